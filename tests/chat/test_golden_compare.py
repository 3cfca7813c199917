"""Two builds' chat goldens compared (harness/chat/golden_compare.py): each changed case a signed finding.

No chat helper: the other build's recording is a committed chat golden with planted changes (one case's
prompt text, another's legacy text), and a template it did not record or recorded from another text.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from harness.chat import golden_compare

GOLDEN = Path(__file__).resolve().parents[2] / "golden" / "chat"
NAME = "gemma-4.json"


def two_builds(tmp_path: Path) -> tuple[Path, Path]:
    pinned, other = tmp_path / "pinned", tmp_path / "other"
    pinned.mkdir()
    other.mkdir()
    shutil.copy2(GOLDEN / NAME, pinned / NAME)
    data = json.loads((GOLDEN / NAME).read_text(encoding="utf-8"))
    data["cases"][0]["text"] = data["cases"][0]["text"].replace("Hello!", "Hello?")
    data["cases"][1]["legacy"] = "a legacy text the pinned build did not make"
    (other / NAME).write_text(json.dumps(data), encoding="utf-8")
    return pinned, other


def test_changed_cases_are_signed_findings_and_the_rest_agree(tmp_path):
    pinned, other = two_builds(tmp_path)
    result = golden_compare.compare(pinned, other, other_name="llama.cpp@9.9.9")
    [row] = result["targets"]
    assert row["status"] == "compared" and row["cases"] == 48 and (row["agree"], row["differ"]) == (46, 2)
    text, legacy = result["findings"]
    assert text["verdict"] == "text differs" and text["signature"].startswith("d-")
    assert legacy["target"].endswith(":legacy") and legacy["signature"] != text["signature"]
    assert "llama.cpp@9.9.9" in text["reproduce"]


def test_the_same_recording_agrees_everywhere(tmp_path):
    pinned, other = two_builds(tmp_path)
    shutil.copy2(pinned / NAME, other / NAME)
    result = golden_compare.compare(pinned, other, other_name="x")
    assert result["counts"] == {"cases": 48, "agree": 48, "differ": 0, "missing": 0, "not_compared": 0}


def test_a_template_not_recorded_or_of_another_text_is_not_compared(tmp_path):
    pinned, other = two_builds(tmp_path)
    data = json.loads((other / NAME).read_text(encoding="utf-8"))
    (other / NAME).write_text(json.dumps({**data, "template_sha256": "0" * 64}), encoding="utf-8")
    [row] = golden_compare.compare(pinned, other, other_name="x")["targets"]
    assert row["status"] == "not compared" and "another template text" in row["why"]
    (other / NAME).unlink()
    [row] = golden_compare.compare(pinned, other, other_name="x")["targets"]
    assert row["status"] == "not compared" and "recorded no gemma-4.json" in row["why"]
