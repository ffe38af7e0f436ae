"""Recorded fuzz findings (harness/fuzz/recorded.py): read from a product's expected file, checked against its
cases, limited by version, and what they change in a session's records and exit status."""

from __future__ import annotations

import textwrap

import pytest

from harness.fuzz.recorded import RecordedFindingsError, recorded_findings
from harness.peers.registry import VENDORS, expected_path
from harness.fuzz.session import Finding, FuzzTarget, SessionReport

CASE = "suites/robustness/test_crashers.py::test_server_survives_the_input[broker-x]"


def _write(tmp_path, body: str):
    (tmp_path / "acme.yaml").write_text(textwrap.dedent(body))
    return tmp_path


def test_a_recorded_finding_is_read_for_its_mode_and_versions(tmp_path):
    folder = _write(tmp_path, f"""
        cases:
          - case: {CASE}
            reason: spins
        fuzz:
          - finding: frames/cpu-after-close:x
            checked_by: {CASE}
            reason: >-
              spins after
              close
          - finding: frames/hang:y
            versions: "<2.0"
            reason: old releases only
          - finding: stateful/stateful:orders:attach-refused
            reason: refuses
          - finding: [frames/hang:z, frames/cpu-after-close:z]
            checked_by: {CASE}
            reason: both kinds of one input
        """)
    both = {"hang:z": "both kinds of one input", "cpu-after-close:z": "both kinds of one input"}
    assert recorded_findings("acme", "2.1.0", "frames", folder) == {"cpu-after-close:x": "spins after close", **both}
    assert set(recorded_findings("acme", "1.9", "frames", folder)) == {"cpu-after-close:x", "hang:y", *both}
    assert set(recorded_findings("acme", None, "frames", folder)) == {"cpu-after-close:x", *both}  # release unknown
    assert recorded_findings("acme", "2.1.0", "stateful", folder) == {"stateful:orders:attach-refused": "refuses"}
    assert recorded_findings("nobody", "1", "frames", folder) == {}


@pytest.mark.parametrize("entry, complaint", [
    ("- finding: frames/hang:y\n", "fuzz[0]: expected a mapping with 'finding'"),
    ("- {finding: hang:y, reason: r}\n", "fuzz[0].finding: expected frames/<signature>"),
    ("- {finding: frames/hang:y, reason: r, checked_by: nowhere}\n", "fuzz[0].checked_by: 'nowhere' is not a case"),
    ("- {finding: frames/hang:y, reason: r, versions: 'about 2'}\n", "fuzz[0].versions: expected PEP 440"),
])
def test_a_malformed_entry_is_named(tmp_path, entry, complaint):
    folder = _write(tmp_path, "fuzz:\n" + entry)
    with pytest.raises(RecordedFindingsError) as caught:
        recorded_findings("acme", "2.0", "frames", folder)
    assert complaint in str(caught.value) and "acme.yaml" in str(caught.value)


@pytest.mark.parametrize("vendor", [v.name for v in VENDORS if expected_path(v.name).exists()])
def test_every_products_recorded_findings_are_well_formed(vendor):
    for mode in ("frames", "stateful"):
        for reason in recorded_findings(vendor, "99.0.0", mode).values():
            assert reason


def _report(*signatures: str, recorded: dict | None = None) -> SessionReport:
    report = SessionReport(mode="frames", seed=5, budget_s=20.0, executed=10, recorded=recorded or {})
    for signature in signatures:
        report.add(Finding(signature, signature.split(":")[0], f"the server did {signature}"))
    return report


TARGET = FuzzTarget(role="broker", vendor="acme", host="127.0.0.1", port=1, peer=None, topology="t")


def test_a_session_that_met_only_recorded_findings_is_an_expected_difference():
    report = _report("hang:x", recorded={"hang:x": "known to hang"})
    assert report.new_findings == []
    session, finding = report.records(TARGET)
    assert session["outcome"] == "xfail" and session["details"]["recorded"] == ["hang:x"]
    assert finding["outcome"] == "xfail" and "recorded difference: known to hang" in finding["message"]


def test_a_new_finding_fails_the_session_beside_recorded_ones():
    report = _report("hang:x", "close-wait:y", recorded={"hang:x": "known to hang"})
    assert [f.signature for f in report.new_findings] == ["close-wait:y"]
    session, *findings = report.records(TARGET)
    assert session["outcome"] == "failed" and "1 of them recorded" in session["message"]
    assert session["message"].endswith("close-wait:y")  # the new one is named first
    assert {f["details"]["signature"]: f["outcome"] for f in findings} == {"hang:x": "xfail", "close-wait:y": "failed"}


def test_a_session_that_found_nothing_passed():
    assert _report().records(TARGET)[0]["outcome"] == "passed"


def test_a_pattern_records_every_input_of_one_fault(tmp_path):
    folder = _write(tmp_path, f"""
        cases:
          - case: {CASE}
            reason: leaks
        fuzz:
          - finding: frames/close-wait:sasl-mechanisms.*
            checked_by: {CASE}
            reason: a client's sasl-mechanisms frame is never closed
        """)
    recorded = recorded_findings("acme", "1.0", "frames", folder)
    assert "close-wait:sasl-mechanisms.truncated" in recorded
    assert recorded.get("close-wait:sasl-mechanisms.sasl-server-mechanisms.wrong-type-int-negative") == \
        "a client's sasl-mechanisms frame is never closed"
    assert "close-wait:sasl-outcome.code-wrong-type" not in recorded and "hang:sasl-mechanisms.x" not in recorded
    report = _report("close-wait:sasl-mechanisms.truncated", recorded=recorded)
    assert report.new_findings == [] and report.records(TARGET)[0]["outcome"] == "xfail"
