"""The original's side of the message check, without llama.cpp: its templates read and compared with
the GGUF's, transformers' apply_chat_template in a bounded child (fixed clock, time and memory
limits), the classes of a difference, and our renderer's memory budget."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from harness.chat import message_classes as mc
from harness.chat import original as orig
from harness.chat.oracle import NOW, ChatAnswer
from harness.errors import SetupError

HI = [{"role": "user", "content": "hi"}]
DATED = ("{{ bos_token }}{% for m in messages %}[{{ m['role'] }}]{{ m['content'] }}{% endfor %}"
         "{{ strftime_now('%d %b %Y') }}")


def folder_with(tmp_path, *, config: dict | None = None, jinja: str | None = None):
    tmp_path.mkdir(parents=True, exist_ok=True)
    if config is not None:
        (tmp_path / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    if jinja is not None:
        (tmp_path / "chat_template.jinja").write_text(jinja, encoding="utf-8")
    return tmp_path


# --- the templates themselves ---------------------------------------------------------------

def test_original_templates_are_read_where_transformers_reads_them(tmp_path):
    assert orig.original_templates(folder_with(tmp_path / "a", config={"chat_template": "A"})) == {"": "A"}
    named = [{"name": "default", "template": "D"}, {"name": "tool_use", "template": "T"}]
    assert orig.original_templates(folder_with(tmp_path / "b", config={"chat_template": named})) == \
        {"": "D", "tool_use": "T"}
    both = folder_with(tmp_path / "c", config={"chat_template": "old"}, jinja="new")
    assert orig.original_templates(both) == {"": "new"}, "chat_template.jinja wins over the config's key"
    assert orig.original_templates(folder_with(tmp_path / "d", config={})) == {}


def test_gguf_templates_are_the_default_and_each_named_key():
    meta = {"tokenizer.chat_template": "D", "tokenizer.chat_template.rag": "R",
            "tokenizer.chat_templates": ["rag"], "tokenizer.ggml.model": "gpt2"}
    assert orig.gguf_templates(meta) == {"": "D", "rag": "R"}


def test_different_bytes_and_a_missing_side_are_each_a_finding_with_a_diff():
    findings = orig.compare({"": "a\nb\n", "rag": "R"}, {"": "a\nB\n", "tool_use": "T"})
    by_name = {f["name"]: f for f in findings}
    assert by_name["default"]["class"] == orig.TEMPLATE_DIFFERS
    assert "-B\u21b5" in by_name["default"]["diff"] and "+b\u21b5" in by_name["default"]["diff"]
    assert by_name["rag"]["class"] == orig.ABSENT_ORIGINAL
    assert by_name["tool_use"]["class"] == orig.ABSENT_GGUF
    assert orig.compare({"": "same"}, {"": "same"}) == []


def test_a_template_differing_only_in_its_final_newline_still_shows_a_diff():
    [finding] = orig.compare({"": "x"}, {"": "x\n"})
    assert finding["diff"], "difflib alone shows nothing for a missing final newline"


def test_the_original_folder_of_a_reference_spec(tmp_path):
    (tmp_path / "tokenizer.json").write_text("{}", encoding="utf-8")
    assert orig.folder_of(f"hf:{tmp_path}") == tmp_path
    assert orig.folder_of(f"hf:{tmp_path / 'tokenizer.json'}") == tmp_path
    assert orig.folder_of(f"hf:{tmp_path / 'missing'}") == tmp_path / "missing", "not its parent: it is refused"


def test_bad_original_files_are_one_line_setup_errors(tmp_path):
    bad = folder_with(tmp_path / "a")
    (bad / "tokenizer_config.json").write_text("{not json", encoding="utf-8")
    with pytest.raises(SetupError, match=r"tokenizer_config\.json: not JSON"):
        orig.original_templates(bad)
    shape = folder_with(tmp_path / "b", config={"chat_template": 3})
    with pytest.raises(SetupError, match="neither a string nor a list"):
        orig.original_templates(shape)
    huge = folder_with(tmp_path / "c", jinja="x" * (orig.MAX_TEMPLATE_BYTES + 1))
    with pytest.raises(SetupError, match="larger than 4 MiB"):
        orig.original_templates(huge)


# --- classes ----------------------------------------------------------------------------------

def ok(text: str, ids: list[int]) -> ChatAnswer:
    return ChatAnswer("ok", text=text.encode(), ids=ids)


def classify(a: ChatAnswer, b: ChatAnswer, *, same: bool = True) -> str:
    return mc.classify(a, b, original_text=a.text, llama_text=b.text, same_template=same, bos_id=1)


@pytest.mark.parametrize(("original", "llama", "same", "expected"), [
    pytest.param(ok("<s>x", [1, 5]), ok("<s>x", [1, 5]), True, mc.AGREE, id="agree"),
    pytest.param(ok("<s>x", [1, 5]), ok("<s>y", [1, 6]), False, mc.TEMPLATE, id="template-differs"),
    pytest.param(ok("<s>x", [1, 5]), ok("<s><s>x", [1, 1, 5]), True, mc.BOS, id="bos-twice"),
    pytest.param(ok("a\n b", [2]), ok("a b", [3]), True, mc.WHITESPACE, id="whitespace"),
    pytest.param(ok("Today 01 Jan 2025.", [2]), ok("Today 26 Jul 2024.", [3]), True, mc.DATE, id="date"),
    pytest.param(ok("x", [5]), ok("y", [6]), True, mc.RENDERS, id="renders-differently"),
    pytest.param(ok("x", [5]), ok("x", [6]), True, mc.IDS, id="ids-differ"),
    pytest.param(ChatAnswer("error", error="raise_exception: roles must alternate"), ok("x", [5]), True,
                 mc.RAISED_ONE_SIDE, id="raised-on-one-side"),
    pytest.param(ok("x", [5]), ChatAnswer("error", error="Unknown filter: wordwrap"), True, mc.JINJA,
                 id="jinja-feature"),
    pytest.param(ChatAnswer("error", error="raise_exception: no"), ChatAnswer("error", error="Jinja Exception: no"),
                 True, mc.NOT_APPLICABLE, id="both-refuse"),
    pytest.param(ChatAnswer("error", error="UndefinedError: 'tools_in_user_message' is undefined"), ok("x", [5]),
                 True, mc.NOT_APPLICABLE, id="variable-never-set"),
])
def test_a_difference_gets_its_class(original, llama, same, expected):
    assert classify(original, llama, same=same) == expected


def test_a_bos_the_tokenizer_adds_is_part_of_the_text_the_model_sees():
    llama = ChatAnswer("ok", text=b"x", ids=[1, 5])  # chat.cpp cut the template's BOS, the tokenizer added it
    assert mc.effective_text(llama, bos=(1, "<s>"), eos=(2, "</s>")) == b"<s>x"
    assert mc.effective_text(ChatAnswer("ok", text=b"<s>x", ids=[1, 5]), bos=(1, "<s>"), eos=None) == b"<s>x"


# --- the transformers child ---------------------------------------------------------------------

@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    pytest.importorskip("transformers", reason="could not import 'transformers'")
    from tests.reference_files import bpe_json
    folder = tmp_path_factory.mktemp("tiny-original")
    bpe_json(folder / "tokenizer.json")
    return folder


def original_chat(folder, template: str, **kw):
    from harness.chat.transformers_side import OriginalChat
    config = {"bos_token": "<|bos|>", "eos_token": "<|bos|>", "chat_template": template,
              "tokenizer_class": "PreTrainedTokenizerFast"}
    (folder / "tokenizer_config.json").write_text(json.dumps(config), encoding="utf-8")
    return OriginalChat(folder, **kw)


def ask(chat, **kw):
    from harness.chat.oracle import request
    return chat.ask(request(template=None, messages=HI, add_generation_prompt=True, **kw))


def test_transformers_renders_with_its_special_tokens_and_the_fixed_clock(tiny):
    with original_chat(tiny, DATED) as chat:
        answer = ask(chat)
        later = ask(chat, now=NOW + 86400 * 31)
    assert answer.status == "ok"
    assert answer.text == b"<|bos|>[user]hi01 Jan 2025"
    assert later.text is not None and later.text.endswith(b"01 Feb 2025"), "strftime_now reads the request's now"
    from tokenizers import Tokenizer
    bos = Tokenizer.from_file(str(tiny / "tokenizer.json")).token_to_id("<|bos|>")
    assert answer.ids[:2].count(bos) == 1, "no second BOS: transformers tokenizes with add_special_tokens=False"


def test_raise_exception_in_the_original_is_a_refusal(tiny):
    with original_chat(tiny, "{{ raise_exception('no system role') }}") as chat:
        answer = ask(chat)
    assert answer.status == "error" and answer.error.startswith("raise_exception: ")


def test_a_template_that_allocates_without_end_stops_at_the_memory_limit(tiny):
    hog = ("{% set ns = namespace(l=[]) %}{% for i in range(100000) %}"
           "{% set ns.l = ns.l + ['x' * 1000000 + i|string] %}{% endfor %}{{ ns.l|length }}")
    with original_chat(tiny, hog, memory=1 << 30, timeout=60) as chat:
        answer = ask(chat)
        after = ask(chat)
    assert answer.status == "error" and "MemoryError" in answer.error
    assert after.status == "error", "the child survives its MemoryError and answers the next request"


def test_a_template_that_loops_is_killed_at_the_time_limit(tiny):
    loop = "{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}"
    with original_chat(tiny, loop, timeout=2) as chat:
        answer = ask(chat)
    assert answer.status == "hang"


# --- our renderer's memory budget -----------------------------------------------------------------

BUDGET = 512 << 20  # tokenizer.chat.budget.DEFAULT_MEMORY_BUDGET
PROBE = textwrap.dedent("""
    import json, sys
    from tokenizer.chat.errors import ChatBudgetExceeded
    from tokenizer.chat.render import apply_template
    try:
        apply_template(sys.argv[1], [{"role": "user", "content": "hi"}], bos_token="<s>", eos_token="</s>",
                       now=0, seconds=60)
        error = ""
    except ChatBudgetExceeded as exc:
        error = str(exc)
    # VmHWM: this process's own peak. ru_maxrss is not: after exec it keeps the forking parent's (a
    # pytest-xdist worker of hundreds of MiB), so it measured the worker, not the render.
    with open("/proc/self/status", encoding="ascii") as status:
        peak = next(int(line.split()[1]) for line in status if line.startswith("VmHWM:")) * 1024
    print(json.dumps({"error": error, "peak": peak}))
""")


@pytest.mark.parametrize("template", [
    pytest.param("{{ (range(10**8)|list)|length }}", id="range-to-list"),
    pytest.param("{% set ns = namespace(l=[]) %}{% for i in range(100000) %}"
                 "{% set ns.l = ns.l + ['x' * 1000000 + i|string] %}{% endfor %}{{ ns.l|length }}",
                 id="list-of-strings"),
])
def test_a_hostile_template_stops_at_our_memory_budget(template):
    if not Path("/proc/self/statm").is_file():
        pytest.skip("reads /proc")
    out = subprocess.run([sys.executable, "-c", PROBE, template], capture_output=True, text=True, timeout=120,
                         check=True)
    result = json.loads(out.stdout)
    assert "MiB, over its budget" in result["error"], "the memory budget stops it, not the clock"
    assert result["peak"] < BUDGET + (256 << 20), "512 MiB of growth over a ~60 MiB interpreter"
