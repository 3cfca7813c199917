"""One corpus case from an input, and an even spread of token ids: shared by corpus and boundaries."""

from __future__ import annotations


def make_case(case_id: str, data: bytes | str) -> dict:
    """`{"id", "text"}` when the input is valid UTF-8, else `{"id", "bytes": hex}`."""
    if isinstance(data, str):
        data = data.encode("utf-8", "surrogateescape")
    try:
        return {"id": case_id, "text": data.decode("utf-8")}
    except UnicodeDecodeError:
        return {"id": case_id, "bytes": data.hex()}


def spread(ids: list[int], k: int) -> list[int]:
    """Up to k ids: the first half by id, the rest evenly spaced over the remainder."""
    if len(ids) <= k:
        return ids
    head = ids[: k // 2]
    rest = ids[k // 2:]
    step = len(rest) / (k - len(head))
    return head + [rest[int(j * step)] for j in range(k - len(head))]
