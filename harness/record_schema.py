"""The fields of a result record's `details`, declared per kind of record, and how an older record becomes current.

A record's top-level fields are fixed by harness/results.py (schema 1). `details` is the part each writer fills with
what its kind of record measured: a fuzz session's seed and signatures, a benchmark's throughput, a mutation group's
score. The report (reports/) reads those fields by name, so they are declared here, once, for both sides: the writer
(harness.results.validate_record) checks a record's details against its kind's declaration, and the report decodes
each field as declared (reports/record_fields.py) instead of naming `details` keys in its queries.

Pure Python on purpose (no Spark, no proton, nothing of the harness): reports/ imports it, and the report runs where
the harness is not installed. A key no declaration names stays free-form: a writer may record anything else.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

SCHEMA = 1

# ---- field types ---------------------------------------------------------------------------------------------------
#
# `sql` is the Spark type the report decodes a field as. In Spark `details` is a map of strings (a string as it is,
# anything else as its JSON text: the record schema's DETAILS_SQL), so each field is decoded from its text:
#   string           the text as it is
#   int, bigint, double, boolean    the text cast to that type
#   array<...>, map<...>            the JSON text parsed as that type
#   json             the JSON text kept as it is (the report reads paths in it, or shows it)
#   count            a number, or a number per node ({"B1": 0, "B2": 1}) and then their sum

DETAILS_SQL = "map<string,string>"
# role (or node) -> the peer that played it: a record's `peers`, and the `nodes` of a mixed-release case
PEERS_MAP = "map<string, struct<vendor: string, version: string, provider: string>>"


def _is_int(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _is_number(value) -> bool:
    return (isinstance(value, (int, float)) and not isinstance(value, bool)) and math.isfinite(value)


def _is_text_list(value) -> bool:
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


@dataclass(frozen=True)
class Type:
    expected: str                       # what an error message says was expected
    accepts: Callable[[object], bool]
    sql: str                            # how the report decodes it (see above)


TEXT = Type("a string", lambda v: isinstance(v, str), "string")
INT = Type("an integer", _is_int, "bigint")
SMALL_INT = Type("an integer", _is_int, "int")  # read as a 32-bit int: the stored tables' column type
NUMBER = Type("a number", _is_number, "double")
BOOL = Type("true or false", lambda v: isinstance(v, bool), "boolean")
TEXT_LIST = Type("a list of strings", _is_text_list, "array<string>")
LIST = Type("a list", lambda v: isinstance(v, list), "array<string>")  # only its length is read
OBJECT = Type("an object", lambda v: isinstance(v, dict), "json")
ANY = Type("any JSON value", lambda v: True, "json")
COUNT = Type("an integer, or an object of node to integer",
             lambda v: _is_int(v) or (isinstance(v, dict) and all(_is_int(x) for x in v.values())), "count")
NODES = Type("an object of node to {vendor, version, provider}",
             lambda v: isinstance(v, dict) and all(isinstance(x, dict) for x in v.values()), PEERS_MAP)
STEPS = Type("a list of objects", lambda v: isinstance(v, list) and all(isinstance(x, dict) for x in v),
             "array<map<string,string>>")
# a fuzz session's list of recorded signatures; a finding record's reason text (read as no list)
RECORDED = Type("a list of strings or a string", lambda v: isinstance(v, str) or _is_text_list(v), "array<string>")


# ---- kinds of record -----------------------------------------------------------------------------------------------

# The suites whose records are of a kind of their own (see each declaration below)
FUZZ_SUITE = "fuzz"
BENCH_SUITE = "bench"
MUTATION_SUITE = "mutation"
TYPES_SUITE = "types"
NETWORK_SUITE = "network"
UPGRADE_SUITE = "upgrade"
# Suites whose records are measurements, not conformance cases (the report keeps them out of every case aggregate)
NOT_CASES = (FUZZ_SUITE, BENCH_SUITE, MUTATION_SUITE)

CASE, RECOVERY, FUZZ, BENCH, MUTATION, TYPES, NETWORK, UPGRADE = (
    "case", "recovery", "fuzz", "bench", "mutation", "types", "network", "upgrade")

# Every case record, whatever its suite, may carry these
_CASE = {
    "failures": ANY,    # what differed (a type interop case: value, sent and arrived); shown as its text
    "nodes": NODES,     # a mixed topology's every node (`peers` names the first of each role only)
    "xfail_message": TEXT,  # an expected failure's own assertion message (its record's message is the reason)
    # fields older records kept here, now top-level (harness.results.OPTIONAL_FIELDS): see MIGRATIONS
    "cell": TEXT, "cell_peers": TEXT, "config_fault": TEXT, "checks": OBJECT, "resume_s": NUMBER,
}

DETAILS: dict[str, dict[str, Type]] = {
    CASE: _CASE,
    # a case that timed a recovery (it has resume_s: e.g. suites/brokerconnections/test_mirror_faults.py)
    RECOVERY: {**_CASE, "fault": TEXT, "lost": INT, "duplicated": INT, "recovered": INT},
    # `interop fuzz`: a session record FUZZ-<MODE>, and a record FUZZ-<MODE>/<signature> per finding
    FUZZ: {"mode": TEXT, "seed": INT, "budget_s": NUMBER, "executed": INT, "failures": INT,
           "signatures": TEXT_LIST, "recorded": RECORDED, "figures": OBJECT,
           "kind": TEXT, "signature": TEXT, "reproducer": TEXT, "evidence": ANY},
    # bench/routing.py: BENCH-<bench>/<scenario>/<vendor>/<client stack>
    BENCH: {"bench": TEXT, "scenario": TEXT, "clients": TEXT, "msgs_per_s": NUMBER, "p50_ms": NUMBER,
            "p99_ms": NUMBER, "ratio": NUMBER, "ratio_to": TEXT, "cpu_s_per_1000": NUMBER, "repeats": SMALL_INT,
            "isolated": BOOL, "router_cpu": NUMBER, "delivered": NUMBER},
    # bench/mutation.py: MUTATION/<group>
    MUTATION: {"mutation_group": TEXT, "score": NUMBER, "target": NUMBER, "sample": INT, "seed": INT,
               "modules": TEXT_LIST, "killed": INT, "timeout": INT, "survived": INT, "equivalent": INT,
               "incompetent": INT, "pending": INT, "baseline_s": NUMBER, "run_s": NUMBER, "survivors": TEXT_LIST},
    # suites/types: a value of a type family sent by one client stack, received by another
    TYPES: {**_CASE, "type": TEXT, "section": TEXT, "sender_stack": TEXT, "receiver_stack": TEXT, "via": TEXT,
            "values": SMALL_INT, "failures": LIST},
    # suites/network: a network of brokers; a topic case counts per subscriber
    NETWORK: {**_CASE, "fault": TEXT, "lost": COUNT, "duplicated": COUNT},
    # suites/upgrade: a rolling upgrade (or downgrade), per step of a multi-node topology in `steps`
    UPGRADE: {**_CASE, "topology": TEXT, "step": TEXT, "stop": TEXT, "from_version": TEXT, "to_version": TEXT,
              "lost": COUNT, "duplicated": COUNT, "downgrade": TEXT, "refusal": TEXT, "steps": STEPS},
}

_SUITE_KINDS = {FUZZ_SUITE: FUZZ, BENCH_SUITE: BENCH, MUTATION_SUITE: MUTATION, TYPES_SUITE: TYPES,
                NETWORK_SUITE: NETWORK, UPGRADE_SUITE: UPGRADE}


def kind_of(record: dict) -> str:
    """A record's kind: its suite's, else a recovery where it timed one (resume_s), else a plain case."""
    kind = _SUITE_KINDS.get(record.get("suite"))
    if kind:
        return kind
    details = record.get("details")
    timed = record.get("resume_s") is not None or (isinstance(details, dict) and details.get("resume_s") is not None)
    return RECOVERY if timed else CASE


def field(kind: str, name: str) -> Type:
    """The declared type of a details field of a kind; KeyError naming both where none is declared."""
    try:
        return DETAILS[kind][name]
    except KeyError:
        raise KeyError(f"details.{name}: not declared for {kind} records (harness/record_schema.py)") from None


def details_error(record: dict) -> str | None:
    """One line naming the first declared details field whose value has the wrong type, else None. A null is as if
    the field were absent; keys no declaration names are free-form."""
    details = record.get("details")
    if not isinstance(details, dict):
        return None  # (validate_record says so)
    kind = kind_of(record)
    declared = DETAILS[kind]
    for name, value in details.items():
        spec = declared.get(name)
        if spec is not None and value is not None and not spec.accepts(value):
            shown = repr(value)
            shown = shown if len(shown) <= 60 else shown[:57] + "..."
            return f"record: field 'details.{name}' ({kind} record): expected {spec.expected}, got {shown}"
    return None


# ---- migration -----------------------------------------------------------------------------------------------------
#
# How a record written by an older harness becomes a current one, applied once as records are read in (the report's
# ingest; migrate() for a record in hand), so that nothing downstream knows old forms. Keyed by the record's
# `schema`: each step takes a record of that version (or of its older forms, told apart by the keys they carry) to
# the next or current form. Schema 1 has had one change: the optional top-level fields
# (harness.results.OPTIONAL_FIELDS) were once kept in `details`, some under another name.

# schema 1 before its optional top-level fields: details key -> top-level field
V1_LIFTED = {"cell": "cell", "config_fault": "config_fault", "checks": "checks", "cell_peers": "target",
             "resume_s": "resume_s"}


def _from_v1_details(record: dict) -> dict:
    """A schema-1 record that kept its optional fields in `details`: those fields top-level, where the record has
    none of its own (details keep them too, as they were written)."""
    details = record.get("details") or {}
    lifted = {top: details[old] for old, top in V1_LIFTED.items()
              if record.get(top) is None and details.get(old) is not None}
    return {**record, **lifted} if lifted else record


MIGRATIONS: dict[int, Callable[[dict], dict]] = {1: _from_v1_details}


def migrate(record: dict) -> dict:
    """A record in its current form (see MIGRATIONS); a record of a version with no step is returned as it is."""
    step = MIGRATIONS.get(record.get("schema"))
    return step(record) if step else record
