"""On-disk facts of the GGUF format: value types, ggml tensor types, keys.

Kept in one place so the reader, the writer and the vocabulary loader agree.
Numbers come from ggml's `gguf.h`/`ggml.h` in the pinned llama.cpp.
"""

from enum import IntEnum

GGUF_MAGIC = b"GGUF"
SUPPORTED_VERSIONS = (1, 2, 3)
DEFAULT_ALIGNMENT = 32
MAX_DIMS = 4          # GGML_MAX_DIMS
MAX_NAME = 64         # GGML_MAX_NAME, including the terminating NUL


class ValueType(IntEnum):
    UINT8 = 0
    INT8 = 1
    UINT16 = 2
    INT16 = 3
    UINT32 = 4
    INT32 = 5
    FLOAT32 = 6
    BOOL = 7
    STRING = 8
    ARRAY = 9
    UINT64 = 10
    INT64 = 11
    FLOAT64 = 12


# Fixed-size scalar types: numpy dtype (little endian) and struct format.
SCALAR_DTYPES = {
    ValueType.UINT8: "<u1",
    ValueType.INT8: "<i1",
    ValueType.UINT16: "<u2",
    ValueType.INT16: "<i2",
    ValueType.UINT32: "<u4",
    ValueType.INT32: "<i4",
    ValueType.FLOAT32: "<f4",
    ValueType.BOOL: "<u1",
    ValueType.UINT64: "<u8",
    ValueType.INT64: "<i8",
    ValueType.FLOAT64: "<f8",
}

SCALAR_FORMATS = {
    ValueType.UINT8: "<B",
    ValueType.INT8: "<b",
    ValueType.UINT16: "<H",
    ValueType.INT16: "<h",
    ValueType.UINT32: "<I",
    ValueType.INT32: "<i",
    ValueType.FLOAT32: "<f",
    ValueType.BOOL: "<B",
    ValueType.UINT64: "<Q",
    ValueType.INT64: "<q",
    ValueType.FLOAT64: "<d",
}


# ggml tensor types: id -> (name, elements per block, bytes per block).
# Ids 4, 5, 31-33 and 36-38 were removed from ggml and are rejected.
GGML_TYPES = {
    0: ("F32", 1, 4),
    1: ("F16", 1, 2),
    2: ("Q4_0", 32, 18),
    3: ("Q4_1", 32, 20),
    6: ("Q5_0", 32, 22),
    7: ("Q5_1", 32, 24),
    8: ("Q8_0", 32, 34),
    9: ("Q8_1", 32, 36),
    10: ("Q2_K", 256, 84),
    11: ("Q3_K", 256, 110),
    12: ("Q4_K", 256, 144),
    13: ("Q5_K", 256, 176),
    14: ("Q6_K", 256, 210),
    15: ("Q8_K", 256, 292),
    16: ("IQ2_XXS", 256, 66),
    17: ("IQ2_XS", 256, 74),
    18: ("IQ3_XXS", 256, 98),
    19: ("IQ1_S", 256, 50),
    20: ("IQ4_NL", 32, 18),
    21: ("IQ3_S", 256, 110),
    22: ("IQ2_S", 256, 82),
    23: ("IQ4_XS", 256, 136),
    24: ("I8", 1, 1),
    25: ("I16", 1, 2),
    26: ("I32", 1, 4),
    27: ("I64", 1, 8),
    28: ("F64", 1, 8),
    29: ("IQ1_M", 256, 56),
    30: ("BF16", 1, 2),
    34: ("TQ1_0", 256, 54),
    35: ("TQ2_0", 256, 66),
    39: ("MXFP4", 32, 17),
    40: ("NVFP4", 64, 36),
    41: ("Q1_0", 128, 18),
    42: ("Q2_0", 64, 18),
}


