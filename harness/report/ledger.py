"""The nightly's ledger of differences: one line per signature ever seen, folded night by night.

A nightly's merged report names its differences by signature (`harness.report.differences`); the
ledger remembers them across nights. `ledger.jsonl` is JSON Lines: a header line, then one record
per signature, in the order first seen:

    {"kind": "gguf-parity ledger", "version": 1, "last_night": "2026-12-03", "nights": 3}
    {"id": "d-3f9a0c12b4e1", "title": "ids: bytes ⇥ / ↵", "model": "llama-bpe", "list": "mismatches",
     "first_seen": "2026-12-01", "last_seen": "2026-12-03", "nights": 3, "fixed_on": null, "reopened": 0,
     "cases": 12, "fuzz": false, "reproduce": "python -m harness run ... --report reports/reproduce/..."}

`fold(ledger, night, reports)` adds one night's reports: a signature they show is seen that night
(first seen, last seen, one more night, its title, case count and reproduce line from the newest
representative; a fixed one seen again is open again, `reopened` counts it). An open signature they
do not show is fixed that night only when that night *checked its model* the way it was found: the
model is in a report and not "not checked" there, with a reference (`run --reference`) for a
third-side finding, and its report lists every difference it has (report.json cuts the list per
model, and a merged report counts only what its parts listed: a model with more than it lists, or
with as many as report.json keeps, fixes nothing). A model not checked leaves its differences
open, whatever they were. A night earlier than the ledger's last is refused; the same night folded
again changes no count (the nightly's merge job run twice, or its parts folded one by one).

The ledger is data from the last night's artifact: `read` takes a regular file of at most
`MAX_LEDGER_BYTES` and checks every field (a FIFO, a huge file, bad JSON or a bad field is one
line naming the file and line, exit 2); `write` replaces it atomically (`harness.files.atomic`),
and the command holds a lock beside it for the whole read-fold-write, so two folds at once lose
nothing. `ledger.html` (`page`) shows what is new tonight, what is open and since when, and what
was fixed tonight; `index.html` (`index_page`) links every page of the night's folder.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path
from typing import Any

from ..compare.verdict import not_checked
from ..errors import SetupError
from ..files import jsonl
from .differences import DIFFERENCES_CAP

KIND = "gguf-parity ledger"
VERSION = 1
FILE = "ledger.jsonl"
PAGE = "ledger.html"
INDEX = "index.html"
MAX_LEDGER_BYTES = 64 << 20   # one line per signature ever seen: some 300 bytes each
MAX_LINE_BYTES = 64 << 10
MAX_TEXT = 2000               # characters of a title or a reproduce line kept
MAX_COUNT = 10 ** 9
PAGE_ROWS = 200               # rows per table of ledger.html (the ledger holds them all)
INDEX_PAGES = 100             # pages linked from index.html
RECORD_KEYS = ("id", "title", "model", "list", "first_seen", "last_seen", "nights", "fixed_on", "reopened",
               "cases", "fuzz", "reproduce")
_ID = re.compile(r"d-[0-9a-f]{12}")
_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")


@dataclass
class Ledger:
    """The ledger in memory: the last night folded, how many nights, and the records by signature id."""

    last_night: str | None = None
    nights: int = 0
    records: dict[str, dict[str, Any]] = field(default_factory=dict)


@dataclass
class Tonight:
    """What one fold did: the night, the signatures seen, new, fixed and reopened, and the models it
    checked, not checked, or checked with their list of differences cut."""

    night: str
    seen: list[str] = field(default_factory=list)
    new: list[str] = field(default_factory=list)
    fixed: list[str] = field(default_factory=list)
    reopened: list[str] = field(default_factory=list)
    checked: set[str] = field(default_factory=set)
    referenced: set[str] = field(default_factory=set)               # checked with a reference too
    unchecked: dict[str, str] = field(default_factory=dict)
    cut: dict[str, tuple[int, int]] = field(default_factory=dict)   # model -> (listed, counted)


# --- the night ------------------------------------------------------------------------------------------

def night_of(text: str) -> str:
    """`text` as a night (`YYYY-MM-DD`, a real date); `SetupError` else."""
    if not _DATE.fullmatch(text):
        raise SetupError(f"--night {text!r}: not a date (YYYY-MM-DD)")
    try:
        date.fromisoformat(text)
    except ValueError:
        raise SetupError(f"--night {text}: no such date") from None
    return text


# --- reading and writing ---------------------------------------------------------------------------------

def read(path: str | os.PathLike[str]) -> Ledger:
    """The ledger at `path` (an empty one when there is no file yet), every line checked; `SetupError` or
    `JSONLError` (both exit 2) naming the file and line on anything wrong."""
    path = Path(path)
    if not path.exists() and not path.is_symlink():
        return Ledger()
    ledger: Ledger | None = None
    for lineno, value in jsonl.read(path, max_bytes=MAX_LEDGER_BYTES, max_line=MAX_LINE_BYTES):
        where = f"ledger {path}:{lineno}"
        if not isinstance(value, dict):
            raise SetupError(f"{where}: not an object")
        if ledger is None:
            ledger = _header(value, where)
            continue
        record = check_record(value, where, ledger.last_night)
        if record["id"] in ledger.records:
            raise SetupError(f"{where}: signature {record['id']} is listed twice")
        ledger.records[record["id"]] = record
    return ledger or Ledger()


def _header(value: dict[str, Any], where: str) -> Ledger:
    if value.get("kind") != KIND or value.get("version") != VERSION:
        raise SetupError(f"{where}: not a gguf-parity ledger version {VERSION} (its first line must be "
                         f'{{"kind": "{KIND}", "version": {VERSION}, ...}})')
    last = value.get("last_night")
    if last is not None:
        _date(last, where, "last_night")
    nights = _count(value.get("nights"), where, "nights")
    if (last is None) != (nights == 0):
        raise SetupError(f"{where}: last_night and nights disagree ({last!r}, {nights})")
    return Ledger(last_night=last, nights=nights)


def check_record(value: dict[str, Any], where: str, last_night: str | None) -> dict[str, Any]:
    """One record, every field of its type and its dates in order; `SetupError` naming the field else."""
    missing = [key for key in RECORD_KEYS if key not in value]
    if missing:
        raise SetupError(f"{where}: missing {', '.join(missing)}")
    if not isinstance(value["id"], str) or not _ID.fullmatch(value["id"]):
        raise SetupError(f"{where}: id: not a signature id (d- and 12 hex digits)")
    for key in ("title", "model", "list"):
        _text(value[key], where, key)
    if value["reproduce"] is not None:
        _text(value["reproduce"], where, "reproduce")
    first, last = _date(value["first_seen"], where, "first_seen"), _date(value["last_seen"], where, "last_seen")
    fixed = None if value["fixed_on"] is None else _date(value["fixed_on"], where, "fixed_on")
    if not first <= last or (fixed is not None and fixed < last) or (last_night is not None and
                                                                      max(last, fixed or last) > last_night):
        raise SetupError(f"{where}: dates out of order (first_seen {first}, last_seen {last}, fixed_on {fixed}, "
                         f"the ledger's last night {last_night})")
    if _count(value["nights"], where, "nights") < 1:
        raise SetupError(f"{where}: nights: a signature in the ledger was seen at least one night")
    _count(value["reopened"], where, "reopened")
    _count(value["cases"], where, "cases")
    if not isinstance(value["fuzz"], bool):
        raise SetupError(f"{where}: fuzz: not true or false")
    return {key: value[key] for key in RECORD_KEYS}


def _text(value: object, where: str, key: str) -> str:
    if not isinstance(value, str) or len(value) > MAX_TEXT:
        raise SetupError(f"{where}: {key}: not a string of at most {MAX_TEXT} characters")
    return value


def _date(value: object, where: str, key: str) -> str:
    if not isinstance(value, str) or not _DATE.fullmatch(value):
        raise SetupError(f"{where}: {key}: not a date (YYYY-MM-DD)")
    try:
        date.fromisoformat(value)
    except ValueError:
        raise SetupError(f"{where}: {key}: no such date ({value})") from None
    return value


def _count(value: object, where: str, key: str) -> int:
    if type(value) is not int or not 0 <= value <= MAX_COUNT:
        raise SetupError(f"{where}: {key}: not a whole number from 0 to {MAX_COUNT:,}")
    return value


def lines(ledger: Ledger) -> list[dict[str, Any]]:
    """The ledger as its file's lines: the header, then the records in the order first seen."""
    header = {"kind": KIND, "version": VERSION, "last_night": ledger.last_night, "nights": ledger.nights}
    records = sorted(ledger.records.values(), key=lambda r: (r["first_seen"], r["model"], r["id"]))
    return [header, *records]


