"""tools/report_identity.py: two reports are the same but for timings and checkout paths, or it says where not."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
TOOL = ROOT / "tools" / "report_identity.py"


def _report(tmp_path: Path, name: str, *, root: str, seconds: float, agreed: int) -> Path:
    report = {"meta": {"golden": f"{root}/golden", "command": "python -m harness compare"},
              "summary": {"per_model": {"llama-spm": {"cases": 3, "agreed": agreed}}},
              "lines": [f"messages: 77 templates in {seconds:.0f} s"], "seconds": seconds}
    path = tmp_path / name
    path.write_text(json.dumps(report), encoding="utf-8")
    return path


def _tool(*args: str | Path) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, str(TOOL), *map(str, args)], capture_output=True, text=True, check=False)


def test_timings_and_checkout_paths_do_not_count(tmp_path):
    a = _report(tmp_path, "a.json", root="/work/before", seconds=20.7, agreed=3)
    b = _report(tmp_path, "b.json", root="/work/after", seconds=41.2, agreed=3)
    done = _tool(a, b, "--root", "/work/before", "/work/after")
    assert done.returncode == 0 and "identical" in done.stdout


def test_a_changed_figure_is_named_by_its_path(tmp_path):
    a = _report(tmp_path, "a.json", root="/work/before", seconds=20.7, agreed=3)
    b = _report(tmp_path, "b.json", root="/work/before", seconds=20.7, agreed=2)
    done = _tool(a, b)
    assert done.returncode == 1
    assert "$.summary.per_model.llama-spm.agreed: 3 != 2" in done.stdout


def test_a_path_of_another_checkout_counts_without_root(tmp_path):
    a = _report(tmp_path, "a.json", root="/work/before", seconds=1, agreed=3)
    b = _report(tmp_path, "b.json", root="/work/after", seconds=1, agreed=3)
    assert _tool(a, b).returncode == 1
