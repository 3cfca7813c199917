"""Golden files: llama.cpp's recorded behaviour for one vocabulary, as reviewable JSON.

Format and policy: docs/golden.md; schema: harness/data/golden.schema.json.
Golden files are written by `python -m harness record` and never edited by
hand; a changed golden is re-recorded from the oracle and its diff reviewed.

In memory a golden is a plain dict (`new_golden`): header keys, `"vocab"`
(`harness.golden.records.vocab_record`) and `"cases"`, each case exactly as
`harness.golden.records.evaluate_case` returns it, or a crash record
`{"id", "text"|"bytes", "crash": {...}}`.  On disk a case is packed
(`pack_case` / `unpack_case`) to keep files small:

- `encode` is a list of 4 in the fixed (add_special, parse_special) order
  FF, FT, TF, TT, and each `detokenize` a list of 4 in the fixed
  (remove_special, unparse_special) order, so the flags are not repeated;
- an output is a JSON string (valid UTF-8) or `{"bytes": hex}`;
- an `encode` item whose ids and detokenizations equal an earlier item's is
  written `{"as": k}`; ids that are an earlier item's ids with up to two ids
  added at either end (BOS, EOS, SEP) `{"of": k, "pre": [...], "post": [...]}`;
- an output equal to the case input is `{"as": "input"}`, one equal to an
  earlier output `{"as": [i, j]}` (encode i, detokenize j), and one that is
  the input with text around it (`"<s> " + input`) `{"wrap": [prefix, suffix]}`,
  or an earlier output with text around it `{"wrap": [...], "of": [i, j]}`.

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

from ..environment import project_root
from ..files import input_limits
from ..files.atomic import write_bytes_atomic

SCHEMA = "gguf-parity/golden"
SCHEMA_VERSION = 1
SCHEMA_PATH = Path(__file__).resolve().parents[1] / "data" / "golden.schema.json"
GOLDEN_DIR = project_root() / "golden"  # the checkout's; for an installed copy, the current directory's

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

FLAGS = ((False, False), (False, True), (True, False), (True, True))
MAX_WRAP = 2  # ids added around an earlier encoding's ids: BOS/EOS, CLS/SEP


def pack_case(case: dict) -> dict:
    """The on-disk form of a case (positional flags, repeats as references; see docs/golden.md)."""
    if "encode" not in case:
        return case
    if [(e["add_special"], e["parse_special"]) for e in case["encode"]] != list(FLAGS):
        raise GoldenError(f"case {case['id']!r}: encode items are not in (add_special, parse_special) order")
    input_field = _value(case)
    seen: dict[tuple, list[int]] = {}
    encode: list[dict] = []
    for i, item in enumerate(case["encode"]):
        earlier = _same_encode(case["encode"][:i], item)
        if earlier is not None:
            encode.append({"as": earlier})
            continue
        detok = []
        for j, out in enumerate(item["detokenize"]):
            value = _value(out)
            if value in seen:
                detok.append({"as": seen[value]})
                continue
            detok.append(_pack_output(value, input_field, seen))
            seen[value] = [i, j]
        encode.append({"ids": _pack_ids(item["ids"], case["encode"][:i]), "detokenize": detok})
    return {**case, "encode": encode}


def _pack_output(value: tuple[str, str], input_field: tuple[str, str], seen: dict):
    """An output as written: a reference, a wrap of the input or an earlier text, or itself."""
    if value == input_field:
        return {"as": "input"}
    kind, data = value
    if kind == "bytes":
        return {"bytes": data}
    bases = [(None, input_field[1])] if input_field[0] == "text" else []
    bases += [(ref, text) for (k, text), ref in seen.items() if k == "text"]
    best = None
    for ref, base in bases:
        start = data.find(base) if base else -1
        if start >= 0 and len(data) - len(base) < len(base) and (best is None or len(base) > len(best[1])):
            best = (ref, base, start)
    if best is None:
        return data
    ref, base, start = best
    wrap = {"wrap": [data[:start], data[start + len(base):]]}
    return wrap if ref is None else {**wrap, "of": ref}


def _pack_ids(ids: list[int], previous: list[dict]):
    """`ids`, or `{"of": k, "pre": [...], "post": [...]}` when they wrap encode k's ids."""
    for k, other in enumerate(previous):
        inner = other["ids"]
        for start in range(min(MAX_WRAP, len(ids) - len(inner)) + 1):
            tail = len(ids) - len(inner) - start
            if inner and tail <= MAX_WRAP and ids[start:start + len(inner)] == inner:
                return {"of": k, "pre": ids[:start], "post": ids[len(ids) - tail:]}
    return ids


