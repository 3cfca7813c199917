"""Generate `tokenizer/data/unicode_data.json` from llama.cpp's own `unicode-data.cpp`.

Our character classes must agree with llama.cpp's tables, not with Python's
`unicodedata`, so the tables are lifted from the pinned llama.cpp source
rather than from the UCD.  Run:

    python tools/gen_unicode.py [path/to/unicode-data.cpp]

The default path is the copy `python -m harness fetch` extracts from the
pinned llama-cpp-python sdist.  The output is committed; the input is not.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from harness.models.shipped import LLAMA_CPP_PYTHON_VERSION, source_path

DEFAULT_SOURCE = source_path("unicode-data.cpp")
OUTPUT = Path(__file__).resolve().parent.parent / "tokenizer" / "data" / "unicode_data.json"

# C++ table name -> (json key, numbers per entry)
TABLES = {
    "unicode_ranges_flags": ("ranges_flags", 2),
    "unicode_set_whitespace": ("whitespace", 1),
    "unicode_map_lowercase": ("lowercase", 2),
    "unicode_map_uppercase": ("uppercase", 2),
    "unicode_ranges_nfd": ("ranges_nfd", 3),
}

_TABLE_RE = re.compile(r"\b(unicode_\w+)\s*=\s*\{(.*?)\n\};", re.S)
_HEX_RE = re.compile(r"0x[0-9A-Fa-f]+")


def parse(source: str) -> dict[str, list[int]]:
    """Every table of `TABLES`, flattened to a list of ints."""
    found: dict[str, list[int]] = {}
    for name, body in _TABLE_RE.findall(source):
        if name not in TABLES:
            continue
        key, width = TABLES[name]
        body = re.sub(r"//[^\n]*", "", body)
        numbers = [int(h, 16) for h in _HEX_RE.findall(body)]
        if len(numbers) % width:
            raise SystemExit(f"{name}: {len(numbers)} numbers is not a multiple of {width}")
        found[key] = numbers
    missing = {key for key, _ in TABLES.values()} - set(found)
    if missing:
        raise SystemExit(f"tables not found in source: {sorted(missing)}")
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("source", nargs="?", type=Path, default=DEFAULT_SOURCE)
    parser.add_argument("--output", type=Path, default=OUTPUT)
    args = parser.parse_args(argv)
    raw = args.source.read_bytes()
    tables = parse(raw.decode("utf-8"))
    doc = {
        "source": f"llama.cpp src/unicode-data.cpp as pinned by llama-cpp-python {LLAMA_CPP_PYTHON_VERSION}",
        "source_sha256": hashlib.sha256(raw).hexdigest(),
        **tables,
    }
    args.output.parent.mkdir(parents=True, exist_ok=True)
    args.output.write_text(json.dumps(doc, separators=(",", ":")) + "\n")
    print(f"wrote {args.output} ({args.output.stat().st_size} bytes)", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
