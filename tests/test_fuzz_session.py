"""What both fuzzing modes share (harness/fuzz/session.py) and the `interop fuzz` command's own checks: budgets,
the session's result records (valid schema-1 records the report can read), the progress line, and user
mistakes reported as one line with exit status 2 before any peer starts."""

from __future__ import annotations

import io

import pytest

from harness import cli
from harness.fuzz.session import Finding, FuzzTarget, Progress, SessionReport, parse_budget
from harness.results import validate_record


@pytest.mark.parametrize("text, seconds", [("90", 90.0), ("90s", 90.0), ("10m", 600.0), ("1.5h", 5400.0),
                                           ("500ms", 0.5), (" 2m ", 120.0)])
def test_budgets(text, seconds):
    assert parse_budget(text) == seconds


@pytest.mark.parametrize("text", ["0", "0s", "-5m", "ten minutes", "5d", ""])
def test_bad_budgets_name_what_was_expected(text):
    with pytest.raises(ValueError, match="expected a positive duration such as 90s"):
        parse_budget(text)


def target() -> FuzzTarget:
    return FuzzTarget(role="router", vendor="reference", host="127.0.0.1", port=5672, peer=None,
                      topology="single-router", peer_records={"router": {"vendor": "reference", "version": "0.1",
                                                                         "provider": "process"}})


def test_a_clean_session_is_one_passed_record():
    report = SessionReport(mode="frames", seed=7, budget_s=60.0, executed=1234, duration_s=60.2,
                           figures={"max_rss_mb": 41.0})
    (record,) = report.records(target())
    validate_record(record)
    assert (record["case"], record["suite"], record["outcome"]) == ("FUZZ-FRAMES", "fuzz", "passed")
    assert record["details"] == {"mode": "frames", "seed": 7, "budget_s": 60.0, "executed": 1234, "failures": 0,
                                 "signatures": [], "recorded": [], "figures": {"max_rss_mb": 41.0}}


def test_each_distinct_finding_is_a_failed_record_of_its_own():
    report = SessionReport(mode="stateful", seed=3, budget_s=300.0, executed=88)
    assert report.add(Finding("stateful:multicast:not-all-receivers", "lost", "receiver 2 got nothing"))
    assert not report.add(Finding("stateful:multicast:not-all-receivers", "lost", "the same, found again"))
    assert report.add(Finding("crash:x", "crash", "the router died", reproducer="fuzz/crash_x.py"))
    session, *findings = report.records(target())
    for record in (session, *findings):
        validate_record(record)
    assert session["outcome"] == "failed" and session["details"]["failures"] == 2
    assert "2 distinct failure(s) in 88 programs" in session["message"]
    assert [f["case"] for f in findings] == ["FUZZ-STATEFUL/stateful:multicast:not-all-receivers",
                                             "FUZZ-STATEFUL/crash:x"]
    assert findings[1]["details"]["reproducer"] == "fuzz/crash_x.py"
    assert findings[0]["message"] == "receiver 2 got nothing"


def test_progress_lines_off_a_terminal_are_whole_lines_at_most_every_interval():
    out = io.StringIO()
    progress = Progress("frames router=reference seed 1", 300.0, "cases", every_s=3600.0, stream=out)
    progress.update(1, 0)
    progress.update(2, 0)  # within the interval: not printed
    progress.done(10, 1, "replaying")
    lines = out.getvalue().splitlines()
    assert len(lines) == 2
    assert lines[0].startswith("fuzz frames router=reference seed 1: 1 cases, 0 failure(s), 00:00 / 05:00")
    assert lines[1].endswith("10 cases, 1 failure(s), 00:00 / 05:00  replaying")


@pytest.mark.parametrize("argv, expected", [
    (["fuzz", "--budget", "0"], "fuzz --budget '0': expected a positive duration"),
    (["fuzz", "--cases", "0", "--frames"], "fuzz --cases 0: expected a whole number >= 1"),
    (["fuzz", "--family", "truncated"], "fuzz --family truncated: unknown (expected one of: none"),
    (["fuzz", "--break", "router:no-such-fault"], "unknown fault 'no-such-fault'"),
    (["fuzz", "--peer", "router=nobody"], "nobody"),
    (["fuzz", "--role", "switch"], "invalid choice: 'switch'"),
])
def test_user_mistakes_are_one_line_and_exit_2_before_any_peer_starts(argv, expected, capsys, tmp_path):
    assert cli.main([*argv, "--results", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert expected in err and err.count("\n") == 1, err
    assert not any(tmp_path.iterdir()), "nothing ran, nothing was written"
