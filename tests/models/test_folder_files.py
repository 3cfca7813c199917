"""A model folder's files are read inside the folder, as regular files of bounded size (harness.models.folder_files).

The planted folders are the hostile round's: a file of the folder that is a link to a
secret outside it (relative, absolute, through a chain of links), to a FIFO or a device, a
dangling link, a loop, a directory or a FIFO named like a data file. Each is refused with
one line naming the file, and the secret's bytes are never read. What stays allowed: a link
to another file of the folder, Hugging Face's cache layout (`snapshots/REV/x -> ../../blobs/H`),
and a hard link (a regular file: nothing tells it from a copy).
"""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

from harness.errors import SetupError
from harness.models import folder_files

SECRET = b"root:$6$planted-secret-hash:19000:0:99999:7:::\n"


@pytest.fixture
def planted(tmp_path):
    """(the model folder, the secret outside it)."""
    secret = tmp_path / "secret.txt"
    secret.write_bytes(SECRET)
    folder = tmp_path / "model"
    folder.mkdir()
    (folder / "tokenizer.json").write_text("{}")
    return folder, secret


def plant(folder: Path, secret: Path, how: str) -> Path:
    """`folder/chat_template.jinja` made as `how` says; the file's path."""
    path = folder / "chat_template.jinja"
    if how == "relative-link":
        path.symlink_to(Path("..") / secret.name)
    elif how == "absolute-link":
        path.symlink_to(secret)
    elif how == "link-chain":  # inside, then inside again, then out
        (folder / "b").symlink_to(secret)
        (folder / "a").symlink_to("b")
        path.symlink_to("a")
    elif how == "link-to-fifo-outside":
        os.mkfifo(secret.with_name("pipe"))
        path.symlink_to(secret.with_name("pipe"))
    elif how == "link-to-fifo-inside":
        os.mkfifo(folder / "pipe")
        path.symlink_to("pipe")
    elif how == "fifo":
        os.mkfifo(path)
    elif how == "link-to-device":
        path.symlink_to("/dev/zero")
    elif how == "dangling-link":
        path.symlink_to("nowhere")
    elif how == "link-loop":
        path.symlink_to("chat_template.jinja")
    elif how == "directory":
        path.mkdir()
    elif how == "linked-parent":  # a folder of the model that is a link out: its files are outside
        (folder / "sub").symlink_to(secret.parent)
        return folder / "sub" / secret.name
    return path


REFUSED = {
    "relative-link": "outside the folder", "absolute-link": "outside the folder", "link-chain": "outside the folder",
    "link-to-fifo-outside": "outside the folder", "link-to-fifo-inside": "a FIFO, not a regular file",
    "fifo": "a FIFO, not a regular file", "link-to-device": "outside the folder",
    "dangling-link": "a link that leads nowhere", "link-loop": "a link that leads nowhere",
    "directory": "a directory, not a regular file", "linked-parent": "outside the folder",
}


@pytest.mark.parametrize("how", list(REFUSED))
def test_a_file_that_is_not_a_regular_file_inside_the_folder_is_refused_naming_it(planted, how):
    folder, secret = planted
    path = plant(folder, secret, how)
    for read in (lambda: folder_files.read_file(path, 1 << 20, folder=folder),
                 lambda: folder_files.copy_file(path, folder.parent / "copy", 1 << 20, folder=folder),
                 lambda: folder_files.private_copy(folder, [(str(path.relative_to(folder)), 1 << 20)])):
        with pytest.raises(SetupError) as refused:
            read()
        message = str(refused.value)
        assert message.startswith(f"{path}: ") and REFUSED[how] in message and "\n" not in message
        assert not (folder.parent / "copy").exists()


