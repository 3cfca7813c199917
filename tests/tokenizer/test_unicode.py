"""Our Unicode tables against llama.cpp's: every code point 0..0x10FFFF.

1. The flags (`unicode.flags_array`), lower-case map and NFD ranges equal
   what llama.cpp computes from its own `src/unicode-data.cpp`, parsed here
   independently of tools/gen_unicode.py (skips without the sdist).
2. Where llama.cpp's tokenizer can see a class, the oracle confirms it: a
   probe string per code point, tokenized by vocabularies whose pre-tokenizers
   separate letters/digits/whitespace (gpt-2), marks (qwen35), punctuation
   (aquila: default pre), symbols (synthetic deepseek-v3) and Han (synthetic
   kimi-k2).  By default the code points at every class boundary of
   llama.cpp's table (about 9,000), asked of llama.cpp live; with --nightly
   all 1,114,112, against llama.cpp's answers recorded per pinned release
   (tests/tokenizer/code_points.py, golden/code-points/).
3. The tables are Unicode 15.1: its additions are classified, Unicode 16.0's
   are not.  (Python 3.11's `unicodedata` is Unicode 14.0, so using it would
   be wrong for every code point added in 15.0 and 15.1.)
4. llama.cpp's lenient UTF-8 decoding, byte pattern by byte pattern.
"""

from __future__ import annotations

import itertools
import re
from functools import lru_cache
from pathlib import Path

import numpy as np
import pytest

from tests.conformance import synthetic_or_skip
from tests.llama_sources import llama_source
from tests.tokenizer import code_points
from tokenizer import unicode as uni

FLAGS = code_points.FLAGS


@lru_cache(maxsize=1)
def llama_tables() -> dict[str, np.ndarray]:
    src = llama_source("unicode-data.cpp")
    tables = {}
    for name, body in re.findall(r"\b(unicode_\w+)\s*=\s*\{(.*?)\n\};", src, re.S):
        body = re.sub(r"//[^\n]*", "", body)
        tables[name] = np.array([int(h, 16) for h in re.findall(r"0x[0-9A-Fa-f]+", body)], dtype=np.int64)
    return tables


def llama_flags() -> np.ndarray:
    """unicode_cpt_flags_array(), step by step as unicode.cpp builds it."""
    t = llama_tables()
    ranges = t["unicode_ranges_flags"].reshape(-1, 2)
    flags = np.zeros(uni.MAX_CODEPOINTS, dtype=np.int64)
    for (start, value), (end, _) in itertools.pairwise(ranges):
        flags[start:end] = value
    flags[t["unicode_set_whitespace"]] |= 0x0100
    flags[t["unicode_map_lowercase"].reshape(-1, 2)[:, 1]] |= 0x0200
    flags[t["unicode_map_uppercase"].reshape(-1, 2)[:, 1]] |= 0x0400
    flags[t["unicode_ranges_nfd"].reshape(-1, 3)[:, 2]] |= 0x0800
    return flags


def test_flags_equal_llama_tables_for_every_code_point():
    ours = uni.flags_array().astype(np.int64)
    theirs = llama_flags()
    differ = np.flatnonzero(ours != theirs)
    assert differ.size == 0, f"{differ.size} code points differ, e.g. {[hex(c) for c in differ[:10]]}"


def test_lowercase_and_nfd_equal_llama_tables():
    t = llama_tables()
    pairs = t["unicode_map_lowercase"].reshape(-1, 2)
    assert all(uni.tolower(int(a)) == int(b) for a, b in pairs)
    assert uni.tolower(0x1F600) == 0x1F600
    triples = t["unicode_ranges_nfd"].reshape(-1, 3)
    cps = [int(c) for first, last, _ in triples for c in (first, last)]
    want = [int(base) for _, _, base in triples for _ in (0, 1)]
    assert uni.nfd(cps) == want


@pytest.mark.parametrize("cpt, flags", [
    pytest.param(0x1E030, uni.LETTER, id="U+1E030-15.0-cyrillic-modifier"),
    pytest.param(0x31350, uni.LETTER, id="U+31350-15.0-cjk-ext-h"),
    pytest.param(0x11F00, uni.ACCENT_MARK, id="U+11F00-15.0-kawi"),
    pytest.param(0x2EBF0, uni.LETTER, id="U+2EBF0-15.1-cjk-ext-i"),
    pytest.param(0x2FFC, uni.SYMBOL, id="U+2FFC-15.1-ideographic-description"),
    pytest.param(0x0897, uni.UNDEFINED, id="U+0897-16.0-unassigned-here"),
    pytest.param(0x1C89, uni.UNDEFINED, id="U+1C89-16.0-unassigned-here"),
    pytest.param(0x10D40, uni.UNDEFINED, id="U+10D40-16.0-unassigned-here"),
])
def test_tables_are_unicode_15_1(cpt, flags):
    assert uni.cpt_flags(cpt) & uni.MASK_CATEGORIES == flags


# --- through the oracle ----------------------------------------------------------------------

