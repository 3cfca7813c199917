"""A difference's signature: one bug is one signature through any case, flag pair or run; another bug is another.

The id lists here are built by hand on a toy vocabulary, so that each test says exactly which
difference it makes; tests/runs/test_differences.py holds the same properties on llama.cpp's ids.
"""

from __future__ import annotations

import pytest

from harness.compare.diff import TokenTable
from harness.compare.signature import detok_signature, ids_signature, masked, shape

PIECES = [b"<s>", b"a", b"b", b"\t", b"\n", b"0", b"4", b"8", b"04", b"048", b"48", b"ab", b" ", b"\xc2\x85",
          b"1", b"2", b"12", b"123", b"\xe2\x80", b"\x94", b"\xe2\x80\x94", b"c", b"\xc2", b"3",
          b"a\xc2\x85", b"b\xc2\x85"]
TABLE = TokenTable(texts=PIECES, pieces=PIECES, attrs=[0] * len(PIECES), edge_ids=frozenset({0}))
ID = {p: i for i, p in enumerate(PIECES)}


def ids(*pieces: bytes) -> list[int]:
    return [ID[p] for p in pieces]


def sig(expected, got):
    return ids_signature("toy", "engine~llama.cpp", expected, got, TABLE, names=("llama.cpp", "engine"))


def test_a_wrong_id_is_one_signature_in_every_context():
    contexts = [((b"a", b"\t", b"b"), (b"a", b"\n", b"b")),
                ((b"\t",), (b"\n",)),
                ((b"<s>", b"ab", b"\t", b"0"), (b"<s>", b"ab", b"\n", b"0")),
                ((b"048", b"\t", b"\t"), (b"048", b"\n", b"\t"))]
    found = {sig(ids(*e), ids(*g)) for e, g in contexts}
    assert len(found) == 1
    [one] = found
    assert (one.kind, one.parts) == ("bytes", ("⇥", "↵"))


def test_a_split_is_named_by_the_boundary_whatever_the_digits():
    three = sig(ids(b"a", b"048"), ids(b"a", b"04", b"8"))
    four = sig(ids(b"c", b"123"), ids(b"c", b"12", b"3"))
    assert three.kind == "split" and three.parts == ("N|N", "engine only")
    assert three == four and three.id == four.id


def test_the_side_that_has_the_boundary_is_part_of_it():
    assert sig(ids(b"048"), ids(b"04", b"8")) != sig(ids(b"04", b"8"), ids(b"048"))


def test_an_unusual_character_names_the_split_wherever_it_stands():
    after_a = sig(ids(b"a", b"\xc2\x85"), ids(b"a\xc2\x85"))
    after_b = sig(ids(b"b", b"\xc2\x85", b"c"), ids(b"b\xc2\x85", b"c"))
    assert after_a == after_b and after_a.parts == ("\\u{0085}", "llama.cpp only")


def test_bos_placement_is_an_edge_difference():
    found = sig(ids(b"<s>", b"a"), ids(b"a"))
    assert found.kind == "edges"


def test_a_boundary_inside_a_character_is_named_as_such():
    found = sig(ids(b"\xe2\x80\x94"), ids(b"\xe2\x80", b"\x94"))
    assert found.kind == "split" and found.parts[0] == "inside {Pd}"


def test_signatures_are_stable_digests():
    found = sig(ids(b"a", b"\t"), ids(b"a", b"\n"))
    assert found.id == sig(ids(b"\t"), ids(b"\n")).id
    assert found.id.startswith("d-") and len(found.id) == 14
    assert found.as_dict()["title"] == "ids: bytes ⇥ / ↵"


@pytest.mark.parametrize(("data", "shown"), [
    (b"048", "N+"), (b"  a\t", "␣+L⇥"), ("é\u0085—😀".encode(), "L\\u{0085}{Pd}{So}"), (b"\xe2\x80", "\\xE2\\x80"),
])
def test_shape(data, shown):
    assert shape(data) == shown


def test_detokenize_signature_names_where_outputs_part():
    one = detok_signature("toy", "s", b"a ?", b"a?")
    two = detok_signature("toy", "s", b"what ?", b"what?")
    assert one == two and one.parts == ("␣", "?")
    assert detok_signature("toy", "s", b"same", b"same") is None
    cut = detok_signature("toy", "s", "x—".encode(), "x–".encode())
    assert cut.parts == ("{Pd}", "{Pd}")


def test_error_messages_are_masked():
    assert masked("KeyError: 'scores' at token 12\nTraceback") == "KeyError: '…' at token #"


def test_a_dropped_last_token_is_one_signature_whatever_the_token():
    found = {sig(ids(b"a", b"\t"), ids(b"a")), sig(ids(b"<s>", b"048", b"b"), ids(b"<s>", b"048")),
             sig(ids(b"ab", b"12"), ids(b"ab"))}
    assert len(found) == 1 and next(iter(found)).parts == ("llama.cpp only", "1 token at the end")
