"""The identity of one difference: the same bug seen through any case, flag pair, run or night.

A run finds a difference many times: every case and flag pair that goes through the same
wrong rule shows it again, with other words around it. A `Signature` names the difference
itself, from what the two sides do at the first place they part, and nothing else: no case
id, no flag pair, no position, no seed. Two findings of one bug share a signature; a run
after the fix has no finding with it. docs/differences.md specifies it; the rules:

- ids (`ids_signature`): both id lists are spelled with llama.cpp's pieces for every id (the
  engine's own table is for display), and read from the first index where they differ:
  - only BOS/EOS/SEP differ: `edges`, with the edge tokens each side has;
  - the same piece under two ids: `id`, with the piece's shape and both ids;
  - the sides spell different bytes: `bytes`, the shapes of both sides' first differing pieces
    (a tab given the newline's id is `bytes '⇥' / '↵'` in every text);
  - one side a prefix of the other: `length`, which side goes on and by how many tokens;
  - the same bytes, split otherwise: `split`, the first token boundary one side has and the other
    has not, as the characters on either side of it and which side has it (`048` against `04|8`
    is `split N|N, got only`, whatever the digits);
- detokenize (`detok_signature`): the characters where the two outputs first part;
- an engine error, a llama.cpp crash, a vocabulary field, a third-side class: `other_signature`,
  from the fields that name it (the error's words with numbers and quoted text masked).

`sign(model, kind, entry, table)` gives a finding entry of any list its `signature`.

Characters are written by `shape`: letters, marks and digits by class (`L`, `M`, `N`), the space
as `␣`, every other character (whitespace, controls, punctuation, symbols) as itself, made
visible; outside ASCII, punctuation and symbols by their Unicode category (`{So}`); a run of one
shape once, with `+`. A signature's `id` is a digest of its parts, stable across runs.
"""

from __future__ import annotations

import hashlib
import json
import re
import unicodedata
from collections.abc import Sequence
from dataclasses import dataclass

from .diff import TokenTable, first_diff, visible

PLAIN = {"L": "L", "M": "M", "N": "N"}   # categories written by class (their first letter)
MAX_PART = 80                             # characters of one part of a signature, at most


@dataclass(frozen=True)
class Signature:
    """One difference: the sides compared, the layer, the kind of parting and what it is made of."""

    model: str
    sides: str          # "engine~llama.cpp", "llama.cpp~original", ...
    layer: str          # "ids", "detokenize", "engine error", "llama.cpp crash", "vocabulary", ...
    kind: str           # "bytes", "split", "edges", "id", ...
    parts: tuple[str, ...]

    @property
    def id(self) -> str:
        canon = json.dumps([self.model, self.sides, self.layer, self.kind, list(self.parts)], ensure_ascii=True)
        return "d-" + hashlib.sha256(canon.encode()).hexdigest()[:12]

    @property
    def title(self) -> str:
        return f"{self.layer}: {self.kind} " + " / ".join(self.parts)

    def as_dict(self) -> dict:
        return {"id": self.id, "title": self.title, "model": self.model, "sides": self.sides,
                "layer": self.layer, "kind": self.kind, "parts": list(self.parts)}


# --- characters -------------------------------------------------------------------------------

def char_class(ch: str) -> str:
    """One character's shape: `L`, `M`, `N`, `␣`, or the character made visible / its category."""
    if ch == " ":
        return "␣"
    cat = unicodedata.category(ch)
    if cat[0] in PLAIN:
        return PLAIN[cat[0]]
    if ord(ch) < 0x80 or cat[0] in "CZ":   # ASCII, whitespace, controls, format, unassigned: exact
        return visible(ch)
    return "{" + cat + "}"


def shape(data: bytes) -> str:
    """`data` written by class, each run once with `+` (`b"048"` -> `N+`, `b"  a\\t"` -> `␣+L⇥`); bytes
    that are not UTF-8 (a byte token, half a character) as `\\xNN` each."""
    out: list[str] = []
    for item in _units(data):
        if out and out[-1] in (item, item + "+"):
            out[-1] = item + "+"
        else:
            out.append(item)
    return _clip("".join(out))


def _units(data: bytes) -> list[str]:
    return [_unit(ch) for ch in data.decode("utf-8", "surrogateescape")]


def _unit(ch: str) -> str:
    """`char_class`, with a byte that is not UTF-8 (decoded as a lone surrogate) as `\\xNN`."""
    return f"\\x{ord(ch) - 0xDC00:02X}" if 0xDC80 <= ord(ch) <= 0xDCFF else char_class(ch)


def _clip(text: str) -> str:
    return text if len(text) <= MAX_PART else text[:MAX_PART] + "…"


# --- ids ----------------------------------------------------------------------------------------

