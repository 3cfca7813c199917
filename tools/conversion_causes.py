"""Trace each conversion finding of a `run --reference` report to its cause, by experiment.

A conversion finding is a case where llama.cpp (on the GGUF) and the model's
original tokenizer (HF `tokenizers` on its tokenizer.json) give different ids.
This tool names the cause of each one, not by reading code but by
counterfactuals (the harness does the same per case in every `run --reference`,
`harness.references.causes`; this tool keeps the sweeps and the Unicode-table fix,
which asks the original's normalizer in this process): each known cause has a *fix*, a change that removes exactly
that difference, and a case is explained by the smallest set of fixes after
which llama.cpp and the original agree on every flag pair the report lists
for it. A fix changes one of three things:

- the GGUF, where a key could carry the original's behaviour (the fix is then
  the key the converter should have written; `harness.models.gguf_writer.rewrite`);
- the original's tokenizer.json, where llama.cpp lacks the feature (the fix
  switches the original's feature off, to show that it is the one);
- the input text, where the two normalise a class of code points differently
  (the fix rewrites those code points the same way for both sides, so that the
  class is shown to be the whole difference).

    python tools/conversion_causes.py REPORT_DIR GGUF ORIGINAL_DIR       # every finding of the report
    python tools/conversion_causes.py --sweep GGUF ORIGINAL_DIR          # WPM: every code point, alone and after 'a'
    python tools/conversion_causes.py --text 'a\\x0bb' [--fix NAME] GGUF ORIGINAL_DIR  # three rows (after a fix)

Runs with llama-cpp-python, `tokenizers` and this checkout (the `.nox/tests`
venv has all three). The original is asked through `harness.references.hf`,
so the flags map exactly as in the three-way run. The causes and what they
mean are in docs/conversion-findings.md.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import tempfile
import unicodedata
from collections import Counter
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

# the WordPiece code-point classes live in the harness now (harness.references.cause_candidates)
from harness.references.cause_candidates import (  # noqa: E402
    control_whitespace,
    hangul,
    llama_class,
    per_cpt,
    spacing_mark,
)

PAIRS = [(a, p) for a in (False, True) for p in (False, True)]

@dataclass(frozen=True)
class Fix:
    name: str
    what: str
    text: Callable[[str], str] | None = None
    original: Callable[[dict], None] | None = None
    gguf: Callable[[dict, dict], dict] | None = None  # (GGUF metadata, tokenizer.json) -> changed keys


def raise_word_limit(data: dict) -> None:
    data["model"]["max_input_chars_per_word"] = 10**9


def llama3_pre(meta: dict, data: dict) -> dict:
    return {"tokenizer.ggml.pre": "llama-bpe"}  # llama.cpp's load() sets ignore_merges for it


def added_as_user_defined(meta: dict, data: dict) -> dict:
    """Each added token the original marks special=false, typed USER_DEFINED instead of CONTROL."""
    types = list(meta["tokenizer.ggml.token_type"])
    for token in data.get("added_tokens", []):
        if not token.get("special") and types[token["id"]] == 3:
            types[token["id"]] = 4
    return {"tokenizer.ggml.token_type": types}


def unicode_tables_fix(hf_class: Callable[[int], str]) -> Fix:
    def differs(cpt: int) -> bool:
        if control_whitespace(cpt) or hangul(cpt) or spacing_mark(cpt):
            return False
        return llama_class(cpt) != hf_class(cpt)
    return Fix("unicode-tables", "delete the code points the two class apart (drop, split, join: table versions)",
               text=per_cpt(differs, lambda c: ""))


def wpm_fixes(hf_class: Callable[[int], str]) -> list[Fix]:
    return [
        Fix("word-length", "the original's max_input_chars_per_word raised from 100 to 10**9",
            original=raise_word_limit),
        Fix("control-whitespace", "U+000B, U+000C, U+0085 written as a space",
            text=per_cpt(control_whitespace, lambda c: " ")),
        Fix("hangul-nfd", "Hangul syllables written as their jamo (full NFD)",
            text=per_cpt(hangul, lambda c: unicodedata.normalize("NFD", c))),
        Fix("spacing-marks", "delete the marks llama.cpp strips and HF keeps (Mc, Me)",
            text=per_cpt(spacing_mark, lambda c: "")),
        unicode_tables_fix(hf_class),
        Fix("phantom-space", "delete U+2581, the converter's word-start marker, from the input",
            text=lambda text: text.replace("\u2581", "")),
    ]


RETYPE = Fix("added-token-type", "GGUF token_type USER_DEFINED for the original's special=false added tokens",
             gguf=added_as_user_defined)


def bpe_fixes(sides: Sides) -> list[Fix]:
    """ignore_merges and the added tokens' type through GGUF keys; and the added tokens llama.cpp's
    load() makes CONTROL whatever the GGUF says (its FIM and end-of-generation texts), which no key
    can undo: that fix makes them special in the original instead."""
    import llama_cpp
    vocab = llama_cpp.llama_model_get_vocab(sides.llama((RETYPE,)).model)  # type: ignore[attr-defined]
    forced = {t["id"] for t in sides.data.get("added_tokens", []) if not t.get("special")
              and llama_cpp.llama_vocab_get_attr(vocab, t["id"]) & llama_cpp.LLAMA_TOKEN_ATTR_CONTROL}

    def special_in_original(data: dict) -> None:
        for token in data.get("added_tokens", []):
            if token["id"] in forced:
                token["special"] = True
    return [Fix("ignore-merges", "GGUF tokenizer.ggml.pre = llama-bpe (ignore_merges on)", gguf=llama3_pre), RETYPE,
            Fix("forced-control", f"the original's added tokens llama.cpp forces CONTROL ({len(forced)}) made special",
                original=special_in_original)]


# --- the three sides ---------------------------------------------------------------------

class Sides:
    """llama.cpp on the GGUF (or a rewritten copy) and the original (or a changed copy), cached per fix set."""

    def __init__(self, gguf: Path, original: Path, tmp: Path) -> None:
        self.gguf, self.tmp = gguf, tmp
        folder = original if original.is_dir() else original.parent
        self.tokenizer_json = folder / "tokenizer.json"
        self.data = json.loads(self.tokenizer_json.read_text(encoding="utf-8"))
        self._llama: dict[tuple, object] = {}
        self.paths: dict[tuple, Path] = {}  # the GGUF (or its rewritten copy) per set of GGUF fixes
        self._hf: dict[tuple, object] = {}

    def llama(self, fixes: Iterable[Fix]) -> object:
        import llama_cpp

        from harness.models.gguf_writer import rewrite
        from tokenizer.gguf.reader import read
        key = tuple(f.name for f in fixes if f.gguf)
        if key not in self._llama:
            path = self.gguf
            if key:
                meta = read(self.gguf).metadata
                changes: dict = {}
                for fix in fixes:
                    if fix.gguf:
                        changes |= fix.gguf(meta | changes, self.data)
                path = self.tmp / f"{'+'.join(key)}.gguf"
                rewrite(self.gguf, path, changes)
            self.paths[key] = path
            self._llama[key] = llama_cpp.Llama(model_path=str(path), vocab_only=True, verbose=False)
        return self._llama[key]

    def hf(self, fixes: Iterable[Fix]) -> object:
        from harness.references.hf import HFReference
        key = tuple(f.name for f in fixes if f.original)
        if key not in self._hf:
            path = self.tokenizer_json
            if key:
                data = json.loads(json.dumps(self.data))
                for fix in fixes:
                    if fix.original:
                        fix.original(data)
                path = self.tmp / "+".join(key) / "tokenizer.json"
                path.parent.mkdir(parents=True, exist_ok=True)
                path.write_text(json.dumps(data), encoding="utf-8")
            self._hf[key] = HFReference(path)
        return self._hf[key]

    def rows(self, text: str, pair: tuple[bool, bool], fixes: tuple[Fix, ...] = ()) -> tuple[list[int], list[int]]:
        for fix in fixes:
            if fix.text:
                text = fix.text(text)
        add, parse = pair
        llama = self.llama(fixes).tokenize(text.encode(), add_bos=add, special=parse)  # type: ignore[attr-defined]
        original = self.hf(fixes).tokenize(text, add_special=add, parse_special=parse)  # type: ignore[attr-defined]
        return original, llama


def minimal_fix_sets(sides: Sides, text: str, pairs: list[tuple[bool, bool]],
                     fixes: list[Fix]) -> list[tuple[str, ...]]:
    """Every smallest set of fixes after which llama.cpp and the original agree on all `pairs`."""
    found: list[tuple[str, ...]] = []
    for size in range(len(fixes) + 1):
        for subset in itertools.combinations(fixes, size):
            names = tuple(f.name for f in subset)
            if any(set(f) <= set(names) for f in found):
                continue
            if all(o == g for o, g in (sides.rows(text, p, subset) for p in pairs)):
                found.append(names)
        if found:
            return found
    return []


def hf_class_test(sides: Sides) -> Callable[[int], str]:
    """What the original's BertNormalizer and BertPreTokenizer do with a code point between two x's."""
    hf = sides.hf(()).hf  # type: ignore[attr-defined]
    cache: dict[int, str] = {}

    def hf_class(cpt: int) -> str:
        if cpt not in cache:
            normal = hf.normalizer.normalize_str("x" + chr(cpt) + "x")
            words = [w for w, _ in hf.pre_tokenizer.pre_tokenize_str(normal)]
            cache[cpt] = ("drop" if normal == "xx" else "space" if normal == "x x"
                          else "split" if len(words) == 3 else "join")
        return cache[cpt]
    return hf_class


def fixes_for(sides: Sides) -> list[Fix]:
    return wpm_fixes(hf_class_test(sides)) if sides.data["model"].get("type") == "WordPiece" else bpe_fixes(sides)


def explain_report(report: Path, sides: Sides) -> int:
    findings = json.loads((report / "report.json").read_text(encoding="utf-8")).get("reference_findings") or []
    cases: dict[str, dict] = {}
    for f in findings:
        if f.get("class") == "conversion":
            case = cases.setdefault(f["case_id"], {"text": f["text"], "pairs": []})
            case["pairs"].append((f["add_special"], f["parse_special"]))
    fixes = fixes_for(sides)
    counts: Counter[str] = Counter()
    for case_id, case in cases.items():
        if case["text"] is None:
            print(f"{case_id}: bytes input, not traced")
            counts["(bytes, not traced)"] += 1
            continue
        sets = minimal_fix_sets(sides, case["text"], case["pairs"], fixes)
        cause = " | ".join("+".join(s) for s in sets) or "UNEXPLAINED"
        counts[cause] += 1
        print(f"{case_id} ({len(case['pairs'])} pairs): {cause}   {case['text'][:60]!r}")
    print(f"\n{len(cases)} conversion findings (cases):")
    for cause, n in counts.most_common():
        print(f"  {n:3}  {cause}")
    return 0 if "UNEXPLAINED" not in counts else 1


def sweep(sides: Sides) -> int:
    """Inputs of each cause's class, counted. WPM: every code point c, alone, after a letter and between
    two, `c ac` + `b` (add and parse special off), with a breakdown by each side's class of c and c's
    category in Python's unicodedata; BPE: every added token's text alone, under the four flag pairs. Each input where
    llama.cpp and the original differ is attributed to the fixes that make them agree."""
    fixes = fixes_for(sides)
    if sides.data["model"].get("type") == "WordPiece":
        cpts = (c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF)
        inputs = ((f"U+{c:04X}", f"{chr(c)} a{chr(c)}b", [(False, False)]) for c in cpts)
        hf_class = hf_class_test(sides)
    else:
        inputs = ((f"{t['id']} {t['content']!r}", t["content"], PAIRS) for t in sides.data.get("added_tokens", []))
    counts: Counter[str] = Counter()
    examples: dict[str, list[str]] = {}
    classes: Counter[tuple[str, str, str, str]] = Counter()
    total = 0
    for label, text, pairs in inputs:
        total += 1
        if all(o == g for o, g in (sides.rows(text, p) for p in pairs)):
            continue
        sets = minimal_fix_sets(sides, text, pairs, fixes)
        cause = " | ".join("+".join(s) for s in sets) or "UNEXPLAINED"
        counts[cause] += 1
        examples.setdefault(cause, []).append(label)
        if label.startswith("U+"):
            cpt = int(label[2:], 16)
            classes[cause, llama_class(cpt), hf_class(cpt), unicodedata.category(chr(cpt))] += 1
    for cause, n in counts.most_common():
        print(f"{n:7}  {cause}  e.g. {', '.join(examples[cause][:8])}")
    if classes:
        print("by cause, llama.cpp's class -> the original's, Python's category (Unicode "
              f"{unicodedata.unidata_version}):")
        for (cause, ours, theirs, category), n in sorted(classes.items()):
            print(f"{n:7}  {cause}: {ours} -> {theirs}, {category}")
    print(f"{sum(counts.values())} of {total} inputs differ")
    return 0 if "UNEXPLAINED" not in counts else 1


def three_rows(sides: Sides, text: str, fix_names: list[str]) -> int:
    from tokenizer import Tokenizer
    known = {f.name: f for f in fixes_for(sides)}
    unknown = [n for n in fix_names if n not in known]
    if unknown:
        print(f"error: no fix {unknown[0]!r} for this model (there are: {', '.join(known)})", file=sys.stderr)
        return 2
    fixes = tuple(known[n] for n in fix_names)
    sides.llama(fixes)
    ours = Tokenizer.from_gguf(sides.paths[tuple(f.name for f in fixes if f.gguf)])
    for fix in fixes:
        if fix.text:
            text = fix.text(text)
    for pair in PAIRS:
        original, llama = sides.rows(text, pair, tuple(f for f in fixes if not f.text))
        engine = ours.tokenize(text, add_special=pair[0], parse_special=pair[1])
        print(f"add_special={pair[0]} parse_special={pair[1]}\n"
              f"  original  {original}\n  llama.cpp {llama}\n  ours      {engine}")
    return 0


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("report", nargs="?", help="a `run --reference` report folder")
    parser.add_argument("gguf")
    parser.add_argument("original", help="the original's folder (tokenizer.json)")
    parser.add_argument("--sweep", action="store_true")
    parser.add_argument("--text")
    parser.add_argument("--fix", action="append", default=[], help="with --text: apply this fix (repeatable)")
    args = parser.parse_args(argv)
    os.environ.setdefault("RAYON_NUM_THREADS", "1")
    gguf, original = Path(args.gguf).expanduser(), Path(args.original).expanduser()
    folder = original if original.is_dir() else original.parent
    for path, what in ((gguf, "GGUF"), (folder / "tokenizer.json", "tokenizer.json"),
                       (Path(args.report or ".") / "report.json", "report.json")):
        if (what != "report.json" or args.report) and not path.is_file():
            print(f"error: no {what} at {path}", file=sys.stderr)
            return 2
    with tempfile.TemporaryDirectory() as tmp:
        sides = Sides(gguf, original, Path(tmp))
        if args.text is not None:
            # backslash escapes (\x0b, \u0085, \U00011b00) read as Python's, other characters kept
            return three_rows(sides, args.text.encode("latin-1", "backslashreplace").decode("unicode_escape"), args.fix)
        if args.sweep:
            return sweep(sides)
        if not args.report:
            parser.error("give a report folder, --sweep or --text")
        return explain_report(Path(args.report), sides)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
