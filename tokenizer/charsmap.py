"""SentencePiece's `precompiled_charsmap`, parsed strictly and applied as llama.cpp applies it.

The blob (`tokenizer.ggml.precompiled_charsmap`) is a little-endian u32 `n`,
then `n` bytes of a XOR-compressed double array (darts-clone units), then
NUL-terminated replacement strings. A unit packs: LCHECK in bits 0-7 (bit 31
kept, so value units never match a label), has-leaf in bit 8, an offset in bits
10-30 shifted left by 8 when bit 9 is set, and for value units the replacement
offset in bits 0-30.

llama.cpp walks the array byte by byte from each input position and keeps the
*longest* key that matches (HF `tokenizers` does something else); a NUL byte
ends the walk. Where the blob is hostile, llama.cpp throws from inside
`llama_tokenize` (an index past the array, a replacement offset past the
strings, a string without its NUL), which takes the process down. We refuse
such a blob when it is loaded instead: `parse` visits every node any input can
reach and checks every index the walk could read.

Example:
    >>> cm = parse(blob, where="key 'tokenizer.ggml.precompiled_charsmap'")
    >>> cm.longest_match(b"\\xef\\xbc\\xa1bc", 0)   # FULLWIDTH A
    (b'A', 3)
"""

from __future__ import annotations

import re
import struct
from dataclasses import dataclass, field

import numpy as np

from .errors import GGUFError

__all__ = ["Charsmap", "PrefixNormalizer", "parse", "lead_len", "lead_table", "llama_utf8_fix",
           "is_llama_valid", "trie_pattern"]

_LABELS = np.arange(1, 256, dtype=np.uint32)  # a NUL byte ends the walk, so labels are 1..255
_VALUE_MASK = (1 << 31) - 1
_LCHECK_MASK = (1 << 31) | 0xFF

# unicode_len_utf8: the length llama.cpp assumes from a lead byte's top four bits.
_LEAD_LEN = bytes([1] * 0xC0 + [2] * 0x20 + [3] * 0x10 + [4] * 0x10)


def lead_table() -> bytes:
    """`lead_len` for all 256 byte values, as a 256-byte table."""
    return _LEAD_LEN


def lead_len(byte: int) -> int:
    """How many bytes llama.cpp steps over for a code point starting with `byte`."""
    return _LEAD_LEN[byte]


@dataclass(frozen=True)
class Charsmap:
    """A validated charsmap and what the fast normaliser needs to know about it.

    `singles` maps each one-character key to its replacement; `starters` are
    the first characters of longer keys and `followers` every character that
    occurs after the first one in a key. `plain` is False when some key is not
    a sequence of whole, valid UTF-8 characters (or the array is not a tree of
    valid characters at all); such a map is served by `longest_match` alone.
    """

    units: tuple[int, ...]
    replacements: bytes
    singles: dict[bytes, bytes]
    starters: frozenset[bytes]
    followers: frozenset[bytes]
    plain: bool
    valid_replacements: bool  # every replacement decodes without U+FFFD
    where: str = ""

    def longest_match(self, data: bytes, pos: int) -> tuple[bytes, int] | None:
        """(replacement, bytes consumed) for the longest key at `data[pos:]`, or None.

        This is the exact walk llama.cpp does; `parse` guarantees it never
        reads out of range.
        """
        units = self.units
        if not units:
            return None
        node = _base(units[0])
        best_len = 0
        best_off = 0
        end = len(data)
        i = pos
        while i < end:
            c = data[i]
            if c == 0:
                break
            node ^= c
            unit = units[node]
            if unit & _LCHECK_MASK != c:
                break
            node ^= _base(unit)
            if unit >> 8 & 1:
                best_len = i - pos + 1
                best_off = units[node] & _VALUE_MASK
            i += 1
        if not best_len:
            return None
        stop = self.replacements.index(b"\0", best_off)
        return self.replacements[best_off:stop], best_len


def _base(unit: int) -> int:
    return (unit >> 10) << ((unit & (1 << 9)) >> 6)


