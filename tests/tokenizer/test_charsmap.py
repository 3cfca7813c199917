"""The precompiled charsmap: strict parsing, and llama.cpp's longest-match normalisation.

Hostile blobs must give a clear `GGUFError` naming the key (never an
IndexError, a hang or a crash). Which of them llama.cpp itself accepts is
pinned here too, in a subprocess, because llama.cpp aborts on them:

| blob                                   | llama.cpp                         | we            |
|----------------------------------------|-----------------------------------|---------------|
| shorter than its 4-byte header         | refuses at load                   | GGUFError     |
| header size leaves no replacement byte | refuses at load                   | GGUFError     |
| trie index past the array              | loads; aborts tokenizing the input| GGUFError     |
| value unit index past the array        | loads; aborts tokenizing the input| GGUFError     |
| replacement offset past the strings    | loads; aborts tokenizing the input| GGUFError     |
| replacement string without its NUL     | loads; aborts tokenizing the input| GGUFError     |

Normalisation results are compared with llama.cpp's tokenization of a tiny
vocabulary whose tokens are single bytes, so the ids spell out the normalized
text. Expected ids come only from the live oracle.
"""

from __future__ import annotations

import os
import struct
import subprocess
import sys
import textwrap

import numpy as np
import pytest

from tokenizer import GGUFError, Tokenizer
from tokenizer.attrs import TokenType
from tokenizer.gguf.constants import Keys
from tokenizer.normalize.charsmap import llama_utf8_fix, parse
from tokenizer.normalize.ugm import PrefixNormalizer

KEY = Keys.PRECOMPILED_CHARSMAP
LEAF, VALUE = 1 << 8, 1 << 31


# --- a tiny darts-clone builder -----------------------------------------------------------

def unit(base: int = 0, *, leaf: bool = False, label: int = 0) -> int:
    return (base << 10) | (LEAF if leaf else 0) | label


def blob_for(units: dict[int, int], size: int, replacements: bytes) -> bytes:
    """A charsmap blob: `size` units (zero unless given), then the replacement strings."""
    arr = np.zeros(size, dtype="<u4")
    for i, u in units.items():
        arr[i] = u
    return struct.pack("<I", 4 * size) + arr.tobytes() + replacements


def one_key(key: int, *, size: int = 0x300, value: int = 0, value_at: int = 0x200,
            replacements: bytes = b"Q\0") -> bytes:
    """A trie holding the single one-byte key `key` -> replacement at offset `value`.

    The root's children sit at 0x100 ^ c, the key's value unit (and the node
    after it) at `value_at`.
    """
    child = 0x100 ^ key
    units = {0: unit(0x100), child: unit(child ^ value_at, leaf=True, label=key)}
    if value_at < size:
        units[value_at] = VALUE | value
    return blob_for(units, size, replacements)


GOOD = one_key(ord("a"))

HOSTILE = [
    pytest.param(b"", "shorter than its 4-byte header", "refused", id="empty"),
    pytest.param(b"\x10\x00", "shorter than its 4-byte header", "refused", id="short-header"),
    pytest.param(struct.pack("<I", 8) + b"\0" * 8, "at least one byte of replacement",
                 "refused", id="no-replacement-bytes"),
    pytest.param(struct.pack("<I", 4000) + b"\0" * 16, "at least one byte of replacement",
                 "refused", id="size-past-end"),
    pytest.param(one_key(ord("a"), size=0x280), "lies past its 640 units", "crash",
                 id="trie-index-out-of-range"),
    pytest.param(one_key(ord("a"), value_at=0x2F0, size=0x2F0), "value unit", "crash",
                 id="value-unit-out-of-range"),
    pytest.param(one_key(ord("a"), value=500), "replacement offset 500", "crash",
                 id="replacement-offset-out-of-range"),
    pytest.param(one_key(ord("a"), replacements=b"QQ"), "no NUL terminator", "crash",
                 id="unterminated-replacement"),
]


@pytest.mark.parametrize("blob, message, llama", HOSTILE)
def test_parse_refuses_hostile_blob(blob, message, llama):
    with pytest.raises(GGUFError, match=message) as info:
        parse(blob, where=f"key {KEY!r}")
    assert KEY in str(info.value)


def test_hostile_error_names_the_input_that_reaches_it():
    with pytest.raises(GGUFError, match=r"after input bytes b'a\\x80'"):
        parse(one_key(ord("a"), size=0x280))


