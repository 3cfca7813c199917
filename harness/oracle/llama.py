"""llama.cpp itself, behind the same Python API as `tokenizer.Tokenizer`.

`LlamaOracle(path)` loads a GGUF file `vocab_only` through llama-cpp-python's
low-level C API and answers every `Tokenizer` call by asking llama.cpp:

    >>> with LlamaOracle(resolve("llama-spm")) as oracle:
    ...     oracle.tokenize(b"Hello world", add_special=True, parse_special=False)
    [1, 15043, 3186]

Inputs go to llama.cpp as raw bytes (a `str` is encoded as UTF-8 with
surrogateescape, so text read from GGUF metadata round-trips exactly); outputs
are the exact bytes and ids llama.cpp returns.  Every call that fills a buffer
retries with the size llama.cpp asks for when it answers "too small".

A few facts the C API does not expose are read through exported C++ members of
`llama_vocab` (`token_eom`, `get_tokenizer_pre`, the normaliser flags); see
`_cxx`.  Those symbols are part of the pinned build; `internals()` returns
`None` for anything the installed library does not export.

llama.cpp aborts the process on some inputs: run the oracle in a worker
(`harness.oracle.workers`) when that must not take the caller down.
"""

from __future__ import annotations

import ctypes
import os
import platform
import sys
from collections import deque
from collections.abc import Callable
from functools import cache, cached_property
from pathlib import Path

import llama_cpp
from llama_cpp import llama_cpp as _capi

from ..golden.records import SPECIALS

VOCAB_TYPES = {0: "none", 1: "spm", 2: "bpe", 3: "wpm", 4: "ugm", 5: "rwkv", 6: "plamo2", 7: "test"}

# Tokenizer attribute name -> C getter (each returns LLAMA_TOKEN_NULL, -1, when unset).
SPECIAL_GETTERS = {
    "bos": "llama_vocab_bos", "eos": "llama_vocab_eos", "eot": "llama_vocab_eot",
    "sep": "llama_vocab_sep", "nl": "llama_vocab_nl", "pad": "llama_vocab_pad",
    "mask": "llama_vocab_mask", "fim_pre": "llama_vocab_fim_pre", "fim_suf": "llama_vocab_fim_suf",
    "fim_mid": "llama_vocab_fim_mid", "fim_pad": "llama_vocab_fim_pad",
    "fim_rep": "llama_vocab_fim_rep", "fim_sep": "llama_vocab_fim_sep",
}

# Boolean members of llama_vocab that load() settles; mangled names of the pinned build.
FLAG_SYMBOLS = {
    "add_space_prefix": "_ZNK11llama_vocab20get_add_space_prefixEv",
    "ignore_merges": "_ZNK11llama_vocab17get_ignore_mergesEv",
    "clean_spaces": "_ZNK11llama_vocab16get_clean_spacesEv",
    "remove_extra_whitespaces": "_ZNK11llama_vocab28get_remove_extra_whitespacesEv",
    "escape_whitespaces": "_ZNK11llama_vocab22get_escape_whitespacesEv",
    "treat_whitespace_as_suffix": "_ZNK11llama_vocab30get_treat_whitespace_as_suffixEv",
}
# Special ids the C API has no getter for: exported `llama_token llama_vocab::token_*() const`.
MEMBER_SPECIALS = {"eom": "_ZNK11llama_vocab9token_eomEv", "unk": "_ZNK11llama_vocab9token_unkEv"}
STRING_SYMBOLS = {
    "model": "_ZNK11llama_vocab19get_tokenizer_modelB5cxx11Ev",
    "pre": "_ZNK11llama_vocab17get_tokenizer_preB5cxx11Ev",
}
PRE_TYPE_SYMBOL = "_ZNK11llama_vocab12get_pre_typeEv"

_INT32_MAX = 2**31 - 1


class OracleError(RuntimeError):
    """llama.cpp refused a request (a model it cannot load, an input it cannot size)."""


