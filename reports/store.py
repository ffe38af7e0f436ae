"""The report's store: every run read once into Parquet, each row with its run, and what depends on one run alone.

A nightly matrix adds one run a night. Re-reading every run's JSON lines each night would make a year's report cost
365 runs of work to add one, so `interop report` keeps what it has read under `<out>/tables/` and reads a run again
only when it changed. Every row of the tables below carries its `run_folder` (the name of the folder that holds the
run's results.jsonl: the harness names it by run id), and one run is one unit, written and replaced as a whole.
`lines` is partitioned by it (a partition per run and kind), so that adding a run writes that run alone and a query
of a few runs reads their files alone. The small per-run tables are one Parquet file each where this machine writes
the store (a folder of this machine, Spark running here: see write_per_run_here for why), and a partition per run
where Spark writes it (a cluster, a remote Spark Connect server); a reader finds the same rows in either layout:

  lines         every line of a run's results.jsonl, in partitions `kind=records` (the records, with the columns
                the aggregates group by) and `kind=rejects` (lines set aside, with the reason)
  run_counts    outcome counts per run, target, suite, clause list, cell, fault and checker counts: the few hundred
                rows per run that runs, trend, pass rate, conformance and the fault tables are sums of
  run_durations the run's case durations per target and suite as a log-scale histogram (the durations table)
  run_recovery  the run's records with details.resume_s (the recovery table's input)
  run_fuzz      the run's `interop fuzz` records, their details decoded (the fuzz tables' input)
  run_bench     the run's benchmark records (bench/routing.py --results), their figures decoded
  run_types     the run's type interop cases (suites/types), with type, section and client stacks
  run_network   the run's network-of-brokers cases (suites/network), with fault, lost, duplicated and resume_s
  run_mutation  the run's mutation-score records (bench/mutation.py), a group each, score and counts decoded
  manifest      one row per run: its files with size and modification time, its run.json facts, and the store's
                format version

A run is read when it is not in the manifest yet, or when its results.jsonl or run.json has another size or time
than the manifest says (a run interrupted and resumed). Reading it again replaces its rows (its partitions, by
Spark's dynamic partition overwrite, or its rows of a table's one file): the store is idempotent by run. Every
row carries the `ingest_id` of the files it was read from, and only rows whose ingest_id is the manifest's are read
back, so a report killed between writing a run's tables and its manifest row leaves no half-replaced run behind:
the next report sees the files differ from the manifest and reads the run again. Runs stay in the store when
their folders are deleted from results/: the store is the history. `--rebuild` starts it anew from the inputs given.

Everything here goes through Spark's DataFrame API only (no SparkContext, no JVM gateway), so it runs the same in
a local session, under spark-submit on a cluster, and through Spark Connect (`interop report --remote`).
"""

from __future__ import annotations

import glob as globmod
import os
import shutil
from collections.abc import Callable
from dataclasses import dataclass, field
from urllib.parse import unquote, urlparse

# Bumped when the layout or the meaning of a stored column changes: a store of another version is refused with a
# request for --rebuild rather than read wrongly (its raw runs may be gone, so it is never dropped silently).
STORE_VERSION = 5  # 2: run_network; 3: run_mutation; 4: run_findings, difference_of, client_xfail; 5: per-run
# tables in one file each where this machine writes them
# versions this one reads as they are: 4 differs only in the per-run tables' layout (a partition per run), which is
# read as well and replaced table by table as runs are added (write_per_run_here). A report of version 4 refuses a
# store that has version 5 rows: it would add partition folders beside a table's one file.
READS_ALSO = (4,)
RESULTS_FILE = "results.jsonl"
RUN_META_FILE = "run.json"
# tables no longer written (the layout before the store, where one report was one full read; run_bad_cases, the flaky
# table's candidates before its fold): removed when a store is started over them
OLD_TABLES = ("records", "rejects", "_lines", "run_bad_cases")


