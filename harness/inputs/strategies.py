"""Hypothesis strategies that aim at the places tokenizers go wrong.

Each strategy is one small function; its docstring names the trap it aims at
and its `repr` shows the call (`whitespace_runs(max_len=8)`), so a failing
example says where it came from. They compose: `fuzz_inputs(view)` mixes the
Unicode-heavy text, the vocabulary-aware text and raw (often invalid) UTF-8.

Inputs are `str` or `bytes`; `as_case()` turns one into a replayable corpus
case (`{"id", "text"}` or `{"id", "bytes": hex}`).

Settings profiles and the example database live in `harness.inputs.fuzz`.
"""

from __future__ import annotations

import hashlib
import unicodedata
from dataclasses import dataclass
from typing import cast

from hypothesis import strategies as st

from tokenizer.attrs import Attr

MAX_CODEPOINT = 0x10FFFF


WHITESPACE = (
    " ", "  ", "\t", "\n", "\n\n", "\r\n", "\r", "\x0b", "\x0c", "\x85", "\xa0",
    "\u1680", "\u2000", "\u2009", "\u200a", "\u2028", "\u2029", "\u202f", "\u205f",
    "\u3000", "\u200b", "\ufeff",
)
FORMAT_CONTROLS = (
    "\u200d", "\u200c", "\ufeff", "\u00ad", "\u200e", "\u200f", "\u202a", "\u202b",
    "\u202c", "\u202d", "\u202e", "\u2066", "\u2067", "\u2068", "\u2069", "\u061c",
    "\u2060", "\U000e0001", "\U000e0041",
)
APOSTROPHES = ("'", "\u2019", "\u02bc", "`")
CONTRACTION_TAILS = ("s", "t", "re", "ve", "m", "ll", "d", "S", "T", "RE", "VE", "M", "LL", "D", "Ll")
# Letters whose NFC and NFD spellings differ (precomposed Latin, Greek, Vietnamese, Hangul, kana).
COMPOSABLE = "ÀÁÂÃÄÅÇÈÉÊËÌÍÎÏÑÒÓÔÕÖÙÚÛÜÝàáâãäåçèéêëìíîïñòóôõöùúûüýÿĀāĂăŐőŮůǺǻΆΈΉάέήώỆệỳẫ한국어가각ガパゞ"
SCRIPT_WORDS = (
    "hello", "Hello", "HELLO", "naïve", "straße", "İstanbul", "ﬁne", "東京", "日本語", "中文字",
    "Ελληνικά", "русский", "עברית", "العربية", "हिन्दी", "தமிழ்", "ไทย", "ᏣᎳᎩ", "한국어", "ქართული",
    "Ǆemal", "ǅ", "ß", "ﬀ", "Ⅻ", "½", "x²", "ℌ", "𝔘𝔫𝔦", "🙂",
)
EMOJI = ("👍", "👍🏽", "👨‍👩‍👧‍👦", "🏳️‍🌈", "🇯🇵", "🇺🇸🇬🇧", "❤️", "#️⃣", "🧑🏿‍🚀", "☺", "☺️")
INVALID_UTF8 = (
    b"\x80", b"\xbf", b"\xc0\x80", b"\xc1\xbf", b"\xe2\x82", b"\xf0\x9f\x98", b"\xed\xa0\x80",
    b"\xed\xbf\xbf", b"\xf4\x90\x80\x80", b"\xf5", b"\xff", b"\xfe", b"\xe0\x80\xaf", b"\xc3",
    b"\xf8\x88\x80\x80\x80", b"\x00",
)


# --- Unicode-heavy text ---------------------------------------------------------------------

@st.composite
def table_characters(draw, *, categories: tuple[str, ...]):
    """One character of `categories` as llama.cpp's tables class it, not Python's `unicodedata`.

    Python 3.11 knows Unicode 14.0; llama.cpp's tables are 15.1. The code points
    Python cannot name (CJK Extensions H and I, Kawi, Nag Mundari...) are drawn
    by llama.cpp's class (harness.inputs.unicode_probes.table_codepoints).
    """
    from .unicode_probes import table_codepoints

    cpts = table_codepoints(categories)
    return chr(int(cpts[draw(st.integers(0, len(cpts) - 1))]))


