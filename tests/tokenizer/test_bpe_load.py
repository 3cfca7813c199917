"""The BPE load's numpy shortcuts give what the plain per-element code gives.

- The reader cuts a string array out of the file with numpy (`reader._joined`)
  and keeps its bytes joined by NUL (`GGUFFile.raw_strings`): the same bytes as
  joining the decoded strings and encoding them again, and the same strings.
- A vocabulary's merges stay one NUL-joined `bytes` (`vocab.Merges`); the engine
  finds the ids of every merge's left part, right part and result with packed
  keys (`engines.bpe_ids`), falling back to the dict: the same ids, the same
  numbering of texts that are no token, the same pair table as the dict lookups
  of a plain list of pairs, on every shipped BPE vocabulary and on made-up
  merges that hit the fallbacks (long parts, parts that are no token, an empty
  right part, tokens that share a key).
- `PairTable` keeps the first rank of a repeated key.

Speed is measured by bench/bench_tokenize.py, never here.
"""

from __future__ import annotations

import random

import numpy as np
import pytest

from harness.models import gguf_writer
from harness.models.shipped import vocab_path
from tests.tokenizer.test_bpe import BPE_SHIPPED
from tokenizer.engines import bpe, bpe_ids
from tokenizer.gguf import reader as gguf
from tokenizer.vocab import Merges, _split_merges, load_vocab


def _same_merger(merges: Merges, token_to_id: dict[bytes, int]) -> None:
    assert merges.joined is not None  # the numpy path is the one under test
    fast = bpe.Merger(merges, token_to_id, len(token_to_id))
    slow = bpe.Merger(tuple(merges.pairs), token_to_id, len(token_to_id))
    assert fast.extra == slow.extra and fast.extra_texts == slow.extra_texts
    assert fast.shift == slow.shift and fast.none == slow.none
    assert fast.result_array.tolist() == slow.result_array.tolist()
    assert fast.ranks == slow.ranks


@pytest.mark.parametrize("name", BPE_SHIPPED)
def test_shipped_merge_ids_are_the_dicts(name):
    path = vocab_path(name)
    if not path.is_file():
        pytest.skip(f"{path} is not installed (./quickstart.sh installs the shipped vocabularies)")
    f = gguf.read(path)
    for key, raw in f.raw_strings.items():
        assert raw == "\x00".join(f.metadata[key]).encode("utf-8", "surrogateescape"), key
    vocab = load_vocab(f)
    if not len(vocab.merges):
        pytest.skip("no merges")
    _same_merger(vocab.merges, dict(vocab.token_to_id))


def _made_up(seed: int) -> tuple[Merges, dict[bytes, int]]:
    rng = random.Random(seed)
    alphabet = [b"a", b"b", b"\xc4\xa0", b"\xe2\x96\x81", b"z", b"\xf0\x9f\xa6\x99", b"<", b">"]
    tokens = list(dict.fromkeys(b"".join(rng.choice(alphabet) for _ in range(rng.randint(1, 12)))
                                for _ in range(400)))
    lines = []
    for _ in range(600):
        kind = rng.random()
        if kind < 0.6:  # two tokens, often long (past 16 bytes)
            left, right = rng.choice(tokens), rng.choice(tokens)
        elif kind < 0.8:  # a part that is no token
            left, right = rng.choice(tokens), b"q" * rng.randint(1, 20)
        elif kind < 0.9:  # nothing after the space
            left, right = rng.choice(tokens), b""
        else:
            left, right = b"x" * rng.randint(1, 24), rng.choice(tokens)
        lines.append((left + b" " + right).decode("utf-8", "surrogateescape"))
    merges = _split_merges(lines)
    return merges, {t: i for i, t in enumerate(tokens)}


@pytest.mark.parametrize("seed", range(8))
def test_made_up_merge_ids_are_the_dicts(seed):
    merges, ids = _made_up(seed)
    _same_merger(merges, ids)


def test_tokens_that_share_a_key_still_get_their_ids(monkeypatch):
    """Every token packs to one key: the table holds the first, the dict answers the rest."""
    merges, ids = _made_up(99)
    real_pack = bpe_ids.pack

    def one_key(blob, starts, lengths):
        w0, w1, key = real_pack(blob, starts, lengths)
        return w0, w1, np.zeros_like(key)

    monkeypatch.setattr(bpe_ids, "pack", one_key)
    _same_merger(merges, ids)


def test_tokens_holding_a_nul_are_looked_up_in_the_dict():
    merges, ids = _made_up(5)
    ids[b"a\x00b"] = len(ids)
    assert not bpe_ids.TokenKeys(ids, bpe.PairTable).usable
    _same_merger(merges, ids)


@pytest.mark.parametrize("seed", range(5))
def test_pair_table_keeps_the_first_rank(seed):
    rng = np.random.default_rng(seed)
    keys = rng.integers(0, 3000, size=5000)  # many repeats, many collisions
    table = bpe.PairTable(keys, len(keys))
    first: dict[int, int] = {}
    for rank, key in enumerate(keys.tolist()):
        first.setdefault(key, rank)
    assert bpe.first_ranks(keys) == first  # the dict merge_ids reads (Merger.ranks)
    assert table.get(keys).tolist() == [first[k] for k in keys.tolist()]
    absent = np.array([3000, 5000, -1, -7])
    assert table.get(absent).tolist() == [len(keys)] * 4