class StoreError(Exception):
    """The store cannot be used as it is (another format version, a run found twice): one line for the user."""


@dataclass(frozen=True)
class RunFiles:
    """One run as found among the inputs: its results.jsonl and the run.json beside it (if any)."""

    run_folder: str
    results: str              # URI
    size: int
    mtime_ms: int
    meta: str | None = None   # URI of run.json
    meta_size: int = -1
    meta_mtime_ms: int = -1

    @property
    def ingest_id(self) -> str:
        """What the store read: the run and its files' sizes and times. A run whose files changed gets another id;
        no two runs have the same."""
        return f"{self.run_folder}/{self.size}.{self.mtime_ms}.{self.meta_size}.{self.meta_mtime_ms}"


@dataclass
class Found:
    runs: list[RunFiles] = field(default_factory=list)
    empty: list[str] = field(default_factory=list)     # inputs that named nothing readable


@dataclass
class Plan:
    """What this report does with each run: read (new, or changed since), or keep as stored."""

    fresh: bool                                 # a new store (none yet, or --rebuild)
    new: list[RunFiles]
    changed: list[RunFiles]
    unchanged: list[str]                        # run folders among the inputs, stored as they are now
    kept: list[str]                             # run folders in the store that no input names (history)
    current: dict[str, str]                     # run folder -> ingest id, for every run the report covers

    @property
    def to_read(self) -> list[RunFiles]:
        return self.new + self.changed


# ---- finding the runs --------------------------------------------------------------------------------------------


def _is_local(text: str) -> bool:
    return "://" not in text and not text.startswith("file:")


def local_path(uri: str) -> str:
    return unquote(urlparse(uri).path) if uri.startswith("file:") else uri


def _stat(path: str) -> tuple[int, int] | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns // 1_000_000


def _local_run(results_path: str) -> RunFiles | None:
    found = _stat(results_path)
    if found is None:
        return None
    path = os.path.abspath(results_path)
    folder = os.path.dirname(path)
    meta_path = os.path.join(folder, RUN_META_FILE)
    meta = _stat(meta_path)
    return RunFiles(os.path.basename(folder), "file://" + path, found[0], found[1],
                    "file://" + meta_path if meta else None, *(meta or (-1, -1)))


def _find_local(given: str) -> list[RunFiles]:
    runs = []
    for match in sorted(globmod.glob(os.path.expanduser(given))):
        if os.path.isfile(match):
            name = os.path.basename(match)
            candidates = [os.path.join(os.path.dirname(match), RESULTS_FILE)] if name == RUN_META_FILE else [match]
        else:
            direct = os.path.join(match, RESULTS_FILE)
            candidates = [direct] if os.path.isfile(direct) else sorted(
                globmod.glob(os.path.join(globmod.escape(match), "*", RESULTS_FILE)))
        runs += [run for run in map(_local_run, candidates) if run is not None]
    return runs


def _find_remote(spark, given: str) -> list[RunFiles]:
    """Runs under a URI a Spark reader can list (hdfs://, s3a://, ...): listed by Spark itself, where the data is."""
    from pyspark.errors import PySparkException

    base = given.rstrip("/")
    patterns = [base] if base.endswith(".jsonl") else [f"{base}/{RESULTS_FILE}", f"{base}/*/{RESULTS_FILE}"]
    for pattern in patterns:
        try:
            listed = (spark.read.format("binaryFile").load(pattern)
                      .select("path", "length", F_ms("modificationTime")).collect())
        except PySparkException as exc:
            if "PATH_NOT_FOUND" in str(exc) or "does not exist" in str(exc):
                continue
            raise StoreError(f"{given}: cannot list: {str(exc).splitlines()[0][:200]}") from None
        if listed:
            metas = {}
            meta_pattern = pattern.rsplit("/", 1)[0] + "/" + RUN_META_FILE
            try:
                metas = {row["path"].rsplit("/", 1)[0]: row for row in spark.read.format("binaryFile")
                         .load(meta_pattern).select("path", "length", F_ms("modificationTime")).collect()}
            except PySparkException:
                pass  # no run.json anywhere: the runs are read without their facts
            runs = []
            for row in listed:
                folder = row["path"].rsplit("/", 1)[0]
                meta = metas.get(folder)
                runs.append(RunFiles(folder.rsplit("/", 1)[-1], row["path"], row["length"], row["mtime_ms"],
                                     meta["path"] if meta else None, meta["length"] if meta else -1,
                                     meta["mtime_ms"] if meta else -1))
            return runs
    return []