def _value(record: dict) -> tuple[str, str]:
    return ("text", record["text"]) if "text" in record else ("bytes", record["bytes"])


def _same_encode(previous: list[dict], item: dict) -> int | None:
    for k, other in enumerate(previous):
        if other["ids"] == item["ids"] and other["detokenize"] == item["detokenize"]:
            return k
    return None


def unpack_case(case: dict) -> dict:
    """Inverse of `pack_case`: the full `evaluate_case` layout."""
    if "encode" not in case:
        return case
    input_field = _value(case)
    encode: list[dict] = []
    for (add_special, parse_special), item in zip(FLAGS, case["encode"]):
        head = {"add_special": add_special, "parse_special": parse_special}
        if "as" in item:
            source = encode[item["as"]]
            encode.append({**head, "ids": list(source["ids"]),
                           "detokenize": [dict(d) for d in source["detokenize"]]})
            continue
        detok: list[dict] = []
        for (remove_special, unparse_special), out in zip(FLAGS, item["detokenize"]):
            kind, value = _unpack_output(out, input_field, encode, detok)
            detok.append({"remove_special": remove_special, "unparse_special": unparse_special, kind: value})
        encode.append({**head, "ids": _unpack_ids(item["ids"], encode), "detokenize": detok})
    return {**case, "encode": encode}


def _unpack_ids(ids, encode: list[dict]) -> list[int]:
    if isinstance(ids, list):
        return ids
    return ids["pre"] + encode[ids["of"]]["ids"] + ids["post"]


def _unpack_output(out, input_field, encode: list[dict], current: list[dict]) -> tuple[str, str]:
    if isinstance(out, str):
        return "text", out
    if "wrap" in out:
        prefix, suffix = out["wrap"]
        if "of" in out:
            i, j = out["of"]
            base = _value(encode[i]["detokenize"][j] if i < len(encode) else current[j])[1]
        else:
            base = input_field[1]
        return "text", prefix + base + suffix
    ref = out.get("as")
    if ref is None:
        return "bytes", out["bytes"]
    if ref == "input":
        return input_field
    i, j = ref
    return _value(encode[i]["detokenize"][j] if i < len(encode) else current[j])


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
    return write_bytes_atomic(path, data, "golden file")


def load_golden(path: str | os.PathLike, *, check: bool = True) -> dict:
    """Read a golden file (validated unless `check=False`), cases unpacked to the full layout."""
    return unpack_golden(read_golden(path), path, check=check)


def read_golden(path: str | os.PathLike) -> dict:
    """A golden file as it is on disk: read (bounded) and parsed, its cases still packed, nothing checked.

    What `load_golden` does in one step, split so that a caller reading the file for its case ids
    (`harness.runs.replay.plan`) hands the same dict on to `unpack_golden`, and reads the file once.
    """
    path = Path(path)
    try:  # bounded: size, inflated size, nesting (harness.files.input_limits)
        raw = input_limits.read_capped(path, input_limits.MAX_GOLDEN_BYTES, "golden file")
        golden = input_limits.loads(raw, str(path))
    except OSError as exc:
        raise GoldenError(f"{path}: cannot read golden file ({exc.strerror or exc})") from None
    except ValueError as exc:
        raise GoldenError(f"cannot read golden file: {exc}") from None  # exc names the file
    if not isinstance(golden, dict):
        raise GoldenError(f"{path}: not a golden file (the top level is not an object)")
    return golden


def unpack_golden(golden: dict, path: str | os.PathLike, *, check: bool = True) -> dict:
    """A golden `read_golden` returned, validated unless `check=False`, its cases unpacked in place."""
    path = Path(path)
    if check:
        _validate_packed(golden, where=str(path))
    golden["cases"] = [_unpacked(c, i, path) for i, c in enumerate(golden.get("cases") or [])]
    return golden


