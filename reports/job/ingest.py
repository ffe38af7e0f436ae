"""Reading records in: results.jsonl lines parsed against the record's schema, checked (a line that is not a
schema-1 record is set aside with the reason), migrated to the current form (harness/record_schema.py
MIGRATIONS), and given the per-row columns the aggregates group by.
"""

from __future__ import annotations

from harness.record_schema import CASE, MIGRATIONS, PEERS_MAP, V1_LIFTED
from reports.job.records import OUTCOMES
from reports.record_fields import details_type, text

# columns whose values hardly repeat: a Parquet dictionary for them is built only to be thrown away (measured: a
# tenth of the ingest's write)
UNIQUE_COLUMNS = ("started_at", "started", "duration_s")
RECORD_FIELDS = ("schema", "run_id", "case", "suite", "spec", "topology", "peers", "fault", "outcome", "duration_s",
                 "started_at", "details", "message", "host")
# A record's optional top-level field -> the column the store keeps it as (in the order of the columns the store has
# always had: the cell's target is `cell_peers`, and resume_s its text, as the details of the first records held it).
# Records written before these fields existed are migrated first (migrate_lines).
LIFTED = {"cell": "cell", "config_fault": "config_fault", "checks": "checks", "target": "cell_peers",
          "resume_s": "resume_s"}


def record_schema():
    from pyspark.sql import types as T

    return T.StructType([
        T.StructField("schema", T.LongType()),
        T.StructField("run_id", T.StringType()),
        T.StructField("case", T.StringType()),
        T.StructField("suite", T.StringType()),
        T.StructField("spec", T.ArrayType(T.StringType())),
        T.StructField("topology", T.StringType()),
        # role -> {vendor, version, provider}, kept as JSON text: building a map per row costs more than the rest
        # of the parse; it is decoded per distinct value (a handful per run) where versions are needed
        T.StructField("peers", T.StringType()),
        T.StructField("fault", T.StringType()),      # a name, or a fault object kept as its JSON text
        T.StructField("outcome", T.StringType()),
        T.StructField("duration_s", T.DoubleType()),
        T.StructField("started_at", T.StringType()),
        # key -> value, each declared field decoded where it is read (reports/record_fields.py)
        T.StructField("details", details_type()),
        T.StructField("message", T.StringType()),
        T.StructField("host", T.StringType()),
        # optional top-level fields (harness.results.OPTIONAL_FIELDS); older records kept them in `details`
        *[T.StructField(name, T.DoubleType() if name == "resume_s" else T.StringType()) for name in LIFTED],
    ])


INGEST_ID_FIELDS = [("run_folder", "string"), ("ingest_id", "string")]


def line_schema():
    from pyspark.sql import types as T

    return T.StructType([*record_schema().fields, T.StructField("_corrupt", T.StringType())])


def ingest(spark, files: list[str], ingest_ids: dict[str, str]):
    """Every line of the results.jsonl files, parsed by Spark's JSON reader, with `reason` set on the lines that are
    not schema-1 records (and `_corrupt` holding the text of those that are not JSON), and the run folder and
    ingest id of the store (reports/store.py) it is kept under."""


    from reports.store import literal_rows

    parsed = (spark.read.schema(line_schema())
              .option("mode", "PERMISSIVE").option("columnNameOfCorruptRecord", "_corrupt")
              .json(files))
    ids = literal_rows(spark, [{"run_folder": k, "ingest_id": v} for k, v in ingest_ids.items()], INGEST_ID_FIELDS)
    return checked_lines(parsed, ids)


def checked_lines(parsed, ingest_ids):
    """The checks and derived columns of `ingest` on parsed lines (also applied to an empty relation, for the
    store's schema). `ingest_ids` is a small DataFrame of run_folder -> ingest_id: joined by a broadcast hash join
    (a literal map would be searched key by key on every line)."""
    from pyspark.sql import functions as F

    from reports.store import run_folder_of_path

    parsed = (parsed.select("*", F.col("_metadata.file_path").alias("_file"))
              .withColumn("run_folder", run_folder_of_path(F.col("_file")))
              .join(F.broadcast(ingest_ids), "run_folder", "left")
              # parsed once: the check below and the aggregates' `started` column
              .withColumn("started", F.col("started_at").cast("timestamp")))
    c = F.col
    required = ("run_id", "case", "suite", "outcome", "started_at")
    corrupt = F.trim("_corrupt")
    reason = (F.when(c("_corrupt").isNotNull() & ~(corrupt.startswith("{") & corrupt.endswith("}")),
                     F.lit("not a JSON record (a torn or garbled line)"))
              .when(c("_corrupt").isNotNull(), F.lit("a field has the wrong type"))
              .when(c("schema").isNull() | (c("schema") != 1), F.lit("schema: expected 1")))
    for name in required:
        # `== ""`, not length() == 0: length counts characters, a scan of the string
        reason = reason.when(c(name).isNull() | (c(name) == ""), F.lit(f"{name}: missing, empty or not a string"))
    reason = (reason.when(~c("outcome").isin(*OUTCOMES),
                          F.concat(F.lit("outcome: unknown value "), F.substring("outcome", 1, 40)))
              .when(c("duration_s").isNull() | F.isnan("duration_s") | (c("duration_s") < 0),
                    F.lit("duration_s: missing or not a number >= 0"))
              .when(~c("started_at").endswith("Z") | c("started").isNull(),
                    F.lit("started_at: not an ISO-8601 UTC time"))
              .when(c("peers").isNull() | ~c("peers").startswith("{"),
                    F.lit("peers: missing or not an object of role to {vendor, ...}")))
    # the file a line came from is kept for rejected lines only: a record names its run, and copying the path
    # into every row costs a tenth of the parse
    checked = _derive(parsed.withColumn("reason", reason)
                      .withColumn("source_file", F.when(c("reason").isNotNull(), c("_file"))))
    # `line` keeps the text of a rejected line (up to 300 characters; the raw `_corrupt` column is not kept)
    line = F.substring(F.coalesce("_corrupt", F.to_json(F.struct(*RECORD_FIELDS))), 1, 300)
    return (checked.withColumn("line", F.when(F.col("reason").isNotNull(), line))
            .withColumn("kind", F.when(F.col("reason").isNull(), "records").otherwise("rejects"))
            .drop("_corrupt", "_file"))


