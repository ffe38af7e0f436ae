"""A small table's rows for the HTML report, collected from Spark or from Arrow, in the same order either way.
"""

from __future__ import annotations


def arrow_rows(table, order: list[str], limit: int | None = None) -> list[dict]:
    """An Arrow table's rows as _rows gives a DataFrame's (dicts; timestamps as naive UTC datetimes, as a UTC
    session's Row gives them), sorted the same way, the first `limit` of them."""
    from datetime import UTC

    import pyarrow as pa

    def plain(value, kind):
        """A value as Row.asDict(recursive=True) gives it, by its Arrow type (a map's pylist is a list of pairs)."""
        if value is None:
            return None
        if pa.types.is_timestamp(kind) and kind.tz is not None:
            return value.astimezone(UTC).replace(tzinfo=None)
        if pa.types.is_map(kind):
            return {plain(k, kind.key_type): plain(v, kind.item_type) for k, v in value}
        if pa.types.is_list(kind) or pa.types.is_large_list(kind):
            return [plain(v, kind.value_type) for v in value]
        if pa.types.is_struct(kind):
            return {field.name: plain(value[field.name], field.type) for field in kind}
        return value

    row_type = pa.struct(list(table.schema))
    rows = [plain(row, row_type) for row in table.to_pylist()]
    _sort_rows(rows, order)
    return rows[:limit] if limit else rows


def _sort_rows(rows: list[dict], order: list[str]) -> None:
    """Sort in place as Spark's orderBy does: nulls first ascending, last descending."""
    for key in reversed(order):  # stable sorts, the last key first
        name, descending = key.lstrip("-"), key.startswith("-")
        rows.sort(key=lambda r: (r[name] is not None, r[name]), reverse=descending)


def _rows(df, order: list[str], limit: int | None = None) -> list[dict]:
    """The rows of a small table, in `order` (Spark's: nulls first ascending, last descending). Without a limit
    they are sorted here: a Spark sort is two more jobs (sampling the range bounds, then sorting), each costing
    far more than sorting a few thousand rows in Python."""
    from pyspark.sql import functions as F

    if limit:
        keys = [F.desc(k[1:]) if k.startswith("-") else F.col(k) for k in order]
        return [row.asDict(recursive=True) for row in df.orderBy(*keys).limit(limit).collect()]
    rows = [row.asDict(recursive=True) for row in df.collect()]
    _sort_rows(rows, order)
    return rows
