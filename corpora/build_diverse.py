"""Write harness/data/corpora/diverse.txt: the benchmark text a user might have (python corpora/build_diverse.py).

Prose-like paragraphs in 26 languages and 13+ scripts, built from real word
lists: wordfreq 3.1.1 (`pip install wordfreq==3.1.1`; frequency lists compiled
from Wikipedia, subtitles, news and web text) for 24 languages, and the lorem
word lists of Faker 40.54.0 (`pip install faker==40.54.0`) for Thai and Armenian,
which wordfreq lacks. Each word is drawn by a log-uniform rank (a Zipf law with
exponent 1, the shape of real text), so common words recur and most words occur
once. Sentences get a capital, their script's punctuation, now and then a
number, and Chinese, Japanese and Thai are written without spaces. A few lines of
Faker's structured data (addresses, e-mails, URLs, prices, dates) and some code
are mixed in. Seeded: the same package versions give the same file byte for byte.

`--stats FILE` prints the statistics of any text file: characters, words,
hapax fraction, scripts.
"""

from __future__ import annotations

import argparse
import math
import random
import sys
from collections import Counter
from pathlib import Path

import regex

OUT = Path(__file__).resolve().parents[1] / "harness" / "data" / "corpora" / "diverse.txt"
SIZE = 300_000  # characters
SEED = 21

# language: (sentence end, word separator); wordfreq's codes.
WORDFREQ = {
    "en": (". ", " "), "es": (". ", " "), "fr": (". ", " "), "de": (". ", " "),
    "pt": (". ", " "), "it": (". ", " "), "pl": (". ", " "), "cs": (". ", " "),
    "tr": (". ", " "), "vi": (". ", " "), "id": (". ", " "), "fi": (". ", " "),
    "ru": (". ", " "), "uk": (". ", " "), "bg": (". ", " "), "el": (". ", " "),
    "ar": (". ", " "), "fa": (". ", " "), "ur": ("۔ ", " "), "he": (". ", " "),
    "hi": ("। ", " "), "bn": ("। ", " "), "ta": (". ", " "),
    "zh": ("。", ""), "ja": ("。", ""), "ko": (". ", " "),
}
FAKER = {"th_TH": (" ", ""), "hy_AM": ("։ ", " ")}

# Scripts counted by --stats (Unicode Script property names, as the regex module spells them).
SCRIPTS = (
    "Latin", "Cyrillic", "Greek", "Arabic", "Hebrew", "Devanagari", "Bengali", "Tamil",
    "Han", "Hiragana", "Katakana", "Hangul", "Thai", "Armenian", "Georgian", "Ethiopic",
    "Gujarati", "Gurmukhi", "Telugu", "Kannada", "Malayalam", "Sinhala", "Khmer", "Lao",
    "Myanmar", "Tibetan",
)
WORD = regex.compile(r"[\p{L}\p{M}]+|\p{N}+")

CODE = (
    "def fib(n):\n    return n if n < 2 else fib(n - 1) + fib(n - 2)\n",
    "for (int i = 0; i < n; ++i) { sum += a[i] * b[i]; }\n",
    "SELECT name, COUNT(*) FROM users WHERE age >= 18 GROUP BY name;\n",
    '{"id": 42, "tags": ["a", "b"], "ok": true}\n',
)


def word_lists() -> dict[str, tuple[list[str], tuple[str, str]]]:
    """Each language's words, most frequent first, with its punctuation."""
    import faker
    import wordfreq

    lists = {}
    for lang, punct in WORDFREQ.items():
        words = [w for w in wordfreq.top_n_list(lang, 50_000) if WORD.fullmatch(w)]
        if lang == "el":  # wordfreq folds the final sigma; write it as Greek text has it
            words = [w[:-1] + "ς" if w.endswith("σ") else w for w in words]
        lists[lang] = (words, punct)
    for locale, punct in FAKER.items():
        module = __import__(f"faker.providers.lorem.{locale}", fromlist=["Provider"])
        lists[locale] = (list(module.Provider.word_list), punct)
    assert faker.VERSION and wordfreq.__name__  # both imported from the pinned packages
    return lists


