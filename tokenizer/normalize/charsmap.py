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
reach and checks every index the walk could read. (`tokenizer.normalize.ugm`
applies the map to whole inputs.)

Example:
    >>> cm = parse(blob, where="key 'tokenizer.ggml.precompiled_charsmap'")
    >>> cm.longest_match(b"\\xef\\xbc\\xa1bc", 0)   # FULLWIDTH A
    (b'A', 3)
"""

from __future__ import annotations

import struct
from array import array
from dataclasses import dataclass, field

import numpy as np

from ..errors import GGUFError

__all__ = [
    "REPLACEMENT",
    "Charsmap",
    "is_llama_valid",
    "lead_len",
    "lead_table",
    "llama_utf8_fix",
    "parse",
    "unit_at",
]

_LABELS = np.arange(1, 256, dtype=np.uint32)  # a NUL byte ends the walk, so labels are 1..255
_VALUE_MASK = (1 << 31) - 1
_LCHECK_MASK = (1 << 31) | 0xFF
_CHUNK = 4096           # frontier rows per (rows x 255) matrix
# the exploration's per-row data: (first character done, partial character, example key)
_Meta = tuple[bool, bytes, bytes]
_State = tuple[int, bool, bytes]  # (trie node, first character done, partial character)
_MAX_STATES = 1 << 20   # states visited before we stop exploring a (hostile) trie
_MAX_LEVELS = 1 << 12   # levels (key length in bytes) likewise

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

    `singles` maps each one-character key to its replacement and `followers`
    holds every character that occurs after the first one in a key. `plain` is
    False when some path does not spell whole, valid UTF-8 characters; such a
    map is served by `longest_match` alone.
    """

    units: array[int]  # uint32 units, compact; indexed by the walk
    replacements: bytes
    singles: dict[bytes, bytes]
    followers: frozenset[bytes]
    plain: bool
    valid_replacements: bool  # llama.cpp decodes every replacement without U+FFFD
    strict_replacements: bool  # every replacement is valid UTF-8 (Python's strict sense)

    def longest_match(self, data: bytes, pos: int) -> tuple[bytes, int] | None:
        """(replacement, bytes consumed) for the longest key at `data[pos:]`, or None.

        This is the exact walk llama.cpp does; `parse` guarantees it never
        reads out of range.
        """
        length, offset, _ = self.walk(data, pos)
        return (self.replacement(offset), length) if length else None

    def walk(self, data: bytes, pos: int) -> tuple[int, int, bool]:
        """(longest key length, its replacement offset, whether the walk ran off the end)."""
        units = self.units
        if not units:
            return 0, 0, False
        node = _base(units[0])
        best_len = best_off = 0
        end = len(data)
        i = pos
        while i < end:
            c = data[i]
            if c == 0:
                return best_len, best_off, False
            node ^= c
            unit = units[node]
            if unit & _LCHECK_MASK != c:
                return best_len, best_off, False
            node ^= _base(unit)
            if unit >> 8 & 1:
                best_len = i - pos + 1
                best_off = units[node] & _VALUE_MASK
            i += 1
        return best_len, best_off, True

    def replacement(self, offset: int) -> bytes:
        return self.replacements[offset:self.replacements.index(b"\0", offset)]


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
        units=array("I", units.astype(np.uint32).tobytes()),
        replacements=replacements,
        singles=found.singles,
        followers=frozenset(found.followers),
        plain=found.plain,
        valid_replacements=found.valid_replacements,
        strict_replacements=found.strict_replacements,
    )


@dataclass
class _Found:
    singles: dict[bytes, bytes] = field(default_factory=dict)
    followers: set[bytes] = field(default_factory=set)
    plain: bool = True
    valid_replacements: bool = True
    strict_replacements: bool = True