def F_ms(column: str):  # noqa: N802 - reads as the column it makes
    from pyspark.sql import functions as F

    return (F.unix_micros(F.col(column)) // 1000).alias("mtime_ms")


def find_runs(spark, inputs: list[str]) -> Found:
    """Each input is a results.jsonl, a run folder (holding one), a results folder (holding run folders), a glob of
    any of these, or a URI of any of these that Spark can list. Local paths are looked up here (a few stat calls);
    URIs by Spark, on the file system they name."""
    found = Found()
    seen: dict[str, RunFiles] = {}
    for given in inputs:
        runs = _find_local(given) if _is_local(given) else (
            _find_local(local_path(given)) if given.startswith("file:") else _find_remote(spark, given))
        if not runs:
            found.empty.append(given)
        for run in runs:
            other = seen.get(run.run_folder)
            if other is None:
                seen[run.run_folder] = run
                found.runs.append(run)
            elif other.results != run.results:
                raise StoreError(f"run {run.run_folder} is found twice: {other.results} and {run.results} "
                                 "(the store keeps one run per folder name: give one of them)")
    return found


# ---- the manifest and the plan -----------------------------------------------------------------------------------


def manifest_schema():
    from pyspark.sql import types as T

    return T.StructType([
        T.StructField("store_version", T.IntegerType()),
        T.StructField("ingest_id", T.StringType()),
        T.StructField("results", T.StringType()),
        T.StructField("size", T.LongType()),
        T.StructField("mtime_ms", T.LongType()),
        T.StructField("meta", T.StringType()),
        T.StructField("meta_size", T.LongType()),
        T.StructField("meta_mtime_ms", T.LongType()),
        T.StructField("ingested_at", T.TimestampType()),
        # run.json facts (None where the run has none, or it is not JSON)
        T.StructField("run_id", T.StringType()),
        T.StructField("meta_started_at", T.StringType()),
        T.StructField("ended_at", T.StringType()),
        T.StructField("interrupted", T.BooleanType()),
        T.StructField("breaks", T.ArrayType(T.StringType())),
        T.StructField("fuzz_role", T.StringType()),
        T.StructField("run_folder", T.StringType()),
    ])


def read_manifest(spark, tables_dir: str) -> dict[str, dict] | None:
    """run folder -> its manifest row; None when there is no store at tables_dir yet."""
    from pyspark.errors import PySparkException

    try:
        rows = (spark.read.schema(manifest_schema()).parquet(f"{tables_dir}/manifest")
                .select("run_folder", "store_version", "ingest_id", "size", "mtime_ms", "meta_size", "meta_mtime_ms")
                .collect())
    except PySparkException as exc:
        if "PATH_NOT_FOUND" in str(exc) or "does not exist" in str(exc):
            return None
        raise
    versions = {r["store_version"] for r in rows}
    if versions - {STORE_VERSION, *READS_ALSO}:
        raise StoreError(f"{tables_dir}: a store of format version {max(v or 0 for v in versions)}, this report "
                         f"reads version {STORE_VERSION}: run `interop report --rebuild` (it reads the runs again "
                         "from the inputs; runs whose folders are gone are then dropped)")
    return {r["run_folder"]: r.asDict() for r in rows}


def plan_ingest(found: Found, manifest: dict[str, dict] | None, rebuild: bool) -> Plan:
    fresh = rebuild or manifest is None
    stored = {} if fresh else manifest
    new, changed, unchanged = [], [], []
    for run in found.runs:
        before = stored.get(run.run_folder)
        if before is None:
            new.append(run)
        elif before["ingest_id"] != run.ingest_id:
            changed.append(run)
        else:
            unchanged.append(run.run_folder)
    named = {run.run_folder for run in found.runs}
    kept = sorted(folder for folder in stored if folder not in named)
    current = {folder: row["ingest_id"] for folder, row in stored.items()}
    current.update({run.run_folder: run.ingest_id for run in new + changed})
    return Plan(fresh, new, changed, unchanged, kept, current)


# ---- writing a run's tables --------------------------------------------------------------------------------------


def run_folder_of_path(path_column):
    """The run folder of a line from the file it came from. Spark gives the path as a URI (a space is %20, a '+' is
    itself), hence '+' is protected before decoding."""
    from pyspark.sql import functions as F

    folder = F.element_at(F.split(path_column, "/"), -2)
    return F.url_decode(F.replace(folder, F.lit("+"), F.lit("%2B")))


def literal_rows(spark, rows: list[dict], fields: list[tuple[str, object]]):
    """A small DataFrame from Python values, as an expression (inline of literal structs): no Python worker and
    no data sent ahead of the query, the same in a local session and through Spark Connect. `fields` are (name,
    type) pairs, the type a Spark DataType or its SQL name."""
    from pyspark.sql import functions as F

    if not rows:
        return spark.range(0).select(*[F.lit(None).cast(kind).alias(name) for name, kind in fields])
    structs = [F.struct(*[F.lit(row[name]).cast(kind).alias(name) for name, kind in fields]) for row in rows]
    return spark.range(1).select(F.inline(F.array(*structs)))


def write_per_run(df, path: str, fresh: bool, schema, replaced: list[str]) -> None:
    """Write the runs' partitions of a per-run table where Spark writes the store (a cluster, a remote server): a
    fresh store replaces the whole table, otherwise only the partitions of the runs in `df` are replaced (dynamic
    partition overwrite: idempotent by run).

    A table this machine wrote as one file (write_per_run_here) has no partitions to replace: it is rewritten whole,
    partitioned, from its rows of the other runs and `df` (read in full first: Spark cannot overwrite a folder it
    is reading from)."""
    from pyspark.sql import functions as F

    if not fresh and _written_as_one_file(df.sparkSession, path):
        others = df.sparkSession.read.schema(schema).parquet(path).where(~F.col("run_folder").isin(*replaced))
        df, fresh = others.unionByName(df).localCheckpoint(), True
    # one task writes them: a per-run table has a few rows per run, and a file per run and writing task (up to one
    # per shuffle partition) is mostly Parquet's fixed cost per file
    (df.coalesce(1).write.mode("overwrite").option("partitionOverwriteMode", "static" if fresh else "dynamic")
     .partitionBy("run_folder").parquet(path))


def _written_as_one_file(spark, path: str) -> bool:
    """Whether a per-run table holds files outside run_folder= partitions (the layout write_per_run_here writes)."""
    from pyspark.errors import PySparkException

    try:
        files = spark.read.parquet(path).inputFiles()
    except PySparkException:  # no table there yet (or no file in it)
        return False
    return any(not f.rsplit("/", 2)[-2].startswith("run_folder=") for f in files)


def write_per_run_here(table, path: str, fresh: bool, replaced: list[str]) -> None:
    """write_per_run for a store on this machine, from the Arrow table of the rows of the runs read now
    (run_folder among its columns): the table is one Parquet file of every run's rows, the runs in `replaced`
    taking their rows from `table` (a run read again with no row here any more loses its old ones), and it is
    swapped in whole (write_parquet_here).

    One file, not a partition per run as Spark writes it: Spark opens every file of a table for each query that
    reads it, and with a hundred runs that fixed cost (0.3-0.5 s a table on a warm Spark Connect server, measured)
    was most of a nightly report's time. The per-run tables are small (the largest, run_durations, is about 50 KB
    a run), so rewriting one costs this process milliseconds. A table in the other layout (an older store, or one
    Spark wrote) is read in either layout and written in this one."""
    import pyarrow as pa
    import pyarrow.compute as pc

    old = None if fresh else read_table_here(path)
    if old is not None and old.num_rows:
        kept = old.filter(pc.invert(pc.is_in(old.column("run_folder"), value_set=pa.array(replaced, pa.string()))))
        table = pa.concat_tables([kept.select(table.schema.names).cast(table.schema), table])
    write_parquet_here(table, path)


def read_table_here(path: str):
    """A per-run table of this machine's store as one Arrow table, from either layout: Parquet files in its folder
    (run_folder a column) and run_folder=<escaped> partition folders (run_folder from the folder's name, as Spark
    reads it). None when there is no such folder."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    root = local_path(path)
    if not os.path.isdir(root):
        return None
    pieces = []
    for name in sorted(os.listdir(root)):
        if name.startswith((".", "_")):  # hidden or marker files (_SUCCESS), as Spark skips them
            continue
        where = os.path.join(root, name)
        if name.startswith("run_folder=") and os.path.isdir(where):
            part = pq.read_table(where)
            folder = unquote(name.removeprefix("run_folder="))
            pieces.append(part.append_column("run_folder", pa.array([folder] * part.num_rows, pa.string())))
        elif name.endswith(".parquet"):
            pieces.append(pq.read_table(where))
    if not pieces:
        return None
    names = pieces[0].schema.names
    return pa.concat_tables([p.select(names) for p in pieces], promote_options="permissive")


def write_parquet_here(table, uri: str) -> None:
    """Write an Arrow table as a Parquet table folder Spark reads (part file and _SUCCESS), replacing what was there:
    written beside it first and swapped in, so a reader finds the old table or the new one."""
    import uuid

    import pyarrow.parquet as pq

    folder = local_path(uri)
    parent, name = os.path.split(folder.rstrip("/"))
    fresh = os.path.join(parent, f".{name}.{uuid.uuid4().hex[:8]}.new")
    os.makedirs(fresh)
    pq.write_table(table, os.path.join(fresh, "part-00000.parquet"), compression="snappy")
    open(os.path.join(fresh, "_SUCCESS"), "w").close()
    old = os.path.join(parent, f".{name}.{uuid.uuid4().hex[:8]}.old")
    if os.path.exists(folder):
        os.rename(folder, old)
    os.rename(fresh, folder)
    shutil.rmtree(old, ignore_errors=True)


def local_row_count(uri: str) -> int | None:
    """The rows of a Parquet table in a folder of this machine, from its files' footers (no Spark job); None for a
    table elsewhere. Rows of runs the manifest no longer names are counted too: a bound, not the current count."""
    import pyarrow.parquet as pq

    if not uri.startswith("file:"):
        return None
    total = 0
    for parent, folders, names in os.walk(local_path(uri)):
        folders[:] = [f for f in folders if not f.startswith((".", "_"))]  # Spark's _temporary, hidden ones
        for name in names:
            if name.endswith(".parquet") and not name.startswith((".", "_")):
                total += pq.ParquetFile(os.path.join(parent, name)).metadata.num_rows
    return total


def drop_local_partitions(tables_dir: str, tables: tuple[str, ...], folders: list[str],
                          log: Callable[[str], None]) -> None:
    """Before runs are read again, their old partitions are removed where the store is on this machine: a table in
    which the new reading has no rows for a run (no rejected line any more, say) would otherwise keep the old ones
    on disk. They are never read either way (their ingest_id is not the manifest's); this keeps the files honest
    for whoever reads the tables directly."""
    if not tables_dir.startswith("file:") and "://" in tables_dir:
        return
    root = local_path(tables_dir)
    for table in tables:
        for folder in folders:
            target = os.path.join(root, table, f"run_folder={escape_partition_value(folder)}")
            if os.path.isdir(target):
                shutil.rmtree(target, ignore_errors=True)
    if folders:
        log(f"store: old partitions of {len(folders)} changed run(s) removed")


def drop_local_folders(tables_dir: str, table: str, keep: str) -> None:
    """Remove a table's folders other than `keep` where the store is on this machine (a derived table of which
    only the newest folder is read: the flaky fold); elsewhere they stay."""
    if not tables_dir.startswith("file:") and "://" in tables_dir:
        return
    root = os.path.join(local_path(tables_dir), table)
    for name in os.listdir(root) if os.path.isdir(root) else ():
        if name != keep and not name.startswith((".", "_")):
            shutil.rmtree(os.path.join(root, name), ignore_errors=True)


def escape_partition_value(value: str) -> str:
    """Spark's escaping of a partition value in a path (ExternalCatalogUtils.escapePathName)."""
    special = set('"#%\'*/:=?\\\x7f{[]^') | {chr(c) for c in range(0x20)}
    return "".join(f"%{ord(ch):02X}" if ch in special else ch for ch in value)


def remove_old_layout(tables_dir: str, tables: tuple[str, ...]) -> None:
    if "://" in tables_dir and not tables_dir.startswith("file:"):
        return
    root = local_path(tables_dir)
    for name in OLD_TABLES + tables:
        shutil.rmtree(os.path.join(root, name), ignore_errors=True)


def with_current(df, current: dict[str, str]):
    """Only the rows read from the files the manifest names (see the module's doc). The run folders prune the
    partitions; the ingest ids (one per run, unique: they start with the run folder) drop any stale row."""
    from pyspark.sql import functions as F

    if not current:
        return df.where(F.lit(False))
    # one SQL expression, not a column object per value: with a hundred runs, building the two lists value by value
    # took a local session 40-50 ms a table (a call into the JVM per value), 0.45 s of a nightly report
    folders, ingest_ids = sql_strings(current), sql_strings(current.values())
    return df.where(F.expr(f"run_folder IN ({folders}) AND ingest_id IN ({ingest_ids})"))


def sql_strings(values) -> str:
    """Spark SQL string literals, comma-separated: 'a', 'it\\'s' (a backslash and a quote escaped)."""
    return ", ".join("'" + value.replace("\\", "\\\\").replace("'", "\\'") + "'" for value in values)


META_FIELDS = [("run_folder", "string"), ("run_id", "string"), ("meta_started_at", "string"),
               ("ended_at", "string"), ("interrupted", "boolean"), ("breaks", "array<string>"),
               ("fuzz_role", "string")]


def _local_facts(run: RunFiles) -> dict | None:
    """The facts of a local run.json, as Spark's reader would give them: none when it is not a JSON object with a
    run_id, and a field of the wrong type as null."""
    import json

    if not run.meta:
        return None
    try:
        data = json.loads(open(local_path(run.meta), encoding="utf-8").read())
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("run_id"), str):
        return None

    def text(key: str):
        return data[key] if isinstance(data.get(key), str) else None

    breaks = data.get("breaks")
    fuzz = data.get("fuzz")
    return {"run_folder": run.run_folder, "run_id": data["run_id"], "meta_started_at": text("started_at"),
            "ended_at": text("ended_at"),
            "interrupted": data["interrupted"] if isinstance(data.get("interrupted"), bool) else None,
            "breaks": [b for b in breaks if isinstance(b, str)] if isinstance(breaks, list) else [],
            "fuzz_role": fuzz.get("role") if isinstance(fuzz, dict) and isinstance(fuzz.get("role"), str) else None}