def ids_signature(model: str, sides: str, expected: Sequence[int], got: Sequence[int], table: TokenTable,
                  *, names: tuple[str, str] = ("expected", "got")) -> Signature | None:
    """The signature of two differing id lists (None when they agree); both spelled with `table`.

    `names` say which side is which in a `split` signature ("llama.cpp only", "engine only").
    """
    start = first_diff(expected, got)
    if start is None:
        return None
    def make(kind: str, *parts: str) -> Signature:
        return Signature(model, sides, "ids", kind, tuple(parts))
    bare_e, bare_g = _strip_edges(expected, table), _strip_edges(got, table)
    if bare_e == bare_g:
        return make("edges", _edge_text(expected, table), _edge_text(got, table))
    exp, gt = [table.piece(t) for t in expected[start:]], [table.piece(t) for t in got[start:]]
    if not exp or not gt:  # one side is a prefix of the other: which one goes on, by how many tokens
        more = len(exp) or len(gt)
        return make("length", f"{names[0] if exp else names[1]} only", f"{min(more, 3)}{'+' if more > 3 else ''} "
                    f"token{'s' if more > 1 else ''} at the end")
    if exp[0] == gt[0]:
        return make("id", shape(exp[0]), str(expected[start]), str(got[start]))
    if b"".join(exp) != b"".join(gt):
        return make("bytes", shape(exp[0]), shape(gt[0]))
    return make("split", *_first_split(exp, gt, names))


def _strip_edges(ids: Sequence[int], table: TokenTable) -> list[int]:
    lo, hi = 0, len(ids)
    while lo < hi and ids[lo] in table.edge_ids:
        lo += 1
    while hi > lo and ids[hi - 1] in table.edge_ids:
        hi -= 1
    return list(ids[lo:hi])


def _edge_text(ids: Sequence[int], table: TokenTable) -> str:
    lead = [visible(table.text(t)) for t in ids[:2] if t in table.edge_ids]
    tail = [visible(table.text(t)) for t in ids[-2:] if t in table.edge_ids] if len(ids) > 2 else []
    return " ".join(lead) + " … " + " ".join(tail) if lead or tail else "none"


def _boundaries(pieces: Sequence[bytes]) -> list[int]:
    out, at = [], 0
    for piece in pieces:
        at += len(piece)
        out.append(at)
    return out


def _first_split(exp: Sequence[bytes], gt: Sequence[bytes], names: tuple[str, str]) -> tuple[str, str]:
    """(the characters around the first boundary only one side has, which side has it)."""
    text = b"".join(exp)
    ends_e, ends_g = _boundaries(exp), set(_boundaries(gt))
    only_e = [b for b in ends_e if b not in ends_g]
    only_g = sorted(set(ends_g) - set(ends_e))
    first_e, first_g = (only_e[0] if only_e else len(text) + 1), (only_g[0] if only_g else len(text) + 1)
    at, side = (first_e, names[0]) if first_e <= first_g else (first_g, names[1])
    return _around(text, at), f"{side} only"


def _around(text: bytes, at: int) -> str:
    """The boundary at byte `at` of `text`: the characters either side, by `char_class`; when one of them
    is not a letter, mark, digit or space, that one alone names it (`\\u{0085}` wherever it stands)."""
    before, after, inside = _chars_at(text, at)
    if inside:
        return f"inside {shape(inside)}"
    left = _unit(before) if before else "^"
    right = _unit(after) if after else "$"
    unusual = [c for c in (left, right) if c not in ("L", "M", "N", "␣", "^", "$")]
    return " ".join(dict.fromkeys(unusual)) if unusual else f"{left}|{right}"


def _chars_at(text: bytes, at: int) -> tuple[str, str, bytes]:
    """(the character ending at `at`, the one starting there, b"") or, when `at` cuts a UTF-8
    character, ("", "", its bytes)."""
    start = at - _cut_back(text, at)
    if start < at:
        return "", "", text[start:start + _char_len(text, start)]
    head = text[max(at - 4, 0):at].decode("utf-8", "surrogateescape")
    tail = text[at:at + 4].decode("utf-8", "surrogateescape")
    return head[-1:], tail[:1], b""


# --- detokenize and the rest ----------------------------------------------------------------------

def detok_signature(model: str, sides: str, expected: bytes, got: bytes | None) -> Signature | None:
    """The signature of two differing detokenizations: the characters where they first part."""
    if got is None:
        return Signature(model, sides, "detokenize", "missing", ())
    if expected == got:
        return None
    n = _common_prefix(expected, got)
    n -= _cut_back(expected, n)
    return Signature(model, sides, "detokenize", "bytes", (shape(expected[n:n + 4][:_char_len(expected, n)]) or "∅",
                                                            shape(got[n:n + 4][:_char_len(got, n)]) or "∅"))


