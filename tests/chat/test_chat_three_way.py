"""The three-way message check end to end: a tiny original folder (tokenizer.json + its template),
a GGUF of the same vocabulary with the same or an older template, and llama.cpp's chat path.

Expected ids come from the original's own library (transformers) and from llama.cpp (the helper);
skips when the helper is not built (`python -m harness chat --build-helper`) or transformers is
missing (`pip install 'gguf-parity[reference]'`).
"""

from __future__ import annotations

import json

import pytest
from test_chat_oracle import HELPER

from harness.chat import message_classes as mc
from harness.chat import original as orig
from harness.chat.oracle import ChatOracle
from tests.reference_files import BOS, bpe_gguf, bpe_json

pytest.importorskip("transformers", reason="could not import 'transformers'")
pytestmark = pytest.mark.skipif(HELPER is None, reason="chat helper not built: python -m harness chat --build-helper")

CURRENT = ("{{ bos_token }}{% for m in messages %}<{{ m['role'] }}>{{ m['content'] }}\n{% endfor %}"
           "{% if add_generation_prompt %}<assistant><think>\n{% endif %}")
OLDER = CURRENT.replace("<assistant><think>\n", "<assistant>")  # before the repository opened a think block


def pair(tmp_path, *, original: str, gguf: str):
    folder = tmp_path / "original"
    bpe_json(folder / "tokenizer.json")
    config = {"bos_token": BOS, "eos_token": BOS, "chat_template": original,
              "tokenizer_class": "PreTrainedTokenizerFast"}
    (folder / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    model = bpe_gguf(folder / "tokenizer.json", tmp_path / "tiny.gguf", extra={"tokenizer.chat_template": gguf})
    return model, folder


@pytest.fixture(scope="module")
def oracle():
    with ChatOracle() as o:
        yield o


def by_case(result) -> dict[str, dict]:
    return {c["case"]: c for c in result.cards}


def test_same_template_agrees_three_ways_except_where_llama_cpp_prepares_the_messages(tmp_path, oracle):
    from harness.chat.three_way import check
    model, folder = pair(tmp_path, original=CURRENT, gguf=CURRENT)
    result = check(model, folder, oracle=oracle, log=lambda s: None)
    assert result.templates == [], "the converter's template is byte-identical"
    assert result.checked == [""] and result.cases == 48
    assert result.classes == {mc.AGREE: 42, mc.PREPARED: 6}, result.classes
    prepared = {c["case"] for c in result.cards}
    assert prepared == {f"{conv}/{gen}" for conv in ("null-assistant", "developer", "tool-call")
                        for gen in ("gen", "nogen")}, "null content is '' to llama.cpp, 'None' to transformers; " \
        "llama.cpp reads developer as system"
    card = by_case(result)["developer/nogen"]
    assert [seg for op, seg in card["diff"] if op != "="] == ["d", "syst", "veloper", "m"]
    assert result.ours_differ == 0 and not result.ok


def test_an_older_template_in_the_gguf_is_a_template_finding_with_its_text_and_count(tmp_path, oracle):
    from harness.chat.three_way import check
    model, folder = pair(tmp_path, original=CURRENT, gguf=OLDER)
    result = check(model, folder, oracle=oracle, log=lambda s: None)
    [template] = result.templates
    assert template["class"] == orig.TEMPLATE_DIFFERS
    assert any("<think>" in line for line in template["diff"]), template["diff"]
    card = by_case(result)["one-user/gen"]
    assert card["class"] == mc.TEMPLATE
    sides = {s["side"]: s for s in card["sides"]}
    assert sides["original"]["text"].endswith("<assistant><think>\u21b5\n"), sides["original"]["text"]
    assert sides["llama.cpp"]["text"].endswith("<assistant>")
    assert sides["original"]["count"] > sides["llama.cpp"]["count"] == sides["ours"]["count"]
    assert [seg for op, seg in card["diff"] if op == "-"] == ["<think>\n"]
    assert "one-user/nogen" not in by_case(result), "without the generation prompt both render the same"
    assert result.classes[mc.TEMPLATE] == 24 and result.count_differs == 27
    assert by_case(result)["developer/nogen"]["class"] == mc.PREPARED, "the template's change does not matter there"
    assert result.ours_differ == 0 and not result.ok


def test_the_chat_command_checks_three_ways_and_writes_the_three_sides(tmp_path, capsys):
    from harness.cli import main
    model, folder = pair(tmp_path, original=CURRENT, gguf=OLDER)
    status = main(["chat", "--model", str(model), "--reference", f"hf:{folder}", "--report", str(tmp_path / "r")])
    out = capsys.readouterr().out
    assert status == 1, out
    assert "1 template finding(s) (default: template differs)" in out
    assert "template differs 24" in out and "ours vs llama.cpp: 48/48 identical" in out
    assert "message token count differs on 27" in out
    data = json.loads((tmp_path / "r" / "messages.json").read_text(encoding="utf-8"))
    assert data["three_way"][0]["classes"][mc.TEMPLATE] == 24
    page = (tmp_path / "r" / "messages.html").read_text(encoding="utf-8")
    assert "Three ways:" in page and "<th>original</th>" in page and "<th>ours</th>" in page
    assert "template differs" in page


def test_reference_without_a_model_is_a_usage_error(capsys):
    from harness.cli import main
    assert main(["chat", "--reference", "hf:/nowhere"]) == 2
    assert "--reference needs --model" in capsys.readouterr().err