def test_good_blob_walks_like_llama():
    cm = parse(GOOD)
    assert cm.longest_match(b"xa", 1) == (b"Q", 1)
    assert cm.longest_match(b"b", 0) is None
    assert cm.singles == {b"a": b"Q"}
    assert cm.plain


def test_cyclic_trie_is_validated_and_walked():
    """Two labels leading back to the root: the walk must still terminate and stay in range."""
    units = {0: unit(0x100), 0x100 ^ ord("a"): unit((0x100 ^ ord("a")) ^ 0x100, leaf=True,
                                                      label=ord("a")), 0x100: VALUE | 0}
    cm = parse(blob_for(units, 0x200, b"Z\0"))
    assert cm.longest_match(b"aaab", 0) == (b"Z", 3)


def test_nul_stops_the_walk():
    cm = parse(GOOD)
    assert cm.longest_match(b"\0a", 0) is None


@pytest.mark.parametrize("data, expected", [
    pytest.param(b"abc", b"abc", id="ascii"),
    pytest.param(b"\xe2\x82A", "\ufffd\ufffdA".encode(), id="truncated-3-byte"),
    pytest.param(b"\xc1\x81", b"\xc1\x81", id="overlong-kept"),
    pytest.param(b"\xed\xa0\x80", b"\xed\xa0\x80", id="surrogate-kept"),
    pytest.param(b"\xf7\xbf\xbf\xbf", b"\xf7\xbf\xbf\xbf", id="above-10ffff-kept"),
    pytest.param(b"\xf8\x80", "\ufffd\ufffd".encode(), id="f8-lead"),
])
def test_llama_utf8_fix(data, expected):
    """llama.cpp's decoder: one U+FFFD per undecodable byte, lenient otherwise
    (these cases are also pinned against llama.cpp in test_ugm's differential run)."""
    assert llama_utf8_fix(data) == expected


DELETE_13 = one_key(0x13, replacements=b"\0")  # U+0013 -> "" (as nmt_nfkc drops controls)


@pytest.mark.parametrize("blob", [pytest.param(GOOD, id="a->Q"),
                                  pytest.param(DELETE_13, id="ctrl->empty")])
@pytest.mark.parametrize("ud", [pytest.param([], id="no-user-defined"),
                                pytest.param([b"<x>", "é".encode(), b"a"], id="user-defined")])
def test_fast_and_walking_normalizers_agree(blob, ud):
    """The fast paths (translate, candidate scan) must give the exact walk's bytes."""
    norm = PrefixNormalizer(parse(blob), ud)
    for text in (b"aaa", b"<x<x>ab", "éèê a\xcc\x81".encode(), b"\xc3(\xc3", b"", b"a\xff",
                 b"\xc6\x13\xb7\x99", b"\xe2\x13\x82\xac", b"\x13\x13a\x13",
                 "\uffff\ufffd".encode() + b"\xc3\x13"):
        assert norm(text)[0] == norm.walk(text), text


# --- llama.cpp on the same blobs (subprocess: it aborts) ------------------------------------

BYTES_VOCAB = ["<pad>", "</s>", "<unk>"] + [bytes([b]) for b in range(1, 256)]


def byte_vocab(blob: bytes | None, **extra) -> bytes:
    """A t5 vocabulary whose normal tokens are the 255 single bytes (ids 3..257)."""
    from harness.models import synth
    types = [TokenType.CONTROL, TokenType.CONTROL, TokenType.UNKNOWN] + [TokenType.NORMAL] * 255
    meta = {KEY: None if blob is None else np.frombuffer(blob, dtype=np.uint8).copy(),
            Keys.ADD_SPACE_PREFIX: False, Keys.REMOVE_EXTRA_WS: False} | extra
    return synth.custom(BYTES_VOCAB, model="t5", types=types, scores=[0.0] * len(BYTES_VOCAB),
                        extra=meta)


_PROBE = textwrap.dedent("""
    import sys
    from harness.oracle.llama import LlamaOracle
    try:
        o = LlamaOracle(sys.argv[1])
    except Exception as e:
        print("REFUSED"); sys.exit(0)
    print("LOADED", flush=True)
    o.tokenize(bytes.fromhex(sys.argv[2]), add_special=False, parse_special=False)
    print("SURVIVED", flush=True)
""")


