"""What a record is to the job: its outcomes, and the suites whose records are not conformance cases or make
tables of their own (their names are harness/record_schema.py's: why each is apart is said here, where it counts).
"""

from __future__ import annotations

from harness import record_schema as rs

OUTCOMES = ("passed", "failed", "error", "skipped", "not-applicable", "xfail")
# An expected difference that belongs to a client stack, not to the peers (suites/expected/client-<stack>.yaml: the
# plugin's xfail reason then reads "expected difference: client-<stack>: ..."). Counted as an outcome of its own,
# `client-xfail`, so that a vendor's pass rate counts only what the vendor answers for: a Proton C++ decimal or a
# rhea ulong says nothing about the broker in between. The client stacks' own table shows them.
CLIENT_XFAIL = "client-xfail"
COUNTED_OUTCOMES = (*OUTCOMES, CLIENT_XFAIL)
BAD = ("failed", "error")
CONFORMANCE_ORDER = ("failed", "xfail", "passed", "not-applicable", "client-difference", "not run")
# The suite of `interop fuzz` records. A fuzz session is not a conformance case: it is a seeded, time-boxed search
# whose outcome says "found something in N programs", cites no clause, and lasts as long as its budget; a finding
# record per signature appears only when one is found. Counted as cases, they would move a target's pass rate and
# durations by how long someone fuzzed, and a finding would show as a new failing case (a regression) or, found by
# one seed and not the next, as a flaky one. So every conformance aggregate leaves them out, a run counts them apart
# (runs.fuzz_records), and they have tables of their own: fuzz_sessions and fuzz_findings.
FUZZ_SUITE = rs.FUZZ_SUITE
# The suite of benchmark records (bench/routing.py --results): figures of a scenario, not a case that conforms or
# not. Kept out of every conformance aggregate like fuzz records, counted apart (runs.bench_records), and shown in
# a table of their own (benchmarks).
BENCH_SUITE = rs.BENCH_SUITE
# The suite of mutation-score records (bench/mutation.py): one per group of reference modules per job, with the
# score and the mutant counts in details. A measurement of the suites, not a case: kept out of every conformance
# aggregate like the benchmarks (counted with them in runs.bench_records), shown in a table of its own (mutation).
MUTATION_SUITE = rs.MUTATION_SUITE
NOT_CASES = rs.NOT_CASES
# The suite of type interop cases (suites/types): they are conformance cases like any other, and their details
# (type family, section, sender and receiver client stack) also make a table of their own (type_interop).
TYPES_SUITE = rs.TYPES_SUITE
# The suite of the networks of brokers (suites/network): conformance cases like any other, whose details (messages
# lost and duplicated, seconds until forwarding resumed after a link outage or a broker's kill) also make a table of
# their own, per case and target (network), so that vendors' networks compare case by case.
NETWORK_SUITE = rs.NETWORK_SUITE


def is_case():
    """A record of a suite's case (not a fuzz session's or a benchmark's)."""
    from pyspark.sql import functions as F

    return ~F.col("suite").isin(*NOT_CASES)


def counted_outcome():
    """A record's outcome as the counts see it: a client stack's recorded difference is `client-xfail`."""
    from pyspark.sql import functions as F

    return F.when(F.col("difference_of").startswith("client-"), F.lit(CLIENT_XFAIL)).otherwise(F.col("outcome"))
