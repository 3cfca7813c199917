"""An engine whose load asks for 64 GiB: the reference child's memory limit must stop it (tests only)."""

from __future__ import annotations


def load(path):
    return bytearray(64 << 30)
