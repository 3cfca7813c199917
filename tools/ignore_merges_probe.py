"""Measure what `ignore_merges` changes: the original tokenizer.json against llama.cpp on its GGUF.

A one-off measurement for docs/real-models.md, not the three-way check (that is
`--reference` on `run`). For every vocabulary entry of a BPE
`tokenizer.json` that the original (HF `tokenizers`, `ignore_merges` as the file
sets it) encodes as that one token, it compares the original's ids, the same
tokenizer with `ignore_merges` off, llama.cpp's ids on the GGUF, and ours:

    python tools/ignore_merges_probe.py ORIGINAL/tokenizer.json FILE.gguf

The `tokenizers` half runs in the converter venv (`harness.models.convert.ensure_venv`),
which has it; llama.cpp and our engine run here.
"""

from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

ORIGINAL_SIDE = r'''
import json, sys
from tokenizers import Tokenizer
data = json.load(open(sys.argv[1], encoding="utf-8"))
if data["model"].get("type") != "BPE":
    raise SystemExit("not a BPE tokenizer.json")
original = Tokenizer.from_str(json.dumps(data))
flag = data["model"].get("ignore_merges")
data["model"]["ignore_merges"] = False
plain = Tokenizer.from_str(json.dumps(data))
# GPT-2's byte-to-unicode table, to read a byte-level token back as text
bs = [*range(33, 127), *range(161, 173), *range(174, 256)]
cs, n = bs[:], 0
for b in range(256):
    if b not in bs:
        bs.append(b); cs.append(256 + n); n += 1
decode = {chr(c): b for b, c in zip(bs, cs)}
found = []
for token in data["model"]["vocab"]:
    try:
        text = bytes(decode[c] for c in token).decode("utf-8")
    except (KeyError, UnicodeDecodeError):
        continue
    ids = original.encode(text, add_special_tokens=False).ids
    if len(ids) == 1:
        without = plain.encode(text, add_special_tokens=False).ids
        if without != ids:
            found.append([text, ids, without])
json.dump({"vocab": len(data["model"]["vocab"]), "ignore_merges": flag, "found": found},
          open(sys.argv[2], "w", encoding="utf-8"))
'''


def original_side(tokenizer_json: Path) -> dict:
    from harness.models.convert import ensure_venv

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "found.json"
        subprocess.run([str(ensure_venv()), "-c", ORIGINAL_SIDE, str(tokenizer_json), str(out)], check=True)
        return json.loads(out.read_text(encoding="utf-8"))


def main(argv: list[str]) -> int:
    import llama_cpp

    from tokenizer import Tokenizer

    tokenizer_json, gguf = Path(argv[0]), Path(argv[1])
    side = original_side(tokenizer_json)
    found = side["found"]
    print(f"original: {side['vocab']} vocabulary entries, ignore_merges={side['ignore_merges']}")
    llm = llama_cpp.Llama(model_path=str(gguf), vocab_only=True, verbose=False)
    ours = Tokenizer.from_gguf(gguf)
    differ = as_plain = agree = 0
    for text, original, plain in found:
        theirs = llm.tokenize(text.encode(), add_bos=False, special=False)
        agree += ours.tokenize(text, add_special=False, parse_special=False) == theirs
        differ += theirs != original
        as_plain += theirs == plain
    print(f"{len(found)} vocabulary words are one token in the original but not with ignore_merges off; "
          f"llama.cpp differs from the original on {differ} (equals ignore_merges off on {as_plain}); "
          f"ours equals llama.cpp on {agree}")
    for text, original, _ in sorted(found, key=lambda f: (len(f[0]), f[0]))[:5]:
        theirs = llm.tokenize(text.encode(), add_bos=False, special=False)
        print(f"  {text!r}: original {original}, llama.cpp {theirs}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