@pytest.mark.parametrize("width", [4, 8])
@pytest.mark.parametrize("seed", range(6))
def test_joined_is_the_strings_joined_by_nul(seed, width):
    rng = random.Random(seed)
    strings = [bytes(rng.choice(b"ab \xc3\xa9\xff") for _ in range(rng.randint(0, 9))) for _ in range(50)]
    region, starts = b"", []
    for s in strings:
        region += len(s).to_bytes(width, "little")
        starts.append(len(region))
        region += s
    assert gguf._joined(region, np.array(starts), width) == b"\x00".join(strings)


@pytest.mark.parametrize("version", [1, 3])
def test_a_string_array_with_a_nul_inside_reads_one_by_one(version):
    data = gguf_writer.build({"k": ["a\x00b", "c", ""], "m": ["x", "y\udcff"], "e": []}, version=version)
    f = gguf.parse(data)
    assert f.metadata["k"] == ["a\x00b", "c", ""] and "k" not in f.raw_strings
    assert f.metadata["m"] == ["x", "y\udcff"] and f.raw_strings["m"] == b"x\x00y\xff"
    assert f.metadata["e"] == [] and "e" not in f.raw_strings


def test_merges_compare_and_index_as_their_pairs():
    merges = _split_merges(["a b", "ab c", "\u0120 t"])
    assert merges.joined is not None
    pairs = ((b"a", b"b"), (b"ab", b"c"), ("\u0120".encode(), b"t"))
    assert merges == pairs and tuple(merges) == pairs and merges[1] == pairs[1] and len(merges) == 3
    assert merges == Merges(pairs)


@pytest.mark.parametrize("seed", range(6))
def test_word_cutter_finds_the_same_crossing_merges(seed):
    merges, _ = _made_up(seed)
    marker = b"\xe2\x96\x81"
    fast = bpe.WordCutter(merges, marker)
    slow = bpe.WordCutter(tuple(merges.pairs), marker)
    assert fast.pattern is not None and fast.pattern.pattern == slow.pattern.pattern
    assert bpe_ids.crossing(merges.joined, len(merges), marker) == [
        (a, b) for a, b in merges.pairs if b.startswith(marker) and not a.endswith(marker)]


def _array_bytes(strings: list[bytes], width: int) -> bytes:
    return b"".join(len(s).to_bytes(width, "little") + s for s in strings)


@pytest.mark.parametrize("width", [4, 8])
@pytest.mark.parametrize("odd", ["none", "empty", "nul", "long", "cut", "zeros"])
def test_numpy_string_starts_are_the_walks(width, odd):
    """The numpy guess of where the strings start either agrees with the walk or gives up."""
    rng = random.Random(f"{width}{odd}")
    strings = [bytes(rng.choice(b"ab\xc3\xa9\xff ") for _ in range(rng.randint(1, 12))) for _ in range(3000)]
    at = rng.randrange(3000)
    if odd == "empty":
        strings[at] = b""
    elif odd == "nul":
        strings[at] = b"a\x00\x00\x00\x00\x00\x00\x00\x00b"
    elif odd == "long":
        strings[at] = b"x" * 70000
    elif odd == "zeros":
        strings[at] = b"\x01" + bytes(7) + b"\x01"
    data = b"HEAD" + _array_bytes(strings, width) + b"\x07TAIL"
    if odd == "cut":
        data = data[:len(data) // 2]
    len_type = gguf.ValueType.UINT64 if width == 8 else gguf.ValueType.UINT32
    walked = gguf._string_starts(data, 4, len(data), len(strings), len_type)
    found = gguf._string_starts_numpy(data, 4, len(data), len(strings), width)
    if odd == "none":
        assert found is not None
    if found is not None:
        assert walked is not None and found[0].tolist() == walked[:-1] and found[1] == walked[-1]
    if odd == "cut":
        assert found is None and walked is None


@pytest.mark.parametrize("version", [1, 3])
def test_lazy_strings_are_the_same_strings(version):
    meta = {"t": ["a", "\u0120b", "c\udcff", "d" * 30], "n": ["a\x00b", "c"], "one": ["x"]}
    data = gguf_writer.build(meta, version=version)
    eager, lazy = gguf.parse(data), gguf.parse(data, lazy_strings=True)
    assert isinstance(lazy.metadata["t"], gguf.StringArray) and not isinstance(eager.metadata["t"], gguf.StringArray)
    assert not isinstance(lazy.metadata["n"], gguf.StringArray)  # a NUL inside: decoded at once
    for key, value in meta.items():
        got = lazy.metadata[key]
        assert len(got) == len(value) and got == value and list(got) == value and got[1:] == value[1:]
        assert eager.metadata[key] == value
    assert lazy.raw_strings == eager.raw_strings


def test_from_gguf_reads_lazily_and_keeps_the_strings():
    from tokenizer import Tokenizer

    path = vocab_path("gpt-2")
    if not path.is_file():
        pytest.skip(f"{path} is not installed")
    tok = Tokenizer.from_gguf(path)
    merges = tok.vocab.metadata["tokenizer.ggml.merges"]
    assert isinstance(merges, gguf.StringArray)
    assert merges == gguf.read(path).metadata["tokenizer.ggml.merges"]