@pytest.mark.skipif(os.geteuid() != 0, reason="making a device node needs root")
def test_a_device_inside_the_folder_is_refused_without_being_opened(planted):
    folder, _ = planted
    os.mknod(folder / "tokenizer.model", stat.S_IFCHR | 0o600, os.makedev(1, 5))  # /dev/zero's numbers
    with pytest.raises(SetupError, match="a character device, not a regular file"):
        folder_files.read_file(folder / "tokenizer.model", 1 << 20)


def test_a_link_to_another_file_of_the_folder_is_followed_and_copied_as_a_file(planted):
    folder, _ = planted
    (folder / "templates").mkdir()
    (folder / "templates" / "t.jinja").write_text("{{ x }}")
    (folder / "chat_template.jinja").symlink_to(Path("templates") / "t.jinja")
    assert folder_files.read_file(folder / "chat_template.jinja", 100) == b"{{ x }}"
    copy = folder_files.private_copy(folder, [("chat_template.jinja", 100), ("tokenizer.json", 100),
                                              ("absent.json", 100)])
    assert sorted(p.name for p in copy.iterdir()) == ["chat_template.jinja", "tokenizer.json"]
    assert not (copy / "chat_template.jinja").is_symlink() and (copy / "chat_template.jinja").read_text() == "{{ x }}"
    folder_files.remove_copy(copy)
    assert not copy.exists()


def test_a_hard_link_is_a_regular_file_and_is_read(planted):
    """A hard link cannot be told from a copy of the bytes (and gives nothing its maker could not read)."""
    folder, secret = planted
    os.link(secret, folder / "chat_template.jinja")
    assert folder_files.read_file(folder / "chat_template.jinja", 1 << 20) == SECRET


def test_the_hugging_face_cache_layout_is_inside(tmp_path):
    """snapshots/REV/x -> ../../blobs/HASH: the repository's blobs count as the snapshot's folder."""
    repo = tmp_path / "hub" / "models--org--name"
    (repo / "blobs").mkdir(parents=True)
    (repo / "blobs" / "abc123").write_text('{"model": {}}')
    snapshot = repo / "snapshots" / "0123abcd"
    snapshot.mkdir(parents=True)
    (snapshot / "tokenizer.json").symlink_to(Path("..") / ".." / "blobs" / "abc123")
    assert folder_files.read_file(snapshot / "tokenizer.json", 100) == b'{"model": {}}'
    (snapshot / "secret").symlink_to(tmp_path / "hub")  # the rest of the cache stays outside
    (tmp_path / "hub" / "token").write_text("hf_secret")
    with pytest.raises(SetupError, match="outside the folder"):
        folder_files.read_file(snapshot / "secret" / "token", 100, folder=snapshot)


def test_a_file_over_its_limit_is_refused_before_it_is_read(planted):
    folder, _ = planted
    with (folder / "tokenizer.json").open("wb") as fh:
        fh.truncate(5 << 30)  # sparse: 5 GB claimed, no disk taken
    with pytest.raises(folder_files.TooLarge, match="5,368,709,120 bytes, over the limit of 1,024"):
        folder_files.read_file(folder / "tokenizer.json", 1024)


def test_the_folder_itself_may_be_a_link(planted, tmp_path):
    """The folder as the user names it is theirs: only what is inside it is judged."""
    folder, _ = planted
    (tmp_path / "alias").symlink_to(folder)
    assert folder_files.read_file(tmp_path / "alias" / "tokenizer.json", 100) == b"{}"


def test_the_private_copies_of_a_process_that_is_gone_are_removed(tmp_path):
    """A killed run cannot remove its copies at exit: the next run does."""
    import subprocess
    import sys

    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead = tmp_path / f"{folder_files.PRIVATE_PREFIX}{gone.stdout.strip()}-abc"
    alive = tmp_path / f"{folder_files.PRIVATE_PREFIX}{os.getpid()}-def"
    for folder in (dead, alive):
        (folder / "copy-x").mkdir(parents=True)
    folder_files._sweep(tmp_path)
    assert not dead.exists() and alive.exists()
