"""Shared venvs (the converter's, a llama.cpp@VERSION's) are made once, by one run at a time; the converter's
in a temporary folder renamed when complete."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from harness.models import convert


def test_two_runs_at_once_build_the_venv_once_and_never_see_half_of_it(tmp_path, monkeypatch):
    monkeypatch.setenv("GGUF_PARITY_VENVS", str(tmp_path / "venvs"))
    monkeypatch.setattr(convert, "ensure_sources", lambda **kw: tmp_path / "sources")
    building: list[Path] = []
    seen_half: list[bool] = []
    inside = threading.Semaphore(0)
    at_once = [0, 0]  # now, most

    def fake_run(argv: list[str], *, what: str) -> None:
        if argv[1:3] == ["-m", "venv"]:
            at_once[0] += 1
            at_once[1] = max(at_once)
            where = Path(argv[3])
            building.append(where)
            (where / "bin").mkdir(parents=True)
            (where / "bin" / "python").write_text("")
            inside.release()
            time.sleep(0.5)  # the other run arrives meanwhile
            seen_half.append(convert.is_ready())
            at_once[0] -= 1

    monkeypatch.setattr(convert, "_run", fake_run)
    got: list[Path] = []
    threads = [threading.Thread(target=lambda: got.append(convert.ensure_venv())) for _ in range(2)]
    threads[0].start()
    inside.acquire(timeout=10)
    threads[1].start()
    for thread in threads:
        thread.join(timeout=30)
    assert len(building) == 1 and at_once[1] == 1, building
    assert building[0] != convert.venv_dir() and not building[0].exists()  # built aside, then renamed
    assert seen_half == [False] and got == [convert.venv_python()] * 2 and convert.is_ready()


def test_two_runs_at_once_make_a_release_venv_once(tmp_path, monkeypatch):
    from harness.subjects import llama_release

    monkeypatch.setenv("GGUF_PARITY_VENVS", str(tmp_path / "venvs"))
    made: list[str] = []

    def fake_make(version: str, log) -> None:
        made.append(version)
        time.sleep(0.5)  # the other run arrives meanwhile
        where = llama_release.venv_dir(version)
        (where / "bin").mkdir(parents=True)
        (where / "bin" / "python").write_text("")
        (where / llama_release.READY).write_text(llama_release._stamp(version), encoding="utf-8")

    monkeypatch.setattr(llama_release, "_make", fake_make)
    threads = [threading.Thread(target=llama_release.ensure, args=("0.3.1",)) for _ in range(2)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    assert made == ["0.3.1"] and llama_release.is_ready("0.3.1")


def test_the_converter_runs_under_its_memory_cap(tmp_path, monkeypatch):
    """run_driver hands the cap to the driver, which sets it on itself before anything is imported."""
    import sys

    from harness import environment

    monkeypatch.setattr(convert, "ensure_venv", lambda **kw: Path(sys.executable))
    monkeypatch.setattr(convert, "sources_dir", lambda: tmp_path / "no-sources")
    environment.set_child_memory(1 << 30)
    try:
        cap = convert.converter_memory()
        result = convert.run_driver("fingerprint", [str(tmp_path)], timeout=60)
    finally:
        environment.set_child_memory(None)
    assert cap == min(2 << 30, environment.physical_memory() or 2 << 30)  # twice the workers' cap
    assert result["memory_limit"] == cap
    assert result["error"] is not None  # no converter sources here: the driver says so, under its cap


def test_a_folder_with_a_tokenizer_file_over_its_limit_is_refused_before_the_converter(tmp_path, monkeypatch):
    from harness.errors import SetupError
    from harness.files import input_limits

    monkeypatch.setattr(convert, "ensure_venv", lambda **kw: (_ for _ in ()).throw(AssertionError("venv")))
    folder = tmp_path / "m"
    folder.mkdir()
    with (folder / "tokenizer.model").open("wb") as fh:
        fh.truncate(input_limits.MAX_SPM_MODEL_BYTES + 1)  # sparse
    with pytest.raises(SetupError, match=r"tokenizer.model: 33,554,433 bytes, over the limit of 33,554,432"):
        convert.convert(folder, tmp_path / "x.gguf")
    with pytest.raises(SetupError, match=r"tokenizer.model: 33,554,433 bytes, over the limit of 33,554,432"):
        convert.fingerprint(folder)
