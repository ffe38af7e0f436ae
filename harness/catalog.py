"""The spec catalog (suites/spec/catalog.yaml) and coverage of its clauses by suite cases.

Every suite case names the clauses it checks (`@pytest.mark.spec(...)`); the catalog lists each clause with
a paraphrase and where it comes from. Coverage reports the three ways they can drift apart: a clause no case
checks, a case citing an id the catalog lacks, and a case citing nothing.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from harness.topology import display_path, read_yaml

CLAUSE_ID = re.compile(r"^[A-Z][A-Z0-9]*(-[A-Z0-9]+)+$")
# "003_9cdc7c48796dae4f.txt §12.1.1.3" (a seed document and its section) or "AMQP 1.0 §2.6.12".
SOURCE = re.compile(r"^(?:[\w.-]+\.txt|AMQP 1\.0) §\s?\S.*$")
AREA = re.compile(r"^[a-z][a-z0-9-]*$")
_FIELDS = ("id", "source", "text", "area")


class CatalogError(ValueError):
    """The catalog file is wrong; str() is one line naming the file, the entry and the field."""


@dataclass(frozen=True)
class Clause:
    id: str
    source: str
    text: str
    area: str


@dataclass
class Coverage:
    clauses: dict[str, list[str]] = field(default_factory=dict)  # clause id -> cases citing it
    uncovered: list[str] = field(default_factory=list)  # clause ids no case cites
    unknown: dict[str, list[str]] = field(default_factory=dict)  # case -> cited ids not in the catalog
    untraced: list[str] = field(default_factory=list)  # cases citing no clause at all

    @property
    def complete(self) -> bool:
        return not (self.uncovered or self.unknown or self.untraced)


def load_catalog(path: str | Path) -> dict[str, Clause]:
    """Clauses by id, in file order; raises CatalogError on the first problem."""
    shown = display_path(path)
    data = read_yaml(path, CatalogError)
    if not isinstance(data, dict) or "clauses" not in data:
        got = "a mapping without it" if isinstance(data, dict) else type(data).__name__
        raise CatalogError(f"{shown}: expected a mapping with a 'clauses' list, got {got}")
    for key in data:
        if key != "clauses":
            raise CatalogError(f"{shown}: field '{key}': unknown field; expected only 'clauses'")
    entries = data["clauses"]
    if not isinstance(entries, list):
        raise CatalogError(f"{shown}: field 'clauses': expected a list, got {type(entries).__name__}")
    catalog: dict[str, Clause] = {}
    first_seen: dict[str, int] = {}
    for i, entry in enumerate(entries):
        clause = _parse_clause(shown, i, entry)
        if clause.id in first_seen:
            raise CatalogError(
                f"{shown}: clauses[{i}]: duplicate id {clause.id!r} (first at clauses[{first_seen[clause.id]}])"
            )
        first_seen[clause.id] = i
        catalog[clause.id] = clause
    return catalog


def _parse_clause(shown: str, i: int, entry: Any) -> Clause:
    where = f"{shown}: clauses[{i}]"
    if not isinstance(entry, dict):
        raise CatalogError(f"{where}: expected a mapping with {', '.join(_FIELDS)}, got {entry!r:.60}")
    if isinstance(entry.get("id"), str):
        where += f" ({entry['id']})"
    for key in entry:
        if key not in _FIELDS:
            raise CatalogError(f"{where}: field '{key}': unknown field; expected one of {', '.join(_FIELDS)}")
    checks = (
        ("id", CLAUSE_ID, "an id like ROUTING-MULTICAST-1 (upper case, digits, '-')"),
        ("source", SOURCE, "'<seed file>.txt §<section>' or 'AMQP 1.0 §<section>'"),
        ("text", None, "a non-empty paraphrase"),
        ("area", AREA, "a lower-case area name like routing"),
    )
    for key, regex, expected in checks:
        if key not in entry:
            raise CatalogError(f"{where}: field '{key}': missing; expected {expected}")
        value = entry[key]
        if not isinstance(value, str) or not value.strip() or (regex and not regex.match(value)):
            raise CatalogError(f"{where}: field '{key}': expected {expected}, got {value!r:.60}")
    return Clause(
        id=entry["id"], source=entry["source"], text=" ".join(entry["text"].split()), area=entry["area"]
    )


def coverage(catalog: dict[str, Clause], case_spec_ids: dict[str, list[str]]) -> Coverage:
    """Match cases (case id -> clause ids it cites) against the catalog."""
    cov = Coverage(clauses={clause_id: [] for clause_id in catalog})
    for case, ids in sorted(case_spec_ids.items()):
        if not ids:
            cov.untraced.append(case)
            continue
        for clause_id in dict.fromkeys(ids):  # a case citing an id twice still counts once
            if clause_id in cov.clauses:
                cov.clauses[clause_id].append(case)
            else:
                cov.unknown.setdefault(case, []).append(clause_id)
    cov.uncovered = [clause_id for clause_id, cases in cov.clauses.items() if not cases]
    return cov


def format_coverage(cov: Coverage, most: int | None = None) -> str:
    """A few lines for a terminal summary: totals first, then each kind of gap (at most `most` uncovered clauses
    named: a session of one suite leaves most of the catalog uncovered, which `interop catalog` lists whole)."""
    total = len(cov.clauses)
    covered = total - len(cov.uncovered)
    cases = {case for cases in cov.clauses.values() for case in cases} | set(cov.unknown) | set(cov.untraced)
    lines = [f"spec coverage: {covered}/{total} clauses covered by {len(cases)} cases"]
    if cov.uncovered:
        shown = cov.uncovered if most is None else cov.uncovered[:most]
        more = len(cov.uncovered) - len(shown)
        lines.append(f"clauses with no case ({len(cov.uncovered)}): {', '.join(shown)}"
                     + (f" (+{more} more; `interop catalog` lists them)" if more else ""))
    if cov.unknown:
        lines.append(f"cases citing clauses not in the catalog ({len(cov.unknown)}):")
        lines += [f"  {case}: {', '.join(ids)}" for case, ids in cov.unknown.items()]
    if cov.untraced:
        lines.append(f"cases citing no clause ({len(cov.untraced)}):")
        lines += [f"  {case}" for case in cov.untraced]
    return "\n".join(lines)


def spec_ids(item) -> list[str]:
    """Every clause id a case carries: from its function, its class/module and its parameters."""
    ids: list[str] = []
    for marker in item.iter_markers("spec"):
        ids.extend(a for a in marker.args if a not in ids)
    return ids
