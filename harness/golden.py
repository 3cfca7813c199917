"""Golden files: llama.cpp's recorded behaviour for one vocabulary, as reviewable JSON.

Format and policy: docs/golden.md; schema: harness/data/golden.schema.json.
Golden files are written by `python -m harness record` and never edited by
hand; a changed golden is re-recorded from the oracle and its diff reviewed.

In memory a golden is a plain dict (`new_golden`): header keys, `"vocab"`
(`harness.evaluate.vocab_record`) and `"cases"`, each case exactly as
`harness.evaluate.evaluate_case` returns it, or a crash record
`{"id", "text"|"bytes", "crash": {...}}`.  On disk, repeats inside a case are
replaced by references to keep files small (`pack_case` / `unpack_case`):

- an `encode` item whose ids and detokenizations equal an earlier item's is
  written `{"add_special", "parse_special", "as": k}`;
- a detokenization equal to the case input is written `{"as": "input"}`, one
  equal to an earlier output `{"as": [i, j]}` (encode i, detokenize j).

`write_golden` is deterministic: sorted keys, no floats (scores are packed
binary), UTF-8, the header indented and one case per line, so the same
record gives byte-identical files and a diff shows one line per changed case.
"""

from __future__ import annotations

import gzip
import json
import os
from functools import cache
from pathlib import Path

SCHEMA = "gguf-parity/golden"
SCHEMA_VERSION = 1
SCHEMA_PATH = Path(__file__).resolve().parent / "data" / "golden.schema.json"
GOLDEN_DIR = Path(__file__).resolve().parent.parent / "golden"

# JSON leaves these unescaped, but they break lines in editors and in str.splitlines().
_LINE_BREAKS = {"\u0085": "\\u0085", "\u2028": "\\u2028", "\u2029": "\\u2029"}


class GoldenError(ValueError):
    """A golden file that cannot be read or does not match the schema; names the file and place."""


def new_golden(*, gguf: dict, llama: dict, tokenizer: dict, vocab: dict | None,
               cases: list[dict], load_error: dict | None = None) -> dict:
    """A golden dict with the schema header."""
    return {"schema": SCHEMA, "schema_version": SCHEMA_VERSION, "gguf": gguf, "llama": llama,
            "tokenizer": tokenizer, "vocab": vocab, "load_error": load_error, "cases": cases}


def golden_path(directory: str | os.PathLike, model_path: str | os.PathLike) -> Path:
    """`<dir>/<file stem>.json`: the golden for a GGUF is named after the file."""
    return Path(directory) / (Path(model_path).name.removesuffix(".gguf") + ".json")


# -- packing ------------------------------------------------------------------

def pack_case(case: dict) -> dict:
    """The on-disk form of a case: repeats replaced by references (see module docstring)."""
    if "encode" not in case:
        return case
    input_field = _value(case)
    seen_outputs: dict[tuple, list[int]] = {}
    encode = []
    for i, item in enumerate(case["encode"]):
        head = {"add_special": item["add_special"], "parse_special": item["parse_special"]}
        earlier = _same_encode(case["encode"][:i], item)
        if earlier is not None:
            encode.append({**head, "as": earlier})
            continue
        detok = []
        for j, out in enumerate(item["detokenize"]):
            flags = {"remove_special": out["remove_special"], "unparse_special": out["unparse_special"]}
            value = _value(out)
            if value == input_field:
                detok.append({**flags, "as": "input"})
            elif value in seen_outputs:
                detok.append({**flags, "as": seen_outputs[value]})
            else:
                seen_outputs[value] = [i, j]
                detok.append({**flags, value[0]: value[1]})
        encode.append({**head, "ids": item["ids"], "detokenize": detok})
    return {**case, "encode": encode}


def _value(record: dict) -> tuple[str, str]:
    return ("text", record["text"]) if "text" in record else ("bytes", record["bytes"])


