"""The protobuf wire reader (harness/files/protobuf.py) on hostile bytes: bounded work, one clear error."""

from __future__ import annotations

import time

import pytest

from harness.files import protobuf


def test_a_varint_longer_than_10_bytes_is_refused_at_once():
    data = b"\xff" * (256 << 10)  # quadratic before: 1 MB of 0xFF took 99 s
    began = time.monotonic()
    with pytest.raises(protobuf.ProtobufError, match="varint at byte 0 is longer than 10 bytes"):
        protobuf.fields(data)
    assert time.monotonic() - began < 1


@pytest.mark.parametrize("data, expected", [
    (b"\x08\x96\x01", [(1, 0, 150)]),
    (b"\x08" + b"\xff" * 9 + b"\x01", [(1, 0, (1 << 64) - 1)]),  # the longest varint there is: 10 bytes
    (b"\x12\x02hi", [(2, 2, b"hi")]),
])
def test_well_formed_fields_still_read(data, expected):
    assert protobuf.fields(data) == expected


def test_a_truncated_varint_names_its_offset():
    with pytest.raises(protobuf.ProtobufError, match="truncated varint at byte 4"):
        protobuf.fields(b"\x08\x96\x01\x08")