def parse(blob: bytes, *, where: str = "precompiled_charsmap") -> Charsmap:
    """Parse and validate a charsmap blob; `GGUFError` naming `where` and what is wrong."""
    if len(blob) < 4:
        raise GGUFError(
            f"{where}: {len(blob)} bytes, shorter than its 4-byte header "
            f"(llama.cpp refuses this too)")
    (size,) = struct.unpack_from("<I", blob, 0)
    if size + 4 >= len(blob):
        raise GGUFError(
            f"{where}: the header says the trie takes {size} bytes, but only "
            f"{len(blob) - 4} follow it and at least one byte of replacement strings "
            f"must remain (llama.cpp refuses this too)")
    units = np.frombuffer(blob, dtype="<u4", count=size // 4, offset=4).astype(np.int64)
    replacements = bytes(blob[4 + size:])
    found = _Explorer(units, replacements, where).run()
    return Charsmap(
        units=tuple(units.tolist()),
        replacements=replacements,
        singles=found.singles,
        starters=frozenset(found.starters),
        followers=frozenset(found.followers),
        plain=found.plain,
        valid_replacements=found.valid_replacements,
        where=where,
    )


@dataclass
class _Found:
    singles: dict[bytes, bytes] = field(default_factory=dict)
    starters: set[bytes] = field(default_factory=set)
    followers: set[bytes] = field(default_factory=set)
    plain: bool = True
    valid_replacements: bool = True


class _Explorer:
    """Visit every state the walk can reach, checking each index it could read.

    A state is (node, whether the first character is complete, the bytes of
    the character being read). From a node llama.cpp reads the unit at
    `node ^ c` for any byte c, and for a leaf the value unit at the child's
    base; each index must lie in the array and each value must point at a
    NUL-terminated string. States are deduplicated, so a DAWG (darts-clone
    shares suffixes) or even a cyclic array is visited in time linear in its
    size.
    """

    def __init__(self, units: np.ndarray, replacements: bytes, where: str):
        self.units = units
        self.n = len(units)
        self.repl = replacements
        self.where = where
        self.next_nul = _next_nul(replacements)
        self.found = _Found()
        self.offsets: set[int] = set()

    def fail(self, key: bytes, what: str) -> GGUFError:
        return GGUFError(
            f"{self.where}: after input bytes {key!r} {what} "
            f"(llama.cpp accepts this file and throws from llama_tokenize on such input)")

    def run(self) -> _Found:
        if self.n == 0:
            return self.found
        # frontier rows: node, and parallel Python lists (first_done, partial, example key)
        nodes = np.array([_base(int(self.units[0]))], dtype=np.int64)
        meta = [(False, b"", b"")]
        seen: set = set()
        while len(nodes):
            nodes, meta = self.level(nodes, meta, seen)
        self.found.valid_replacements = all(
            is_llama_valid(self.replacement(off)) for off in self.offsets)
        return self.found

    def level(self, nodes, meta, seen):
        idx = nodes[:, None] ^ _LABELS[None, :].astype(np.int64)
        bad = np.argwhere(idx >= self.n)
        if len(bad):
            r, c = bad[0]
            raise self.fail(meta[r][2] + bytes([c + 1]),
                            f"the trie index {int(idx[r, c])} lies past its {self.n} units")
        unit = self.units[idx]
        rows, cols = np.nonzero((unit & _LCHECK_MASK) == _LABELS[None, :])
        child = unit[rows, cols]
        nxt = idx[rows, cols] ^ ((child >> 10) << ((child & (1 << 9)) >> 6))
        leaf = ((child >> 8) & 1).astype(bool)
        offsets = self.check_leaves(nxt, leaf, rows, cols, meta)
        out_nodes, out_meta = [], []
        for k, (r, c, node) in enumerate(zip(rows.tolist(), cols.tolist(), nxt.tolist())):
            first_done, partial, key = meta[r]
            state = self.step(first_done, partial + bytes([c + 1]), offsets.get(k), node)
            if state is None or (node, state[0], state[1]) in seen:
                continue
            seen.add((node, state[0], state[1]))
            out_nodes.append(node)
            out_meta.append((state[0], state[1], key + bytes([c + 1])))
        return np.array(out_nodes, dtype=np.int64), out_meta

    def step(self, first_done: bool, partial: bytes, value_off, node):
        """Record what this edge says about the keys; the next state, or None to stop."""
        need = _LEAD_LEN[partial[0]]
        complete = len(partial) == need
        if value_off is not None and not (complete and _strict_char(partial)):
            self.found.plain = False  # a key ends inside, or on a malformed, character
        if not complete:
            return first_done, partial
        if not _strict_char(partial):
            self.found.plain = False
            return True, b""
        if first_done:
            self.found.followers.add(partial)
        else:
            self.found.starters.add(partial)
            if value_off is not None:
                self.found.singles[partial] = self.replacement(value_off)
        return True, b""

    def replacement(self, off: int) -> bytes:
        return self.repl[off:int(self.next_nul[off])]

    def check_leaves(self, nxt, leaf, rows, cols, meta) -> dict[int, int]:
        """Validate every leaf's value; {edge number: replacement offset}."""
        out = {}
        for k in np.flatnonzero(leaf).tolist():
            key = meta[int(rows[k])][2] + bytes([int(cols[k]) + 1])
            node = int(nxt[k])
            if node >= self.n:
                raise self.fail(key, f"the value unit {node} lies past its {self.n} units")
            off = int(self.units[node]) & _VALUE_MASK
            if off >= len(self.repl):
                raise self.fail(
                    key, f"the replacement offset {off} lies past the "
                    f"{len(self.repl)} bytes of replacement strings")
            if self.next_nul[off] < 0:
                raise self.fail(
                    key, f"the replacement string at offset {off} has no NUL terminator")
            out[k] = off
            self.offsets.add(off)
        return out


def _next_nul(data: bytes) -> np.ndarray:
    """For each offset, the index of the first NUL at or after it (-1 if none)."""
    arr = np.frombuffer(data, dtype=np.uint8)
    n = len(arr)
    pos = np.where(arr == 0, np.arange(n), n)
    nxt = np.minimum.accumulate(pos[::-1])[::-1]
    return np.where(nxt == n, -1, nxt)


def _strict_char(ch: bytes) -> bool:
    try:
        return len(ch.decode("utf-8")) == 1
    except UnicodeDecodeError:
        return False


# -- llama.cpp's UTF-8 decoding ---------------------------------------------------

_REPLACEMENT = "\ufffd".encode()
_CONT = range(0x80, 0xC0)


def _unit_at(data: bytes, i: int) -> int:
    """Length of the code point llama.cpp decodes at `data[i]`, or 0 if it throws.

    llama.cpp checks only the lead byte's pattern and that the continuation
    bytes are 10xxxxxx: overlong forms, surrogates and values up to 0x1FFFFF
    all decode.
    """
    b = data[i]
    if b < 0x80:
        return 1
    if b < 0xC0 or b >= 0xF8:
        return 0
    k = 2 if b < 0xE0 else 3 if b < 0xF0 else 4
    if i + k > len(data):
        return 0
    for j in range(i + 1, i + k):
        if data[j] not in _CONT:
            return 0
    return k


def llama_utf8_fix(data: bytes) -> bytes:
    """`data` with each byte llama.cpp cannot decode replaced by U+FFFD, one per byte."""
    try:
        data.decode("utf-8")
        return data
    except UnicodeDecodeError:
        pass
    out = bytearray()
    i, n = 0, len(data)
    while i < n:
        k = _unit_at(data, i)
        if k:
            out += data[i:i + k]
            i += k
        else:
            out += _REPLACEMENT
            i += 1
    return bytes(out)


def is_llama_valid(data: bytes) -> bool:
    """Whether llama.cpp decodes all of `data` without a replacement."""
    i, n = 0, len(data)
    while i < n:
        k = _unit_at(data, i)
        if not k:
            return False
        i += k
    return True


def trie_pattern(keys, *, every_node: bool = False) -> bytes:
    """A regex (bytes) matching the longest of `keys` (or, with `every_node`, the
    longest path through their trie, as llama.cpp's `naive_trie::get_longest_prefix`).

    Built as a prefix tree so each step has one live branch; greedy optional
    groups make the longest match win.
    """
    root: dict = {}
    for key in keys:
        node = root
        for b in key:
            node = node.setdefault(b, {})
        node[None] = True
    return _emit(root, every_node, root=True) or b"(?!)"


def _emit(node: dict, every_node: bool, *, root: bool = False) -> bytes:
    branches = []
    for b in sorted(k for k in node if k is not None):
        branches.append(re.escape(bytes([b])) + _emit(node[b], every_node))
    if not branches:
        return b""
    body = branches[0] if len(branches) == 1 else b"(?:" + b"|".join(branches) + b")"
    optional = not root and (every_node or None in node)
    return b"(?:" + body + b")?" if optional else body


# -- the prefix normaliser --------------------------------------------------------

class PrefixNormalizer:
    """llama.cpp's `normalize_prefix`, applied from the start of an input to its end.

    At each position, in this order: the longest path through the trie of
    user-defined tokens (a *path*, not a whole token: llama.cpp's
    `naive_trie::get_longest_prefix` quirk) is copied as is; else the longest
    charsmap key is replaced; else one code point is copied, or one byte that
    does not decode becomes U+FFFD.

    `__call__` returns the normalized bytes and whether every piece it copied
    decodes cleanly (so that code point starts are where a decoder finds them).

    The fast path runs one regex over the input to find the positions where
    something other than a plain copy can happen; it is used when no key and
    no user-defined token starts with a UTF-8 continuation byte (so the regex
    never stops inside a code point llama.cpp steps over) and the charsmap is
    `plain`. Otherwise every position is walked, exactly as llama.cpp does.
    """

    def __init__(self, cm: Charsmap | None, user_defined) -> None:
        self.cm = cm
        self.user_defined = [t for t in user_defined if t]
        self.ud_trie = _byte_trie(self.user_defined)
        self.regex = self._fast_regex()
        self.trusted_replacements = cm is None or cm.valid_replacements

    def _fast_regex(self):
        cm = self.cm
        if cm is not None and not cm.plain:
            return None
        if any(t[0] in _CONT for t in self.user_defined):
            return None
        parts = []
        if self.user_defined:
            parts.append(b"(?P<u>" + trie_pattern(self.user_defined, every_node=True) + b")")
        if cm is not None and cm.starters and cm.followers:
            parts.append(b"(?P<w>" + trie_pattern(cm.starters) + b")(?="
                         + trie_pattern(cm.followers) + b")")
        if cm is not None and cm.singles:
            parts.append(b"(?P<s>" + trie_pattern(cm.singles) + b")")
        return re.compile(b"|".join(parts), re.S) if parts else False

    def __call__(self, data: bytes) -> tuple[bytes, bool]:
        if self.regex is None:
            return self.walk(data), False
        if self.regex is False:
            return llama_utf8_fix(data), True
        return self.fast(data)

    def fast(self, data: bytes) -> tuple[bytes, bool]:
        cm, search = self.cm, self.regex.search
        out: list[bytes] = []
        trusted = self.trusted_replacements
        pos = 0
        while True:
            m = search(data, pos)
            if m is None:
                out.append(llama_utf8_fix(data[pos:]))
                return b"".join(out), trusted
            start = m.start()
            if start > pos:
                out.append(llama_utf8_fix(data[pos:start]))
            kind = m.lastgroup
            if kind == "s":
                out.append(cm.singles[m.group()])
                pos = m.end()
            elif kind == "u":
                piece = m.group()
                trusted = trusted and is_llama_valid(piece)
                out.append(piece)
                pos = m.end()
            else:
                found = cm.longest_match(data, start)
                if found is None:
                    out.append(m.group("w"))
                    pos = m.end("w")
                else:
                    out.append(found[0])
                    pos = start + found[1]

    def walk(self, data: bytes) -> bytes:
        """The position-by-position walk: slow, exact for any charsmap and any tokens."""
        out = bytearray()
        i, n = 0, len(data)
        while i < n:
            k = _longest_path(self.ud_trie, data, i)
            if k:
                out += data[i:i + k]
                i += k
                continue
            found = self.cm.longest_match(data, i) if self.cm is not None else None
            if found is not None:
                out += found[0]
                i += found[1]
                continue
            k = _unit_at(data, i)
            out += data[i:i + k] if k else _REPLACEMENT
            i += k or 1
        return bytes(out)


def _byte_trie(keys) -> dict:
    root: dict = {}
    for key in keys:
        node = root
        for b in key:
            node = node.setdefault(b, {})
    return root


def _longest_path(trie: dict, data: bytes, i: int) -> int:
    node, j, n = trie, i, len(data)
    while j < n:
        node = node.get(data[j])
        if node is None:
            break
        j += 1
    return j - i