def write(ledger: Ledger, path: str | os.PathLike[str]) -> Path:
    """The ledger written to `path` whole or not at all (a temp file beside it, then a rename)."""
    return jsonl.write(path, lines(ledger))


# --- folding a night ------------------------------------------------------------------------------------

def fold(ledger: Ledger, night: str, reports: list[dict[str, Any]]) -> Tonight:
    """`reports` (one night's report.json contents) folded into `ledger` as `night`; see the module."""
    if ledger.last_night is not None and night < ledger.last_night:
        raise SetupError(f"the ledger already holds night {ledger.last_night}; night {night} is earlier "
                         "(nights are folded in order)")
    tonight = _models(night, reports)
    seen: dict[str, dict[str, Any]] = {}
    for report in reports:
        for record in report.get("differences") or []:
            seen.setdefault(str(record["id"]), record)
    for sig, record in seen.items():
        _seen(ledger, tonight, sig, record)
    for sig, record in ledger.records.items():
        if record["fixed_on"] is None and sig not in seen and _rechecked(record, tonight):
            record["fixed_on"] = night
            tonight.fixed.append(sig)
    if ledger.last_night != night:
        ledger.nights += 1
    ledger.last_night = night
    return tonight


def _models(night: str, reports: list[dict[str, Any]]) -> Tonight:
    """The models the reports checked, those they did not (and why), and those whose differences were cut."""
    tonight = Tonight(night)
    listed: dict[str, set[str]] = {}
    for report in reports:
        for record in report.get("differences") or []:
            listed.setdefault(str(record.get("model", "")), set()).add(str(record["id"]))
    for report in reports:
        unchecked = not_checked(report)
        tonight.unchecked.update(unchecked)
        for model, counts in report["summary"]["per_model"].items():
            if model in unchecked:
                continue
            tonight.checked.add(model)
            if counts.get("reference"):
                tonight.referenced.add(model)
            counted, held = int(counts.get("differences") or 0), len(listed.get(model, ()))
            if counted > held or held >= DIFFERENCES_CAP:  # a merged report counts only what its parts listed
                tonight.cut[model] = (held, max(counted, held))
    for model in tonight.checked:  # checked in one report, not in another: checked
        tonight.unchecked.pop(model, None)
    return tonight


