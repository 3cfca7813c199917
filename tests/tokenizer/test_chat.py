"""tokenizer.chat.render without llama.cpp: the sandbox, the budget, and llama.cpp's engine rules.

The expected outputs here are llama.cpp's behaviour as read in `common/jinja/` (cited per
test); the golden replay in tests/chat/test_chat_golden.py checks the same against recordings.
"""

from __future__ import annotations

import time

import pytest

from tokenizer.chat.caps import caps_of
from tokenizer.chat.errors import ChatBudgetExceeded, ChatTemplateError, TemplateRaised
from tokenizer.chat.jinja import render
from tokenizer.chat.render import apply_template

HI = [{"role": "user", "content": "hi"}]


def run(source: str, messages=HI, **kw) -> str:
    return apply_template(source, messages, bos_token="<s>", eos_token="</s>", now=0, **kw)


def test_infinite_loop_stops_within_budget():
    src = "{% for a in range(100000) %}{% for b in range(100000) %}{% endfor %}{% endfor %}"
    start = time.monotonic()
    with pytest.raises(ChatBudgetExceeded, match="budget"):
        run(src, seconds=0.5)
    assert time.monotonic() - start < 3


def test_doubling_string_stops_within_size_budget():
    src = ("{% set ns = namespace(s='ab') %}{% for i in range(64) %}{% set ns.s = ns.s ~ ns.s %}"
           "{% endfor %}{{ ns.s }}")
    with pytest.raises(ChatBudgetExceeded):
        run(src, size=1 << 20)


def test_string_repetition_is_refused_before_allocation():
    with pytest.raises(ChatBudgetExceeded):
        run("{{ 'x' * 10000000000 }}")


def test_recursion_is_a_clear_error():
    src = "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}"
    with pytest.raises(ChatTemplateError):
        run(src)


@pytest.mark.parametrize("src", [
    "{{ ''.__class__.__mro__[1].__subclasses__() }}",
    "{{ messages.__class__ }}",
    "{{ raise_exception.__globals__ }}",
    "{{ cycler.__init__.__globals__.os }}",
    "{{ ''.upper.__globals__ }}",
    "{{ x.items.__globals__ }}",
    "{{ (none).items.__closure__ }}",
])
def test_sandbox_blocks_attribute_escapes(src):
    try:
        out = run(src)
    except ChatTemplateError:
        return
    assert "class" not in out and "module" not in out and "function" not in out


def test_raise_exception_is_a_refusal():
    with pytest.raises(TemplateRaised, match="Jinja Exception: no system"):
        run("{{ raise_exception('no system') }}")


def test_trim_and_lstrip_blocks_like_llama_cpp():
    # lexer.cpp: lstrip_blocks and trim_blocks are on; a single trailing newline is dropped
    src = "A\n  {% if true %}\nB\n  {% endif %}\nC\n"
    assert render(src, {}, now=0) == "A\nB\nC"


def test_tojson_layout_is_llama_cpp_value_to_json():
    src = "{{ x | tojson }}|{{ x | tojson(indent=2) }}|{{ 'é<' | tojson }}"
    out = render(src, {"x": {"a": [1, 2.5, None, True]}}, now=0)
    assert out == ('{"a": [1, 2.5, null, true]}|{\n  "a": [\n    1,\n    2.5,\n    null,\n    true\n  ]\n}'
                   '|"é<"')


def test_printed_values_follow_as_string():
    out = render("{{ none }} {{ true }} {{ 1.5 }} {{ 2.0 }} {{ [1, 'a'] }} {{ {'k': 'v'} }}", {}, now=0)
    assert out == "None True 1.5 2.0 [1, 'a'] {'k': 'v'}"


def test_concat_with_null_reads_as_empty():
    # runtime.cpp workaround_concat_null_with_str
    assert render("{{ 'a' + none }}|{{ 'a' ~ undefined_name }}", {}, now=0) == "a|a"


def test_strftime_now_reads_the_given_clock():
    assert render("{{ strftime_now('%Y-%m-%d') }}", {}, now=86400 * 365) == time.strftime(
        "%Y-%m-%d", time.localtime(86400 * 365))


def test_generation_tag_renders_its_body():
    assert render("{% generation %}x{% endgeneration %}", {}, now=0) == "x"


def test_system_merged_when_template_ignores_system_role():
    src = "{% for m in messages %}[{{ m.role }}:{{ m['content'] }}]{% endfor %}".replace(
        "{% for m in messages %}", "{% for m in messages if m.role != 'system' %}")
    msgs = [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}]
    assert not caps_of(src).supports_system_role
    assert run(src, msgs) == "[user:S\nU]"


def test_bos_written_by_template_is_not_doubled():
    src = "{{ bos_token }}{% for m in messages %}{{ m.content }}{% endfor %}"
    assert apply_template(src, HI, bos_token="<s>", eos_token="", add_bos=True, now=0) == "hi"
    assert apply_template(src, HI, bos_token="<s>", eos_token="", add_bos=False, now=0) == "<s>hi"


def test_add_generation_prompt_is_undefined_when_false():
    src = "{{ add_generation_prompt is defined }}"
    assert run(src, add_generation_prompt=False) == "False"
    assert run(src, add_generation_prompt=True) == "True"


def test_default_replaces_none_too():
    # value.cpp default_value: undefined or none takes the default (jinja2: undefined only)
    assert render("{{ none | default('u') }}|{{ {}.get('a') | default('z') }}", {}, now=0) == "u|z"


def test_indent_splits_on_newline_only():
    # value.cpp indent: std::getline on '\n' (jinja2's splitlines also splits on U+0085 and others)
    assert render("{{ 'a\nb\x85c\n' | indent(2) }}", {}, now=0) == "a\n  b\x85c\n"
