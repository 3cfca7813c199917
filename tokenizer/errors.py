"""The exceptions every part of `tokenizer` raises.

One root per kind of failure, so a caller can catch exactly what it means:

- `GGUFError`: the bytes of a GGUF file, or the tokenizer metadata in it, are
  malformed. The message names the byte offset and the key or tensor.
- `UnsupportedVocab`: the file is well formed, but describes a tokenizer that
  we cannot reproduce token for token (or that llama.cpp itself refuses).

- `InvalidToken`: a token id outside the vocabulary was passed to the API.
- `LlamaCppAbort` (and `UnencodableCodepoint`): an input on which the pinned
  llama.cpp aborts its process; we raise instead of guessing an output.

All are `ValueError`s, so code that already guards `ValueError` keeps working.
"""


class GGUFError(ValueError):
    """A GGUF file, or the tokenizer metadata it carries, is malformed."""


class GGUFTruncated(GGUFError):
    """The bytes end before what they announce: `needed` is the smallest size that could hold it.

    A reader of a file's first bytes (a remote header fetched in windows) asks
    for more only on this error, and no further than `needed` says.
    """

    def __init__(self, message: str, needed: int) -> None:
        super().__init__(message)
        self.needed = needed


class UnsupportedVocab(ValueError):
    """A well-formed vocabulary that this package refuses to reproduce."""


class InvalidToken(ValueError):
    """A token id passed to the API is not in the vocabulary (llama.cpp throws out_of_range)."""


class LlamaCppAbort(ValueError):
    """An input on which llama.cpp aborts the process; we raise this instead.

    The pinned llama.cpp terminates (uncaught C++ exception or GGML_ASSERT)
    for these inputs, so there is no output to agree with.  Raising keeps the
    caller alive and names the cause; the harness records llama.cpp's side as
    an oracle crash.
    """


class UnencodableCodepoint(LlamaCppAbort):
    """A decoded code point above U+10FFFF, which llama.cpp cannot re-encode.

    llama.cpp's decoder accepts lead bytes F4 90.. to F7 and yields code
    points up to 0x1FFFFF; re-encoding one throws `std::invalid_argument`,
    which escapes `llama_tokenize` and aborts the process.
    """
