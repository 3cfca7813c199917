"""The candidate causes of a conversion finding, read from the GGUF and the original: one change each.

A candidate is a change after which llama.cpp and the original might agree
(`harness.references.causes` tries them on each differing case and names the
smallest set that makes it agree). Each is built from what the two files hold,
and only where they disagree, so a candidate that changes nothing is never
offered. Three sides:

- `gguf`: a GGUF key rewritten to what the original says: `tokenizer.ggml.pre`
  (a name whose llama.cpp regex and ignore_merges are the original's),
  `add_space_prefix`, the token types of the original's added or user-defined
  tokens, the scores (a file whose every score is the converter's placeholder; a NaN or
  infinite score, given the original's),
  `add_bos_token` / `add_eos_token` and the BOS / EOS ids. These are what
  `repair` writes; `exact` says that the value comes whole from the original;
- `original`: a llama.cpp behaviour that no key carries, switched on the
  original's side (its normalizer off, its `ignore_merges` off, its Split
  regexes replaced by llama.cpp's for the GGUF's pre name, WordPiece's
  word-length limit raised): the case agrees once the original does what
  llama.cpp does, which shows the behaviour is the difference;
- `input`: a class of code points the two normalise differently (WordPiece:
  U+000B/U+000C/U+0085, Hangul syllables, spacing and enclosing marks, a typed
  U+2581), rewritten the same way for both.

The WordPiece classes come from llama.cpp's own tables (`tokenizer.unicode`),
as docs/conversion-findings.md traces them.
"""

from __future__ import annotations

import math
import unicodedata
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from tokenizer import Tokenizer
from tokenizer import unicode as uni
from tokenizer.pretokenize.behaviours import get as get_pretokenizer
from tokenizer.pretokenize.names import PRE_NAMES

from . import llama_facts
from .gguf_keys import PLACEHOLDER_SCORE, _split_patterns, _template_ends, llama_form, prepends_space

NORMAL, CONTROL, USER_DEFINED = 1, 3, 4
PREFERRED_PRE = ("llama-bpe", "gpt-4o", "qwen2", "default")  # the name taken when several say the same
HANGUL = range(0xAC00, 0xD7A4)
KEEP = "\t\n\r"  # HF's clean_text counts these as whitespace, not control
CJK = ((0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F), (0x2B740, 0x2B81F),
       (0x2B920, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F))  # is_chinese_char, both sides


@dataclass(frozen=True)
class Candidate:
    """One change; `gguf` gives the changed keys from the metadata as it stands (so changes compose)."""

    name: str
    what: str
    side: str  # "gguf", "original" or "input"
    gguf: Callable[[dict], dict] | None = None
    original: Callable[[dict], None] | None = None
    text: Callable[[str], str] | None = None
    exact: bool = True
    keys: tuple[str, ...] = field(default=())


def for_hf(tok: Tokenizer, meta: dict, data: dict) -> list[Candidate]:
    """The candidates for a GGUF against a tokenizer.json (`data`)."""
    model = data.get("model") or {}
    found = [*_pre_name(tok, meta, data), *_added_types(meta, data), *_specials(tok, data),
             *_space_prefix(tok, data), *_scores(tok, meta, data), *_finite_scores(tok, meta, _unigram_scores(data))]
    found += _original_switches(tok, data)
    if model.get("type") == "WordPiece":
        found += wpm_inputs()
    return found


def for_spm(tok: Tokenizer, meta: dict, model: dict) -> list[Candidate]:
    """The candidates for a GGUF against a SentencePiece model (`gguf_keys.read_spm`'s fields)."""
    found = []
    types = meta.get("tokenizer.ggml.token_type")
    if types is not None:
        wrong = [i for i, t in enumerate(model["types"][:len(types)]) if t == USER_DEFINED and int(types[i]) != t]
        if wrong:
            found.append(_retype("token-types", f"{len(wrong)} user-defined piece(s) typed USER_DEFINED", wrong,
                                 USER_DEFINED))
    for key, flag in (("add_space_prefix", "add_dummy_prefix"),
                      ("remove_extra_whitespaces", "remove_extra_whitespaces")):
        if getattr(tok.vocab, key) != model[flag]:
            found.append(_key(key.replace("_", "-"), f"tokenizer.ggml.{key} = {model[flag]} (the model's {flag})",
                              {f"tokenizer.ggml.{key}": bool(model[flag])}))
    return found + _finite_scores(tok, meta, model.get("scores"))


