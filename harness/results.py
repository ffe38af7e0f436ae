"""Result records: one JSON object per case per run in `<dir>/results.jsonl`, run metadata in `run.json`.

This is the only contract between a run and the reports (Spark job, HTML report), so records are checked
on the way out and the reader tolerates damage on the way in: a run that crashed mid-line must still be
readable. Schema 1; new optional fields may be added without a version bump, removing or retyping one
needs `schema: 2`. The `details` fields the report reads are declared per kind of record in
harness/record_schema.py, and checked here too; how an older record becomes a current one is its MIGRATIONS.
"""

from __future__ import annotations

import json
import math
import os
import platform
import secrets
import socket
import sys
import threading
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Self

from harness import record_schema

SCHEMA = record_schema.SCHEMA
OUTCOMES = ("passed", "failed", "error", "skipped", "not-applicable", "xfail")
RESULTS_FILE = "results.jsonl"
RUN_META_FILE = "run.json"
RUN_ID_ENV = "INTEROP_RUN_ID"
# Where run folders go when --results is not given. `make test` points it at a temporary folder, so that the
# project's own tests never add runs to the checkout's results/, which `make run` reports on.
RESULTS_DIR_ENV = "INTEROP_RESULTS"


def default_results_dir() -> str:
    return os.environ.get(RESULTS_DIR_ENV) or "results"

# Field order of a record as make_record builds it; the reader does not depend on it.
_FIELDS = (
    "schema",
    "run_id",
    "case",
    "suite",
    "spec",
    "topology",
    "peers",
    "fault",
    "outcome",
    "duration_s",
    "started_at",
    "details",
    "message",
    "host",
)
# Optional top-level fields the report reads as columns (absent in older records, which kept them in `details`):
# the matrix cell, its choice of vendor per role (`router=reference,broker=rabbitmq`), the deliberate config fault
# it ran with, the checkers' results (name -> their as_details()) and the time to resume after a fault.
OPTIONAL_FIELDS = ("cell", "target", "config_fault", "checks", "resume_s")
REQUIRED = tuple(f for f in _FIELDS if f not in ("details", "message", "host"))


class InvalidRecord(ValueError):
    """A record breaks the schema; str() names the field."""