@st.composite
def table_differences(draw):
    """A code point whose class differs between llama.cpp's tables and Python's: what Python cannot name."""
    from .unicode_probes import differing_codepoints

    return chr(draw(st.sampled_from(differing_codepoints())))


@st.composite
def any_category(draw, *, max_size: int = 12):
    """Every general category but surrogates, and what only llama.cpp's tables name: unseen \\p{..} classes."""
    alphabet = st.one_of(st.characters(exclude_categories=["Cs"]), table_differences())
    return draw(st.text(alphabet, max_size=max_size))


@st.composite
def weighted_categories(draw, *, max_size: int = 12):
    """Z*, M*, Nd, P*, So and Cf: the classes pre-tokenizer regexes split on differently (llama.cpp's tables)."""
    cats = draw(st.sampled_from([("Zs", "Zl", "Zp"), ("Mn", "Mc", "Me"), ("Nd",), ("No", "Nl"),
                                 ("Pc", "Pd", "Ps", "Pe", "Pi", "Pf", "Po"), ("So", "Sk", "Sm"),
                                 ("Cf",), ("Lu", "Ll", "Lt", "Lm", "Lo")]))
    return draw(st.text(table_characters(categories=cats), min_size=1, max_size=max_size))


@st.composite
def digits_of_many_scripts(draw, *, max_size: int = 10):
    """Runs of Nd digits from any script (llama.cpp's tables): `\\p{N}{1,3}` chunking and digit splitting."""
    digit = st.one_of(st.sampled_from("0123456789"), table_characters(categories=("Nd",)))
    return draw(st.text(digit, min_size=1, max_size=max_size))


@st.composite
def whitespace_runs(draw, *, max_len: int = 8):
    """Mixed whitespace incl. \\r\\n, U+2028, NBSP: `\\s+(?!\\S)` and SPM space escaping."""
    return "".join(draw(st.lists(st.sampled_from(WHITESPACE), min_size=1, max_size=max_len)))


@st.composite
def format_controls(draw):
    """A Cf control (ZWJ, BOM, bidi marks, tags) between letters: invisible but tokenized."""
    left, right = draw(st.sampled_from(SCRIPT_WORDS)), draw(st.sampled_from(SCRIPT_WORDS + ("",)))
    return left + draw(st.sampled_from(FORMAT_CONTROLS)) + right


@st.composite
def rare_code_points(draw):
    """Astral, private-use, unassigned and noncharacter code points: byte fallback and <unk>."""
    ranges = [(0x10000, MAX_CODEPOINT), (0xE000, 0xF8FF), (0xF0000, 0x10FFFD),
              (0xFDD0, 0xFDEF), (0x0378, 0x0379), (0x2FE0, 0x2FEF), (0xE0000, 0xE007F)]
    lo, hi = draw(st.sampled_from(ranges))
    cp = draw(st.integers(lo, hi))
    plane_end = draw(st.sampled_from([None, 0xFFFE, 0xFFFF]))
    if plane_end is not None:  # noncharacters U+xFFFE / U+xFFFF on any plane
        cp = (cp & 0x1F0000) | plane_end
    return chr(cp)


@st.composite
def nfc_nfd_pair(draw):
    """A word in NFC and in NFD: normalisers must not merge or split these unlike llama.cpp."""
    word = "".join(draw(st.lists(st.sampled_from(COMPOSABLE), min_size=1, max_size=4)))
    forms = draw(st.sampled_from([("NFC",), ("NFD",), ("NFC", "NFD"), ("NFD", "NFC"), ("NFKD",)]))
    sep = draw(st.sampled_from(["", " "]))
    return sep.join(unicodedata.normalize(form, word) for form in forms)


