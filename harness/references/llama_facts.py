"""What llama.cpp does, read from its own pinned sources: the loader's by-text retyping and its Unicode tables.

The cause experiments (`harness.references.class_experiments`) name a class of
difference from facts about llama.cpp. Those facts come from llama.cpp's side,
never from our engine's tables (a bug there must not bend the test meant to
catch it): the pinned sources `python -m harness fetch` puts in the cache
(`harness.models.shipped.source_path`), read bounded.

- `retyping_rules()`: the token texts `llama_vocab::impl::load`
  (`src/llama-vocab.cpp`) recognises whatever the GGUF's token type says:
  end-of-turn, end-of-message, the six fill-in-the-middle roles, and the
  end-of-generation list. A token so named that is not CONTROL in the file is
  made CONTROL, with the loader's warning "control-looking token ... was not
  control-type; ... its type will be overridden" (`OVERRIDE_WARNING`, read from
  the source too). Each rule is a `TextRule` (what it is, its texts).
- `unicode_flags()`: `unicode_ranges_flags` of `src/unicode-data.cpp`, one
  flags value per code point (`UNDEFINED`: not assigned in llama.cpp's UCD);
  `tables_version(assigned)`: the Unicode version a table holds, found from
  code points first assigned in each version (`VERSION_MARKERS`): llama.cpp's
  (15.1 for the pinned build), Python's `unicodedata`, the `regex` module's.

A missing source is `None` (the experiments that need it are then not offered,
and say so); a source over `MAX_SOURCE` bytes is refused.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np

from ..files.input_limits import read_capped
from ..models.shipped import source_path

MAX_SOURCE = 4 << 20  # bytes of a pinned llama.cpp source read (llama-vocab.cpp is 187 KB, unicode-data.cpp 168 KB)
MAX_CODEPOINTS = 0x110000
UNDEFINED = 0x0001  # unicode_cpt_flags' "undefined" bit: the code point is not assigned in llama.cpp's UCD
# code points first assigned in each version (letters, marks, symbols): a table that holds all of a version's
# and every earlier version's holds that version
VERSION_MARKERS: dict[str, tuple[int, ...]] = {
    "12.0": (0x1FA70, 0x1E100, 0x0E86),
    "13.0": (0x1FAD0, 0x10E80, 0x08BE),
    "14.0": (0x1FAE0, 0x10570, 0x0870),
    "15.0": (0x1FA75, 0x11F00, 0x0CF3),
    "15.1": (0x2FFC, 0x31EF, 0x2EBF0),
    "16.0": (0x1FAE9, 0x10D50, 0xA7CB),
    "17.0": (0x1FAEA, 0x10940, 0x11DB0),
}
# a rule's target variable in llama-vocab.cpp -> what the rule makes of the token
ROLES = {
    "special_eot_id": "end-of-turn (EOT)", "special_eom_id": "end-of-message (EOM)",
    "special_fim_pre_id": "fill-in-the-middle prefix", "special_fim_suf_id": "fill-in-the-middle suffix",
    "special_fim_mid_id": "fill-in-the-middle middle", "special_fim_pad_id": "fill-in-the-middle pad",
    "special_fim_rep_id": "fill-in-the-middle repository", "special_fim_sep_id": "fill-in-the-middle separator",
    "special_eog_ids": "end-of-generation (EOG)",
}
_RULE = re.compile(r'if \(false((?:\s*\|\|\s*t\.first == "(?:[^"\\]|\\.)*"\s*(?://[^\n]*)?)+)\s*\)\s*\{\s*'
                   r'(special_\w+)')
_TEXT = re.compile(r't\.first == "((?:[^"\\]|\\.)*)"')
_WARNING = re.compile(r'"%s: (control-looking token: [^"]*?its type will be overridden)')
_FLAGS = re.compile(r"unicode_ranges_flags = \{[^\n]*\n(.*?)\n\};", re.S)
_PAIR = re.compile(r"\{0x([0-9A-Fa-f]+), 0x([0-9A-Fa-f]+)\}")


@dataclass(frozen=True)
class TextRule:
    """One of the loader's by-text rules: `role` (what it makes of the token), the texts it names."""

    role: str
    texts: tuple[str, ...]

    def line(self, text: str) -> str:
        return (f"{text!r} is in llama-vocab.cpp's {self.role} text list: llama.cpp's loader makes it CONTROL "
                f"whatever the GGUF's token type ({override_warning()})")


