"""Hostile tokenizer metadata: a clear GGUFError or UnsupportedVocab, never a stray exception.

Each case builds a small synthetic SPM vocabulary with `harness.models.gguf_writer`,
breaks one thing, and checks the error names the key and, where there is one,
the token id. Several of these inputs are accepted by llama.cpp (it warns and
carries on, or misreads them); the module `ACCEPTED_BY_LLAMA_CPP` list says
which, and why we refuse them anyway. The rest make llama.cpp refuse the file,
abort, or throw in the middle of tokenizing.
"""

from __future__ import annotations

import numpy as np
import pytest

from harness.models.gguf_writer import write
from tokenizer import GGUFError, Tokenizer, UnsupportedVocab
from tokenizer import vocab as vocab_mod
from tokenizer.gguf.constants import ValueType

# Inputs we reject although llama.cpp loads them (docs/refusals.md).
ACCEPTED_BY_LLAMA_CPP = {
    "special_id_out_of_range": "llama.cpp warns and keeps the type's default id",
    "scores_longer_than_tokens": "llama.cpp ignores the extra scores",
    "token_types_longer_than_tokens": "llama.cpp ignores the extra types",
    "byte_token_minus_one": "llama.cpp reads <0x-1> with strtol as byte 0xFF",
    "byte_token_three_digits": "llama.cpp reads <0x1FF> as byte 0x1F",
    "nan_score": "llama.cpp merges in an order its heap leaves undefined",
}

WORDS = ["\u2581the", "\u2581a", "he", "llo", "\u2581he", "\u2581hello", "wor", "ld", "\u2581world"]


def tiny_spm(**changes) -> tuple[dict, dict]:
    """Metadata and types of a 268-token SPM vocabulary: <unk> <s> </s>, 256 bytes, words."""
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)] + WORDS
    types = [2, 3, 3] + [6] * 256 + [1] * len(WORDS)
    scores = [0.0, 0.0, 0.0] + [0.0] * 256 + [-float(i) for i in range(len(WORDS))]
    meta = {
        "general.architecture": "llama",
        "general.name": "tiny",
        "tokenizer.ggml.model": "llama",
        "tokenizer.ggml.tokens": tokens,
        "tokenizer.ggml.scores": np.array(scores, dtype=np.float32),
        "tokenizer.ggml.token_type": np.array(types, dtype=np.int32),
        "tokenizer.ggml.bos_token_id": 1,
        "tokenizer.ggml.eos_token_id": 2,
    }
    types_override: dict = {}
    for key, value in changes.items():
        if isinstance(value, tuple) and len(value) == 2 and value[0] == "typed":
            meta[key], types_override[key] = value[1]
        elif value is None:
            meta.pop(key, None)
        else:
            meta[key] = value
    return meta, types_override


def load(tmp_path, **changes) -> Tokenizer:
    meta, types = tiny_spm(**changes)
    path = tmp_path / "v.gguf"
    write(path, meta, types=types)
    return Tokenizer.from_gguf(path)


def test_tiny_vocabulary_loads(tmp_path):
    tok = load(tmp_path)
    assert tok.vocab_type == "spm" and tok.n_tokens == 268


def _tokens_with(index: int, text: str) -> list[str]:
    tokens = tiny_spm()[0]["tokenizer.ggml.tokens"]
    tokens[index] = text
    return tokens


def _types_with(index: int, value: int) -> np.ndarray:
    types = tiny_spm()[0]["tokenizer.ggml.token_type"].copy()
    types[index] = value
    return types