def _same_encode(previous: list[dict], item: dict) -> int | None:
    for k, other in enumerate(previous):
        if other["ids"] == item["ids"] and _outputs(other) == _outputs(item):
            return k
    return None


def _outputs(item: dict) -> list:
    return [(d["remove_special"], d["unparse_special"], _value(d)) for d in item["detokenize"]]


def unpack_case(case: dict) -> dict:
    """Inverse of `pack_case`: the full `evaluate_case` layout."""
    if "encode" not in case:
        return case
    input_field = _value(case)
    encode: list[dict] = []
    for item in case["encode"]:
        head = {"add_special": item["add_special"], "parse_special": item["parse_special"]}
        if "as" in item:
            source = encode[item["as"]]
            encode.append({**head, "ids": list(source["ids"]),
                           "detokenize": [dict(d) for d in source["detokenize"]]})
            continue
        detok = []
        for out in item["detokenize"]:
            flags = {"remove_special": out["remove_special"], "unparse_special": out["unparse_special"]}
            ref = out.get("as")
            if ref is None:
                kind, value = _value(out)
            elif ref == "input":
                kind, value = input_field
            else:
                kind, value = _value(encode[ref[0]]["detokenize"][ref[1]] if ref[0] < len(encode)
                                     else detok[ref[1]])
            detok.append({**flags, kind: value})
        encode.append({**head, "ids": item["ids"], "detokenize": detok})
    return {**case, "encode": encode}


# -- writing and reading ------------------------------------------------------

def dumps_line(value) -> str:
    """Compact, sorted, UTF-8 JSON on one line."""
    text = json.dumps(value, sort_keys=True, ensure_ascii=False, separators=(",", ":"),
                      allow_nan=False)
    for char, escaped in _LINE_BREAKS.items():
        text = text.replace(char, escaped)
    return text


def dumps_golden(golden: dict) -> str:
    """The exact text `write_golden` writes."""
    header = {k: v for k, v in golden.items() if k != "cases"}
    head = json.dumps(header, sort_keys=True, ensure_ascii=False, indent=1, allow_nan=False)
    for char, escaped in _LINE_BREAKS.items():
        head = head.replace(char, escaped)
    cases = ",\n".join(dumps_line(pack_case(c)) for c in golden["cases"])
    body = f'"cases": [\n{cases}\n]' if cases else '"cases": []'
    return head[:-2] + ",\n " + body + "\n}\n"


def write_golden(path: str | os.PathLike, golden: dict) -> Path:
    """Validate and write `golden` to `path` (gzip, with mtime 0, if it ends in .gz)."""
    validate(golden)
    data = dumps_golden(golden).encode("utf-8")
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    if path.suffix == ".gz":
        data = gzip.compress(data, compresslevel=9, mtime=0)
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_bytes(data)
    os.replace(tmp, path)
    return path


def load_golden(path: str | os.PathLike, *, check: bool = True) -> dict:
    """Read a golden file (validated unless `check=False`), cases unpacked to the full layout."""
    path = Path(path)
    try:
        raw = path.read_bytes()
        if path.suffix == ".gz":
            raw = gzip.decompress(raw)
        golden = json.loads(raw.decode("utf-8"))
    except (OSError, ValueError, EOFError) as exc:
        raise GoldenError(f"{path}: cannot read golden file ({exc})") from None
    if check:
        _validate_packed(golden, where=str(path))
    golden["cases"] = [unpack_case(c) for c in golden.get("cases", [])]
    return golden


def golden_files(directory: str | os.PathLike) -> list[Path]:
    """The golden files in a directory, sorted by name."""
    directory = Path(directory)
    return sorted(p for p in directory.iterdir()
                  if p.name.endswith((".json", ".json.gz")) and p.is_file())


# -- validation -----------------------------------------------------------------

@cache
def schema() -> dict:
    """The JSON Schema of the on-disk (packed) golden layout."""
    return json.loads(SCHEMA_PATH.read_text(encoding="utf-8"))