def for_tekken(tok: Tokenizer, data: dict) -> list[Candidate]:
    """The candidates for a GGUF against a tekken file: its pattern replaced by llama.cpp's for the pre name."""
    pattern = (data.get("config") or {}).get("pattern")
    ours = list(get_pretokenizer(tok.vocab.pre_type).patterns)
    if not pattern or len(ours) != 1 or llama_form(pattern) == ours[0]:
        return []
    return [Candidate("original-pattern", f"tekken's config.pattern replaced by llama.cpp's regex for pre "
                      f"{tok.vocab.pre!r}", "original", original=lambda d: d["config"].__setitem__("pattern", ours[0]))]


def _key(name: str, what: str, changes: dict, *, exact: bool = True) -> Candidate:
    return Candidate(name, what, "gguf", gguf=lambda meta: dict(changes), exact=exact, keys=tuple(changes))


def _retype(name: str, what: str, ids: list[int], to: int) -> Candidate:
    def change(meta: dict) -> dict:
        types = [int(t) for t in meta["tokenizer.ggml.token_type"]]
        for i in ids:
            types[i] = to
        return {"tokenizer.ggml.token_type": types}
    return Candidate(name, what, "gguf", gguf=change, keys=("tokenizer.ggml.token_type",))


def _pre_name(tok: Tokenizer, meta: dict, data: dict) -> list[Candidate]:
    """A pre name whose llama.cpp regex is the original's (or the GGUF's, when the original's is none of
    llama.cpp's) and whose ignore_merges is the original's; the add_bos/add_eos llama.cpp reads today kept."""
    vocab = tok.vocab
    model = data.get("model") or {}
    if vocab.vocab_type != "bpe" or model.get("type") != "BPE":
        return []
    wanted = bool(model.get("ignore_merges", False))
    theirs = tuple(llama_form(p) for p in _split_patterns(data.get("pre_tokenizer")))
    ours = tuple(get_pretokenizer(vocab.pre_type).patterns)
    names = _pre_names(theirs, wanted)
    if not names and wanted != vocab.ignore_merges:
        names = _pre_names(ours, wanted)
    names = [n for n in names if n != vocab.pre and _same_flags(n, vocab.pre)]
    if not names or (theirs == ours and wanted == vocab.ignore_merges):
        return []
    name = next((n for n in PREFERRED_PRE if n in names), names[0])
    changes: dict[str, Any] = {"tokenizer.ggml.pre": name}
    flags = PRE_NAMES[name][1]
    for flag, now in (("add_bos", vocab.add_bos), ("add_eos", vocab.add_eos)):
        key = f"tokenizer.ggml.{flag}_token"
        if key not in meta and flag in flags and flags[flag] != now:  # the new name would switch it: keep it
            changes[key] = bool(now)
    return [_key("pre-name", f"tokenizer.ggml.pre = {name} (llama.cpp's regex as the original's, "
                 f"ignore_merges {'on' if wanted else 'off'})", changes)]


def _same_flags(name: str, current: str) -> bool:
    """The two names set the same flags apart from ignore_merges and add_bos (add_bos is kept as a key)."""
    mine = dict(PRE_NAMES.get(name, ("", {}))[1])
    theirs = dict(PRE_NAMES.get(current, ("", {}))[1])
    for flags in (mine, theirs):
        flags.pop("ignore_merges", None)
        flags.pop("add_bos", None)
    return mine == theirs


def _pre_names(patterns: tuple[str, ...], ignore_merges: bool) -> list[str]:
    out = []
    for name, (pre_type, flags) in PRE_NAMES.items():
        try:
            same = tuple(get_pretokenizer(pre_type).patterns) == patterns
        except Exception:  # noqa: BLE001 - a behaviour with no patterns of its own
            continue
        if same and bool(flags.get("ignore_merges", False)) == ignore_merges:
            out.append(name)
    return out


