"""The converter without its venv, for the tests of `harness.models.convert` (tests/models/).

`fake_sources` puts two files where the pinned converter's sources would be and makes the venv
`python`, so a test's own `run_driver` answers for the converter.
"""

from __future__ import annotations

from pathlib import Path

from harness.models import convert


def fake_sources(tmp_path: Path, monkeypatch) -> Path:
    """The converter's sources as two files under `tmp_path/converter`, and no venv to build."""
    src = tmp_path / "converter"
    (src / "conversion").mkdir(parents=True)
    (src / "convert_hf_to_gguf.py").write_text("# the converter\n")
    (src / "conversion" / "base.py").write_text("# its base\n")
    monkeypatch.setattr(convert, "sources_dir", lambda: src)
    monkeypatch.setattr(convert, "ensure_venv", lambda **kw: Path("python"))
    return src
