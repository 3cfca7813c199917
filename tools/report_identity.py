"""Are two runs' reports identical but for timings and the checkout they ran in?

    python tools/report_identity.py BEFORE/report.json AFTER/report.json [--root BEFORE_DIR AFTER_DIR]
    python tools/report_identity.py BEFORE/messages.json AFTER/messages.json --root /a /b

For a move-and-merge change (no behaviour change): run the main job, `compare --golden golden`
and the chat replay before and after, then hold each report.json (or messages.json) against its
twin. Removed before comparing: every "seconds" value and the "N s" / "N.N s" durations in text
lines. `--root A B` reads paths under checkout A and checkout B as the same. Prints the first
differences (as JSON paths) and exits 1 when there are any, 0 when the two are identical.
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

TIMING_KEYS = frozenset({"seconds"})
DURATION = re.compile(r"\b\d+(?:\.\d+)? ?(?:s|ms|min)\b")


def normalized(value: Any, roots: tuple[str, ...] = ()) -> Any:
    """`value` with timing fields dropped, durations in text blanked and checkout roots replaced."""
    if isinstance(value, dict):
        return {k: normalized(v, roots) for k, v in value.items() if k not in TIMING_KEYS}
    if isinstance(value, list):
        return [normalized(v, roots) for v in value]
    if isinstance(value, str):
        for root in roots:
            value = value.replace(root, "<checkout>")
        return DURATION.sub("<time>", value)
    return value


def differences(a: Any, b: Any, where: str = "$") -> Iterator[str]:
    """JSON paths where `a` and `b` differ, each with both values (shortened)."""
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b), key=str):
            if key not in b:
                yield f"{where}.{key}: only in the first"
            elif key not in a:
                yield f"{where}.{key}: only in the second"
            else:
                yield from differences(a[key], b[key], f"{where}.{key}")
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            yield f"{where}: {len(a)} items against {len(b)}"
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            yield from differences(x, y, f"{where}[{i}]")
    elif a != b:
        yield f"{where}: {json.dumps(a)[:120]} != {json.dumps(b)[:120]}"


def compare(first: Path, second: Path, roots: tuple[str, ...] = ()) -> list[str]:
    a = json.loads(first.read_text(encoding="utf-8"))
    b = json.loads(second.read_text(encoding="utf-8"))
    return list(differences(normalized(a, roots), normalized(b, roots)))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("first", type=Path)
    parser.add_argument("second", type=Path)
    parser.add_argument("--root", nargs=2, default=(), metavar=("FIRST_DIR", "SECOND_DIR"),
                        help="the checkouts the two runs were made in (their paths compare equal)")
    parser.add_argument("--show", type=int, default=20, help="differences printed (default 20)")
    args = parser.parse_args(argv)
    roots = tuple(sorted((str(Path(r).resolve()) for r in args.root), key=len, reverse=True))
    found = compare(args.first, args.second, roots)
    for line in found[:args.show]:
        print(line)
    print(f"{args.first} vs {args.second}: " + (f"{len(found)} difference(s)" if found else "identical"
                                                   " (timings and checkout paths aside)"))
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
