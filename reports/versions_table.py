"""What changes if I upgrade: the report's tables of products run in two releases side by side (issue 54).

A cell chosen as `broker=artemis@2.39.0` has the target `broker=artemis 2.39.0 + router=reference`; the same cell on
the pinned default has `broker=artemis + router=reference`. Targets that are equal once each role's version is taken
out of their text form a group (a cell of another client stack, `+ client=rhea`, stays a group of its own). Each
target of a group is a side, named by the release its peers reported in its latest run (the most common version of
each varied role among its ordinary records: neither the upgrade suite's, whose peers change release mid-case, nor
the mixed-release cases', whose nodes run two releases). Tables:

  version_pairs    per group, each release against the next one up: the runs compared, and how many cases had the
                   same outcome, a different one, no comparable one (skipped or not-applicable on a side), or ran on
                   one side only
  version_changes  the cases of a pair whose outcomes differ (passed, failed, error, xfail, xpass are compared), with
                   each side's outcome, message, clauses and run
  mixed_releases   per target, its latest run's cases citing UPGRADE-MIXED-1 (a topology whose nodes run two
                   releases), with `details.nodes` (node -> vendor and version) made readable
  upgrades         per target, its latest run's rolling-upgrade cases (suite `upgrade`): topology, step, stop, from and
                   to release, lost, duplicated, downtime, and the steps of a multi-node topology

The latest outcome of a case on a side is its latest record among the side's runs of that release (per suite, the
latest such run that ran the suite): a side whose suites ran in separate runs compares them all. The upgrade suite's
cases are not compared (they run on the newer release only, and have their table).

Only Spark SQL functions and the DataFrame API (see reports/job/); the records read are those of the few runs named
by `needed_runs`, found by their run folders (reports/job/run.py collects them with the regressions' runs).
"""

from __future__ import annotations

from dataclasses import dataclass

from harness.record_schema import CASE, COUNT, PEERS_MAP, UPGRADE, UPGRADE_SUITE
from reports.record_fields import decoded, detail

MIXED_CLAUSE = "UPGRADE-MIXED-1"
JUDGED = ("passed", "failed", "error", "xfail", "xpass")
# `broker=artemis 2.39.0`: a role, its vendor (with any @provider) and the version the cell chose
_ROLE = r"[A-Za-z0-9_.-]+"
VERSIONED_PART = rf"({_ROLE})=([^ +]+) [0-9][^ +]*"
MESSAGE_CHARS = 500
PAIR_KEYS = ["base", "product", "old_target", "old_release", "old_run", "new_target", "new_release", "new_run"]
REPORT_ORDER = {
    "version_pairs": (["product", "base", "old_release"], None),
    "version_changes": (["product", "base", "old_release", "suite", "case"], None),
    "mixed_releases": (["target", "case"], None),
    "upgrades": (["target", "case"], None),
}


def unversioned(target):
    """`broker=artemis 2.39.0 + router=reference` -> `broker=artemis + router=reference`."""
    from pyspark.sql import functions as F

    return F.regexp_replace(target, rf"({_ROLE}=[^ +]+) [0-9][^ +]*", "$1")


