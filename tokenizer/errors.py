"""The exceptions every part of `tokenizer` raises.

One root per kind of failure, so a caller can catch exactly what it means:

- `GGUFError`: the bytes of a GGUF file, or the tokenizer metadata in it, are
  malformed. The message names the byte offset and the key or tensor.
- `UnsupportedVocab`: the file is well formed, but describes a tokenizer that
  we cannot reproduce token for token (or that llama.cpp itself refuses).

Both are `ValueError`s, so code that already guards `ValueError` keeps working.
"""


class GGUFError(ValueError):
    """A GGUF file, or the tokenizer metadata it carries, is malformed."""


class UnsupportedVocab(ValueError):
    """A well-formed vocabulary that this package refuses to reproduce."""


class InvalidToken(ValueError):
    """A token id passed to the API is not in the vocabulary (llama.cpp throws out_of_range)."""
