"""Message-level truth three ways: the original's `apply_chat_template`, llama.cpp's chat path, ours.

For a GGUF and its original folder (`--reference hf:DIR`):

1. the templates themselves (`harness.chat.original.compare`): every name on either side,
   different bytes or a side without it is a conversion finding with a line diff;
2. every conversation (the chat corpus, then `fuzz` Hypothesis conversations, tools where the
   case has them) with add_generation_prompt true and false, for each GGUF template the original
   also has, three answers: the original (transformers, `harness.chat.transformers_side`),
   llama.cpp (the chat helper, with the GGUF loaded) and ours (`Tokenizer.apply_chat_template`
   and `tokenize`, as `encode_chat`); all three with the clock fixed at `oracle.NOW`.

The original against llama.cpp is a conversion finding, classed by `harness.chat.message_classes`;
ours against llama.cpp is a finding against our engine (`harness.chat.diff.verdict`), as in the
two-way check. Each card keeps the three texts, id counts and the character diff.
"""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..compare.diff import visible
from . import message_classes as mc
from . import original as orig
from .bounds import Bounds, not_asked, our_answer
from .cases import Case, Target, cases, load_conversations, tokenizer_for
from .diff import MATCH, char_diff, product_answer, verdict
from .oracle import ChatAnswer, ChatOracle, request
from .strategies import sample
from .transformers_side import OriginalChat

CARD_LIMIT = 200  # cards kept per GGUF; the counts cover every case
# A side that hung or crashed on the case (a template bomb, a helper dying): a finding about the
# template, before any comparison of texts; a template that hangs is asked no more (`harness.chat.bounds`).
LIMIT = "over a side's limit (hang or crash)"
STOPPED = ("hang", "crash")


@dataclass
class ThreeWay:
    """One GGUF's three-way message check, as plain data (`data()`) for messages.json and the report."""

    model: str
    original: str
    templates: list[dict[str, Any]] = field(default_factory=list)
    checked: list[str] = field(default_factory=list)  # template names rendered three ways
    skipped: dict[str, str] = field(default_factory=dict)  # template name -> why it was not rendered
    cases: int = 0
    classes: Counter[str] = field(default_factory=Counter)
    ours_differ: int = 0
    count_differs: int = 0
    cards: list[dict[str, Any]] = field(default_factory=list)
    seconds: float = 0.0
    not_asked: int = 0  # cases never asked: past the deadline, or of a template a side hung on (bounds)
    # "template: case key" of every case where the original and llama.cpp differ (all of them, unlike the
    # cards): `repair`'s messages layer compares two files conversation by conversation. Not in `data()`.
    differ_keys: list[str] = field(default_factory=list)

    def data(self) -> dict[str, Any]:
        return {**{k: v for k, v in self.__dict__.items() if k != "differ_keys"}, "classes": dict(self.classes)}

    def lines(self) -> list[str]:
        agree, na = self.classes.get(mc.AGREE, 0), self.classes.get(mc.NOT_APPLICABLE, 0)
        differ = {k: v for k, v in sorted(self.classes.items()) if k not in (mc.AGREE, mc.NOT_APPLICABLE)}
        if not self.templates and not self.checked and not self.skipped:
            return [f"messages three ways {Path(self.model).name}: no chat template on either side, nothing to check"]
        lines = [f"messages three ways {Path(self.model).name} against {self.original}: "
                 f"{len(self.templates)} template finding(s) "
                 f"({', '.join(t['name'] + ': ' + t['class'] for t in self.templates) or 'identical'})"]
        if self.checked:
            lines.append(f"  original vs llama.cpp: {agree}/{self.cases - na} agree ({na} not applicable)"
                         + (f"; differ: {', '.join(f'{k} {v}' for k, v in differ.items())}" if differ else "")
                         + f"; message token count differs on {self.count_differs}")
            lines.append(f"  ours vs llama.cpp: {self.cases - self.ours_differ}/{self.cases} identical")
        for name, why in sorted(self.skipped.items()):
            lines.append(f"  template {name or 'default'}: not checked ({why})")
        if self.not_asked:
            lines.append(f"  not asked: {self.not_asked} case(s) (the deadline, or a template a side hung on)")
        return lines

    @property
    def conversion_findings(self) -> int:
        """Template findings and cases where the original and llama.cpp differ (about the GGUF, not us)."""
        return len(self.templates) + sum(n for k, n in self.classes.items() if k not in (mc.AGREE, mc.NOT_APPLICABLE))

    @property
    def ok(self) -> bool:
        """Nothing found: ours equals llama.cpp on every case, and the GGUF chats like the original."""
        return self.ours_differ == 0 and self.conversion_findings == 0


