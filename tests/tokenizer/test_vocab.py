"""The vocabulary descriptor against llama.cpp's loader, on every shipped vocabulary.

What `tokenizer.vocab.load_vocab` settles (special ids, flags, attributes after
the by-text overrides, the end-of-generation set, each token's piece) is
compared with what llama.cpp reports for the same file through the oracle.
This covers every vocabulary type, not only SPM: the descriptor is shared.

The C++ library orders that llama.cpp inherits (`tokenizer.cpp_map_order`) are also
checked against the system's libstdc++ directly, when a C++ compiler exists.
"""

from __future__ import annotations

import random
import shutil
import struct
import subprocess

import pytest

from harness.models.shipped import SHIPPED
from tokenizer import cpp_map_order

GETTERS = ("n_tokens", "vocab_type", "pre", "bos", "eos", "eot", "eom", "unk", "sep", "nl", "pad",
           "mask", "fim_pre", "fim_suf", "fim_mid", "fim_pad", "fim_rep", "fim_sep",
           "add_bos", "add_eos", "add_sep")
FIELDS = ("token_attr", "token_text", "token_score", "is_eog", "is_control")
FLAGS = ("add_space_prefix", "ignore_merges", "clean_spaces", "remove_extra_whitespaces",
         "escape_whitespaces", "treat_whitespace_as_suffix")
VOCABS = [pytest.param(n, id=n) for n in SHIPPED]


def _first_diff(ids, ours, theirs):
    for i in ids:
        if ours(i) != theirs(i):
            return i, ours(i), theirs(i)
    return None


def _getter(ours, oracle, what):
    assert getattr(ours, what) == getattr(oracle, what)


def _flag(ours, oracle, what):
    assert getattr(ours.vocab, what) == oracle.internals()[what]


def _field(ours, oracle, what):
    assert _first_diff(range(ours.n_tokens), getattr(ours, what), getattr(oracle, what)) is None


def _piece(ours, oracle, what):
    special = what == "special"
    assert _first_diff(range(ours.n_tokens), lambda t: ours.token_to_piece(t, special=special),
                       lambda t: oracle.token_to_piece(t, special=special)) is None


CHECKS = ([("getter", g, _getter) for g in GETTERS] + [("flag", f, _flag) for f in FLAGS]
          + [("field", f, _field) for f in FIELDS] + [("piece", p, _piece) for p in ("plain", "special")])


@pytest.mark.oracle
@pytest.mark.vocab
@pytest.mark.parametrize(("kind", "what", "check"),
                         [pytest.param(k, w, c, id=f"{k}-{w}") for k, w, c in CHECKS])
@pytest.mark.parametrize("name", VOCABS)
def test_matches_llama_cpp(pair_for, name, kind, what, check):
    """One cell per vocabulary and per getter, flag, per-token field or piece mode."""
    ours, oracle = pair_for(name)
    check(ours, oracle, what)


# -- libstdc++ orders, checked against the real library -------------------------------

_CXX = r"""
#include <unordered_map>
#include <string>
#include <vector>
#include <algorithm>
#include <cstdio>
#include <cstdint>
int main(int, char ** argv) {
  FILE * f = fopen(argv[1], "rb"); std::vector<std::string> toks; uint32_t n;
  while (fread(&n, 4, 1, f) == 1) { std::string s(n, '\0'); if (n) fread(&s[0], 1, n, f); toks.push_back(s); }
  std::unordered_map<std::string, int> m;
  for (size_t i = 0; i < toks.size(); i++) m[toks[i]] = (int) i;
  for (auto & t : m) printf("%d ", t.second);
  printf("\n");
  std::vector<int> ids; for (size_t i = 0; i < toks.size(); i++) ids.push_back((int) i);
  std::sort(ids.begin(), ids.end(), [&](int a, int b) { return toks[a].size() > toks[b].size(); });
  for (int i : ids) printf("%d ", i);
  printf("\n");
}
"""


@pytest.fixture(scope="module")
def cxx_probe(tmp_path_factory):
    compiler = shutil.which("g++")
    if compiler is None:
        pytest.skip("no g++ to build the libstdc++ probe")
    d = tmp_path_factory.mktemp("cxx")
    (d / "probe.cpp").write_text(_CXX)
    subprocess.run([compiler, "-O1", "-o", str(d / "probe"), str(d / "probe.cpp")], check=True)
    return d


def _probe(d, texts: list[bytes]) -> tuple[list[int], list[int]]:
    (d / "in.bin").write_bytes(b"".join(struct.pack("<I", len(t)) + t for t in texts))
    out = subprocess.run([str(d / "probe"), str(d / "in.bin")], check=True,
                         capture_output=True).stdout.decode().splitlines()
    return [int(x) for x in out[0].split()], [int(x) for x in out[1].split()]


@pytest.mark.parametrize("n", [1, 2, 13, 14, 30, 1000, 5000])
def test_map_order_and_sort_match_libstdcxx(cxx_probe, n):
    rng = random.Random(n)
    texts = list(dict.fromkeys(bytes(rng.randrange(256) for _ in range(rng.randint(1, 24)))
                               for _ in range(n)))
    order, ranked = _probe(cxx_probe, texts)
    assert cpp_map_order.map_order(cpp_map_order.hash_all(texts)).tolist() == order
    assert cpp_map_order.std_sort(list(range(len(texts))), lambda a, b: len(texts[a]) > len(texts[b])) == ranked


def test_hash_matches_vectorised_hash():
    texts = [b"", b"a", b"abc", b"12345678", b"123456789", bytes(range(256))]
    assert [cpp_map_order.hash_bytes(t) for t in texts] == cpp_map_order.hash_all(texts).tolist()
