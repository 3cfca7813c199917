"""The chat helper (llama.cpp's chat.cpp): answers, refusals, crash and hang isolation.

Skips when the helper is not built: `python -m harness chat --build-helper` builds it
(a few minutes, once; cached under the gguf-parity cache).
"""

from __future__ import annotations

import pytest

from harness.chat import helper_build as chat_helper_build
from harness.chat.oracle import ChatOracle, request
from harness.errors import SetupError


def _helper():
    try:
        path = chat_helper_build.helper_path()
    except SetupError:
        return None
    return path if path.is_file() else None


HELPER = _helper()
pytestmark = pytest.mark.skipif(HELPER is None, reason="chat helper not built: python -m harness chat --build-helper")
HI = [{"role": "user", "content": "hi"}]


@pytest.fixture(scope="module")
def oracle():
    with ChatOracle(HELPER, timeout=20) as o:
        yield o


def test_renders_and_reports_legacy(oracle):
    src = "{% for m in messages %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{% endfor %}"
    answer = oracle.ask(request(template=src, messages=HI, add_generation_prompt=False))
    assert answer.status == "ok"
    assert answer.text == b"<|im_start|>user\nhi<|im_end|>\n"
    assert answer.legacy == answer.text  # recognised as chatml by llama_chat_apply_template


def test_raise_exception_is_an_error_outcome(oracle):
    answer = oracle.ask(request(template="{{ raise_exception('nope') }}", messages=HI, add_generation_prompt=True))
    assert answer.status == "error" and "nope" in answer.error
    assert answer.legacy is None  # not recognised


def test_hang_is_an_outcome_and_the_next_request_works():
    src = "{% for a in range(100000) %}{% for b in range(100000) %}{% for c in range(100000) %}" \
          "{% endfor %}{% endfor %}{% endfor %}"
    with ChatOracle(HELPER, timeout=3) as o:
        assert o.ask(request(template=src, messages=HI, add_generation_prompt=True, legacy=False)).status == "hang"
        assert o.ask(request(template="{{ 'ok' }}", messages=HI, add_generation_prompt=True)).status == "ok"


def test_crash_is_an_outcome_and_the_next_request_works():
    """A recursive macro overflows llama.cpp's stack (SIGSEGV): a finding, not our death."""
    src = "{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}"
    with ChatOracle(HELPER, timeout=60) as o:
        answer = o.ask(request(template=src, messages=HI, add_generation_prompt=True, legacy=False))
        assert answer.status == "crash" and "-11" in answer.error
        assert o.ask(request(template="{{ 'ok' }}", messages=HI, add_generation_prompt=True)).status == "ok"


def test_a_template_that_allocates_without_end_fails_at_the_helpers_memory_cap():
    probe = "{{ (range(10**8)|list)|length }}"  # 100,000,000 values: several GB unbounded
    with ChatOracle(memory=1 << 30, timeout=60) as capped:
        answer = capped.ask(request(template=probe, messages=HI, add_generation_prompt=True))
        after = capped.ask(request(template="{{ 'ok' }}", messages=HI, add_generation_prompt=True))
    assert answer.status in ("error", "crash") and answer.text is None, answer
    assert after.status == "ok" and after.text == b"ok"