def version_groups(fine):
    """(target, base, roles, product) of every target in a group of two or more that differ by version only: `roles`
    the roles a target of the group names with a version, `product` their vendors (`artemis`)."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    found = fine.select("target").distinct().select(
        "target", unversioned(F.col("target")).alias("base"),
        F.regexp_extract_all("target", F.lit(VERSIONED_PART), 1).alias("roles"),
        F.regexp_extract_all("target", F.lit(VERSIONED_PART), 2).alias("vendors"))
    group = Window.partitionBy("base")
    return (found.withColumn("n", F.count(F.lit(1)).over(group))
            .withColumn("roles", F.array_sort(F.array_distinct(F.flatten(F.collect_list("roles").over(group)))))
            .withColumn("product", F.array_join(F.array_sort(F.array_distinct(
                F.flatten(F.collect_list("vendors").over(group)))), " + "))
            .where((F.col("n") >= 2) & (F.size("roles") > 0))
            .select("target", "base", "roles", "product"))


def run_releases(fine, groups):
    """(base, target, run_id) -> release: per varied role, the version most of the run's ordinary cases reported
    (`2.40.0`; `broker 2.40.0 + router 1.19.0` where two roles vary). A run with no ordinary case that names a
    version (an upgrade-suite run alone) has none."""
    from pyspark.sql import functions as F

    ordinary = fine.where((F.col("suite") != UPGRADE_SUITE) & ~F.array_contains("spec", MIXED_CLAUSE))
    reported = (ordinary.join(F.broadcast(groups.select("target")), "target", "left_semi")
                .select("run_id", "target", "cases",
                        F.explode(F.from_json("peers", PEERS_MAP)).alias("role", "peer"))
                .where(F.col("peer.version").isNotNull())
                .groupBy("run_id", "target", "role", F.col("peer.version").alias("version"))
                .agg(F.sum("cases").alias("n")))
    per_role = reported.groupBy("run_id", "target", "role").agg(
        F.max_by("version", F.struct("n", "version")).alias("version"))
    varied = groups.select("target", "base", "roles", F.explode("roles").alias("role"))
    both = (varied.join(per_role, ["target", "role"])
            .groupBy("base", "target", "run_id")
            .agg(F.first("roles").alias("roles"), F.sort_array(F.collect_list(F.struct("role", "version"))).alias("rv"))
            .where(F.size("rv") == F.size("roles")))
    release = F.when(F.size("roles") == 1, F.col("rv")[0]["version"]).otherwise(
        F.array_join(F.transform("rv", lambda x: F.concat_ws(" ", x["role"], x["version"])), " + "))
    return both.select("base", "target", "run_id", release.alias("release"))


@dataclass
class Plan:
    """The sides and runs of the version tables, known before the records are read (cached: the caller's
    `needed_runs` collect fills the caches; `unpersist` when the report is written)."""

    sides: object       # base, product, target, release, run_id, run_index, older_* (the next release down)
    case_runs: object   # target, suite, run_id: the run each side takes a suite's cases from
    mixed_runs: object  # target, run_id: each target's latest run with mixed-release cases
    upgrade_runs: object  # target, run_id: each target's latest run with rolling-upgrade cases

    def needed_runs(self):
        """run_id of every run whose records the tables read."""
        return (self.case_runs.select("run_id").union(self.mixed_runs.select("run_id"))
                .union(self.upgrade_runs.select("run_id")).distinct())

    def unpersist(self) -> None:
        for df in (self.case_runs, self.sides):
            df.unpersist()


def _latest_run(rows, runs):
    """(target, run_id): per target, the latest of the runs among `rows` (target, run_id)."""
    from pyspark.sql import functions as F

    return (rows.select("target", "run_id").distinct()
            .join(F.broadcast(runs.select("run_id", "run_index")), "run_id")
            .groupBy("target").agg(F.max_by("run_id", "run_index").alias("run_id")))


def plan(fine, runs) -> Plan:
    """From the per-run counts (`fine`: the suites' cases) and the runs table."""
    from pyspark.sql import Window
    from pyspark.sql import functions as F

    groups = version_groups(fine)
    indexed = run_releases(fine, groups).join(F.broadcast(runs.select("run_id", "run_index")), "run_id")
    latest = (indexed.groupBy("base", "target")
              .agg(F.max_by(F.struct("release", "run_id"), "run_index").alias("l"),
                   F.max("run_index").alias("run_index"))
              .select("base", "target", "l.release", "l.run_id", "run_index")
              .join(groups.select("target", "product"), "target"))
    # one side per release: where two targets of a group reported the same, the one run last
    same = Window.partitionBy("base", "release").orderBy(F.desc("run_index"), "target")
    latest = latest.withColumn("k", F.row_number().over(same)).where("k = 1").drop("k")
    ordered = Window.partitionBy("base").orderBy(F.transform(F.split("release", "[^0-9]+"), lambda x: x.cast("int")),
                                                 "release")
    sides = (latest.withColumn("releases", F.count(F.lit(1)).over(Window.partitionBy("base")))
             .where(F.col("releases") >= 2)
             .select("*", *[F.lag(name).over(ordered).alias(f"older_{name}")
                            for name in ("target", "release", "run_id")])
             .cache())
    # per side and suite, the latest run of the side's release that ran the suite; the rolling-upgrade cases are
    # left out (they need the release before the latest: not-applicable on the older side, and in a section of
    # their own), the mixed-release ones are compared (judged on the newer side, not-applicable on the older)
    side_runs = indexed.join(sides.select("base", "target", "release"), ["base", "target", "release"], "left_semi")
    case_runs = (fine.where(F.col("suite") != UPGRADE_SUITE).select("run_id", "target", "suite").distinct()
                 .join(side_runs.select("run_id", "target", "run_index"), ["run_id", "target"])
                 .groupBy("target", "suite").agg(F.max_by("run_id", "run_index").alias("run_id"))
                 .cache())
    mixed = _latest_run(fine.where(F.array_contains("spec", MIXED_CLAUSE)), runs)
    upgrade = _latest_run(fine.where(F.col("suite") == UPGRADE_SUITE), runs)
    return Plan(sides, case_runs, mixed, upgrade)


def tables(plan: Plan, records) -> dict:
    """The four tables, from the records of plan.needed_runs() (the caller keeps `records` to those runs' folders)."""
    return {"version_pairs": version_pairs(plan, records), "version_changes": version_changes(plan, records),
            "mixed_releases": mixed_releases(plan, records), "upgrades": upgrades(plan, records)}


def _pairs(plan: Plan):
    from pyspark.sql import functions as F

    return plan.sides.where(F.col("older_target").isNotNull()).select(
        "base", "product", F.col("older_target").alias("old_target"), F.col("older_release").alias("old_release"),
        F.col("older_run_id").alias("old_run"), F.col("target").alias("new_target"),
        F.col("release").alias("new_release"), F.col("run_id").alias("new_run"))


def _compared(plan: Plan, records):
    """Per pair and case present on either side: each side's latest outcome (suite, clauses, message, run), and
    `status`: same, different, not compared (a side neither passed nor failed it: skipped, not-applicable), or
    only old / only new."""
    from pyspark.sql import functions as F

    latest = (records.join(F.broadcast(plan.case_runs), ["target", "suite", "run_id"], "left_semi")
              .groupBy("target", "case")
              .agg(F.max_by(F.struct("suite", "spec", "outcome", "message", "run_id"), "started").alias("c"))
              .select("target", "case", "c.*"))

    def side(name: str):
        return latest.select(F.col("target").alias(f"{name}_target"), "case",
                             *[F.col(c).alias(f"{name}_{c}") for c in ("suite", "spec", "outcome", "message",
                                                                       "run_id")])

    pairs = _pairs(plan)
    old, new = pairs.join(side("old"), "old_target"), pairs.join(side("new"), "new_target")
    both = old.join(new, [*PAIR_KEYS, "case"], "full")
    o, n = F.col("old_outcome"), F.col("new_outcome")
    status = (F.when(o.isNull(), "only new").when(n.isNull(), "only old")
              .when(o.isin(*JUDGED) & n.isin(*JUDGED), F.when(o == n, "same").otherwise("different"))
              .otherwise("not compared"))
    return pairs, both.withColumn("status", status)


def version_pairs(plan: Plan, records):
    """One row per pair of releases of a group: the sides' targets, releases and latest runs, and the case counts."""
    from pyspark.sql import functions as F

    pairs, compared = _compared(plan, records)
    counts = compared.groupBy(*PAIR_KEYS).agg(*[
        F.sum((F.col("status") == s).cast("long")).alias(s.replace(" ", "_"))
        for s in ("same", "different", "not compared", "only old", "only new")])
    return (pairs.join(counts, PAIR_KEYS, "left")
            .fillna(0, ["same", "different", "not_compared", "only_old", "only_new"])
            .withColumn("compared", F.col("same") + F.col("different")))


def version_changes(plan: Plan, records):
    """The cases of each pair whose outcome differs between the releases."""
    from pyspark.sql import functions as F

    _, compared = _compared(plan, records)
    return compared.where(F.col("status") == "different").select(
        *PAIR_KEYS, F.coalesce("new_suite", "old_suite").alias("suite"), "case",
        F.coalesce("new_spec", "old_spec").alias("spec"),
        "old_outcome", F.substring("old_message", 1, MESSAGE_CHARS).alias("old_message"),
        F.col("old_run_id").alias("old_case_run"),
        "new_outcome", F.substring("new_message", 1, MESSAGE_CHARS).alias("new_message"),
        F.col("new_run_id").alias("new_case_run"))


def mixed_releases(plan: Plan, records):
    """Per target, the mixed-release cases of its latest run that had any: outcome, message, and which node ran which
    vendor and version (`B1 artemis 2.39.0, B2 artemis 2.40.0`, from details.nodes, where the record has it)."""
    from pyspark.sql import functions as F

    nodes = F.map_entries(detail(CASE, "nodes"))
    readable = F.array_join(F.transform(F.array_sort(nodes), lambda x: F.concat_ws(
        " ", x["key"], x["value"]["vendor"], x["value"]["version"])), ", ")
    return (records.where(F.array_contains("spec", MIXED_CLAUSE))
            .join(F.broadcast(plan.mixed_runs), ["target", "run_id"], "left_semi")
            .select("target", "suite", "case", "spec", "outcome",
                    F.substring("message", 1, MESSAGE_CHARS).alias("message"),
                    F.nullif(readable, F.lit("")).alias("nodes"), "run_id"))


def upgrades(plan: Plan, records):
    """Per target, the rolling-upgrade cases (suite upgrade) of its latest run that had any: topology, step (upgrade
    or downgrade), stop (graceful or kill-9), from and to release, outcome, lost, duplicated, resume_s (the
    downtime), a downgrade's result (read or refused) and refusal, and per step of a multi-node topology (its
    `details.steps`: the node, named `router` or `node`) the node's release, lost, duplicated and resume_s."""
    from pyspark.sql import functions as F

    def d(name: str):
        return detail(UPGRADE, name)

    # a step's lost and duplicated are counts like the record's own (record_schema.COUNT)
    steps = F.transform(d("steps"), lambda s: F.struct(
        F.coalesce(s["node"], s["router"]).alias("node"), s["to_version"].alias("to_version"),
        decoded(s["lost"], COUNT.sql).alias("lost"), decoded(s["duplicated"], COUNT.sql).alias("duplicated"),
        s["resume_s"].cast("double").alias("resume_s")))
    return (records.where(F.col("suite") == UPGRADE_SUITE)
            .join(F.broadcast(plan.upgrade_runs), ["target", "run_id"], "left_semi")
            .select("target", "case", "spec", F.coalesce(d("topology"), F.col("topology")).alias("topology"),
                    *[d(name).alias(name) for name in ("step", "stop", "from_version", "to_version")], "outcome",
                    d("lost").alias("lost"), d("duplicated").alias("duplicated"),
                    F.round(F.col("resume_s").cast("double"), 3).alias("resume_s"),
                    d("downgrade").alias("downgrade"), F.substring(d("refusal"), 1, MESSAGE_CHARS).alias("refusal"),
                    steps.alias("steps"), F.substring("message", 1, MESSAGE_CHARS).alias("message"), "run_id"))