def _unpacked(case, i: int, path: Path) -> dict:
    """`unpack_case`, with a dangling or malformed `as`/`of` reference named as a `GoldenError`."""
    try:
        return unpack_case(case)
    except (KeyError, IndexError, TypeError, AttributeError, ValueError) as exc:
        case_id = case.get("id") if isinstance(case, dict) else None
        raise GoldenError(f"{path}: case {i} ({case_id!r}): a reference or field that does not "
                          f"resolve ({type(exc).__name__}: {exc})") from None


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
    cases = golden.get("cases", [])
    if not isinstance(cases, list):
        raise GoldenError("golden: schema violation at cases: not a list")
    packed = []
    for i, case in enumerate(cases):
        try:
            packed.append(pack_case(case))
        except (KeyError, TypeError, IndexError, AttributeError, GoldenError) as exc:
            raise GoldenError(f"golden: schema violation at cases/{i}: cannot pack ({exc})") from None
    _validate_packed({**golden, "cases": packed}, where="golden")


def _validate_packed(golden: dict, *, where: str) -> None:
    import jsonschema

    validator = jsonschema.Draft202012Validator(schema())
    error = jsonschema.exceptions.best_match(validator.iter_errors(golden))
    if error is not None:
        place = "/".join(str(p) for p in error.absolute_path) or "(top level)"
        raise GoldenError(f"{where}: schema violation at {place}: {error.message[:300]}")


# -- comparing two recordings -------------------------------------------------------

def case_input_of(case: dict) -> dict:
    """Just the input of a golden case: `{"id", "text"|"bytes"}` (and a document's identity), ready to replay."""
    return {k: case[k] for k in ("id", "text", "bytes", "document") if k in case}


def diff_cases(old: dict, new: dict) -> list[str]:
    """Readable differences between two records of the same case (empty when equal)."""
    if old == new:
        return []
    if ("crash" in old) != ("crash" in new):
        was, now = (_crash_words(c) for c in (old, new))
        return [f"{was} -> {now}"]
    if "crash" in old:
        return [f"crash changed: {old['crash']} -> {new['crash']}"]
    if "digest" in old or "digest" in new:
        from .digest import diff_digests
        return diff_digests(old, new) or [_record_changed(old, new)]
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
    return out or [_record_changed(old, new)]


def _record_changed(old: dict, new: dict) -> str:
    """The last resort: the records differ, but not in ids or outputs; names the fields that do."""
    fields = sorted(k for k in set(old) | set(new) if old.get(k) != new.get(k))
    return f"record changed (fields: {', '.join(fields)})"


def _crash_words(case: dict) -> str:
    crash = case.get("crash")
    if not crash:
        return "ok"
    return f"oracle crash ({crash['kind']} {crash['signal'] or crash['exit']})"


def _shown(record: dict) -> str:
    return repr(record["text"]) if "text" in record else f"bytes {record['bytes']}"


def diff_goldens(old: dict, new: dict, *, model: bool = True) -> list[str]:
    """Every behavioural difference between two goldens of one GGUF file, one line each.

    The model's own lines (load, tokenizer metadata, vocabulary record) come
    first, then each of `old`'s cases in order. Header differences that are not behaviour (llama.cpp build,
    llama-cpp-python version) are not listed; compare `old["llama"]` yourself for those.
    `model=False` gives the cases' lines only (a `drift --shard` part that does not own the model).
    """
    out = _diff_model(old, new) if model else []
    new_cases = {c["id"]: c for c in new["cases"]}
    for case in old["cases"]:
        other = new_cases.get(case["id"])
        if other is None:
            out.append(f"case {case['id']}: missing from the new recording")
            continue
        out += [f"case {case['id']}: {line}" for line in diff_cases(case, other)]
    return out


def _diff_model(old: dict, new: dict) -> list[str]:
    """The model's own differences: load outcome, tokenizer metadata, vocabulary record."""
    from .records import diff_vocab

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
    return out