def _special(tok: Any, role: str) -> tuple[int, str] | None:
    token = tok.vocab.special[role]
    if token < 0:
        return None
    return token, tok.token_to_piece(token, special=True).decode("utf-8", "surrogateescape")


def check(gguf: Path, folder: Path, *, fuzz: int = 0, seed: int = 0, oracle: ChatOracle,
          on_case: Callable[[Target, Case, ChatAnswer, ChatAnswer], None] | None = None, timeout: float = 30.0,
          log: Callable[[str], None] = print, bounds: Bounds | None = None,
          blocks: list[ThreeWay] | None = None) -> ThreeWay:
    """The three-way check of `gguf` against the original `folder` (see the module doc).

    `on_case(target, case, llama_cpp, ours)`, when given, receives each case's two answers, as the
    two-way check adds them (`harness.chat.run.ChatSummary.add`): the three-way run includes it.
    `bounds`: the whole check's deadline and hang count (`harness.chat.bounds`). `blocks`: the result
    is appended to it before the first case, so an interrupted check keeps what finished.
    """
    start = time.monotonic()
    bounds = bounds or Bounds()
    tok = tokenizer_for(str(gguf))
    gguf_side, original_side = orig.gguf_templates(tok.vocab.metadata), orig.original_templates(folder)
    result = ThreeWay(str(gguf), str(folder), templates=orig.compare(gguf_side, original_side))
    if blocks is not None:
        blocks.append(result)
    stem = Path(gguf).stem
    targets = {name: Target(f"{stem}.{name}" if name else stem, str(gguf), source, "file")
               for name, source in gguf_side.items()}
    for name in sorted(set(targets) - set(original_side)):
        result.skipped[name] = "the original has no template of that name"
    both = {name: target for name, target in targets.items() if name in original_side}
    if not both:
        result.seconds = time.monotonic() - start
        return result
    convs = load_conversations()
    fuzzed = sample(fuzz, seed) if fuzz else []
    with OriginalChat(folder, timeout=timeout) as transformers:
        try:
            for name, target in sorted(both.items()):
                result.checked.append(name)
                for case in [*cases(target, convs), *fuzzed]:
                    why = bounds.why_not(target.name)
                    if why is None:
                        llama, ours = _one(result, tok, target, case, name, (oracle, transformers, bounds),
                                           same=gguf_side.get(name) == original_side[name])
                    else:
                        result.not_asked += 1
                        llama, ours = not_asked(why), not_asked(why)
                    if on_case is not None:
                        on_case(target, case, llama, ours)
                log(f"  {Path(gguf).name} template {name or 'default'}: {result.cases} cases so far")
        finally:
            result.seconds = time.monotonic() - start
    return result


def _asked(req: dict[str, Any], tok: Any, target: Target, case: Case, name: str,
           sides: tuple[ChatOracle, OriginalChat, Bounds]) -> tuple[ChatAnswer, ChatAnswer, ChatAnswer]:
    """The case's three answers (original, llama.cpp, ours), each side's hang noted in the bounds;
    ours is not rendered where llama.cpp's helper hung (the case is its finding whatever ours says)."""
    oracle, transformers, bounds = sides
    llama = oracle.ask(req)
    bounds.note(target.name, "llama.cpp", case.key, llama)
    original = transformers.ask({**req, "template_name": name or None})
    bounds.note(target.name, "transformers", case.key, original)
    ours = our_answer(product_answer(tok, target, case)) if llama.status != "hang" else ChatAnswer(
        "not rendered", error="llama.cpp's helper hung on this case, so ours was not rendered")
    bounds.note(target.name, "ours", case.key, ours)
    return original, llama, ours


