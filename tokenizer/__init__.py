"""Pure-Python GGUF tokenizers, token-identical to llama.cpp.

This package never imports llama.cpp, ggml, HF tokenizers, sentencepiece or
tiktoken; `harness` checks it against llama.cpp from the outside.
"""

from .errors import GGUFError, UnsupportedVocab

__all__ = ["GGUFError", "UnsupportedVocab"]

try:  # the API module arrives with the engines
    from .api import Tokenizer  # noqa: F401
    __all__.append("Tokenizer")
except ImportError:  # pragma: no cover
    pass
