"""Pure-Python GGUF tokenizers, token-identical to llama.cpp.

This package never imports llama.cpp, ggml, HF tokenizers, sentencepiece or
tiktoken; `harness` checks it against llama.cpp from the outside.

    >>> from tokenizer import Tokenizer
    >>> tok = Tokenizer.from_gguf("ggml-vocab-llama-spm.gguf")
"""

from .api import Tokenizer
from .errors import GGUFError, InvalidToken, LlamaCppAbort, UnencodableCodepoint, UnsupportedVocab

__all__ = ["GGUFError", "InvalidToken", "LlamaCppAbort", "Tokenizer", "UnencodableCodepoint",
           "UnsupportedVocab"]