@pytest.mark.parametrize("blob, message, llama", HOSTILE)
def test_tokenizer_refuses_hostile_blob(tmp_path, blob, message, llama):
    path = tmp_path / "hostile.gguf"
    path.write_bytes(byte_vocab(blob))
    with pytest.raises(GGUFError, match=KEY):
        Tokenizer.from_gguf(path)


@pytest.mark.oracle
@pytest.mark.parametrize("blob, message, llama", HOSTILE)
def test_what_llama_does_with_hostile_blob(tmp_path, blob, message, llama):
    path = tmp_path / "hostile.gguf"
    path.write_bytes(byte_vocab(blob))
    probe = subprocess.run([sys.executable, "-c", _PROBE, str(path), b"a\xc3\xa9".hex()],
                           capture_output=True, text=True, timeout=120,
                           env=os.environ | {"GGML_NO_BACKTRACE": "1"})
    lines = probe.stdout.splitlines()
    if llama == "refused":
        assert lines[:1] == ["REFUSED"], probe.stdout
    else:
        assert lines[:1] == ["LOADED"] and "SURVIVED" not in lines, probe.stdout
        assert probe.returncode != 0


@pytest.mark.oracle
@pytest.mark.parametrize("text", [
    pytest.param(b"a", id="key"), pytest.param(b"xay", id="key-inside"),
    pytest.param(b"\0a", id="nul-before-key"), pytest.param(b"\xe2\x82a", id="bad-utf8-then-key"),
    pytest.param(b"a\xcc\x81", id="key-then-mark"), pytest.param(b"", id="empty"),
])
def test_normalisation_matches_llama(tmp_path, text):
    from harness.oracle.llama import LlamaOracle
    path = tmp_path / "good.gguf"
    path.write_bytes(byte_vocab(GOOD))
    ours = Tokenizer.from_gguf(path)
    with LlamaOracle(path) as llama:
        assert ours.tokenize(text, add_special=False, parse_special=False) == \
            llama.tokenize(text, add_special=False, parse_special=False)


# --- random charsmaps through llama.cpp --------------------------------------------------------

ALPHABET = ["a", "b", "c", "x", " ", "\t", "\x01", "é", "e", "\u0301", "\u0308", "ｱ", "\u00a0",
            "\u2581", "\ufffd", "日", "\U0001f600", "\u1100", "\u1161"]


def build_trie(mapping: dict[bytes, bytes]) -> bytes:
    """A darts-clone style blob for `mapping`: each node's children in a 256-unit block
    of its own, its value in slot 0 of that block."""
    children: list[dict[int, int]] = [{}]
    value_at: dict[int, bytes] = {}
    for key, repl in mapping.items():
        node = 0
        for c in key:
            if c not in children[node]:
                children.append({})
                children[node][c] = len(children) - 1
            node = children[node][c]
        value_at[node] = repl
    blocks = len(children) + 1
    units = {0: unit(256)}
    strings = bytearray()
    for node, kids in enumerate(children):
        block = 256 * (node + 1)
        if node in value_at:
            units[block] = VALUE | len(strings)
            strings += value_at[node] + b"\0"
        for c, child in kids.items():
            # the walk goes from unit (block ^ c) to (block ^ c) ^ base: the child's block
            units[block ^ c] = unit((block ^ c) ^ 256 * (child + 1), leaf=child in value_at, label=c)
    return blob_for(units, 256 * blocks, bytes(strings) or b"\0")


def alphabet_vocab(blob: bytes, *, prefix: bool, merge: bool, user_defined=()) -> bytes:
    """Every ASCII byte and alphabet character is a token of equal score, so the ids
    spell out llama.cpp's normalized text; `user_defined` tokens are added."""
    from harness.models import synth
    chars = sorted({chr(b) for b in range(1, 0x80)} | set(ALPHABET))
    extra = sorted(set(user_defined) - set(chars))
    tokens = ["<pad>", "</s>", "<unk>"] + chars + extra
    types = ([TokenType.CONTROL, TokenType.CONTROL, TokenType.UNKNOWN] + [TokenType.NORMAL] * len(chars)
             + [TokenType.USER_DEFINED] * len(extra))
    return synth.custom(tokens, model="t5", types=types, scores=[-1.0] * len(tokens), extra={
        KEY: np.frombuffer(blob, dtype=np.uint8).copy(),
        Keys.ADD_SPACE_PREFIX: prefix, Keys.REMOVE_EXTRA_WS: merge})