def _added_types(meta: dict, data: dict) -> list[Candidate]:
    """Each added token typed as the original marks it: special CONTROL, not special USER_DEFINED."""
    types = meta.get("tokenizer.ggml.token_type")
    if types is None:
        return []
    found = []
    control = [t["id"] for t in data.get("added_tokens") or []
               if _in(t, types) and not t.get("special") and int(types[t["id"]]) == CONTROL]
    if control:
        found.append(_retype("token-types", f"{len(control)} added token(s) the original marks special=false "
                             "typed USER_DEFINED, not CONTROL", control, USER_DEFINED))
    normal = [t["id"] for t in data.get("added_tokens") or [] if _in(t, types) and int(types[t["id"]]) == NORMAL]
    if normal:
        def change(meta: dict) -> dict:
            types = [int(t) for t in meta["tokenizer.ggml.token_type"]]
            for token in data.get("added_tokens") or []:
                if token["id"] in normal:
                    types[token["id"]] = CONTROL if token.get("special") else USER_DEFINED
            return {"tokenizer.ggml.token_type": types}
        found.append(Candidate("added-token-types", f"{len(normal)} added token(s) typed NORMAL given the "
                               "original's type (CONTROL if special, else USER_DEFINED)", "gguf", gguf=change,
                               keys=("tokenizer.ggml.token_type",)))
    return found


def _in(token: dict, types: Any) -> bool:
    return isinstance(token.get("id"), int) and 0 <= token["id"] < len(types)


def _specials(tok: Tokenizer, data: dict) -> list[Candidate]:
    """add_bos_token / add_eos_token (and the ids) as the original's post-processor adds them."""
    vocab = tok.vocab
    first, last = _template_ends(data.get("post_processor"))
    found = []
    if vocab.add_bos != (first is not None) or (first is not None and vocab.special.get("bos") != first):
        changes: dict[str, Any] = {"tokenizer.ggml.add_bos_token": first is not None}
        if first is not None:
            changes["tokenizer.ggml.bos_token_id"] = first
        found.append(_key("add-bos", f"add_bos_token {first is not None}"
                          + (f", bos_token_id {first}" if first is not None else ""), changes))
    if vocab.vocab_type != "wpm" and (vocab.add_eos != (last is not None)
                                      or (last is not None and vocab.special.get("eos") != last)):
        changes = {"tokenizer.ggml.add_eos_token": last is not None}
        if last is not None:
            changes["tokenizer.ggml.eos_token_id"] = last
        found.append(_key("add-eos", f"add_eos_token {last is not None}"
                          + (f", eos_token_id {last}" if last is not None else ""), changes))
    return found


def _space_prefix(tok: Tokenizer, data: dict) -> list[Candidate]:
    if tok.vocab.vocab_type != "spm":
        return []
    wanted = prepends_space(data)
    if wanted is None or wanted == tok.vocab.add_space_prefix:
        return []
    return [_key("add-space-prefix", f"tokenizer.ggml.add_space_prefix = {wanted} (the original "
                 f"{'prepends' if wanted else 'does not prepend'} U+2581)",
                 {"tokenizer.ggml.add_space_prefix": wanted})]


def _scores(tok: Tokenizer, meta: dict, data: dict) -> list[Candidate]:
    """A SentencePiece GGUF whose every score is the placeholder, from a BPE tokenizer.json: each token scored by
    the rank of the merge that makes it (earlier merges higher), so llama.cpp merges in the original's order."""
    model = data.get("model") or {}
    scores = meta.get("tokenizer.ggml.scores")
    if tok.vocab.vocab_type != "spm" or model.get("type") != "BPE" or scores is None or \
            any(float(s) != PLACEHOLDER_SCORE for s in scores):
        return []
    merges = model.get("merges") or []
    rank: dict[str, int] = {}
    for i, merge in enumerate(merges):
        left, right = merge.split(" ", 1) if isinstance(merge, str) else merge
        rank.setdefault(left + right, i)
    tokens = meta["tokenizer.ggml.tokens"]
    new = [float(-rank[t]) if t in rank else float(-len(merges)) for t in tokens]
    return [_key("scores", "tokenizer.ggml.scores from the original's merge ranks (every score was the "
                 f"placeholder {PLACEHOLDER_SCORE})", {"tokenizer.ggml.scores": new}, exact=False)]


