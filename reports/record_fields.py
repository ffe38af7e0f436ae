"""The report's reading of a record's `details`: each field decoded as harness/record_schema.py declares it.

This is the one place of reports/ that indexes the `details` column: a query asks for `detail(kind, name)`, and a
field no declaration names for that kind is an error when the query is built, not a column of nulls. Kept apart from
reports/job/ so that reports/versions_table.py, which the job imports, reads details the same way.
"""

from __future__ import annotations

from harness import record_schema as rs


def details_type():
    """The Spark type of `details` (record_schema.DETAILS_SQL): key -> a string as it is, anything else as its JSON
    text. Parsed with the line rather than kept as text and parsed again for the few keys read: that second parse
    cost more than a third of the whole ingest."""
    from pyspark.sql import types as T

    assert rs.DETAILS_SQL == "map<string,string>"
    return T.MapType(T.StringType(), T.StringType())


def text(kind: str, name: str):
    """A declared field's text as the record wrote it (a string as it is, anything else as its JSON text)."""
    from pyspark.sql import functions as F

    rs.field(kind, name)  # declared, or KeyError
    return F.col("details")[name]


def decoded(value, sql: str):
    """A field's text (a column) decoded as a Spark type of record_schema (see its `sql` values)."""
    from pyspark.sql import functions as F

    if sql in ("string", "json"):
        return value
    if sql == "count":  # a number, or per node ({"B1": 0, "B2": 1}) and then their sum
        per_node = F.map_values(F.from_json(value, "map<string,bigint>"))
        return F.coalesce(value.cast("long"), F.aggregate(per_node, F.lit(0).cast("long"), lambda acc, x: acc + x))
    if sql.startswith(("array<", "map<")):
        return F.from_json(value, sql)
    return value.cast(sql)


def detail(kind: str, name: str):
    """A declared field of a kind's details, decoded as declared (null where the record has none)."""
    return decoded(text(kind, name), rs.field(kind, name).sql)