def manifest_table_here(runs: list[RunFiles]):
    """manifest_rows as an Arrow table made by this process, for runs whose run.json files (if any) are on this
    machine: the same rows, without a Spark job (a hundred literal rows made a query that took Spark seconds to
    plan and run). None when a run.json is elsewhere."""
    from datetime import UTC, datetime

    import pyarrow as pa
    from pyspark.sql.pandas.types import to_arrow_schema

    if not all(r.meta is None or r.meta.startswith("file:") for r in runs):
        return None
    now = datetime.now(UTC)
    facts_fields = [name for name, _ in META_FIELDS if name != "run_folder"]
    rows = []
    for r in runs:
        facts = _local_facts(r) or {}
        rows.append({"store_version": STORE_VERSION, "ingest_id": r.ingest_id, "results": r.results, "size": r.size,
                     "mtime_ms": r.mtime_ms, "meta": r.meta, "meta_size": r.meta_size,
                     "meta_mtime_ms": r.meta_mtime_ms, "ingested_at": now,
                     **{name: facts.get(name) for name in facts_fields}, "run_folder": r.run_folder})
    return pa.Table.from_pylist(rows, schema=to_arrow_schema(manifest_schema(), timezone="UTC"))


def manifest_rows(spark, runs: list[RunFiles]):
    """The manifest rows of runs just read: their files, and the facts of their run.json (read here by Spark, a
    run.json that is not JSON leaving them null)."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    files = literal_rows(spark, [{
        "run_folder": r.run_folder, "ingest_id": r.ingest_id, "results": r.results, "size": r.size,
        "mtime_ms": r.mtime_ms, "meta": r.meta, "meta_size": r.meta_size, "meta_mtime_ms": r.meta_mtime_ms}
        for r in runs], [("run_folder", "string"), ("ingest_id", "string"), ("results", "string"), ("size", "long"),
                         ("mtime_ms", "long"), ("meta", "string"), ("meta_size", "long"), ("meta_mtime_ms", "long")])
    meta_files = [r.meta for r in runs if r.meta]
    if meta_files and all(f.startswith("file:") for f in meta_files):
        # run.json files on this machine are read here (a few hundred bytes each): Spark's multi-line JSON reader
        # takes a task per file, seconds for a hundred runs
        facts = literal_rows(spark, [row for row in map(_local_facts, runs) if row], META_FIELDS)
        rows = files.join(facts, "run_folder", "left")
    elif meta_files:
        schema = T.StructType([
            T.StructField("run_id", T.StringType()), T.StructField("started_at", T.StringType()),
            T.StructField("ended_at", T.StringType()), T.StructField("interrupted", T.BooleanType()),
            T.StructField("breaks", T.ArrayType(T.StringType())),
            T.StructField("fuzz", T.StructType([T.StructField("role", T.StringType())])),  # `interop fuzz`'s
            T.StructField("_corrupt", T.StringType())])
        facts = (spark.read.json(meta_files, schema=schema, multiLine=True, mode="PERMISSIVE",
                                 columnNameOfCorruptRecord="_corrupt")
                 .where(F.col("run_id").isNotNull())
                 .select(run_folder_of_path(F.col("_metadata.file_path")).alias("run_folder"), "run_id",
                         F.col("started_at").alias("meta_started_at"), "ended_at", "interrupted",
                         F.coalesce("breaks", F.array().cast("array<string>")).alias("breaks"),
                         F.col("fuzz.role").alias("fuzz_role"))
                 .dropDuplicates(["run_folder"]))
        rows = files.join(facts, "run_folder", "left")
    else:  # no run.json at all: the facts are null
        rows = files.join(literal_rows(spark, [], META_FIELDS), "run_folder", "left")
    return rows.select(F.lit(STORE_VERSION).alias("store_version"), F.current_timestamp().alias("ingested_at"),
                       "*").select(*[f.name for f in manifest_schema().fields])