class _Log:
    """The one process-wide llama.cpp log sink: silent, but keeps the last lines for errors."""

    def __init__(self) -> None:
        self.verbose = False
        self.lines: deque[str] = deque(maxlen=40)
        self._callback = llama_cpp.llama_log_callback(self._receive)  # kept alive: C holds it
        self.install()

    def install(self) -> None:
        """(Re)take llama.cpp's log: other code may have set a callback it has since freed."""
        llama_cpp.llama_log_set(self._callback, ctypes.c_void_p(0))

    def _receive(self, level: int, text: bytes, user_data) -> None:
        message = (text or b"").decode("utf-8", "replace")
        self.lines.append(message)
        if self.verbose:
            sys.stderr.write(message)

    def tail(self) -> str:
        return "".join(self.lines).strip()


_LOG: _Log | None = None


def _log(*, verbose: bool) -> _Log:
    global _LOG
    if _LOG is None:
        llama_cpp.llama_backend_init()
        _LOG = _Log()
    _LOG.install()
    _LOG.verbose = verbose  # the sink is process-wide: the latest oracle decides
    return _LOG


def as_bytes(text: str | bytes) -> bytes:
    """Input as llama.cpp sees it: bytes as-is, str as UTF-8 (surrogateescape round-trips)."""
    if isinstance(text, (bytes, bytearray, memoryview)):
        return bytes(text)
    return text.encode("utf-8", "surrogateescape")


@cache
def _cxx(name: str, restype, *argtypes):
    """An exported C++ member function of llama_vocab (`this` first), or None if absent.

    `_lib[name]` makes a fresh function object, so llama-cpp-python's own
    bindings keep their argtypes.
    """
    try:
        fn = _capi._lib[name]
    except AttributeError:
        return None
    fn.restype = restype
    fn.argtypes = [ctypes.c_void_p, *argtypes]
    return fn


def _cxx_string(name: str, vocab: int) -> str | None:
    """Call a `std::string llama_vocab::f() const` (libstdc++ layout, returned through sret)."""
    fn = _cxx(name, None, ctypes.c_void_p) if platform.machine() in ("x86_64", "AMD64") else None
    if fn is None:  # the sret convention above is x86-64's; elsewhere the caller falls back
        return None
    out = (ctypes.c_size_t * 4)()  # {char *data; size_t size; char sso[16]}
    fn(ctypes.addressof(out), vocab)  # x86-64 SysV: hidden sret pointer first, then `this`
    data = ctypes.string_at(out[0], out[1])
    if out[0] != ctypes.addressof(out) + 16:  # heap buffer: release it as operator delete would
        ctypes.CDLL(None).free(ctypes.c_void_p(out[0]))
    return data.decode("utf-8", "surrogateescape")


def build_info() -> dict:
    """The llama.cpp build this process talks to: ggml version and commit, llama-cpp-python version."""
    from llama_cpp import _ggml

    info = {"llama_cpp_python": llama_cpp.__version__}
    for key in ("ggml_version", "ggml_commit"):
        fn = getattr(_ggml.libggml, key, None)
        if fn is not None:
            fn.restype, fn.argtypes = ctypes.c_char_p, []
            info[key] = fn().decode("utf-8", "replace")
    return info