def _unigram_scores(data: dict) -> list[float] | None:
    """A Unigram tokenizer.json's scores by id (`model.vocab` is `[[piece, score], ...]`), else None."""
    model = data.get("model") or {}
    vocab = model.get("vocab")
    if model.get("type") != "Unigram" or not isinstance(vocab, list):
        return None
    return [float(v[1]) if isinstance(v, list) and len(v) > 1 and isinstance(v[1], (int, float)) else math.nan
            for v in vocab]


def _finite_scores(tok: Tokenizer, meta: dict, theirs: list[float] | None) -> list[Candidate]:
    """The GGUF's NaN and infinite scores given the original's score for the same token, where llama.cpp
    reads scores (SentencePiece, Unigram): exact when the original holds a finite score for each of them.
    Otherwise the lowest finite score of the file stands in (not exact: a value of ours, named, not applied)."""
    scores = meta.get("tokenizer.ggml.scores")
    if scores is None or tok.vocab.vocab_type not in ("spm", "ugm"):
        return []
    values = np.asarray(scores, dtype=np.float64)
    bad = [int(i) for i in np.flatnonzero(~np.isfinite(values))]
    if not bad:
        return []
    exact = theirs is not None and all(i < len(theirs) and math.isfinite(theirs[i]) for i in bad)
    finite = values[np.isfinite(values)]
    floor = float(finite.min()) if finite.size else 0.0
    new = [float(theirs[i]) if exact and theirs is not None else floor for i in bad]

    def change(meta: dict) -> dict:
        fixed = [float(x) for x in meta["tokenizer.ggml.scores"]]
        for i, value in zip(bad, new, strict=True):
            fixed[i] = value
        return {"tokenizer.ggml.scores": fixed}
    shown = ", ".join(str(i) for i in bad[:5]) + (f" and {len(bad) - 5:,} more" if len(bad) > 5 else "")
    source = "the original's score for each" if exact else f"the file's lowest finite score, {floor:g}"
    return [Candidate("finite-scores", f"tokenizer.ggml.scores: the NaN or infinite score of token(s) {shown} "
                      f"given {source}", "gguf", gguf=change, exact=exact, keys=("tokenizer.ggml.scores",))]


def _original_switches(tok: Tokenizer, data: dict) -> list[Candidate]:
    """llama.cpp behaviours no key carries, switched on in the original instead."""
    model = data.get("model") or {}
    found = []
    normalizer = data.get("normalizer")
    if normalizer and model.get("type") != "WordPiece":
        found.append(Candidate("original-normalizer", f"the original's normalizer ({normalizer.get('type')}) off: "
                               "llama.cpp normalizes nothing for this model", "original",
                               original=lambda d: d.__setitem__("normalizer", None)))
    if model.get("type") == "BPE" and model.get("ignore_merges") and not tok.vocab.ignore_merges:
        found.append(Candidate("original-ignore-merges", "the original's ignore_merges off, as llama.cpp has it "
                               f"for pre {tok.vocab.pre!r}", "original",
                               original=lambda d: d["model"].__setitem__("ignore_merges", False)))
    found += _pattern_switch(tok, data)
    found += _loader_retyping(data)
    if model.get("type") == "WordPiece" and model.get("max_input_chars_per_word"):
        found.append(Candidate("word-length", "the original's max_input_chars_per_word raised to 10**9 "
                               "(llama.cpp's WPM has no limit)", "original",
                               original=lambda d: d["model"].__setitem__("max_input_chars_per_word", 10**9)))
    return found


def _loader_retyping(data: dict) -> list[Candidate]:
    """Added tokens the original marks special=false whose text llama.cpp's loader makes CONTROL whatever
    the GGUF says (the by-text lists of its pinned llama-vocab.cpp: end-of-turn, end-of-message,
    fill-in-the-middle, end-of-generation; `llama_facts.retyping_rules`): made special in the original,
    since no token type can undo it. Its `what` names each token and the rule."""
    forced = [(t["content"], rule) for t in data.get("added_tokens") or []
              if not t.get("special") and isinstance(t.get("content"), str)
              and (rule := llama_facts.rule_for(t["content"])) is not None]
    if not forced:
        return []
    texts = {text for text, _ in forced}

    def special(d: dict) -> None:
        for token in d.get("added_tokens") or []:
            if token.get("content") in texts:
                token["special"] = True
    named = "; ".join(rule.line(text) for text, rule in forced[:3]) + (
        f"; and {len(forced) - 3} more" if len(forced) > 3 else "")
    return [Candidate("loader-retyping", f"{len(forced)} added token(s) the original marks special=false made "
                      f"special in it: {named}", "original", original=special)]


