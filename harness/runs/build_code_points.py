"""The every-code-point probes against another llama.cpp build (`python -m harness builds`).

The pinned llama.cpp's answers are recorded (`golden/code-points/`, `harness.golden.every_code_point`):
a digest of its ids per call of 2,048 probes. The other build is asked every call of a probe
vocabulary through the engine protocol (one flag pair, `add_special=false parse_special=true`, as
recorded), and each answer's digest is held to the record. A call the other build cannot be asked
is "not offered" (the surrogates' call is not UTF-8, and node-llama-cpp takes strings only), never
agreement; one it fails is an error of that call.

A call that differs is narrowed to its code points: the pinned llama.cpp is asked that call live
(a crash-isolated worker, `harness.oracle.session`), both sides' ids are cut at the separator's id
into the probes' ids, and the probes that differ are the call's differing code points. The first
`CASES` of them (spread over all) become cases of the build comparison's live run, where each is
judged as any case is: both sides' ids and pieces, its signature (`harness.runs.builds`).
"""

from __future__ import annotations

import base64
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import SetupError
from ..golden import every_code_point as cpts
from ..golden.files import GoldenError
from ..models.paths import resolve
from ..oracle.session import OracleCrash, OracleRefusal, OracleSession
from ..subjects.client import ChildFailure
from ..subjects.guard import EngineLoadError
from ..subjects.spec import EngineFactory

NARROWED = 16   # differing calls narrowed to their code points per vocabulary (each asks llama.cpp live)
CASES = 64      # differing code points per vocabulary made cases of the live run
FLAG = [cpts.FLAGS["add_special"], cpts.FLAGS["parse_special"]]

Log = Callable[[str], None]


def screen(factory: EngineFactory, name: str, *, records: Path, timeout: float, log: Log) -> dict[str, Any]:
    """One probe vocabulary: every call's digest from the other build held to the pinned record.

    The result: `status` (`compared`, or `not checked` with `why`), the counts of calls (`agree`,
    `differ`, `not_offered`, `errors`), the differing calls' first code points, the code points
    found differing (`code_points`, with how many calls were `narrowed`), and the first errors.
    """
    out: dict[str, Any] = {"vocabulary": cpts.short(name), "status": "not checked", "calls": cpts.CALLS,
                           "agree": 0, "differ": 0, "not_offered": 0, "errors": 0, "differing_calls": [],
                           "code_points": [], "narrowed": 0, "error_lines": []}
    try:
        record = cpts.read_record(name, records)
        path = resolve(cpts.short(name))
    except (GoldenError, SetupError) as exc:
        return {**out, "why": str(exc)}
    out["recorded_with"] = record["llama_cpp_python"]
    try:
        engine = factory(path)
    except (EngineLoadError, SetupError) as exc:
        return {**out, "why": f"the other build did not load {path.name}: {exc}"}
    try:
        return _screen(engine, record, path, out, timeout, log)
    finally:
        engine.close()


def _screen(engine: Any, record: dict[str, Any], path: Path, out: dict[str, Any], timeout: float,
            log: Log) -> dict[str, Any]:
    sep = record["separator"].encode("utf-8")
    if not hasattr(engine, "call"):
        return {**out, "why": "the other build is not a protocol engine (`call` is needed)"}
    sep_ids = _ask(engine, sep)
    if not isinstance(sep_ids, list) or len(sep_ids) != 1:
        return {**out, "why": f"the separator {record['separator']!r} is not one token in the other build: {sep_ids}"}
    differing: list[tuple[int, list[int]]] = []
    for index, (start, data) in enumerate(cpts.batches(sep)):
        if not _offered(engine, data):
            out["not_offered"] += 1
            continue
        got = _ask(engine, data)
        if isinstance(got, str):
            out["errors"] += 1
            if len(out["error_lines"]) < 5:
                out["error_lines"].append(f"U+{start:04X}: {got[:300]}")
        elif cpts.digest(got) == record["digests"][index]:
            out["agree"] += 1
        else:
            out["differ"] += 1
            differing.append((start, got))
    out["status"] = "compared"
    out["differing_calls"] = [f"U+{start:04X}" for start, _ in differing]
    if differing:
        log(f"{out['vocabulary']}: {len(differing)} call(s) differ; the first {NARROWED} narrowed to code points")
        _narrow(path, differing[:NARROWED], sep, sep_ids[0], out, timeout)
    return out


def _offered(engine: Any, data: bytes) -> bool:
    if "bytes_input" in engine.caps:
        return True
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _ask(engine: Any, data: bytes) -> list[int] | str:
    """The other build's ids for `data` under the recorded flag pair, or the line that says why not."""
    try:
        reply = engine.call({"op": "tokenize", "inputs": [base64.b64encode(data).decode("ascii")], "flags": [FLAG]})
    except ChildFailure as exc:
        return f"engine process: {exc}"
    results = reply.get("results") if reply.get("ok") else None
    item = results[0][0] if isinstance(results, list) and results and isinstance(results[0], list) \
        and results[0] else None
    ids = item.get("ids") if isinstance(item, dict) else None
    if not isinstance(ids, list) or not all(isinstance(i, int) and not isinstance(i, bool) for i in ids) \
            or len(ids) > 4 * len(data) + 8:
        error = reply.get("error") or (item.get("error") if isinstance(item, dict) else None) or reply
        return f"no ids: {str(error)[:300]}"
    return ids


def _narrow(path: Path, differing: list[tuple[int, list[int]]], sep: bytes, sep_id: int, out: dict[str, Any],
            timeout: float) -> None:
    """The code points of each differing call, from the pinned llama.cpp's live ids of it."""
    found: list[int] = []
    with OracleSession(path, timeout=timeout) as oracle:
        for start, got in differing:
            case = {"id": f"cpt-call-{start:06x}", "bytes": cpts.batch(start, sep).hex()}
            try:
                pinned = _pinned_ids(oracle.evaluate(case))
            except (OracleCrash, OracleRefusal) as exc:
                out["error_lines"].append(f"U+{start:04X}: the pinned llama.cpp did not answer: "
                                          f"{str(exc).strip()[:200]}")
                continue
            out["narrowed"] += 1
            points = cpts.differing_code_points(start, pinned, got, sep_id)
            if points is None:
                out["error_lines"].append(f"U+{start:04X}: the ids do not cut into probes at the separator")
                continue
            found += points
    out["code_points"] = found


def _pinned_ids(record: dict[str, Any]) -> list[int]:
    """The recorded flag pair's ids of an `evaluate` record."""
    for encoding in record["encode"]:
        if [encoding["add_special"], encoding["parse_special"]] == FLAG:
            return [int(t) for t in encoding["ids"]]
    raise ValueError("the record has no encoding of the recorded flag pair")


def cases(result: dict[str, Any], limit: int = CASES) -> list[dict[str, Any]]:
    """The live run's cases of a vocabulary's differing code points: at most `limit`, spread over all of
    them, each its probe (`cpt-XXXXXX`; a surrogate's probe as bytes)."""
    points = sorted(set(result.get("code_points") or []))
    if len(points) > limit:
        points = [points[i * len(points) // limit] for i in range(limit)]
    out = []
    for cpt in points:
        data = cpts.probe(cpt)
        try:
            out.append({"id": f"cpt-{cpt:06x}", "text": data.decode("utf-8")})
        except UnicodeDecodeError:
            out.append({"id": f"cpt-{cpt:06x}", "bytes": data.hex()})
    return out