class Keys:
    """Metadata keys, spelled as llama.cpp spells them."""

    ALIGNMENT = "general.alignment"
    ARCHITECTURE = "general.architecture"
    NAME = "general.name"

    MODEL = "tokenizer.ggml.model"
    PRE = "tokenizer.ggml.pre"
    TOKENS = "tokenizer.ggml.tokens"
    TOKEN_TYPE = "tokenizer.ggml.token_type"
    TOKEN_TYPE_COUNT = "tokenizer.ggml.token_type_count"
    SCORES = "tokenizer.ggml.scores"
    MERGES = "tokenizer.ggml.merges"
    BOS_ID = "tokenizer.ggml.bos_token_id"
    EOS_ID = "tokenizer.ggml.eos_token_id"
    EOT_ID = "tokenizer.ggml.eot_token_id"
    EOM_ID = "tokenizer.ggml.eom_token_id"
    UNK_ID = "tokenizer.ggml.unknown_token_id"
    SEP_ID = "tokenizer.ggml.seperator_token_id"  # sic: llama.cpp's spelling
    PAD_ID = "tokenizer.ggml.padding_token_id"
    CLS_ID = "tokenizer.ggml.cls_token_id"
    MASK_ID = "tokenizer.ggml.mask_token_id"
    FIM_PRE_ID = "tokenizer.ggml.fim_pre_token_id"
    FIM_SUF_ID = "tokenizer.ggml.fim_suf_token_id"
    FIM_MID_ID = "tokenizer.ggml.fim_mid_token_id"
    FIM_PAD_ID = "tokenizer.ggml.fim_pad_token_id"
    FIM_REP_ID = "tokenizer.ggml.fim_rep_token_id"
    FIM_SEP_ID = "tokenizer.ggml.fim_sep_token_id"
    ADD_BOS = "tokenizer.ggml.add_bos_token"
    ADD_EOS = "tokenizer.ggml.add_eos_token"
    ADD_SEP = "tokenizer.ggml.add_sep_token"
    ADD_SPACE_PREFIX = "tokenizer.ggml.add_space_prefix"
    REMOVE_EXTRA_WS = "tokenizer.ggml.remove_extra_whitespaces"
    PRECOMPILED_CHARSMAP = "tokenizer.ggml.precompiled_charsmap"
    CHAT_TEMPLATE = "tokenizer.chat_template"
    NORMALIZER_LOWERCASE = "tokenizer.ggml.normalizer.lowercase"
    NORMALIZER_STRIP_ACCENTS = "tokenizer.ggml.normalizer.strip_accents"
    RWKV_WORLD = "tokenizer.rwkv.world"
    HF_JSON = "tokenizer.huggingface.json"
    PREFIX_ID = "tokenizer.ggml.prefix_token_id"
    SUFFIX_ID = "tokenizer.ggml.suffix_token_id"
    MIDDLE_ID = "tokenizer.ggml.middle_token_id"
    CHAT_TEMPLATES = "tokenizer.chat_templates"


def _token_id_keys() -> tuple[str, ...]:
    return tuple(v for k, v in vars(Keys).items() if k.endswith("_ID"))


# The on-disk type llama.cpp's loader insists on for the keys it reads
# (`llama_model_loader::get_key` throws "key ... has wrong type" otherwise):
# key -> ValueType, or (ValueType.ARRAY, element type). The writer uses it for
# keys whose type the caller does not give.
KEY_TYPES: dict[str, ValueType | tuple[ValueType, ValueType]] = {
    Keys.ALIGNMENT: ValueType.UINT32,
    Keys.ARCHITECTURE: ValueType.STRING,
    Keys.NAME: ValueType.STRING,
    Keys.MODEL: ValueType.STRING,
    Keys.PRE: ValueType.STRING,
    Keys.CHAT_TEMPLATE: ValueType.STRING,
    Keys.HF_JSON: ValueType.STRING,
    Keys.TOKENS: (ValueType.ARRAY, ValueType.STRING),
    Keys.MERGES: (ValueType.ARRAY, ValueType.STRING),
    Keys.TOKEN_TYPE: (ValueType.ARRAY, ValueType.INT32),
    Keys.SCORES: (ValueType.ARRAY, ValueType.FLOAT32),
    Keys.PRECOMPILED_CHARSMAP: (ValueType.ARRAY, ValueType.UINT8),
    Keys.TOKEN_TYPE_COUNT: ValueType.UINT32,
    Keys.ADD_BOS: ValueType.BOOL,
    Keys.ADD_EOS: ValueType.BOOL,
    Keys.ADD_SEP: ValueType.BOOL,
    Keys.ADD_SPACE_PREFIX: ValueType.BOOL,
    Keys.REMOVE_EXTRA_WS: ValueType.BOOL,
    Keys.NORMALIZER_LOWERCASE: ValueType.BOOL,
    Keys.NORMALIZER_STRIP_ACCENTS: ValueType.BOOL,
    **dict.fromkeys(_token_id_keys(), ValueType.UINT32),
}
