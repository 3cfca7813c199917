"""The code-point probes against another build (harness/runs/build_code_points.py), with planted builds.

No llama.cpp here: the "pinned" build and the "other" one are small protocol engines that spell a probe's
bytes as ids, the separator as one id; the record is made from the pinned one. The other build that
gives the tab the newline's id differs on exactly one call, narrowed to exactly U+0009; a str-only
build is not offered the surrogates' call (not UTF-8), which is never counted as agreeing.
"""

from __future__ import annotations

import base64
import json

import pytest

from harness.golden import every_code_point as cpts
from harness.runs import build_code_points as screens

SEP = "<sep>"
SEP_ID = 999


def spelled(data: bytes, *, tab_as_newline: bool = False) -> list[int]:
    ids: list[int] = []
    for index, part in enumerate(data.split(SEP.encode())):
        if index:
            ids.append(SEP_ID)
        ids += [10 if (b == 9 and tab_as_newline) else b for b in part]
    return ids


class Build:
    """A protocol engine handle of a planted build: `call` answers `tokenize` as the child would."""

    def __init__(self, *, caps=("tokenize", "bytes_input"), tab_as_newline=False) -> None:
        self.caps, self.tab_as_newline, self.closed = frozenset(caps), tab_as_newline, False

    def call(self, message: dict) -> dict:
        data = base64.b64decode(message["inputs"][0])
        if "bytes_input" not in self.caps:
            data.decode("utf-8")  # a str-only child could not even be sent it
        return {"ok": True, "results": [[{"ids": spelled(data, tab_as_newline=self.tab_as_newline)}]]}

    def close(self) -> None:
        self.closed = True


class PinnedSession:
    """The pinned llama.cpp's live answer to a differing call (harness.oracle.session's evaluate)."""

    def __init__(self, path, timeout) -> None:
        pass

    def __enter__(self):
        return self

    def __exit__(self, *exc) -> None:
        pass

    def evaluate(self, case: dict) -> dict:
        ids = spelled(bytes.fromhex(case["bytes"]))
        return {"id": case["id"], "encode": [{"add_special": a, "parse_special": p, "ids": ids}
                                             for a, p in ((False, False), (False, True))]}


@pytest.fixture
def planted(tmp_path, monkeypatch):
    """Seven calls of 0x2000 code points (the last holds the surrogates), recorded from the pinned build."""
    monkeypatch.setattr(cpts, "BATCH", 0x2000)
    monkeypatch.setattr(cpts, "MAX_CODEPOINTS", 0xE000)
    monkeypatch.setattr(cpts, "CALLS", 7)
    monkeypatch.setattr(screens, "resolve", lambda name: tmp_path / f"{name}.gguf")
    monkeypatch.setattr(screens, "OracleSession", PinnedSession)
    record = {"vocabulary": "v", "llama_cpp_python": "9.9.9", "batch": cpts.BATCH, "separator": SEP,
              "digests": [cpts.digest(spelled(data)) for _, data in cpts.batches(SEP.encode())]}
    (tmp_path / "v.json").write_text(json.dumps(record), encoding="utf-8")
    return tmp_path


def screen(records, build: Build) -> dict:
    return screens.screen(lambda path: build, "v", records=records, timeout=10, log=lambda line: None)


def test_the_same_build_agrees_on_every_call(planted):
    build = Build()
    result = screen(planted, build)
    assert (result["status"], result["agree"], result["differ"], result["not_offered"]) == ("compared", 7, 0, 0)
    assert build.closed


def test_a_differing_call_is_narrowed_to_its_code_point(planted):
    result = screen(planted, Build(tab_as_newline=True))
    assert (result["agree"], result["differ"], result["differing_calls"]) == (6, 1, ["U+0000"])
    assert result["code_points"] == [0x09] and result["narrowed"] == 1
    assert screens.cases(result) == [{"id": "cpt-000009", "text": cpts.probe(0x09).decode()}]


def test_a_call_a_str_only_build_cannot_be_asked_is_not_offered_never_agreeing(planted):
    result = screen(planted, Build(caps=("tokenize",)))
    assert (result["agree"], result["differ"], result["not_offered"]) == (6, 0, 1)


def test_a_stale_or_missing_record_is_not_checked_with_its_reason(planted):
    (planted / "v.json").write_text(json.dumps({"batch": 1}), encoding="utf-8")
    result = screen(planted, Build())
    assert result["status"] == "not checked" and "not a code-point record" in result["why"]
    (planted / "v.json").unlink()
    assert "v.json" in screen(planted, Build())["why"]


def test_cases_spread_over_many_code_points():
    picked = screens.cases({"code_points": list(range(1000))}, limit=4)
    assert [c["id"] for c in picked] == ["cpt-000000", "cpt-0000fa", "cpt-0001f4", "cpt-0002ee"]
    assert screens.cases({"code_points": [0xD800]}) == [{"id": "cpt-00d800", "bytes": cpts.probe(0xD800).hex()}]