def _pattern_switch(tok: Tokenizer, data: dict) -> list[Candidate]:
    """The original's Split regexes replaced by llama.cpp's for the GGUF's pre name (its rewrite of them)."""
    if tok.vocab.vocab_type != "bpe":
        return []
    theirs = _split_patterns(data.get("pre_tokenizer"))
    ours = list(get_pretokenizer(tok.vocab.pre_type).patterns)
    if not theirs or len(theirs) != len(ours) or [llama_form(p) for p in theirs] == ours:
        return []

    def switch(d: dict) -> None:
        mine = iter(ours)

        def walk(part: Any) -> None:
            if isinstance(part, dict) and part.get("type") == "Sequence":
                for inner in part.get("pretokenizers") or []:
                    walk(inner)
            elif isinstance(part, dict) and part.get("type") == "Split" and "Regex" in (part.get("pattern") or {}):
                part["pattern"] = {"Regex": next(mine)}
        walk(d.get("pre_tokenizer"))
    return [Candidate("original-pattern", f"the original's Split regex(es) replaced by llama.cpp's for pre "
                      f"{tok.vocab.pre!r}", "original", original=switch)]


# --- WordPiece: the code-point classes the two normalise apart (llama.cpp's tables) -------------------

def llama_class(cpt: int) -> str:
    """What llm_tokenizer_wpm_session::preprocess does with the code point (after its one-to-one NFD,
    lowercase and strip_accents on): 'space' ends the word, 'drop', 'split' (a word of its own), 'join'."""
    base = uni.nfd([cpt])[0]
    flags = uni.cpt_flags(base)
    if flags & uni.WHITESPACE:
        return "space"
    if base in (0, 0xFFFD) or flags & (uni.CONTROL | uni.ACCENT_MARK):
        return "drop"
    if flags & uni.PUNCTUATION or (base < 0x7F and flags & uni.SYMBOL) or any(a <= base <= b for a, b in CJK):
        return "split"
    return "join"


def control_whitespace(cpt: int) -> bool:
    """In llama.cpp's whitespace set (a word break) but a control character (Cc) to HF's clean_text (removed)."""
    return bool(uni.cpt_flags(cpt) & uni.WHITESPACE) and unicodedata.category(chr(cpt)) == "Cc" and chr(cpt) not in KEEP


def hangul(cpt: int) -> bool:
    """A precomposed Hangul syllable: llama.cpp's NFD keeps its first jamo only."""
    return cpt in HANGUL


def spacing_mark(cpt: int) -> bool:
    """llama.cpp drops it as an accent mark (any M category); its full NFD holds a spacing or enclosing mark
    (Mc, Me), which HF's strip_accents (Mn only) keeps."""
    if hangul(cpt) or llama_class(cpt) != "drop":
        return False
    return any(unicodedata.category(c) in ("Mc", "Me") for c in unicodedata.normalize("NFD", chr(cpt)))


def per_cpt(test: Callable[[int], bool], to: Callable[[str], str]) -> Callable[[str], str]:
    return lambda text: "".join(to(c) if test(ord(c)) else c for c in text)


def wpm_inputs() -> list[Candidate]:
    return [
        Candidate("control-whitespace", "U+000B, U+000C, U+0085 written as a space", "input",
                  text=per_cpt(control_whitespace, lambda c: " ")),
        Candidate("hangul-nfd", "Hangul syllables written as their jamo (full NFD)", "input",
                  text=per_cpt(hangul, lambda c: unicodedata.normalize("NFD", c))),
        Candidate("spacing-marks", "delete the marks llama.cpp strips and HF keeps (Mc, Me)", "input",
                  text=per_cpt(spacing_mark, lambda c: "")),
        Candidate("phantom-space", "delete U+2581, the converter's word-start marker, from the input", "input",
                  text=lambda text: text.replace("\u2581", "")),
    ]
