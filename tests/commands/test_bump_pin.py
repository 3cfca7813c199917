"""`python -m harness bump-pin VERSION`: bad input is one line and exit 2 before anything is built.

The procedure itself (hours of building and recording) is run for real once and measured
(docs/golden.md, "Bumping the pin"); its parts are tested in tests/runs/test_bump_steps.py and
tests/report/test_bump.py.
"""

from __future__ import annotations

import pytest

from harness.cli import main
from harness.models.pin import LLAMA_CPP_PYTHON_VERSION as PIN


@pytest.mark.parametrize(("args", "said"), [
    ([PIN], "that is the pinned version already"),
    (["latest"], "expected a llama-cpp-python release, X.Y.Z"),
    (["9.9.9", "--jobs", "0"], "--jobs must be at least 1"),
])
def test_bad_input_is_one_line_and_exit_2(tmp_path, capsys, args, said):
    code = main(["bump-pin", *args, "--report", str(tmp_path / "r")])
    err = capsys.readouterr().err
    assert code == 2 and said in err and err.count("\n") == 1, err
    assert not (tmp_path / "r").exists()


def test_an_existing_work_tree_is_refused(tmp_path, capsys):
    code = main(["bump-pin", "9.9.9", "--report", str(tmp_path / "r"), "--work-tree", str(tmp_path)])
    assert code == 2 and "exists" in capsys.readouterr().err
