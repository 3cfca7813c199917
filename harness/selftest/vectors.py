"""llama.cpp's own test vectors as a detector: `python -m harness.selftest.vectors NAME...`.

This is the check the field usually stops at (llama.cpp's tests/test-tokenizer-0):
each `.inp` input tokenized with add_special=False, parse_special=False and
compared with the ids of the sibling `.out`. Nothing else (no detokenizing, no
flags, no vocabulary comparison). Exit 0 when every vector of every named
vocabulary matches, 1 at the first vocabulary with a wrong or failing vector.
"""

from __future__ import annotations

import sys


def check(name: str) -> str | None:
    """None when every vector of `name` matches, else what went wrong first."""
    from tokenizer import Tokenizer

    from ..inputs.corpus import case_input, inp_expected
    from ..models.paths import resolve

    path = resolve(name)
    try:
        tok = Tokenizer.from_gguf(path)
    except Exception as exc:  # noqa: BLE001 - a mutant may break loading in any way
        return f"{name}: load failed: {type(exc).__name__}: {exc}"
    for case, expected in inp_expected(f"{path}.inp"):
        try:
            got = tok.tokenize(case_input(case), add_special=False, parse_special=False)
        except Exception as exc:  # noqa: BLE001
            return f"{name} {case['id']}: {type(exc).__name__}: {exc}"
        if got != expected:
            return f"{name} {case['id']}: ids differ from the .out line"
    return None


def main(argv: list[str]) -> int:
    for name in argv:
        problem = check(name)
        if problem is not None:
            print(f"vectors: {problem}")
            return 1
    print(f"vectors: all match ({', '.join(argv)})")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
