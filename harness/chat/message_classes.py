"""Why the original's rendered prompt and llama.cpp's differ: one class per case.

Both sides answer one conversation (`harness.chat.oracle.ChatAnswer`): the original through
transformers' `apply_chat_template`, llama.cpp through its own chat path on the GGUF. Before
comparing, each side's text is the text its model sees: llama.cpp cuts a leading BOS the
template wrote and its tokenizer adds one again, so a BOS its ids start with but its text does
not is put back in front (an EOS at the end the same way); `effective_text` does it.

Classes, the first that fits (`classify`):

- `not applicable`: both refuse the conversation (each raised or failed), or the original's
  template needs a variable transformers never sets (jinja2's UndefinedError): nothing to compare,
  counted apart, never an agreement;
- `raise_exception on one side only`: one side's template raised, the other rendered;
- `Jinja feature`: one side failed otherwise (a filter, test or method one runtime lacks);
- `template differs`: the GGUF's template is not the original's, and the texts differ;
- `BOS twice or missing`: the ids differ in how many BOS they start with;
- `whitespace or trim`: the texts are equal once whitespace is removed;
- `date or injected value`: equal once dates are replaced by one placeholder;
- `injected variable`: equal once the original is rendered again with the variables llama-server
  sets and transformers does not (`enable_thinking: true`, `date_string` and `datetime` of the
  fixed clock): an experiment, run by the caller
  (`harness.chat.three_way`) on a `renders differently` case;
- `messages prepared differently`: equal once the original is given the messages as llama.cpp's
  chat.cpp hands them to the template (null content as "", `developer` read as `system`, a
  system message merged where the template has no system role, ...; reproduced by
  `tokenizer.chat.render.prepare_messages`): the same kind of experiment;
- `renders differently`: same template, texts differ otherwise (a Jinja feature rendered
  differently by the two runtimes);
- `ids differ`: same text, different ids (the GGUF's tokenizer against the original's).
"""

from __future__ import annotations

import re
import time

from .oracle import NOW, ChatAnswer

AGREE, NOT_APPLICABLE = "agree", "not applicable"
RAISED_ONE_SIDE, JINJA, TEMPLATE = "raise_exception on one side only", "Jinja feature", "template differs"
BOS, WHITESPACE, DATE = "BOS twice or missing", "whitespace or trim", "date or injected value"
RENDERS, IDS, INJECTED = "renders differently", "ids differ", "injected variable"
PREPARED = "messages prepared differently"
CLASSES = (TEMPLATE, BOS, WHITESPACE, DATE, INJECTED, PREPARED, RAISED_ONE_SIDE, JINJA, RENDERS, IDS)
# What llama-server's chat path sets and transformers' apply_chat_template does not (tokenizer/chat/render.py
# reproduces it): thinking on, and today's date (the fixed clock's) as `date_string` and `datetime`.
LLAMA_SERVER_VARIABLES = {"enable_thinking": True, "date_string": time.strftime("%d %b %Y", time.gmtime(NOW)),
                          "datetime": time.strftime("%b %d %Y", time.gmtime(NOW))}

MONTHS = "Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec"
DATES = re.compile(rf"\b\d{{1,2}} (?:{MONTHS})[a-z]* \d{{4}}\b|\b(?:{MONTHS})[a-z]* \d{{1,2}},? \d{{4}}\b"
                   r"|\b\d{4}-\d{2}-\d{2}(?:[T ]\d{2}:\d{2}(?::\d{2})?)?\b")


def effective_text(answer: ChatAnswer, *, bos: tuple[int, str] | None, eos: tuple[int, str] | None) -> bytes | None:
    """The text the model sees: a BOS (EOS) the tokenizer added to the ids, put back into the text."""
    if answer.text is None:
        return None
    text, ids = answer.text, answer.ids or []
    if bos and ids[:1] == [bos[0]] and bos[1] and not text.startswith(bos[1].encode()):
        text = bos[1].encode() + text
    if eos and ids[-1:] == [eos[0]] and eos[1] and not text.endswith(eos[1].encode()):
        text = text + eos[1].encode()
    return text


def _raised(answer: ChatAnswer) -> bool:
    return answer.status == "error" and ("raise_exception" in answer.error or "Jinja Exception" in answer.error)


def _leading(ids: list[int] | None, token: int) -> int:
    n = 0
    for i in ids or []:
        if i != token:
            break
        n += 1
    return n


def classify(original: ChatAnswer, llama: ChatAnswer, *, original_text: bytes | None, llama_text: bytes | None,
             same_template: bool, bos_id: int | None) -> str:
    """The class of the difference between the original's answer and llama.cpp's (`AGREE` when none)."""
    if original.status != "ok" and llama.status != "ok":
        return NOT_APPLICABLE
    if original.status == "error" and "UndefinedError" in original.error and llama.status == "ok":
        return NOT_APPLICABLE
    if original.status != "ok" or llama.status != "ok":
        failed = original if original.status != "ok" else llama
        return RAISED_ONE_SIDE if _raised(failed) else JINJA
    if original_text == llama_text:
        return AGREE if original.ids == llama.ids else IDS
    return text_class(original_text or b"", llama_text or b"", original.ids, llama.ids,
                      same_template=same_template, bos_id=bos_id)


def text_class(a: bytes, b: bytes, a_ids: list[int] | None, b_ids: list[int] | None, *,
               same_template: bool, bos_id: int | None) -> str:
    """The class of two different rendered texts."""
    if not same_template:
        return TEMPLATE
    if bos_id is not None and _leading(a_ids, bos_id) != _leading(b_ids, bos_id):
        return BOS
    x, y = a.decode("utf-8", "replace"), b.decode("utf-8", "replace")
    if "".join(x.split()) == "".join(y.split()):
        return WHITESPACE
    if DATES.sub("<date>", x) == DATES.sub("<date>", y):
        return DATE
    return RENDERS