class LlamaOracle:
    """A GGUF vocabulary loaded `vocab_only` in llama.cpp, with the `tokenizer.Tokenizer` API.

    Use as a context manager (or call `close()`) to free the model.  `verbose=True`
    lets llama.cpp's log through to stderr; otherwise it is kept silent and only
    quoted in `OracleError` messages.
    """

    build_info = build_info()

    def __init__(self, path: str | os.PathLike, *, verbose: bool = False) -> None:
        self.path = Path(path)
        self._log = _log(verbose=verbose)
        self._log.lines.clear()
        params = llama_cpp.llama_model_default_params()
        params.vocab_only = True
        self._model = llama_cpp.llama_model_load_from_file(os.fsencode(self.path), params)
        if not self._model:
            raise OracleError(f"llama.cpp cannot load {self.path.name}: {self._log.tail() or 'no log'}")
        self._vocab = llama_cpp.llama_model_get_vocab(self._model)

    @classmethod
    def from_gguf(cls, path: str | os.PathLike, *, verbose: bool = False) -> LlamaOracle:
        """Same as the constructor; mirrors `tokenizer.Tokenizer.from_gguf`."""
        return cls(path, verbose=verbose)

    # -- lifetime -------------------------------------------------------------

    def close(self) -> None:
        """Free the model; the oracle is unusable afterwards."""
        if self._model:
            llama_cpp.llama_model_free(self._model)
            self._model = None
            self._vocab = None

    def __enter__(self) -> LlamaOracle:
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001 - interpreter shutdown: the library may already be gone
            pass

    def __repr__(self) -> str:
        return f"LlamaOracle({str(self.path)!r})"

    # -- the Tokenizer API ------------------------------------------------------

    def tokenize(self, text: str | bytes, *, add_special: bool, parse_special: bool) -> list[int]:
        """llama_tokenize: ids for `text` (raw bytes as given)."""
        data = as_bytes(text)
        if len(data) > _INT32_MAX:  # llama_tokenize's text_len is an int32: refuse, never wrap
            raise OracleError(f"input of {len(data):,} bytes exceeds llama.cpp's int32 length ({_INT32_MAX:,})")
        size = self.first_token_buffer(len(data))
        while True:
            buf = (llama_cpp.llama_token * size)()
            n = llama_cpp.llama_tokenize(self._vocab, data, len(data), buf, size,
                                         add_special, parse_special)
            if n >= 0:
                return buf[:n]
            size = self._grow(size, -n, "llama_tokenize")

    def detokenize(self, ids, *, remove_special: bool, unparse_special: bool) -> bytes:
        """llama_detokenize: the bytes for `ids`."""
        ids = list(ids)
        if len(ids) > _INT32_MAX:  # n_tokens is an int32 too
            raise OracleError(f"{len(ids):,} ids exceed llama.cpp's int32 count ({_INT32_MAX:,})")
        arr = (llama_cpp.llama_token * max(len(ids), 1))(*ids)
        size = self.first_text_buffer(len(ids))
        while True:
            buf = ctypes.create_string_buffer(size)
            n = llama_cpp.llama_detokenize(self._vocab, arr, len(ids), buf, size,
                                           remove_special, unparse_special)
            if n >= 0:
                return buf.raw[:n]
            size = self._grow(size, -n, "llama_detokenize")

    def token_to_piece(self, token: int, *, lstrip: int = 0, special: bool) -> bytes:
        """llama_token_to_piece: one token's bytes, skipping up to `lstrip` leading spaces."""
        size = 32
        while True:
            buf = ctypes.create_string_buffer(size)
            n = llama_cpp.llama_token_to_piece(self._vocab, token, buf, size, lstrip, special)
            if n >= 0:
                return buf.raw[:n]
            size = self._grow(size, -n, "llama_token_to_piece")

    @staticmethod
    def first_token_buffer(n_bytes: int) -> int:
        """The first id buffer for an input of `n_bytes`: an id per byte and room for BOS/EOS/SEP, at most int32.

        llama_tokenize answers a buffer that is too small with minus the count it needs;
        `tokenize` then retries once with that size (tests/oracle/test_oracle.py shrinks this one).
        """
        return min(n_bytes + 16, _INT32_MAX)

    @staticmethod
    def first_text_buffer(n_ids: int) -> int:
        """The first byte buffer for detokenizing `n_ids` ids (8 bytes each), at most int32 (retried when short)."""
        return min(64 + 8 * n_ids, _INT32_MAX)

    @staticmethod
    def _grow(size: int, wanted: int, what: str) -> int:
        if wanted <= size:  # llama.cpp contract broken: never loop
            raise OracleError(f"{what} asked for {wanted} after a buffer of {size} was too small")
        if wanted > _INT32_MAX:  # the size is an int32 argument: refuse rather than wrap it
            raise OracleError(f"{what} needs a buffer of {wanted:,}, over llama.cpp's int32 size ({_INT32_MAX:,})")
        return wanted

    @cached_property
    def n_tokens(self) -> int:
        return llama_cpp.llama_vocab_n_tokens(self._vocab)

    @cached_property
    def vocab_type(self) -> str:
        kind = llama_cpp.llama_vocab_type(self._vocab)
        return VOCAB_TYPES.get(kind, f"unknown-{kind}")

    @cached_property
    def pre(self) -> str:
        """llama.cpp's `tokenizer_pre` string: the GGUF value, "gemma4" for gemma4, "" if unset."""
        value = _cxx_string(STRING_SYMBOLS["pre"], self._vocab)
        return (self.meta("tokenizer.ggml.pre") or "") if value is None else value

    def token_text(self, token: int) -> bytes:
        """llama_vocab_get_text (a C string: llama.cpp's API stops at an embedded NUL)."""
        return llama_cpp.llama_vocab_get_text(self._vocab, token) or b""

    def token_score(self, token: int) -> float:
        return llama_cpp.llama_vocab_get_score(self._vocab, token)

    def token_attr(self, token: int) -> int:
        return int(llama_cpp.llama_vocab_get_attr(self._vocab, token))

    def is_eog(self, token: int) -> bool:
        return bool(llama_cpp.llama_vocab_is_eog(self._vocab, token))

    def is_control(self, token: int) -> bool:
        return bool(llama_cpp.llama_vocab_is_control(self._vocab, token))

    @cached_property
    def add_bos(self) -> bool:
        return bool(llama_cpp.llama_vocab_get_add_bos(self._vocab))

    @cached_property
    def add_eos(self) -> bool:
        return bool(llama_cpp.llama_vocab_get_add_eos(self._vocab))

    @cached_property
    def add_sep(self) -> bool:
        return bool(llama_cpp.llama_vocab_get_add_sep(self._vocab))

    def _special(self, name: str) -> int | None:
        if name in MEMBER_SPECIALS:
            fn = _cxx(MEMBER_SPECIALS[name], ctypes.c_int32)
            value = fn(self._vocab) if fn else -1
        else:
            value = getattr(llama_cpp, SPECIAL_GETTERS[name])(self._vocab)
        return None if value < 0 else int(value)

    # -- beyond the Tokenizer API ---------------------------------------------

    def meta(self, key: str) -> str | None:
        """llama_model_meta_val_str: a metadata value as llama.cpp prints it, or None if absent."""
        size = 256
        while True:
            buf = ctypes.create_string_buffer(size)
            n = llama_cpp.llama_model_meta_val_str(self._model, key.encode(), buf, size)
            if n < 0:
                return None
            if n < size:
                return buf.raw[:n].decode("utf-8", "surrogateescape")
            size = n + 1

    def internals(self) -> dict:
        """What load() settled that the C API does not report: model name, pre type, flags."""
        out: dict[str, object] = {"model": _cxx_string(STRING_SYMBOLS["model"], self._vocab)}
        pre_type = _cxx(PRE_TYPE_SYMBOL, ctypes.c_int)
        out["pre_type"] = pre_type(self._vocab) if pre_type else None
        for flag, symbol in FLAG_SYMBOLS.items():
            fn = _cxx(symbol, ctypes.c_bool)
            out[flag] = bool(fn(self._vocab)) if fn else None
        return out


def _add_special_properties() -> None:
    for name in SPECIALS:
        setattr(LlamaOracle, name, property(_special_getter(name),
                                            doc=f"llama.cpp's {name} token id, None when unset (-1)"))


def _special_getter(name: str) -> Callable[[LlamaOracle], int | None]:
    return lambda self: self._special(name)


_add_special_properties()
