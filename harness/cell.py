"""A matrix cell: the peers per role, deliberate breaks and client stack one pytest session runs with.

It is one object that travels: `interop run` writes each cell once as JSON (`cells/<name>.cell.json` in the run
folder) and hands the session `--interop-cell FILE`; the pytest plugin reads it once and takes its peers, breaks
and client stack from it. A plain pytest session builds the same object from `--peer`, `--break` and `--client`.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path

from .breaks import Break, parse_break

REFERENCE = "reference"
CELLS_DIR = "cells"  # results/<run_id>/cells/: <cell>.cell.json (the cell), <cell>.json (collection counts), <cell>.log
DEFAULT_CLIENT = "python"


class CellError(ValueError):
    """A cell file that cannot be read; str() is one line naming the file and the field."""


@dataclass
class Cell:
    name: str | None  # None: a session started without a matrix (plain pytest or `interop run` of one cell)
    peers: dict[str, str]
    suites: list[str] = field(default_factory=list)
    breaks: list[Break] = field(default_factory=list)
    client: str = DEFAULT_CLIENT  # the client stack (harness/drivers.py) of the cases that run through a driver
    keyword: str | None = None  # a pytest -k expression: only the cases of its suites that match it

    def suite_names(self) -> list[str]:
        """The suite folders the cell runs (an entry `security/test_broker_*.py` names some files of one)."""
        return list(dict.fromkeys(entry.partition("/")[0] for entry in self.suites))

    @property
    def products(self) -> frozenset[str]:
        """Real products this cell starts, each with its version when one is chosen (`artemis@2.39.0`): the matrix
        probes each once (can it run here?), and `interop run` gets each chosen version once before the cells."""
        from .peers.vendors import parse_choice

        return frozenset(parse_choice(v).product for v in self.peers.values() if v != REFERENCE)

    def peer_option(self) -> str:
        return ",".join(f"{role}={name}" for role, name in self.peers.items())

    def target(self) -> str:
        """`router=reference,broker=rabbitmq` (and `,client=rhea` for a stack other than python): what the cell
        chose, the report's name for the vendors it judges. The default stack adds nothing, so records from before
        the client axis keep their names. A chosen version reads `broker=artemis 2.39.0`: each version of a product
        is a target of its own."""
        from .peers.vendors import parse_choice

        chosen = ",".join(f"{role}={parse_choice(name).target()}" for role, name in self.peers.items())
        return chosen + ("" if self.client == DEFAULT_CLIENT else f",client={self.client}")

    def as_dict(self) -> dict:
        return {"name": self.name, "peers": dict(self.peers), "suites": list(self.suites),
                "breaks": [str(b) for b in self.breaks], "client": self.client, "keyword": self.keyword}

    def write(self, path: Path) -> Path:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text(json.dumps(self.as_dict(), indent=2) + "\n")
        os.replace(tmp, path)
        return path

    @classmethod
    def read(cls, path: str | Path) -> Cell:
        try:
            data = json.loads(Path(path).read_text())
        except (OSError, ValueError) as exc:
            raise CellError(f"{path}: cannot read the cell: {exc}") from None
        if not isinstance(data, dict) or not isinstance(data.get("peers"), dict):
            raise CellError(f"{path}: expected a JSON object with 'peers'")
        try:
            breaks = [parse_break(b, f"{path}: breaks:") for b in data.get("breaks") or []]
        except ValueError as exc:
            raise CellError(str(exc)) from None
        return cls(data.get("name"), {str(k): str(v) for k, v in data["peers"].items()}, list(data.get("suites") or []),
                   breaks, data.get("client") or DEFAULT_CLIENT, data.get("keyword"))


def cell_name(peers: dict[str, str], breaks: list[Break], client: str = DEFAULT_CLIENT) -> str:
    # `@` (a version or provider) is no character of a cell name: `broker-artemis-2.39.0`
    name = "-".join(f"{role}-{vendor.replace('@', '-')}" for role, vendor in peers.items())
    return name + ("" if client == DEFAULT_CLIENT else f"+client-{client}") + "".join(f"+{b.fault}" for b in breaks)