def _seen(ledger: Ledger, tonight: Tonight, sig: str, record: dict[str, Any]) -> None:
    """One signature the night shows, added to (or updated in) the ledger."""
    night = tonight.night
    tonight.seen.append(sig)
    entry = ledger.records.get(sig)
    if entry is None:
        entry = ledger.records[sig] = {"id": sig, "first_seen": night, "last_seen": night, "nights": 1,
                                       "fixed_on": None, "reopened": 0}
        tonight.new.append(sig)
    elif entry["last_seen"] != night:
        entry["nights"] += 1
    if entry["fixed_on"] is not None:  # fixed, and back
        entry["fixed_on"] = None
        entry["reopened"] += 1
        tonight.reopened.append(sig)
    reproduce = record.get("reproduce")
    entry.update(title=str(record.get("title", sig))[:MAX_TEXT], model=str(record.get("model", ""))[:MAX_TEXT],
                 list=str(record.get("list", ""))[:MAX_TEXT], last_seen=night,
                 cases=min(int(record.get("cases") or 0), MAX_COUNT), fuzz=bool(record.get("fuzz")),
                 reproduce=None if reproduce is None else str(reproduce)[:MAX_TEXT])


def _rechecked(record: dict[str, Any], tonight: Tonight) -> bool:
    """True when the night checked the record's model the way it was found, with its whole list of differences."""
    model = record["model"]
    ways = tonight.referenced if record["list"] == "reference_findings" else tonight.checked
    return model in ways and model not in tonight.cut


