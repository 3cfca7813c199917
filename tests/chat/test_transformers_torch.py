"""The transformers child works where torch is installed beside it (issue 46).

transformers imports torch whenever it is installed (5.18 has no switch to say no: `USE_TORCH`
is no longer read, checked in its `utils/import_utils.py`), though `apply_chat_template` needs
none of it. Under an address-space cap torch's large shared libraries could not be mapped:
`transformers cannot load it: ImportError: libtorch_python.so: failed to map segment from shared
object`. The child now caps its heap (RLIMIT_DATA: what it allocates), not its address space
(which counts every library it maps), so torch loads and a template bomb still stops at the cap.

The CPU build of torch maps about 0.8 GB of address space and the child's heap stays near
0.35 GB, so a cap between the two (0.64 GB here) shows the difference; a CUDA build maps several
GB, which the default 2 GiB cap could not hold.

Runs only where torch is importable; the test session has no torch (the project pins no torch for
it). To run it, in a venv of its own:

    python -m venv /tmp/torchenv
    /tmp/torchenv/bin/pip install ~/.cache/gguf-parity/wheels/llama_cpp_python-$(python tools/matrix_local.py pin)-*.whl
    /tmp/torchenv/bin/pip install -e ".[harness,reference,transformers,test]"
    /tmp/torchenv/bin/python -m pytest tests/chat/test_transformers_torch.py -p no:cacheprovider
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.reference_files import BOS, bpe_json

pytest.importorskip("transformers", reason="could not import 'transformers'")
pytest.importorskip("torch", reason="could not import 'torch': a venv with it is in this file's docstring")

CAP = 640 << 20  # above the child's heap beside torch (about 0.35 GB), below the address space torch maps
HI = [{"role": "user", "content": "hi"}]


def original(tmp_path: Path, template: str) -> Path:
    folder = tmp_path / "original"
    bpe_json(folder / "tokenizer.json")
    (folder / "tokenizer_config.json").write_text(json.dumps(
        {"bos_token": BOS, "eos_token": BOS, "chat_template": template, "tokenizer_class": "PreTrainedTokenizerFast"}))
    return folder


def test_the_transformers_child_loads_torch_and_answers_under_its_cap(tmp_path):
    from harness.chat.transformers_side import OriginalChat
    with OriginalChat(original(tmp_path, "{{ bos_token }}{{ messages[0]['content'] }}"), memory=CAP) as chat:
        answer = chat.ask({"messages": HI, "add_generation_prompt": True})
        maps = Path(f"/proc/{chat._start().pid}/maps").read_text()
    assert answer.status == "ok" and answer.text == f"{BOS}hi".encode(), answer
    assert "libtorch" in maps, "transformers did not import torch: this test shows nothing"


def test_a_template_bomb_beside_torch_still_stops_at_the_cap(tmp_path):
    from harness.chat.transformers_side import OriginalChat
    bomb = "{{ ('x' * 3000000000)|length }}"  # 3 GB of text
    with OriginalChat(original(tmp_path, bomb), memory=CAP) as chat:
        answer = chat.ask({"messages": HI, "add_generation_prompt": True})
        after = chat.ask({"messages": HI, "add_generation_prompt": True, "template_name": "{{ 'ok' }}"})
    assert answer.status == "error" and "MemoryError" in answer.error, answer
    assert after.status == "ok" and after.text == b"ok"
