"""`chat --baseline` on a planted template difference (tests/chat_plants.py), live against llama.cpp's chat
helper: the baseline's conversations carried in, the difference fixed by the real renderer (exit 0), unchanged
with the plant (exit 0), new against a clean baseline (exit 1); messages.json records its meta and the lists."""

from __future__ import annotations

import json

import pytest

from harness.cli import main
from harness.errors import SetupError
from tests.chat_plants import plant_one_character_change


def _helper_built() -> bool:
    from harness.chat import helper_build as chat_helper_build
    try:
        return chat_helper_build.helper_path().is_file()
    except SetupError:
        return False


pytestmark = [pytest.mark.oracle, pytest.mark.skipif(
    not _helper_built(), reason="chat helper not built: python -m harness chat --build-helper")]


def chat(tmp_path, name: str, *args: str, baseline: str | None = None) -> tuple[int, dict]:
    argv = ["chat", "--target", "phi-3", "--report", str(tmp_path / name), *args,
            *(["--baseline", str(tmp_path / baseline)] if baseline else [])]
    return main(argv), json.loads((tmp_path / name / "messages.json").read_text())


def test_chat_baseline_new_fixed_unchanged(tmp_path, monkeypatch, capsys):
    with monkeypatch.context() as patch:
        plant_one_character_change(patch)
        status, first = chat(tmp_path, "a", "--conversation", "one-user")
    assert status == 1 and first["findings"] and {f["signature"] for f in first["findings"]}
    assert first["meta"]["llama_cpp"]["ggml_commit"] and first["meta"]["date"] and first["meta"]["project"]

    status, fixed = chat(tmp_path, "fixed", "--no-corpus", baseline="a")
    assert status == 0 and fixed["cases"] == 1, "only the representative conversation, carried in, ran"
    assert fixed["baseline"]["counts"] == {"new": 0, "fixed": 1, "unchanged": 0, "not_rechecked": 0}
    assert "fixed 1" in capsys.readouterr().out

    with monkeypatch.context() as patch:
        plant_one_character_change(patch)
        status, same = chat(tmp_path, "same", "--conversation", "sys-user", baseline="a")
        assert same["findings"] and status == 0, "the same difference, unchanged: exit 0"
        assert same["baseline"]["counts"]["unchanged"] == 1 and same["baseline"]["counts"]["new"] == 0
        status, new = chat(tmp_path, "new", "--conversation", "sys-user", baseline="fixed")
    assert status == 1 and new["baseline"]["counts"]["new"] == 1
    out = capsys.readouterr().out
    assert "  new " in out and "python -m harness chat --target phi-3 --conversation" in out