def utc_now_iso() -> str:
    """Now as ISO-8601 UTC with a 'Z', millisecond precision: sortable as text, parseable by Spark."""
    return datetime.now(UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def new_run_id() -> str:
    """`2026-11-22T03-00-00Z-ab12`: sorts by start time, safe in file names, unique enough per second."""
    return datetime.now(UTC).strftime("%Y-%m-%dT%H-%M-%SZ") + "-" + secrets.token_hex(2)


_run_id: str | None = None
_run_id_lock = threading.Lock()


def current_run_id() -> str:
    """The run id of this process: $INTEROP_RUN_ID if set (so workers and subprocesses share the parent's
    id), else one made on first use and kept for the life of the process."""
    global _run_id
    env = os.environ.get(RUN_ID_ENV)
    if env:
        return env
    with _run_id_lock:
        if _run_id is None:
            _run_id = new_run_id()
        return _run_id


def host_facts() -> dict:
    return {
        "hostname": socket.gethostname(),
        "platform": platform.platform(),
        "machine": platform.machine(),
        "python": platform.python_version(),
        "python_implementation": platform.python_implementation(),
        "cpu_count": os.cpu_count(),
    }


def make_record(**fields: Any) -> dict:
    """A record with the schema's defaults filled in (schema, run_id, started_at, empty spec/peers/details,
    no fault/message, this host's name); `fields` override them. Not validated here, so callers can build
    it in steps: ResultWriter.write (or validate_record) checks it."""
    defaults: dict[str, Any] = {
        "schema": SCHEMA,
        "run_id": current_run_id(),
        "spec": [],
        "topology": None,
        "peers": {},
        "fault": None,
        "started_at": utc_now_iso(),
        "details": {},
        "message": None,
        "host": socket.gethostname(),
    }
    merged = {**defaults, **fields}
    ordered = {k: merged[k] for k in (*_FIELDS, *OPTIONAL_FIELDS) if k in merged}
    ordered.update((k, v) for k, v in merged.items() if k not in ordered)
    return ordered


def validate_record(record: Any) -> None:
    """Raise InvalidRecord (a ValueError) naming the first field that breaks schema 1."""
    if not isinstance(record, dict):
        raise InvalidRecord(f"record: expected a JSON object, got {type(record).__name__}")
    missing = [k for k in REQUIRED if k not in record]
    if missing:
        raise InvalidRecord(f"record: missing field(s) {', '.join(missing)}")

    def bad(name: str, expected: str) -> InvalidRecord:
        shown = repr(record[name])
        shown = shown if len(shown) <= 60 else shown[:57] + "..."
        return InvalidRecord(f"record: field '{name}': expected {expected}, got {shown}")

    if record["schema"] != SCHEMA or isinstance(record["schema"], bool):
        raise bad("schema", f"{SCHEMA}")
    for name in ("run_id", "case", "suite", "started_at"):
        if not isinstance(record[name], str) or not record[name]:
            raise bad(name, "a non-empty string")
    if not record["started_at"].endswith("Z"):
        raise bad("started_at", "ISO-8601 UTC ending in 'Z'")
    if record["outcome"] not in OUTCOMES:
        raise bad("outcome", "one of " + ", ".join(OUTCOMES))
    if not isinstance(record["spec"], list) or not all(isinstance(s, str) and s for s in record["spec"]):
        raise bad("spec", "a list of clause ids")
    if record["topology"] is not None and not isinstance(record["topology"], str):
        raise bad("topology", "a topology name or null")
    _check_peers(record, bad)
    if not (record["fault"] is None or isinstance(record["fault"], (str, dict))):
        raise bad("fault", "null, a fault name or a fault description object")
    duration = record["duration_s"]
    if (
        isinstance(duration, bool)
        or not isinstance(duration, (int, float))
        or not (math.isfinite(duration) and duration >= 0)
    ):
        raise bad("duration_s", "a number of seconds >= 0")
    if not isinstance(record.get("details", {}), dict):
        raise bad("details", "an object")
    # the fields the report reads, as declared for the record's kind (harness/record_schema.py)
    if (error := record_schema.details_error(record)) is not None:
        raise InvalidRecord(error)
    if record.get("message") is not None and not isinstance(record["message"], str):
        raise bad("message", "a string or null")
    for name in ("cell", "target", "config_fault"):
        if record.get(name) is not None and not isinstance(record[name], str):
            raise bad(name, "a string or absent")
    if record.get("checks") is not None and not isinstance(record["checks"], dict):
        raise bad("checks", "an object of checker name to its result, or absent")
    resume = record.get("resume_s")
    if resume is not None and (isinstance(resume, bool) or not isinstance(resume, (int, float))
                               or not (math.isfinite(resume) and resume >= 0)):
        raise bad("resume_s", "a number of seconds >= 0, or absent")


def _check_peers(record: dict, bad) -> None:
    peers = record["peers"]
    if not isinstance(peers, dict):
        raise bad("peers", "an object of role to {vendor, version, provider}")
    for role, info in peers.items():
        if not isinstance(info, dict) or not isinstance(info.get("vendor"), str):
            raise bad("peers", f"peers.{role} to be an object with a vendor string")
        for key in ("version", "provider"):
            if info.get(key) is not None and not isinstance(info[key], str):
                raise bad("peers", f"peers.{role}.{key} to be a string or null")


def _dumps(record: dict) -> str:
    try:
        # allow_nan=False: NaN/Infinity are not JSON and would break Spark's reader downstream.
        return json.dumps(record, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
    except (TypeError, ValueError) as exc:
        raise ValueError(f"record for case {record.get('case')!r} is not JSON-serialisable: {exc}") from None


class ResultWriter:
    """Appends records to `<dir>/results.jsonl`, each durable on disk before write() returns.

    Each record goes out in a single write() on an O_APPEND descriptor, so records from several processes
    writing the same file (parallel workers) land whole, never interleaved.
    """

    def __init__(self, path_dir: str | Path) -> None:
        self.dir = Path(path_dir)
        self.dir.mkdir(parents=True, exist_ok=True)
        self.results_path = self.dir / RESULTS_FILE
        self.run_meta_path = self.dir / RUN_META_FILE
        self._lock = threading.Lock()
        self._meta: dict = {}
        self._fd: int | None = os.open(self.results_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._end_torn_line()

    def _end_torn_line(self) -> None:
        # A crash can leave a partial last line; start on a fresh line so it stays one malformed line
        # instead of swallowing the first record of this run.
        with open(self.results_path, "rb") as f:
            f.seek(0, os.SEEK_END)
            if f.tell() == 0:
                return
            f.seek(-1, os.SEEK_END)
            if f.read(1) != b"\n":
                self._write_bytes(b"\n")

    def _write_bytes(self, data: bytes) -> None:
        if self._fd is None:
            raise ValueError(f"{self.results_path}: writer is closed")
        view = memoryview(data)
        while view:
            view = view[os.write(self._fd, view) :]
        os.fsync(self._fd)

    def write(self, record: dict) -> None:
        validate_record(record)
        data = (_dumps(record) + "\n").encode("utf-8")
        with self._lock:
            self._write_bytes(data)

    def write_run_meta(self, meta: dict) -> None:
        """Write run.json atomically, merged over what this writer wrote before: call it at the start with
        run_id, versions and matrix, and at the end with ended_at and totals. Fills schema, started_at,
        host facts and argv when absent."""
        with self._lock:
            merged = {"schema": SCHEMA, **self._meta, **meta}
            merged.setdefault("started_at", utc_now_iso())
            merged.setdefault("host", host_facts())
            merged.setdefault("argv", list(sys.argv))
            text = json.dumps(merged, indent=2, ensure_ascii=False, allow_nan=False, default=str) + "\n"
            tmp = self.run_meta_path.with_name(f".{RUN_META_FILE}.{os.getpid()}.tmp")
            with open(tmp, "w", encoding="utf-8") as f:
                f.write(text)
                f.flush()
                os.fsync(f.fileno())
            os.replace(tmp, self.run_meta_path)  # readers see the old file or the new one, never half
            self._meta = merged

    def close(self) -> None:
        with self._lock:
            if self._fd is not None:
                os.close(self._fd)
                self._fd = None

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def read_results(path: str | Path) -> tuple[list[dict], list[tuple[int, str]]]:
    """Records from a results.jsonl (or a directory holding one), plus (line number, error) for every line
    that is not a valid schema-1 record. Blank lines are skipped; nothing here raises for bad content."""
    path = Path(path)
    if path.is_dir():
        path = path / RESULTS_FILE
    records: list[dict] = []
    errors: list[tuple[int, str]] = []
    with open(path, "rb") as f:
        for line_no, raw in enumerate(f, start=1):
            if not raw.strip():
                continue
            try:
                record = json.loads(raw.decode("utf-8"))
                validate_record(record)
            except UnicodeDecodeError as exc:
                errors.append((line_no, f"not UTF-8: {exc.reason}"))
            except json.JSONDecodeError as exc:
                errors.append((line_no, f"not JSON: {exc.msg} at column {exc.colno}"))
            except ValueError as exc:
                errors.append((line_no, str(exc)))
            else:
                records.append(record)
    return records, errors
