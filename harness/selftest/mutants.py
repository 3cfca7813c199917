"""The curated mutants of `tokenizer/` (tests/mutants/*.toml): load, check, apply.

A mutant is a realistic re-implementer's bug, planted as one or more exact
search/replace edits on one file. Each search text must occur exactly once in
the file as it stands, so that a refactor of `tokenizer/` breaks a mutant
loudly (`MutantError`, and tests/selftest/test_mutants.py fails) instead of turning it
into a silent no-op. Applying happens only inside a scratch copy
(`harness.selftest.run`); nothing here writes to the working tree.
"""

from __future__ import annotations

import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..environment import project_root

# Areas, in the order the kill table lists them.
AREAS = (
    "spm", "bpe", "pre-contractions", "pre-digits", "pre-whitespace", "pre-unicode",
    "pre-punctuation", "unicode", "special", "bos-eos", "detokenize", "wpm", "ugm",
    "rwkv", "plamo2", "gguf-defaults",
)


class MutantError(ValueError):
    """A mutant that cannot be applied as written; the message names it and why."""


@dataclass(frozen=True)
class Edit:
    search: str
    replace: str


@dataclass(frozen=True)
class Mutant:
    """One planted bug: `file` (relative to the project root) gets `edits`."""

    id: str
    area: str
    file: str
    description: str
    edits: tuple[Edit, ...]
    vocabs: tuple[str, ...] = ()
    blind_spot: str = ""   # why no detector kills it on the vocabularies the harness runs (docs/mutation-selftest.md)

    def apply_to(self, source: str) -> str:
        """`source` with every edit made; `MutantError` unless each search occurs exactly once."""
        out = source
        for k, edit in enumerate(self.edits, 1):
            count = out.count(edit.search)
            if count != 1:
                where = f"edit {k} of mutant {self.id!r} ({self.file})"
                raise MutantError(f"{where}: search text occurs {count} times, expected exactly once "
                                  f"(re-anchor it): {edit.search[:80]!r}")
            out = out.replace(edit.search, edit.replace, 1)
        if out == source:
            raise MutantError(f"mutant {self.id!r} changes nothing in {self.file}")
        return out


def mutants_dir(root: Path | None = None) -> Path:
    return (root or project_root()) / "tests" / "mutants"


def load(root: Path | None = None) -> list[Mutant]:
    """Every mutant in tests/mutants/*.toml, ids unique, areas known, in file order."""
    found: list[Mutant] = []
    seen: set[str] = set()
    files = sorted(mutants_dir(root).glob("*.toml"))
    if not files:
        raise MutantError(f"no mutant files (*.toml) in {mutants_dir(root)}")
    for path in files:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
        for k, item in enumerate(data.get("mutant", []), 1):
            mutant = _parse(item, f"{path.name} mutant {k}")
            if mutant.id in seen:
                raise MutantError(f"{path.name}: mutant id {mutant.id!r} used twice")
            seen.add(mutant.id)
            found.append(mutant)
    return found


def _parse(item: dict[str, Any], where: str) -> Mutant:
    for key in ("id", "area", "file", "description"):
        if not isinstance(item.get(key), str) or not item[key]:
            raise MutantError(f"{where}: {key!r} must be a non-empty string")
    if item["area"] not in AREAS:
        raise MutantError(f"{where}: unknown area {item['area']!r} (known: {', '.join(AREAS)})")
    if "\n" in item["description"]:
        raise MutantError(f"{where}: the description must be one line")
    edits = item.get("edits")
    if not isinstance(edits, list) or not edits:
        raise MutantError(f"{where}: needs at least one [[mutant.edits]] with search and replace")
    parsed = []
    for edit in edits:
        if not isinstance(edit.get("search"), str) or not isinstance(edit.get("replace"), str) or not edit["search"]:
            raise MutantError(f"{where}: each edit needs a non-empty 'search' and a 'replace' string")
        parsed.append(Edit(edit["search"], edit["replace"]))
    blind_spot = item.get("blind_spot", "")
    if not isinstance(blind_spot, str):
        raise MutantError(f"{where}: 'blind_spot' must be a string (the reason)")
    return Mutant(id=item["id"], area=item["area"], file=item["file"], description=item["description"],
                  edits=tuple(parsed), vocabs=tuple(item.get("vocabs", ())), blind_spot=blind_spot)


def select(mutants: list[Mutant], ids: list[str]) -> list[Mutant]:
    """The mutants named by `ids` (all when empty); `MutantError` naming an unknown id."""
    if not ids:
        return mutants
    by_id = {m.id: m for m in mutants}
    unknown = [i for i in ids if i not in by_id]
    if unknown:
        raise MutantError(f"unknown mutant id(s) {', '.join(unknown)} (see tests/mutants/*.toml)")
    return [by_id[i] for i in ids]