MAX_ROLES = 8  # roles named one by one in a target decoded from `peers`; more are summed up as "N more roles"


def peers_target(peers_json):
    """`broker=rabbitmq + router=reference` from a record's peers (JSON text).

    Built from functions Spark compiles into the query's generated code: one lambda or from_json in a projection
    makes Spark evaluate that whole projection row by row, and this one runs over every record (it costs a tenth
    of the ingest). Hence the JSON text goes through a variant, and the roles are taken by position."""
    from pyspark.sql import functions as F

    as_map = F.try_variant_get(F.try_parse_json(peers_json), "$", PEERS_MAP)
    entries = F.sort_array(F.map_entries(as_map))  # by role
    named = [F.when(F.size(entries) > i, F.concat(entries[i]["key"], F.lit("="), entries[i]["value"]["vendor"]))
             for i in range(MAX_ROLES)]
    more = F.when(F.size(entries) > MAX_ROLES,
                  F.concat((F.size(entries) - MAX_ROLES).cast("string"), F.lit(" more roles")))
    return F.concat_ws(" + ", *named, more)


def _roles_in_order(cell_peers):
    """`router=x,broker=y` -> `broker=y + router=x`. A cell has one or two roles, put in order by comparing the
    parts; only a longer list is split into an array and sorted (that costs several times as much per record)."""
    from pyspark.sql import functions as F

    first, last = F.substring_index(cell_peers, ",", 1), F.substring_index(cell_peers, ",", -1)
    return (F.when(~cell_peers.contains(","), cell_peers)
            .when(F.concat(first, F.lit(","), last) == cell_peers,
                  F.when(first <= last, F.concat(first, F.lit(" + "), last))
                  .otherwise(F.concat(last, F.lit(" + "), first)))
            .otherwise(F.array_join(F.sort_array(F.split(cell_peers, ",")), " + ")))


def migrate_lines(lines):
    """Each parsed line in the current record form, applied once as runs are read in, so that no query downstream
    knows an older form: the step of each schema version (harness/record_schema.py MIGRATIONS) as a DataFrame step,
    oldest first (LINE_MIGRATIONS, below). Schema 1 is the only version, and its step changes only the lines of its
    older form."""
    for _, step in sorted(LINE_MIGRATIONS.items()):
        lines = step(lines)
    return lines


def _from_v1_details(lines):
    """A schema-1 record from before its optional top-level fields (record_schema.V1_LIFTED): each such field from
    `details`, where the line has no top-level value of its own. Told apart by the keys it carries, not by its
    schema: every line has them or not, whatever else it is (a line the checks reject keeps its columns too)."""
    from pyspark.sql import functions as F

    types = dict(lines.dtypes)
    return lines.withColumns({top: F.coalesce(F.col(top), text(CASE, old).cast(types[top]))
                              for old, top in V1_LIFTED.items()})


# schema version -> its step, as record_schema.MIGRATIONS has one per version for a record in hand
LINE_MIGRATIONS = {1: _from_v1_details}
assert LINE_MIGRATIONS.keys() == MIGRATIONS.keys(), "a schema version's migration needs its DataFrame step here"


def _derive(records):
    """Per-row columns the aggregates group by: target, cell, deliberate config fault, checker counts, fault name.
    Cheap string functions only: this runs once per record."""
    from pyspark.sql import functions as F

    # The target is the cell's choice of vendor per role where the record says it (interop run tags every record
    # with its target), else the peers the case itself used (decoded only for those records).
    chosen = _roles_in_order(F.col("cell_peers"))
    # (resume_s: a column of its own, so that the recovery table's input is found without reading every `details`)
    kept = [name for name in records.columns if name not in LIFTED]
    lifted = [F.col(field).cast("string").alias(column) for field, column in LIFTED.items()]
    return (migrate_lines(records).select(*kept, *lifted)
            .withColumn("target", F.when(F.col("cell_peers") != "", chosen)
                        .when(F.col("peers").startswith("{") & (F.col("peers") != "{}"), peers_target(F.col("peers")))
                        .otherwise(F.lit("(no peers)")))
            .withColumn("spec", F.coalesce("spec", F.array().cast("array<string>")))
            # whose recorded difference an xfail is: the expected file's name the plugin put first in its reason
            # ("expected difference: rabbitmq: ..." or "...: client-cpp: ..."), else null
            .withColumn("difference_of", F.when(F.col("outcome") == "xfail", F.nullif(F.regexp_extract(
                "message", r"^expected difference: ([A-Za-z0-9_.+-]+): ", 1), F.lit(""))))
            .withColumn("fault_name", F.when(F.col("fault").startswith("{"), F.coalesce(
                F.get_json_object("fault", "$.name"), F.get_json_object("fault", "$.type"), F.lit("fault")))
                .otherwise(F.col("fault"))))