# --- what the page and the terminal show -------------------------------------------------------------------

def view(ledger: Ledger, tonight: Tonight) -> dict[str, list[dict[str, Any]]]:
    """The ledger's records as the night sees them: new (first seen tonight), back after a fix, fixed tonight,
    open from earlier nights (oldest first), and fixed earlier (newest fix first)."""
    night, records = tonight.night, list(ledger.records.values())
    back = set(tonight.reopened)
    new = [r for r in records if r["first_seen"] == night and r["fixed_on"] is None]
    still = [r for r in records if r["fixed_on"] is None and r["first_seen"] != night and r["id"] not in back]
    return {"new": new, "reopened": [ledger.records[s] for s in tonight.reopened],
            "fixed": [r for r in records if r["fixed_on"] == night],
            "open": sorted(still, key=lambda r: (r["first_seen"], r["model"], r["title"])),
            "fixed_earlier": sorted((r for r in records if r["fixed_on"] not in (None, night)),
                                    key=lambda r: (r["fixed_on"], r["model"]), reverse=True)}


def terminal_lines(ledger: Ledger, tonight: Tonight, first: int = 10) -> list[str]:
    """The fold in a few lines: the counts, then the first new, reopened and fixed differences."""
    shown = view(ledger, tonight)
    oldest = f" (the oldest since {shown['open'][0]['first_seen']})" if shown["open"] else ""
    out = [f"ledger, night {tonight.night}: {len(shown['new'])} new, {len(shown['reopened'])} back after a fix, "
           f"{len(shown['fixed'])} fixed tonight, {len(shown['open'])} open from earlier nights{oldest}; "
           f"{len(tonight.checked)} model(s) checked"]
    for word, key in (("new", "new"), ("back", "reopened"), ("fixed", "fixed")):
        for record in shown[key][:first]:
            out.append(f"  {word:5} {record['id']}  {record['model']}: {record['title']}  "
                       f"(first seen {record['first_seen']})")
        if len(shown[key]) > first:
            out.append(f"  ... and {len(shown[key]) - first} more {word} (ledger.html)")
    for model, (listed, counted) in sorted(tonight.cut.items()):
        out.append(f"  {model}: {counted} differences, {listed} listed in its report: the others are not "
                   "tracked tonight, and none of its open ones is called fixed")
    return out


def page(ledger: Ledger, tonight: Tonight, *, reports: list[tuple[str, str]]) -> str:
    """ledger.html: tonight's new, reopened and fixed differences, the open ones and since when, and the
    reports folded (`reports`: (name, relative link or "") each); each table cut at `PAGE_ROWS` rows."""
    shown = view(ledger, tonight)
    tables = {key: (rows[:PAGE_ROWS], max(0, len(rows) - PAGE_ROWS)) for key, rows in shown.items()}
    from .templating import environment  # jinja2: only when a page is drawn

    return environment().get_template("ledger.html.j2").render(
        night=tonight.night, nights=ledger.nights, tables=tables, reports=reports,
        unchecked=sorted(tonight.unchecked.items()), cut=sorted(tonight.cut.items()),
        models=len(tonight.checked), checked=tonight.checked)


def index_page(folder: Path, night: str) -> str:
    """index.html of a night's folder: a link to every page in it (report.html, ledger.html, drift.html, ...),
    two folders deep at most, `INDEX_PAGES` at most."""
    pages: list[str] = []
    for depth in ("*.html", "*/*.html", "*/*/*.html"):
        for path in sorted(folder.glob(depth)):
            if path.name != INDEX and path.is_file() and len(pages) < INDEX_PAGES:
                pages.append(path.relative_to(folder).as_posix())
    from .templating import environment  # jinja2: only when a page is drawn

    return environment().get_template("ledger_index.html.j2").render(night=night, pages=pages)