def _common_prefix(a: bytes, b: bytes) -> int:
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def _cut_back(data: bytes, n: int) -> int:
    """How many bytes before `n` belong to a character that `n` cuts (0 to 3)."""
    back = 0
    while back < 3 and n - back > 0 and 0x80 <= data[n - back - 1] < 0xC0:
        back += 1
    lead = n - back - 1
    if lead >= 0 and data[lead] >= 0xC0 and _char_len(data, lead) > back + 1:
        return back + 1
    return 0


def _char_len(data: bytes, n: int) -> int:
    if n >= len(data):
        return 0
    lead = data[n]
    return 1 if lead < 0xC0 else 2 if lead < 0xE0 else 3 if lead < 0xF0 else 4


_MASKS = [(re.compile(r"'[^']*'|\"[^\"]*\""), "'…'"), (re.compile(r"0x[0-9a-fA-F]+|\d+(\.\d+)?"), "#")]


def masked(message: str) -> str:
    """An error message's first line with quoted text and numbers masked, so one error is one signature."""
    line = (message or "").strip().split("\n", 1)[0]
    for pattern, mask in _MASKS:
        line = pattern.sub(mask, line)
    return _clip(line)


def other_signature(model: str, sides: str, layer: str, kind: str, *parts: object) -> Signature:
    """A signature from naming fields (an engine error's capability and masked message, a crash's kind)."""
    return Signature(model, sides, layer, kind, tuple(_clip(str(p)) for p in parts))


# --- a finding entry signed ----------------------------------------------------------------------

PARITY = "engine~llama.cpp"


def sign(model: str, kind: str, entry: dict, table: TokenTable) -> dict:
    """`entry` (a finding of list `kind`, as `harness.compare.findings` and the third side make them)
    with its `signature` id and `signature_title`; `table` spells ids (llama.cpp's side)."""
    found = entry_signature(model, kind, entry, table)
    return {**entry, "signature": found.id, "signature_title": found.title}


def entry_signature(model: str, kind: str, entry: dict, table: TokenTable) -> Signature:
    if kind in ("oracle_crashes", "known_oracle_crashes"):
        crash = entry.get("crash") or {}
        how = crash.get("signal") or crash.get("exit") or crash.get("kind")
        return other_signature(model, "llama.cpp", "llama.cpp crash", str(crash.get("kind")), how,
                               entry.get("known_crash") or "")
    if kind == "engine_errors":
        return other_signature(model, PARITY, "engine error", str(entry.get("capability") or "tokenize"),
                               masked(str(entry.get("error") or "")))
    if kind == "vocab_mismatches":
        return _vocab_signature(model, entry)
    compared = entry.get("compared")
    sides = PARITY if kind == "mismatches" or not isinstance(compared, list) else "~".join(map(str, compared))
    if entry.get("class") == "reference_error":
        return other_signature(model, sides, "reference error", str(entry.get("capability") or "tokenize"),
                               masked(str(entry.get("error") or "")))
    if entry.get("class") == "decode":
        first = (entry.get("decode") or [{}])[0]
        return _detok(model, "decode", first.get("llama_hex"), first.get("original_hex"))
    return _ids_or_detok(model, sides, entry, table)


def _ids_or_detok(model: str, sides: str, entry: dict, table: TokenTable) -> Signature:
    expected, got = entry.get("expected"), entry.get("got")
    if expected is None and entry.get("digest_diff") is not None:  # a golden document: a digest per block
        return other_signature(model, sides, "ids", "document", str(entry.get("case_id")))
    named = [str(n) for n in entry.get("compared") or []][:2]
    names = ("llama.cpp", "engine") if sides == PARITY or len(named) < 2 else (named[0], named[1])
    found = ids_signature(model, sides, expected or [], got or [], table, names=(names[0], names[1]))
    if found is not None:
        return found
    detok = (entry.get("detokenize") or [{}])[0]
    return _detok(model, sides, detok.get("expected_hex"), detok.get("got_hex"))


def _detok(model: str, sides: str, expected_hex: str | None, got_hex: str | None) -> Signature:
    expected = bytes.fromhex(expected_hex or "")
    got = None if got_hex is None else bytes.fromhex(got_hex)
    return detok_signature(model, sides, expected, got) or Signature(model, sides, "detokenize", "same", ())


def _vocab_signature(model: str, entry: dict) -> Signature:
    field = str(entry.get("field") or "")
    expected, got = entry.get("expected"), entry.get("got")
    if isinstance(expected, dict):  # a token's two sides (text, score, attr)
        expected, got = expected.get("value"), (got or {}).get("value")
    small = all(isinstance(v, (bool, int)) or v is None for v in (expected, got))
    parts = (field, str(expected), str(got)) if small and field not in ("n_tokens",) else (field,)
    return other_signature(model, PARITY, "vocabulary", "field", *parts)