RAW = [b"\xc3", b"\xe2\x96", b"\xff", b"\x80"]


def random_charsmap(rng) -> dict[bytes, bytes]:
    """Keys and replacements over the alphabet; now and then a raw, undecodable byte string
    (which sends our normaliser down its slower exact paths)."""
    def word(lo, hi):
        return b"".join(rng.choice(RAW) if rng.random() < raw else rng.choice(ALPHABET).encode()
                        for _ in range(rng.randint(lo, hi)))
    raw = rng.choice([0.0, 0.0, 0.05])
    return {word(1, 3): word(0, 3) for _ in range(rng.randint(1, 25))} | {b"x": b""}


def random_text(rng) -> bytes:
    parts = [rng.choice(ALPHABET).encode() for _ in range(rng.randint(0, 12))]
    for _ in range(rng.choice([0, 0, 1, 3])):
        parts.insert(rng.randint(0, len(parts)), rng.choice(RAW + ["\uffff".encode()]))
    return b"".join(parts)


def charsmap_differential(tmp_path, seed: int, inputs: int) -> list:
    import random

    from harness.oracle.llama import LlamaOracle
    rng = random.Random(seed)
    mapping = random_charsmap(rng)
    user = ["".join(rng.choice(ALPHABET) for _ in range(rng.randint(2, 3)))
            for _ in range(rng.choice([0, 0, 3]))]
    path = tmp_path / f"random-{seed}.gguf"
    path.write_bytes(alphabet_vocab(build_trie(mapping), prefix=rng.random() < 0.5,
                                    merge=rng.random() < 0.5, user_defined=user))
    ours = Tokenizer.from_gguf(path)
    texts = [random_text(rng) for _ in range(inputs)] + list(mapping)
    with LlamaOracle(path) as llama:
        return [(mapping, t) for t in texts
                if ours.tokenize(t, add_special=False, parse_special=False)
                != llama.tokenize(t, add_special=False, parse_special=False)][:3]


def test_built_trie_walks_to_its_mapping():
    mapping = {b"a": b"Q", b"ab": b"", "e\u0301".encode(): "é".encode(), b"\t": b" "}
    cm = parse(build_trie(mapping))
    for key, repl in mapping.items():
        assert cm.longest_match(key + b"z", 0) == (repl, len(key))


@pytest.mark.oracle
@pytest.mark.parametrize("seed", [pytest.param(s, id=f"seed-{s}") for s in range(6)])
def test_random_charsmap_matches_llama(tmp_path, seed):
    assert charsmap_differential(tmp_path, seed, 40) == []


@pytest.mark.oracle
@pytest.mark.nightly
def test_random_charsmaps_matches_llama_nightly(tmp_path):
    failures = [f for seed in range(100, 160) for f in charsmap_differential(tmp_path, seed, 100)]
    assert failures == []


# --- tries too deep to explore ------------------------------------------------------------------

@pytest.mark.nightly  # one of the longest end-to-end runs: the nightly runs it (README "Tests")
def test_deep_trie_is_walked_exactly_without_exploring_it_all():
    """A 5,000-byte key: past the exploration budget the map stays usable (and exact),
    served by the walker alone."""
    import time
    deep = {b"a" * 5000: b"Z", b"b": b"Y"}
    start = time.perf_counter()
    cm = parse(build_trie(deep))
    assert time.perf_counter() - start < 20
    assert not cm.plain
    norm = PrefixNormalizer(cm, [])
    for text in (b"a" * 5000 + b"b", b"a" * 4999 + b"b", b"ba"):
        assert norm(text)[0] == norm.walk(text)
    assert norm(b"a" * 5000)[0] == b"Z"


def test_deep_trie_with_a_bad_unit_is_refused():
    """Unprovable: a unit somewhere points outside, and the trie is too deep to show
    that no input reaches it."""
    blob = bytearray(build_trie({b"a" * 5000: b"Z"}))
    size = struct.unpack_from("<I", blob, 0)[0] // 4
    spare = 4 + 4 * (size - 3)  # an unused unit in the last block: give it a label and a far base
    far = (1 << 13) << 10 | (1 << 9) | ord("q")  # base (1 << 13) << 8, past the array
    struct.pack_into("<I", blob, spare, far)
    with pytest.raises(GGUFError, match="too large or deep"):
        parse(bytes(blob))