def sentence(rng: random.Random, words: list[str], punct: tuple[str, str]) -> str:
    end, sep = punct
    picked = []
    for _ in range(rng.randint(5, 18)):
        if rng.random() < 0.04:
            picked.append(str(rng.choice((rng.randint(0, 99), rng.randint(100, 99_999), 2026))))
        else:  # log-uniform rank: the probability of rank r falls as 1/r
            picked.append(words[int(math.exp(rng.random() * math.log(len(words))))])
    first = picked[0]
    picked[0] = first[:1].upper() + first[1:]
    if sep and len(picked) > 6 and rng.random() < 0.3:
        picked[rng.randint(1, len(picked) - 2)] += ","
    return sep.join(picked) + end


def structured(rng: random.Random, fake) -> str:
    kind = rng.randrange(5)
    if kind == 0:
        return f"{fake.name()}, {fake.street_address()}, {fake.city()} {fake.postcode()}\n"
    if kind == 1:
        return f"Contact: {fake.email()} or {fake.url()}{fake.uri_path()}\n"
    if kind == 2:
        return f"Invoice {fake.bothify('??-#####')}: {fake.pricetag()} due {fake.date()}\n"
    if kind == 3:
        return rng.choice(CODE)
    return f"{fake.catch_phrase()} ({fake.company()})\n"


def build(size: int = SIZE, seed: int = SEED) -> str:
    from faker import Faker

    rng = random.Random(seed)
    lists = word_lists()
    fake = Faker(["en_US", "de_DE", "fr_FR", "ja_JP", "ru_RU", "es_ES"])
    Faker.seed(seed)
    parts: list[str] = []
    total = 0
    langs = sorted(lists)
    while total < size:
        lang = rng.choice(langs)
        words, punct = lists[lang]
        para = "".join(sentence(rng, words, punct) for _ in range(rng.randint(1, 4))).rstrip() + "\n"
        if rng.random() < 0.15:
            para += structured(rng, fake)
        parts.append(para)
        total += len(para)
    return "".join(parts)[:size]


def stats(text: str) -> dict[str, object]:
    """Characters, words (letter runs and digit runs), the hapax fraction of the
    distinct words and of the running words, and the scripts with >= 200 letters."""
    counts = Counter(WORD.findall(text))
    words = sum(counts.values())
    hapax = sum(1 for c in counts.values() if c == 1)
    scripts = {s: len(regex.findall(rf"\p{{Script={s}}}", text)) for s in SCRIPTS}
    return {
        "chars": len(text), "bytes": len(text.encode()), "words": words, "distinct": len(counts),
        "hapax_of_distinct": hapax / max(1, len(counts)), "hapax_of_words": hapax / max(1, words),
        "scripts": sorted(s for s, n in scripts.items() if n >= 200),
    }


def describe(text: str) -> str:
    s = stats(text)
    return (f"{s['chars']:,} characters ({s['bytes']:,} bytes), {s['words']:,} words, "
            f"{s['distinct']:,} distinct; hapax: {s['hapax_of_distinct']:.1%} of distinct words, "
            f"{s['hapax_of_words']:.1%} of running words; {len(s['scripts'])} scripts: "
            f"{', '.join(s['scripts'])}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--stats", type=Path, metavar="FILE", help="print FILE's statistics and exit")
    ap.add_argument("--out", type=Path, default=OUT, help=f"output file (default {OUT.name})")
    args = ap.parse_args(argv)
    if args.stats:
        if not args.stats.is_file():
            print(f"error: no such file: {args.stats}", file=sys.stderr)
            return 2
        print(describe(args.stats.read_text(encoding="utf-8")))
        return 0
    try:
        text = build()
    except ImportError as e:
        print(f"error: {e.name} is missing: pip install wordfreq==3.1.1 faker==40.54.0", file=sys.stderr)
        return 2
    args.out.write_text(text, encoding="utf-8", newline="\n")
    print(f"{args.out}: {describe(text)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
