"""NaN and infinite values in GGUF metadata are named as what they are (issue 47, "repair and NaN").

A synthetic GGUF (harness/models/gguf_writer.py) with a NaN and an infinite score, an infinite
float key and a special id stored as a NaN float: `inspect` lists each by key and index (it
called a NaN id `int()` and ended in exit 3), its `--json` is JSON (no bare NaN), a rewrite of
such a file reads back as written (NaN != NaN called every rewrite failed, so `repair` blamed
another cause), the reference's key check names them, and a cause candidate gives each
non-finite score the original's.
"""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from harness import cli
from harness.models.gguf_rewrite import rewrite_metadata
from harness.models.gguf_writer import write
from harness.models.summary import non_finite
from harness.references import cause_candidates, gguf_keys
from tokenizer import Tokenizer
from tokenizer.gguf.constants import ValueType
from tokenizer.gguf.reader import read

TOKENS = ["<unk>", "<s>", "</s>", "\u2581a", "\u2581b", "a", "b", "\u2581"]
SCORES = [0.0, 0.0, 0.0, -1.0, math.inf, -3.0, -4.0, -5.0]


def spm_gguf(path, scores=SCORES, **extra):
    write(path, {"general.architecture": "llama", "tokenizer.ggml.model": "llama", "tokenizer.ggml.pre": "default",
                 "tokenizer.ggml.tokens": TOKENS, "tokenizer.ggml.scores": scores,
                 "tokenizer.ggml.token_type": [2, 3, 3, 1, 1, 1, 1, 1], **extra},
          types={"tokenizer.ggml.bos_token_id": ValueType.FLOAT32, "general.rope_scale": ValueType.FLOAT32})
    return path


def _no_constant(name):
    raise AssertionError(f"{name} in the JSON output")


def test_inspect_names_every_non_finite_value_and_a_float_special_id(tmp_path, capsys):
    path = spm_gguf(tmp_path / "nan.gguf", [0.0, math.nan, 0.0, -1.0, math.inf, math.nan, -4.0, -math.inf],
                    **{"general.rope_scale": math.inf, "tokenizer.ggml.bos_token_id": math.nan})
    assert cli.main(["inspect", str(path)]) == 0
    out = capsys.readouterr().out
    assert "tokenizer.ggml.scores: 4 non-finite values (NaN at 1, inf at 4, NaN at 5, -inf at 7)" in out
    assert "general.rope_scale: 1 non-finite value (inf)" in out
    assert "tokenizer.ggml.bos_token_id: 1 non-finite value (NaN)" in out
    assert "NaN (not an id)" in out
    assert cli.main(["inspect", str(path), "--json"]) == 0
    data = json.loads(capsys.readouterr().out, parse_constant=_no_constant)
    assert data["tokenizer"]["special_ids"]["bos"] == "NaN (not an id)"
    assert {e["key"] for e in data["non_finite"]} == {"general.rope_scale", "tokenizer.ggml.bos_token_id",
                                                      "tokenizer.ggml.scores"}


def test_the_count_is_whole_and_the_list_is_short():
    scores = np.full(100_000, np.nan, dtype=np.float32)
    [entry] = non_finite({"tokenizer.ggml.scores": scores, "ok": 1.5, "name": "x"})
    assert entry["count"] == 100_000 and len(entry["first"]) == 5


def test_a_file_holding_a_nan_reads_back_as_written_after_a_rewrite(tmp_path):
    path = spm_gguf(tmp_path / "nan.gguf", **{"general.rope_scale": math.nan})
    done = rewrite_metadata(path, tmp_path / "out.gguf", {"tokenizer.ggml.pre": "llama-bpe"})
    back = read(done.path).metadata
    assert back["tokenizer.ggml.pre"] == "llama-bpe" and math.isnan(back["general.rope_scale"])
    assert math.isinf(back["tokenizer.ggml.scores"][4])


def test_the_key_check_names_a_non_finite_score_against_any_original(tmp_path):
    path = spm_gguf(tmp_path / "inf.gguf")
    [found] = gguf_keys.non_finite_discrepancies(read(path).metadata)
    assert found.key == "tokenizer.ggml.scores" and "inf at 4" in found.line()


@pytest.mark.parametrize("theirs, exact, value", [
    ([0.0, 0.0, 0.0, -1.0, -2.0, -3.0, -4.0, -5.0], True, -2.0),  # the original holds token 4's score
    (None, False, -5.0),  # it holds none: the file's lowest finite score, named and not applied
])
def test_an_infinite_score_is_a_cause_given_the_originals_score(tmp_path, theirs, exact, value):
    path = spm_gguf(tmp_path / "inf.gguf")
    tok = Tokenizer.from_gguf(path)
    meta = dict(read(path).metadata)
    model = {"types": [2, 3, 3, 1, 1, 1, 1, 1], "scores": theirs, "add_dummy_prefix": tok.vocab.add_space_prefix,
             "remove_extra_whitespaces": tok.vocab.remove_extra_whitespaces}
    [candidate] = [c for c in cause_candidates.for_spm(tok, meta, model) if c.name == "finite-scores"]
    assert candidate.name == "finite-scores" and candidate.side == "gguf" and candidate.exact is exact
    assert candidate.gguf is not None
    assert candidate.gguf(meta)["tokenizer.ggml.scores"][4] == value
