"""llama.cpp's token attributes (`llama_token_attr`) and GGUF token types (`llama_token_type`)."""

from __future__ import annotations

from enum import IntEnum, IntFlag


class Attr(IntFlag):
    """`llama_token_attr` bits, as `llama_vocab_get_attr` reports them."""

    UNDEFINED = 0
    UNKNOWN = 1 << 0
    UNUSED = 1 << 1
    NORMAL = 1 << 2
    CONTROL = 1 << 3
    USER_DEFINED = 1 << 4
    BYTE = 1 << 5
    NORMALIZED = 1 << 6
    LSTRIP = 1 << 7
    RSTRIP = 1 << 8
    SINGLE_WORD = 1 << 9


class TokenType(IntEnum):
    """`tokenizer.ggml.token_type` values (`llama_token_type`)."""

    UNDEFINED = 0
    NORMAL = 1
    UNKNOWN = 2
    CONTROL = 3
    USER_DEFINED = 4
    UNUSED = 5
    BYTE = 6


# token type -> attribute; any other value reads as UNDEFINED, as in llama.cpp
TYPE_TO_ATTR = {
    TokenType.UNDEFINED: Attr.UNDEFINED,
    TokenType.NORMAL: Attr.NORMAL,
    TokenType.UNKNOWN: Attr.UNKNOWN,
    TokenType.CONTROL: Attr.CONTROL,
    TokenType.USER_DEFINED: Attr.USER_DEFINED,
    TokenType.UNUSED: Attr.UNUSED,
    TokenType.BYTE: Attr.BYTE,
}

# the attributes whose piece is withheld unless special=True
SPECIAL_ATTRS = int(Attr.UNKNOWN | Attr.CONTROL)