@st.composite
def combining_marks(draw):
    """A base letter with a stack of combining marks: `\\p{M}` glued to the previous letter."""
    base = draw(st.sampled_from("aeoOnAiy i1 "))
    marks = draw(st.text(table_characters(categories=("Mn", "Me", "Mc")), min_size=1, max_size=4))
    return base + marks


@st.composite
def contraction(draw):
    """`word'tail` with non-ASCII letters and mixed case: the `(?i:'s|'t|...)` alternatives."""
    word = draw(st.sampled_from(SCRIPT_WORDS))
    apostrophe = draw(st.sampled_from(APOSTROPHES))
    tail = draw(st.sampled_from(CONTRACTION_TAILS))
    after = draw(st.sampled_from(["", " ", "x", "é", "s", "\n"]))
    return word + apostrophe + tail + after


@st.composite
def emoji_sequences(draw):
    """ZWJ sequences, skin tones, flags and variation selectors: multi-code-point graphemes."""
    return "".join(draw(st.lists(st.sampled_from(EMOJI), min_size=1, max_size=3)))


@st.composite
def script_words(draw, *, max_words: int = 4):
    """Words of many scripts, with and without spaces: CJK runs, RTL, case folding traps."""
    words = draw(st.lists(st.sampled_from(SCRIPT_WORDS), min_size=1, max_size=max_words))
    return draw(st.sampled_from(["", " "])).join(words)


UNICODE_PARTS = (
    # repeated entries weight the mix toward the classes tokenizers get wrong
    whitespace_runs(), whitespace_runs(), weighted_categories(), weighted_categories(),
    digits_of_many_scripts(), contraction(), contraction(), combining_marks(), nfc_nfd_pair(),
    format_controls(), rare_code_points(), emoji_sequences(), script_words(), any_category(),
)


@st.composite
def unicode_heavy(draw, *, max_parts: int = 6):
    """Concatenated Unicode traps: boundaries between classes are where splits go wrong."""
    parts = draw(st.lists(st.sampled_from(UNICODE_PARTS), min_size=1, max_size=max_parts))
    return "".join(draw(part) for part in parts)


# --- vocabulary-aware text ------------------------------------------------------------------

@dataclass(frozen=True, repr=False)
class VocabView:
    """What the vocabulary-aware strategies need from one vocabulary.

    `pieces` are normal tokens' spellings (bytes, as `token_to_piece` gives
    them), `specials` the control and user-defined token texts.
    """

    name: str
    pieces: tuple[bytes, ...]
    specials: tuple[str, ...]
    byte_fallback: bool

    def __repr__(self) -> str:  # keeps strategy reprs short and readable
        return f"VocabView({self.name!r})"

    def _repr_pretty_(self, printer, cycle) -> None:  # Hypothesis's pretty printer
        printer.text(repr(self))