def boundary_code_points() -> list[int]:
    starts = uni.tables()["ranges_flags"][0::2]
    near = {c + d for c in starts for d in (-1, 0, 1)}
    near |= set(uni.tables()["whitespace"])
    near |= {lo for lo, _ in uni.HAN_RANGES} | {hi for _, hi in uni.HAN_RANGES}
    return sorted(c for c in near if 0 <= c < uni.MAX_CODEPOINTS)


PROBE_VOCABS = [pytest.param(name, id=f"{name.removeprefix('synthetic:pre-')}-{what}")
                for name, what in code_points.PROBE_VOCABS.items()]


def _vocab_path(name: str, require_vocab) -> Path:
    if not name.startswith("synthetic:"):
        return require_vocab(name)
    return synthetic_or_skip(name.split(":", 1)[1])


def _separator(tok) -> bytes:
    sep = code_points.separator(tok)
    if sep is None:
        pytest.skip("no CONTROL token to separate probes with")
    return sep


def probe_mismatches(path: Path, cpts: list[int]) -> list[int]:
    """Code points whose probe tokenizes differently in our engine and in llama.cpp."""
    from harness.oracle.llama import LlamaOracle
    from tokenizer import Tokenizer

    ours = Tokenizer.from_gguf(path)
    sep = _separator(ours)
    bad = []
    with LlamaOracle(path) as oracle:
        for i in range(0, len(cpts), code_points.BATCH):
            chunk = cpts[i:i + code_points.BATCH]
            data = sep.join(map(code_points.probe, chunk))
            if ours.tokenize(data, **FLAGS) != oracle.tokenize(data, **FLAGS):
                probes = [(c, code_points.probe(c)) for c in chunk]
                bad += [c for c, one in probes if ours.tokenize(one, **FLAGS) != oracle.tokenize(one, **FLAGS)]
    return bad


@pytest.mark.oracle
@pytest.mark.parametrize("name", PROBE_VOCABS)
def test_class_boundaries_through_oracle(name, require_vocab):
    bad = probe_mismatches(_vocab_path(name, require_vocab), boundary_code_points())
    assert not bad, f"{len(bad)} code points classified differently, e.g. {[hex(c) for c in bad[:10]]}"


@pytest.mark.oracle
@pytest.mark.nightly
@pytest.mark.parametrize("name", PROBE_VOCABS)
def test_every_code_point_against_llama_cpp(name, require_vocab):
    """Every code point's probe, our ids against llama.cpp's recorded digests (tests/tokenizer/code_points.py);
    a batch that differs is asked of llama.cpp live, code point by code point, to name them."""
    from tokenizer import Tokenizer

    path = _vocab_path(name, require_vocab)
    why = code_points.stale(name, path)
    assert why is None, f"{why}: re-record with `python -m tests.tokenizer.code_points {name}`"
    ours = Tokenizer.from_gguf(path)
    starts = code_points.differing(name, lambda data: ours.tokenize(data, **FLAGS), _separator(ours))
    chunks = [range(s, min(s + code_points.BATCH, uni.MAX_CODEPOINTS)) for s in starts]
    bad = probe_mismatches(path, [c for chunk in chunks for c in chunk]) if starts else []
    assert not starts, (f"{len(starts)} of {-(-uni.MAX_CODEPOINTS // code_points.BATCH)} calls "
                        f"differ from llama.cpp's record; live, {len(bad)} code points classified differently, "
                        f"e.g. {[hex(c) for c in bad[:10]]}" + ("" if bad else " (none: the record is stale, "
                        f"re-record with `python -m tests.tokenizer.code_points {name}`)"))


# --- lenient UTF-8 --------------------------------------------------------------------------

def _utf8_patterns() -> list[bytes]:
    """Every lead byte with 0-3 continuation bytes, minus those llama.cpp aborts on."""
    out = []
    for lead in range(0x80, 0x100):
        for tail in (b"", b"\x80", b"\x80\x80", b"\x80\x80\x80", b"\xbf\xbf\xbf", b"a", b"\x90\x80\x80"):
            data = bytes((lead,)) + tail
            try:
                uni.decode_lenient(data)
            except uni.UnencodableCodepoint:
                continue
            out.append(b"x" + data + b"y")
    return out


@pytest.mark.oracle
def test_lenient_utf8_matches_llama(require_vocab):
    from harness.oracle.llama import LlamaOracle
    from tokenizer import Tokenizer

    path = require_vocab("gpt-2")
    ours = Tokenizer.from_gguf(path)
    flags = {"add_special": False, "parse_special": False}
    with LlamaOracle(path) as oracle:
        bad = [d for d in _utf8_patterns() if ours.tokenize(d, **flags) != oracle.tokenize(d, **flags)]
    assert not bad, f"{len(bad)} byte patterns differ, e.g. {bad[:5]}"


@pytest.mark.parametrize("data", [
    pytest.param(b"\xf4\x90\x80\x80", id="f4-90"),
    pytest.param(b"\xf5\x80\x80\x80", id="f5"),
    pytest.param(b"\xf7\xbf\xbf\xbf", id="f7"),
])
def test_code_points_above_10ffff_are_refused(data):
    with pytest.raises(uni.UnencodableCodepoint, match="beyond U\\+10FFFF"):
        uni.decode_lenient(data)