class _Explorer:
    """Check every index the walk could read, and learn what the fast paths need.

    From a node llama.cpp reads the unit at `node ^ c` for any byte c, and for
    a leaf the value unit at the child's base; each index must lie in the
    array and each value must point at a NUL-terminated string.

    First a vectorized pass over *all* units checks a sufficient condition
    (every labelled unit's children and value in range). Then the states the
    walk can reach are visited breadth first: (node, whether the first
    character is complete, the bytes of the character being read),
    deduplicated, so a DAWG (darts-clone shares suffixes) or even a cyclic
    array takes time linear in its size. The visit has a budget; past it the
    map is served by the exact walker alone (not `plain`), and if the whole-
    array check had failed, it is refused since it cannot be proven safe.
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
            f"{self.where}: after input bytes {key!r} {what} (llama.cpp does not check "
            f"this: it throws from llama_tokenize on such input, aborting the process, or "
            f"fails to load when the newline it tokenizes while loading gets there)")

    def run(self) -> _Found:
        if self.n == 0:
            return self.found
        safe = self.whole_array_safe()
        # frontier rows: node, and parallel Python lists (first_done, partial, example key)
        nodes = np.array([_base(int(self.units[0]))], dtype=np.int64)
        meta = [(False, b"", b"")]
        seen: set[_State] = set()
        levels = 0
        while len(nodes):
            levels += 1
            if levels > _MAX_LEVELS or len(seen) > _MAX_STATES:
                return self.over_budget(safe)
            nodes, meta = self.level(nodes, meta, seen)
        texts = [self.replacement(off) for off in self.offsets]
        self.found.valid_replacements = all(map(is_llama_valid, texts))
        self.found.strict_replacements = all(_strict(t) for t in texts)
        return self.found

    def whole_array_safe(self) -> bool:
        """Every unit that could be a child (a label 1..255, bit 31 clear) has its
        children's block and, for a leaf, a valid value inside the array."""
        u = self.units
        labelled = ((u & _LCHECK_MASK) >= 1) & ((u & _LCHECK_MASK) <= 0xFF)
        idx = np.flatnonzero(labelled)
        nxt = idx ^ ((u[idx] >> 10) << ((u[idx] & (1 << 9)) >> 6))
        if (_base(int(u[0])) | 0xFF) >= self.n or ((nxt | 0xFF) >= self.n).any():
            return False
        leaf = nxt[((u[idx] >> 8) & 1).astype(bool)]
        offsets = u[leaf] & _VALUE_MASK
        if (offsets >= len(self.repl)).any():
            return False
        return bool((self.next_nul[offsets] >= 0).all())

    def over_budget(self, safe: bool) -> _Found:
        if not safe:
            raise GGUFError(
                f"{self.where}: the trie is too large or deep to prove that llama.cpp's walk "
                f"stays inside it, and some unit points outside it; refused")
        self.found.plain = False
        self.found.valid_replacements = self.found.strict_replacements = False
        return self.found

    def level(self, nodes: np.ndarray, meta: list[_Meta], seen: set[_State]) -> tuple[np.ndarray, list[_Meta]]:
        out_nodes: list[np.ndarray] = []
        out_meta: list[_Meta] = []
        for lo in range(0, len(nodes), _CHUNK):
            more_nodes, more_meta = self.chunk(nodes[lo:lo + _CHUNK], meta[lo:lo + _CHUNK], seen)
            out_nodes.append(more_nodes)
            out_meta += more_meta
        return np.concatenate(out_nodes), out_meta

    def chunk(self, nodes: np.ndarray, meta: list[_Meta], seen: set[_State]) -> tuple[np.ndarray, list[_Meta]]:
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
        out_nodes: list[int] = []
        out_meta: list[_Meta] = []
        for k, (r, c, node) in enumerate(zip(rows.tolist(), cols.tolist(), nxt.tolist())):
            first_done, partial, key = meta[r]
            state = self.step(first_done, partial + bytes([c + 1]), offsets.get(k))
            if (node, state[0], state[1]) in seen:
                continue
            seen.add((node, state[0], state[1]))
            out_nodes.append(node)
            out_meta.append((state[0], state[1], key + bytes([c + 1])))
        return np.array(out_nodes, dtype=np.int64), out_meta

    def step(self, first_done: bool, partial: bytes, value_off: int | None) -> tuple[bool, bytes]:
        """Record what this edge says about the keys; the (first_done, partial) it leads to."""
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
        elif value_off is not None:
            self.found.singles[partial] = self.replacement(value_off)
        return True, b""

    def replacement(self, off: int) -> bytes:
        return self.repl[off:int(self.next_nul[off])]

    def check_leaves(self, nxt: np.ndarray, leaf: np.ndarray, rows: np.ndarray, cols: np.ndarray,
                     meta: list[_Meta]) -> dict[int, int]:
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


def _strict(text: bytes) -> bool:
    try:
        text.decode("utf-8")
        return True
    except UnicodeDecodeError:
        return False


def _strict_char(ch: bytes) -> bool:
    try:
        return len(ch.decode("utf-8")) == 1
    except UnicodeDecodeError:
        return False


# -- llama.cpp's UTF-8 decoding ---------------------------------------------------

REPLACEMENT = _REPLACEMENT = "\ufffd".encode()
_CONT = range(0x80, 0xC0)


def unit_at(data: bytes, i: int) -> int:
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


def llama_utf8_fix(data: bytes, replacement: bytes = _REPLACEMENT) -> bytes:
    """`data` with each byte llama.cpp cannot decode replaced by U+FFFD, one per byte."""
    try:
        data.decode("utf-8")
        return data
    except UnicodeDecodeError:
        pass
    out = bytearray()
    i, n = 0, len(data)
    while i < n:
        k = unit_at(data, i)
        if k:
            out += data[i:i + k]
            i += k
        else:
            out += replacement
            i += 1
    return bytes(out)


def is_llama_valid(data: bytes) -> bool:
    """Whether llama.cpp decodes all of `data` without a replacement."""
    i, n = 0, len(data)
    while i < n:
        k = unit_at(data, i)
        if not k:
            return False
        i += k
    return True