def source(name: str) -> str | None:
    """The text of the pinned `src/<name>`, or None when the cache lacks it (`SetupError` above MAX_SOURCE)."""
    path = Path(source_path(name))
    if not path.is_file():
        return None
    return read_capped(path, MAX_SOURCE, f"llama.cpp's {name}").decode("utf-8", "replace")


@cache
def retyping_rules() -> tuple[TextRule, ...] | None:
    """The loader's by-text rules, in the source's order (None: llama-vocab.cpp is not in the cache)."""
    text = source("llama-vocab.cpp")
    if text is None:
        return None
    rules = []
    for block, target in _RULE.findall(text):
        if target in ROLES:
            rules.append(TextRule(ROLES[target], tuple(_unescape(t) for t in _TEXT.findall(block))))
    return tuple(rules)


def rule_for(text: str) -> TextRule | None:
    """The first rule naming `text` (the end-of-generation list before the others: it applies to every token
    of that text, the role rules only while their id is unset), or None."""
    rules = retyping_rules() or ()
    ordered = sorted(rules, key=lambda r: r.role != ROLES["special_eog_ids"])
    return next((r for r in ordered if text in r.texts), None)


@cache
def override_warning() -> str:
    """The loader's own words when it retypes such a token (quoted from llama-vocab.cpp)."""
    found = _WARNING.search(source("llama-vocab.cpp") or "")
    return ('"' + re.sub(r"%\d*[a-z]", "...", found.group(1)) + '"') if found else "its type is overridden"


def _unescape(text: str) -> str:
    return re.sub(r"\\(.)", r"\1", text)


@cache
def unicode_flags() -> np.ndarray | None:
    """llama.cpp's flags per code point (`unicode_cpt_flags_from_cpt`), from unicode-data.cpp (None: not cached)."""
    text = source("unicode-data.cpp")
    found = _FLAGS.search(text or "")
    if found is None:
        return None
    pairs = [(int(a, 16), int(b, 16)) for a, b in _PAIR.findall(found.group(1))]
    flags = np.full(MAX_CODEPOINTS, UNDEFINED, dtype=np.uint16)
    for (start, value), (end, _) in zip(pairs, [*pairs[1:], (MAX_CODEPOINTS, 0)], strict=True):
        flags[start:end] = value
    return flags


def llama_assigned(cpt: int) -> bool:
    """True when llama.cpp's tables hold `cpt` (its flags are not only 'undefined')."""
    flags = unicode_flags()
    return flags is not None and 0 <= cpt < MAX_CODEPOINTS and int(flags[cpt]) != UNDEFINED


def python_assigned(cpt: int) -> bool:
    return unicodedata.category(chr(cpt)) != "Cn"


def regex_category(cpt: int) -> str | None:
    """The general category the `regex` module's own (newer) Unicode tables give `cpt`, or None (unassigned)."""
    import regex
    ch = chr(cpt)
    return next((c for c in CATEGORIES if regex.fullmatch(rf"\p{{{c}}}", ch)), None)


def regex_assigned(cpt: int) -> bool:
    return regex_category(cpt) is not None


CATEGORIES = ("Lu", "Ll", "Lt", "Lm", "Lo", "Mn", "Mc", "Me", "Nd", "Nl", "No", "Pc", "Pd", "Ps", "Pe", "Pi", "Pf",
              "Po", "Sm", "Sc", "Sk", "So", "Zs", "Zl", "Zp", "Cc", "Cf", "Co", "Cs")


def tables_version(assigned: object) -> str:
    """The latest version whose markers (and every earlier version's) `assigned(cpt)` holds: "15.1"; "<12.0"."""
    found = "<12.0"
    for version, points in VERSION_MARKERS.items():
        if not all(assigned(p) for p in points):  # type: ignore[operator]
            break
        found = version
    return found


@cache
def llama_version() -> str | None:
    """llama.cpp's tables' Unicode version, from unicode-data.cpp (None: not cached)."""
    return tables_version(llama_assigned) if unicode_flags() is not None else None


@cache
def regex_version() -> str:
    return tables_version(regex_assigned)