def _one(result: ThreeWay, tok: Any, target: Target, case: Case, name: str,
         sides: tuple[ChatOracle, OriginalChat, Bounds], *, same: bool) -> tuple[ChatAnswer, ChatAnswer]:
    req = request(template=target.source, messages=case.messages, tools=case.tools,
                  add_generation_prompt=case.add_generation_prompt, model=Path(target.model))
    transformers = sides[1]
    original, llama, ours = _asked(req, tok, target, case, name, sides)
    bos, eos = _special(tok, "bos"), _special(tok, "eos")
    texts = {side: mc.effective_text(a, bos=bos, eos=eos) for side, a in
             (("original", original), ("llama.cpp", llama), ("ours", ours))}
    cls = mc.classify(original, llama, original_text=texts["original"], llama_text=texts["llama.cpp"],
                      same_template=same, bos_id=bos[0] if bos else None)
    if original.status in STOPPED or llama.status in STOPPED:
        cls = LIMIT
    if cls == mc.TEMPLATE:  # does the template's change matter for this case? The original with the GGUF's
        swapped = transformers.ask({**req, "template_name": target.source})
        if swapped.status == original.status and swapped.text == original.text and swapped.ids == original.ids:
            cls = mc.classify(original, llama, original_text=texts["original"], llama_text=texts["llama.cpp"],
                              same_template=True, bos_id=bos[0] if bos else None)
    if cls == mc.RENDERS:
        cls = _experiment(req, name, transformers, llama, target.source, bos=bos, eos=eos) or cls
    ours_verdict = verdict(llama, ours)
    result.cases += 1
    result.classes[cls] += 1
    if cls not in (mc.AGREE, mc.NOT_APPLICABLE):
        result.differ_keys.append(f"{name or 'default'}: {case.key}")
    result.ours_differ += ours_verdict != MATCH
    counts = [len(a.ids) if a.ids is not None else None for a in (original, llama, ours)]
    differs = counts[0] is not None and counts[1] is not None and counts[0] != counts[1]
    result.count_differs += differs
    if (cls not in (mc.AGREE, mc.NOT_APPLICABLE) or ours_verdict != MATCH) and len(result.cards) < CARD_LIMIT:
        result.cards.append(card(target, case, name, cls, ours_verdict, (original, llama, ours), texts))
    return llama, ours


def _experiment(req: dict[str, Any], name: str, transformers: OriginalChat, llama: ChatAnswer, source: str, *,
                bos: tuple[int, str] | None, eos: tuple[int, str] | None) -> str | None:
    """Why the same template renders differently, found by rendering the original again: with the variables
    llama-server injects, then with the messages as llama.cpp prepares them; the class that explains it, or None."""
    from tokenizer.chat.caps import caps_of
    from tokenizer.chat.errors import ChatTemplateError
    from tokenizer.chat.render import prepare_messages
    try:
        prepared = prepare_messages(req["messages"], source, caps_of(source))
    except ChatTemplateError:
        prepared = None
    tries: list[tuple[str, dict[str, Any]]] = [(mc.INJECTED, {"variables": mc.LLAMA_SERVER_VARIABLES})]
    if prepared is not None:
        tries += [(mc.PREPARED, {"messages": prepared}),
                  (mc.PREPARED, {"messages": prepared, "variables": mc.LLAMA_SERVER_VARIABLES})]
    for cls, change in tries:
        again = transformers.ask({**req, "template_name": name or None, **change})
        if mc.effective_text(again, bos=bos, eos=eos) == mc.effective_text(llama, bos=bos, eos=eos) \
                and again.ids == llama.ids:
            return cls
    return None


def card(target: Target, case: Case, name: str, cls: str, ours_verdict: str,
         answers: tuple[ChatAnswer, ChatAnswer, ChatAnswer], texts: dict[str, bytes | None]) -> dict[str, Any]:
    """One case's three sides as plain data: status, text (visible), id count, and the diffs."""
    sides = []
    for side, answer in zip(("original", "llama.cpp", "ours"), answers, strict=True):
        text = texts[side]
        sides.append({"side": side, "status": answer.status, "error": answer.error[:300],
                      "text": visible(text.decode("utf-8", "replace"), line_breaks=True) if text is not None else None,
                      "count": len(answer.ids) if answer.ids is not None else None,
                      "ids": answer.ids[:64] if answer.ids is not None else None})
    out: dict[str, Any] = {"target": target.name, "template": name or "default", "case": case.key, "class": cls,
                           "ours_verdict": ours_verdict, "sides": sides,
                           "conversation": {"messages": case.messages, "tools": case.tools,
                                            "add_generation_prompt": case.add_generation_prompt}}
    if texts["original"] is not None and texts["llama.cpp"] is not None and texts["original"] != texts["llama.cpp"]:
        out["diff"] = char_diff(texts["original"], texts["llama.cpp"])  # "-": the original only, "+": llama.cpp only
    return out
