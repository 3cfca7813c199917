"""harness.files.atomic: an output path that is not a regular file is refused before any write; no planted link
is followed; a failed write leaves the old file and no temp file; the lock file is no link."""

from __future__ import annotations

import os
import socket
import stat

import pytest

from harness.errors import SetupError
from harness.files.atomic import building, check_output_path, locked, replacing, write_bytes_atomic, write_text_atomic


def char_device(path) -> bool:
    """A copy of /dev/null at `path` (root only); False when this user cannot make one."""
    try:
        os.mknod(path, stat.S_IFCHR | 0o666, os.makedev(1, 3))
    except PermissionError:
        return False
    return True


@pytest.fixture
def pipe_fd():
    read, write = os.pipe()
    yield write
    os.close(read)
    os.close(write)


def test_a_missing_or_regular_file_and_a_missing_folder_are_accepted(tmp_path):
    (tmp_path / "old.json").write_text("{}")
    for path in (tmp_path / "new.json", tmp_path / "old.json", tmp_path / "a" / "b" / "c.json"):
        assert check_output_path(path, "--out") == path


@pytest.mark.parametrize("kind", ["fifo", "directory", "link-to-fifo", "link-to-dev-null", "socket",
                                  "parent-is-a-file"])
def test_what_is_not_a_regular_file_is_refused_in_one_line(tmp_path, kind):
    path = tmp_path / "out"
    if kind == "fifo":
        os.mkfifo(path)
    elif kind == "directory":
        path.mkdir()
    elif kind == "link-to-fifo":
        os.mkfifo(tmp_path / "fifo")
        path.symlink_to(tmp_path / "fifo")
    elif kind == "link-to-dev-null":
        path.symlink_to("/dev/null")
    elif kind == "socket":
        sock = socket.socket(socket.AF_UNIX)
        sock.bind(str(path))
        sock.close()
    else:
        (tmp_path / "file").write_text("x")
        path = tmp_path / "file" / "out"
    with pytest.raises(SetupError) as caught:
        check_output_path(path, "--json")
    message = str(caught.value)
    assert message.startswith(f"--json {path}:") and "\n" not in message
    with pytest.raises(SetupError):
        write_text_atomic(path, "{}", "--json")


def test_a_character_device_is_refused_and_stays_a_device(tmp_path):
    """issue 47: `repair --json` onto a copy of /dev/null replaced it with a regular file (exit 0)."""
    dev = tmp_path / "null"
    if not char_device(dev):
        pytest.skip("making a character device needs root (mknod); the FIFO and link cases cover the rest")
    with pytest.raises(SetupError, match="is a character device"):
        write_text_atomic(dev, "{}", "--json")
    assert stat.S_ISCHR(dev.lstat().st_mode)
    assert os.listdir(tmp_path) == ["null"]


def test_a_proc_fd_link_to_a_pipe_is_refused(pipe_fd):
    """issue 47: `--out /proc/self/fd/1` exited 0 and left a regular file in its place."""
    with pytest.raises(SetupError, match="is a link to a FIFO"):
        write_bytes_atomic(f"/proc/self/fd/{pipe_fd}", b"x", "--out")


def test_no_write_follows_a_link_planted_beside_the_output(tmp_path):
    victim = tmp_path / "in.gguf"
    victim.write_bytes(b"precious")
    for name in (".out.gguf.tmp", "out.gguf.tmp", ".out.gguf.part", "out.gguf.part"):
        (tmp_path / name).symlink_to(victim)
    write_bytes_atomic(tmp_path / "out.gguf", b"new")
    with building(tmp_path / "built.bin") as path:
        path.write_bytes(b"built")
    assert victim.read_bytes() == b"precious"
    assert (tmp_path / "out.gguf").read_bytes() == b"new" and (tmp_path / "built.bin").read_bytes() == b"built"


def test_a_link_as_the_output_is_replaced_not_written_through(tmp_path):
    victim = tmp_path / "in.gguf"
    victim.write_bytes(b"precious")
    (tmp_path / "out").symlink_to(victim)
    write_bytes_atomic(tmp_path / "out", b"new")
    assert victim.read_bytes() == b"precious" and not (tmp_path / "out").is_symlink()


def test_a_failed_write_keeps_the_old_file_and_leaves_no_temp(tmp_path):
    path = tmp_path / "report.json"
    path.write_text("old")
    with pytest.raises(RuntimeError), replacing(path) as out:
        out.write(b"half")
        raise RuntimeError("disk full")
    with pytest.raises(RuntimeError), building(path) as built:
        built.write_bytes(b"half")
        raise RuntimeError("compiler died")
    assert path.read_text() == "old" and os.listdir(tmp_path) == ["report.json"]


def test_what_a_program_left_that_is_not_a_file_is_not_placed(tmp_path):
    with pytest.raises(SetupError, match="not a regular file"), building(tmp_path / "helper") as built:
        built.symlink_to("/etc/passwd")
    assert os.listdir(tmp_path) == []


def test_the_permission_bits_are_kept_or_0644(tmp_path):
    new, old = tmp_path / "new", tmp_path / "old"
    old.write_text("x")
    old.chmod(0o600)
    write_text_atomic(new, "y")
    write_text_atomic(old, "y")
    assert stat.S_IMODE(new.stat().st_mode) == 0o644 and stat.S_IMODE(old.stat().st_mode) == 0o600


def test_the_lock_file_is_no_link_and_no_fifo(tmp_path):
    (tmp_path / "link.lock").symlink_to(tmp_path / "elsewhere")
    with pytest.raises(SetupError, match="cannot be opened"), locked(tmp_path / "link.lock"):
        pass
    assert not (tmp_path / "elsewhere").exists()
    os.mkfifo(tmp_path / "fifo.lock")
    with pytest.raises(SetupError, match="is a FIFO"), locked(tmp_path / "fifo.lock"):
        pass
    with locked(tmp_path / "a" / "ok.lock"):
        assert (tmp_path / "a" / "ok.lock").is_file()


def test_a_system_folder_is_refused_even_for_a_link_to_a_regular_file(tmp_path):
    """`--json /dev/stdout` (or /proc/self/fd/N) with stdout a regular file: the temp file and the rename
    would go into /dev, replacing the system's /dev/stdout link with a regular file (as root)."""
    regular = tmp_path / "out.txt"
    with regular.open("w") as handle:
        for path in ("/dev/stdout", f"/proc/self/fd/{handle.fileno()}"):
            if path == "/dev/stdout" and not stat.S_ISREG(os.stat("/dev/stdout").st_mode):
                continue  # stdout is not a regular file here: the FIFO and device cases cover it
            with pytest.raises(SetupError, match="a system folder"):
                write_text_atomic(path, "{}", "--json")
    assert os.path.islink("/dev/stdout") or not os.path.lexists("/dev/stdout")
    assert regular.read_text() == ""
