"""The chat side reads the original's folder inside it, and the transformers child loads a private copy.

`chat --reference hf:DIR` and `run --reference hf:DIR --messages` read the original's chat
templates (`harness.chat.original`) and start transformers on the folder
(`harness.chat.transformers_side`). A template that is a link to a secret outside the folder,
a FIFO, a named template that leaves the folder: each is refused with one line naming it,
never read. transformers' `AutoTokenizer` follows links and reads what it likes of a folder,
so the child is given a private copy of the vetted tokenizer files, never the folder itself.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from harness.chat import original as orig
from harness.chat import transformers_side
from harness.errors import SetupError
from harness.models import folder_files

SECRET = "root:$6$planted:19000:0:99999:7:::"


@pytest.fixture
def folder(tmp_path):
    (tmp_path / "secret").write_text(SECRET)
    root = tmp_path / "model"
    root.mkdir()
    (root / "tokenizer.json").write_text('{"model": {"type": "BPE", "vocab": {}}}')
    (root / "tokenizer_config.json").write_text('{"chat_template": "{{ messages }}"}')
    return root


@pytest.mark.parametrize("name", ["chat_template.jinja", "tokenizer_config.json",
                                  "additional_chat_templates/tool_use.jinja"])
@pytest.mark.parametrize("how", ["relative", "absolute", "fifo"])
def test_a_template_source_that_leaves_the_folder_or_is_a_fifo_is_refused_naming_it(folder, name, how):
    path = folder / name
    path.parent.mkdir(exist_ok=True)
    path.unlink(missing_ok=True)
    if how == "relative":
        path.symlink_to(os.path.relpath(folder.parent / "secret", path.parent))
    elif how == "absolute":
        path.symlink_to(folder.parent / "secret")
    else:
        os.mkfifo(path)
    began = time.monotonic()
    with pytest.raises(SetupError) as refused:
        orig.original_templates(folder)
    message = str(refused.value)
    assert message.startswith(f"{path}: ") and SECRET not in message and "\n" not in message
    assert ("a FIFO" if how == "fifo" else "outside the folder") in message
    assert time.monotonic() - began < 5


def test_a_template_linked_inside_the_folder_is_read(folder):
    (folder / "templates").mkdir()
    (folder / "templates" / "chat.jinja").write_text("{{ bos_token }}")
    (folder / "chat_template.jinja").symlink_to(Path("templates") / "chat.jinja")
    assert orig.original_templates(folder)[orig.DEFAULT] == "{{ bos_token }}"


def test_the_transformers_child_is_given_a_copy_of_the_tokenizer_files_only(folder):
    (folder / "chat_template.jinja").write_text("{{ messages }}")
    (folder / "additional_chat_templates").mkdir()
    (folder / "additional_chat_templates" / "rag.jinja").write_text("{{ documents }}")
    (folder / "spiece.model").write_bytes(b"pieces")
    (folder / "tokenization_x.py").write_text("raise SystemExit('ran')")
    (folder / "model.safetensors").write_bytes(b"\0" * 1024)
    names = dict(transformers_side.tokenizer_files(folder))
    copy = folder_files.private_copy(folder, names.items())
    try:
        found = sorted(str(p.relative_to(copy)) for p in copy.rglob("*") if p.is_file())
        assert found == ["additional_chat_templates/rag.jinja", "chat_template.jinja", "spiece.model",
                         "tokenizer.json", "tokenizer_config.json"]
        assert not any(p.is_symlink() for p in copy.rglob("*"))
    finally:
        folder_files.remove_copy(copy)


def test_a_vocabulary_file_linked_out_of_the_folder_is_refused_before_the_child_starts(folder):
    (folder / "spiece.model").symlink_to(folder.parent / "secret")
    with pytest.raises(SetupError, match=r"spiece\.model: a link to .*, outside the folder"):
        folder_files.private_copy(folder, transformers_side.tokenizer_files(folder))


def test_the_original_chat_child_loads_the_copy_and_the_copy_goes_with_it(folder):
    if transformers_side.missing():
        pytest.skip(transformers_side.missing())
    chat = transformers_side.OriginalChat(folder)
    argv = chat._argv()
    copy = Path(argv[argv.index("harness.chat.transformers_child") + 1])
    assert copy != folder and not copy.is_relative_to(folder) and (copy / "tokenizer.json").is_file()
    chat.close()
    assert not copy.exists()