def validate(golden: dict) -> None:
    """Raise `GoldenError` unless `golden` (in-memory, unpacked) matches the schema once packed."""
    packed = {**golden, "cases": [pack_case(c) for c in golden.get("cases", [])]}
    _validate_packed(packed, where="golden")


def _validate_packed(golden: dict, *, where: str) -> None:
    import jsonschema

    validator = jsonschema.Draft202012Validator(schema())
    error = jsonschema.exceptions.best_match(validator.iter_errors(golden))
    if error is not None:
        place = "/".join(str(p) for p in error.absolute_path) or "(top level)"
        raise GoldenError(f"{where}: schema violation at {place}: {error.message[:300]}")


# -- comparing two recordings -------------------------------------------------------

def case_input_of(case: dict) -> dict:
    """Just the input of a golden case: `{"id", "text"|"bytes"}`, ready to replay."""
    return {k: case[k] for k in ("id", "text", "bytes") if k in case}


def diff_cases(old: dict, new: dict) -> list[str]:
    """Readable differences between two records of the same case (empty when equal)."""
    if old == new:
        return []
    if ("crash" in old) != ("crash" in new):
        was, now = (_crash_words(c) for c in (old, new))
        return [f"{was} -> {now}"]
    if "crash" in old:
        return [f"crash changed: {old['crash']} -> {new['crash']}"]
    out = []
    for a, b in zip(old["encode"], new["encode"]):
        flags = f"add_special={a['add_special']} parse_special={a['parse_special']}"
        if a["ids"] != b["ids"]:
            out.append(f"[{flags}] ids {a['ids']} -> {b['ids']}")
            continue
        for da, db in zip(a["detokenize"], b["detokenize"]):
            if da != db:
                out.append(f"[{flags} remove_special={da['remove_special']} "
                           f"unparse_special={da['unparse_special']}] detokenize "
                           f"{_shown(da)} -> {_shown(db)}")
    return out or ["record changed"]


def _crash_words(case: dict) -> str:
    crash = case.get("crash")
    if not crash:
        return "ok"
    return f"oracle crash ({crash['kind']} {crash['signal'] or crash['exit']})"


def _shown(record: dict) -> str:
    return repr(record["text"]) if "text" in record else f"bytes {record['bytes']}"


def diff_goldens(old: dict, new: dict) -> list[str]:
    """Every behavioural difference between two goldens of one GGUF file, one line each.

    Header differences that are not behaviour (llama.cpp build, llama-cpp-python
    version) are not listed; compare `old["llama"]` yourself for those.
    """
    from .evaluate import diff_vocab

    out = []
    if old.get("load_error") != new.get("load_error"):
        out.append(f"load: {old.get('load_error')} -> {new.get('load_error')}")
    for key in sorted(set(old["tokenizer"]) | set(new["tokenizer"])):
        if old["tokenizer"].get(key) != new["tokenizer"].get(key):
            out.append(f"tokenizer.{key}: {old['tokenizer'].get(key)!r} -> {new['tokenizer'].get(key)!r}")
    if old.get("vocab") and new.get("vocab"):
        for d in diff_vocab(old["vocab"], new["vocab"]):
            where = f" token {d['token']}" if "token" in d else (f" tokens {d['block']}" if "block" in d else "")
            out.append(f"vocab {d['field']}{where}: {d['expected']!r} -> {d['got']!r}")
    elif bool(old.get("vocab")) != bool(new.get("vocab")):
        out.append("vocab record appeared or disappeared")
    new_cases = {c["id"]: c for c in new["cases"]}
    for case in old["cases"]:
        other = new_cases.get(case["id"])
        if other is None:
            out.append(f"case {case['id']}: missing from the new recording")
            continue
        out += [f"case {case['id']}: {line}" for line in diff_cases(case, other)]
    return out