def vocab_view(*, name: str, texts, attrs, pieces, max_pieces: int = 4000) -> VocabView:
    """A `VocabView` from parallel per-token lists: GGUF texts, llama_token_attr bits, pieces.

    Normal tokens are sampled evenly down to `max_pieces` so a 256k vocabulary
    stays cheap; every control and user-defined token text is kept (up to 2000).
    """
    kept, specials, has_bytes = [], [], False
    stride = max(len(texts) // max_pieces, 1)
    for token, (text, attr) in enumerate(zip(texts, attrs)):
        if attr & (Attr.CONTROL | Attr.USER_DEFINED):
            if text:
                specials.append(text.decode("utf-8", "surrogateescape") if isinstance(text, bytes) else text)
        elif attr & Attr.BYTE:
            has_bytes = True
        elif token % stride == 0 and token < len(pieces) and pieces[token]:
            kept.append(bytes(pieces[token]))
    return VocabView(name=name, pieces=tuple(kept), specials=tuple(specials[:2000]),
                     byte_fallback=has_bytes)


def vocab_view_of(api, *, name: str, max_pieces: int = 4000) -> VocabView:
    """A `VocabView` of any object with the Tokenizer API (the engine or the oracle)."""
    n = api.n_tokens
    return vocab_view(name=name, texts=[api.token_text(t) for t in range(n)],
                      attrs=[api.token_attr(t) for t in range(n)],
                      pieces=[api.token_to_piece(t, special=False) for t in range(n)],
                      max_pieces=max_pieces)


@st.composite
def vocab_concat(draw, view: VocabView, *, max_tokens: int = 6):
    """The vocab's own pieces glued together, then cut at any byte: merge order and partial UTF-8."""
    if not view.pieces:
        return draw(script_words())
    chosen = draw(st.lists(st.sampled_from(view.pieces), min_size=1, max_size=max_tokens))
    joined = b"".join(chosen)
    start = draw(st.integers(0, max(len(joined) - 1, 0)))
    end = draw(st.integers(start, len(joined)))
    cut = draw(st.booleans())
    return _text_if_valid(joined[start:end] if cut else joined)


@st.composite
def special_tokens(draw, view: VocabView):
    """Special/user-defined token texts with and without whitespace and glued to words: partitioning."""
    if not view.specials:
        return draw(script_words())
    special = draw(st.sampled_from(view.specials))
    left = draw(st.sampled_from(["", " ", "  ", "\n", "word", "é", "\t"]))
    right = draw(st.sampled_from(["", " ", "  ", "\n", "word", "é", "\t"]))
    shape = draw(st.sampled_from(["one", "twice", "prefix", "between"]))
    if shape == "twice":
        special = special + special
    elif shape == "prefix":
        special = special[: max(len(special) - 1, 1)]
    elif shape == "between":
        special = special + draw(st.sampled_from(view.specials))
    return left + special + right


@st.composite
def byte_fallback_triggers(draw):
    """Characters no vocabulary holds whole (rare CJK, astral, controls, `<0xNN>` look-alikes)."""
    pick = draw(st.sampled_from(["rare", "control", "literal", "cjk"]))
    if pick == "rare":
        return draw(rare_code_points())
    if pick == "control":
        return chr(draw(st.integers(0, 0x1F)))
    if pick == "literal":
        return f"<0x{draw(st.integers(0, 255)):02X}>"
    return chr(draw(st.integers(0x20000, 0x2A6DF)))  # CJK extension B


@st.composite
def vocab_aware(draw, view: VocabView, *, max_parts: int = 4):
    """The vocabulary's own material mixed with Unicode traps."""
    options = [vocab_concat(view), vocab_concat(view), special_tokens(view), byte_fallback_triggers(),
               unicode_heavy(max_parts=2)]
    parts = draw(st.lists(st.sampled_from(options), min_size=1, max_size=max_parts))
    values = [draw(part) for part in parts]
    return _join(values)


# --- raw bytes ------------------------------------------------------------------------------

@st.composite
def invalid_utf8(draw, *, max_parts: int = 5):
    """Raw bytes with invalid UTF-8 (lone continuations, truncated, overlong, surrogates) amid text."""
    parts = draw(st.lists(st.one_of(st.sampled_from(INVALID_UTF8),
                                    script_words().map(lambda s: s.encode()),
                                    st.binary(min_size=1, max_size=4)),
                          min_size=1, max_size=max_parts))
    return b"".join(parts)


@st.composite
def fuzz_inputs(draw, view: VocabView | None = None):
    """Everything: Unicode-heavy text, the vocabulary's own material, invalid UTF-8 bytes."""
    options = [unicode_heavy(), unicode_heavy(), invalid_utf8()]
    if view is not None:
        options += [vocab_aware(view), vocab_aware(view)]
    return draw(draw(st.sampled_from(options)))


# --- long documents -------------------------------------------------------------------------

LONG_MIN_BYTES = 66_000  # past 64 KiB: a buffer, chunk or index of that size goes wrong only there
LONG_SEPARATORS = (" ", "\n", "", "  ", "\t", " | ")
LONG_SHAPES = ("repeat", "numbered", "cycle")  # the simplest (first drawn) spells shortest


@st.composite
def long_documents(draw, view: VocabView | None = None, *, texts: tuple[str, ...] = (),
                   min_bytes: int = LONG_MIN_BYTES, max_bytes: int = 2 * LONG_MIN_BYTES):
    """A document of `min_bytes` to `max_bytes` (UTF-8) composed from short inputs, with a planted hard part.

    Buffers, chunked reads, caches and batch paths meet only long calls. A few short parts
    (the corpus's own `texts`, words of many scripts, the vocabulary's material) are joined
    into a line; the line is repeated (`repeat`), numbered so that thousands of words are
    distinct (`numbered`), or the parts are cycled one per line (`cycle`), until the document
    is long enough; one Unicode trap or special token is planted at a drawn place. The draws
    are few whatever the size, so Hypothesis composes a 1 MB document as cheaply as a word.
    """
    sources = [script_words(), unicode_heavy(max_parts=3)]
    if texts:
        sources.insert(0, st.sampled_from(texts))
    if view is not None:
        sources.append(vocab_aware(view, max_parts=2).map(_as_text))
    parts = draw(st.lists(st.one_of(*sources), min_size=1, max_size=6))
    sep = draw(st.sampled_from(LONG_SEPARATORS))
    shape = draw(st.sampled_from(LONG_SHAPES))
    size = draw(st.integers(min_bytes, max(min_bytes, max_bytes)))
    hard = draw(special_tokens(view) if view is not None and view.specials else unicode_heavy(max_parts=2))
    where = draw(st.integers(0, 100))
    return compose_document(parts, sep=sep, shape=shape, size=size, hard=hard, where=where)


def compose_document(parts: list[str], *, sep: str, shape: str, size: int, hard: str = "", where: int = 0) -> str:
    """Lines made of `parts` (see `long_documents`) until at least `size` bytes, `hard` planted `where`% in."""
    line = sep.join(parts)
    unit = len(line.encode("utf-8", "surrogatepass")) + 1
    if shape == "repeat":
        lines = [line + "\n"] * (size // unit + 1)
    else:
        lines, total = [], 0
        while total < size:
            text = parts[len(lines) % len(parts)] if shape == "cycle" else line
            text = f"{text}{sep or ' '}{len(lines)}\n" if shape == "numbered" else text + "\n"
            lines.append(text)
            total += len(text.encode("utf-8", "surrogatepass"))
    at = len(lines) * where // 100
    lines[at:at] = [hard]
    return "".join(lines)


def _as_text(value: str | bytes) -> str:
    return value if isinstance(value, str) else value.decode("utf-8", "replace")


# --- cases ----------------------------------------------------------------------------------

def _text_if_valid(data: bytes) -> str | bytes:
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        return data


def _join(values: list[str | bytes]) -> str | bytes:
    if all(isinstance(v, str) for v in values):
        return "".join(cast("list[str]", values))
    return _text_if_valid(b"".join(v.encode("utf-8", "surrogatepass") if isinstance(v, str) else v
                                   for v in values))


def input_bytes(value: str | bytes) -> bytes:
    return value if isinstance(value, bytes) else value.encode("utf-8", "surrogatepass")


def as_case(value: str | bytes, *, prefix: str = "fuzz") -> dict:
    """A corpus case for an input: `text` when it is valid UTF-8, `bytes` (hex) otherwise.

    The id is stable (a digest of the bytes), so the same input found twice is
    saved once.
    """
    data = input_bytes(value)
    digest = hashlib.sha1(data).hexdigest()[:12]
    text = _text_if_valid(data)
    if isinstance(text, str):
        return {"id": f"{prefix}-{digest}", "text": text}
    return {"id": f"{prefix}-{digest}", "bytes": data.hex()}


def case_input(case: dict) -> str | bytes:
    """The input of a corpus case, as given to `tokenize`."""
    if "bytes" in case:
        return bytes.fromhex(case["bytes"])
    return case["text"]