CASES = {
    # name: (changes, error class, words the message must contain)
    "scores_as_uint8": ({"tokenizer.ggml.scores": ("typed", (np.zeros(268, np.uint8),
                                                            (ValueType.ARRAY, ValueType.UINT8)))},
                        GGUFError, ["tokenizer.ggml.scores", "UINT8", "offset"]),
    "token_type_as_float32": ({"tokenizer.ggml.token_type": ("typed", (
        np.ones(268, np.float32), (ValueType.ARRAY, ValueType.FLOAT32)))},
        GGUFError, ["tokenizer.ggml.token_type", "FLOAT32"]),
    "scores_shorter_than_tokens": ({"tokenizer.ggml.scores": np.zeros(10, np.float32)},
                                   GGUFError, ["tokenizer.ggml.scores", "10 entries", "268"]),
    "scores_longer_than_tokens": ({"tokenizer.ggml.scores": np.zeros(300, np.float32)},
                                  GGUFError, ["tokenizer.ggml.scores", "300 entries"]),
    "token_types_longer_than_tokens": ({"tokenizer.ggml.token_type": np.ones(269, np.int32)},
                                       GGUFError, ["tokenizer.ggml.token_type", "269"]),
    "special_id_out_of_range": ({"tokenizer.ggml.bos_token_id": 5000},
                                GGUFError, ["tokenizer.ggml.bos_token_id", "5000", "268"]),
    "special_id_as_int32": ({"tokenizer.ggml.eos_token_id": ("typed", (2, ValueType.INT32))},
                            GGUFError, ["tokenizer.ggml.eos_token_id", "INT32", "UINT32"]),
    "flag_as_uint8": ({"tokenizer.ggml.add_bos_token": ("typed", (1, ValueType.UINT8))},
                      GGUFError, ["tokenizer.ggml.add_bos_token", "BOOL"]),
    "byte_token_minus_one": ({"tokenizer.ggml.tokens": _tokens_with(3, "<0x-1>")},
                             GGUFError, ["token 3", "<0x-1>"]),
    "byte_token_three_digits": ({"tokenizer.ggml.tokens": _tokens_with(4, "<0x1FF>")},
                                GGUFError, ["token 4", "<0x1FF>"]),
    "duplicate_token_text": ({"tokenizer.ggml.tokens": _tokens_with(262, "\u2581the")},
                             GGUFError, ["tokens 259 and 262", "aborts"]),
    "empty_text_colliding_with_stand_in": (
        {"tokenizer.ggml.tokens": _tokens_with(5, "")[:-1] + ["[EMPTY_5]"]},
        GGUFError, ["tokens 5 and 267"]),
    "missing_tokens": ({"tokenizer.ggml.tokens": None}, GGUFError, ["tokenizer.ggml.tokens"]),
    "missing_model": ({"tokenizer.ggml.model": None}, GGUFError, ["tokenizer.ggml.model"]),
    "model_as_uint32": ({"tokenizer.ggml.model": ("typed", (7, ValueType.UINT32))},
                        GGUFError, ["tokenizer.ggml.model", "STRING"]),
    "unknown_model": ({"tokenizer.ggml.model": "sentencepiece-v9"},
                      UnsupportedVocab, ["sentencepiece-v9", "unknown tokenizer"]),
    "no_vocab_model": ({"tokenizer.ggml.model": "no_vocab"}, UnsupportedVocab, ["'none'"]),
    "nan_score": ({"tokenizer.ggml.scores": np.array([0.0] * 267 + [np.nan], np.float32)},
                  UnsupportedVocab, ["token 267", "NaN"]),
    "phi3_name_without_eos_text": ({"general.name": "phi3-mini",
                                    "tokenizer.ggml.tokens": _tokens_with(2, "<eos>")},
                                   UnsupportedVocab, ["phi-3", "</s>"]),
    "merges_not_strings": ({"tokenizer.ggml.model": "gpt2", "tokenizer.ggml.pre": "gpt-2",
                            "tokenizer.ggml.merges": ("typed", (np.zeros(3, np.int32),
                                                               (ValueType.ARRAY, ValueType.INT32)))},
                           GGUFError, ["tokenizer.ggml.merges", "INT32"]),
    "charsmap_shorter_than_header": ({"tokenizer.ggml.model": "t5",
                                      "tokenizer.ggml.precompiled_charsmap": np.zeros(3, np.uint8)},
                                     GGUFError, ["precompiled_charsmap", "header"]),
    "charsmap_header_beyond_end": ({"tokenizer.ggml.model": "t5",
                                    "tokenizer.ggml.precompiled_charsmap": np.array(
                                        [255, 255, 0, 0, 1, 2], np.uint8)},
                                   GGUFError, ["precompiled_charsmap", "65535"]),
    "byte_token_in_wpm": ({"tokenizer.ggml.model": "bert"}, UnsupportedVocab, ["byte token", "WPM"]),
}


@pytest.mark.parametrize(("changes", "error", "words"),
                         [pytest.param(*v, id=k) for k, v in CASES.items()])
def test_hostile_metadata_is_refused_clearly(tmp_path, changes, error, words):
    with pytest.raises(error) as info:
        load(tmp_path, **changes)
    for word in words:
        assert word in str(info.value), str(info.value)


def test_model_without_engine_is_refused(tmp_path, monkeypatch):
    from tokenizer import engines
    monkeypatch.delitem(engines.ENGINES, "spm")
    with pytest.raises(UnsupportedVocab, match=r"'llama'.*no engine for vocabulary type 'spm'"):
        load(tmp_path)


def test_token_beyond_int32_limit(tmp_path, monkeypatch):
    # a real 2 GiB token is impractical in a test; the limit is one module constant
    monkeypatch.setattr(vocab_mod, "MAX_TOKEN_BYTES", 100)
    with pytest.raises(GGUFError, match="token 267 is 200 bytes"):
        load(tmp_path, **{"tokenizer.ggml.tokens": _tokens_with(267, "x" * 200)})


def test_missing_byte_token_fails_at_tokenize(tmp_path):
    tokens = _tokens_with(3 + 0x41, "\u2581zz")  # no <0x41> and no raw "A" token
    tok = load(tmp_path, **{"tokenizer.ggml.tokens": tokens,
                            "tokenizer.ggml.token_type": _types_with(3 + 0x41, 1)})
    assert tok.tokenize("hello", add_special=False, parse_special=False)
    with pytest.raises(UnsupportedVocab, match="no token for byte 0x41"):
        tok.tokenize("A", add_special=False, parse_special=False)


def test_add_bos_without_bos_id_fails_at_tokenize(tmp_path):
    # a one-token SPM vocabulary: the default BOS id 1 is out of range, so llama.cpp drops it
    meta = {"tokenizer.ggml.tokens": ["<unk>"], "tokenizer.ggml.scores": np.zeros(1, np.float32),
            "tokenizer.ggml.token_type": np.array([2], np.int32),
            "tokenizer.ggml.bos_token_id": None, "tokenizer.ggml.eos_token_id": None}
    tok = load(tmp_path, **meta)
    assert tok.bos is None and tok.add_bos
    with pytest.raises(UnsupportedVocab, match="no BOS id"):
        tok.tokenize("x", add_special=True, parse_special=False)


def test_model_name_of_wrong_type_is_refused(tmp_path):
    # llama.cpp reads general.name as a string to apply its per-model rules; any other type throws
    with pytest.raises(GGUFError, match=r"general\.name.*UINT32.*STRING"):
        load(tmp_path, **{"general.name": ("typed", (3, ValueType.UINT32))})
