"""Suite cases that inject a fault say so in their result record's `fault` field (issue 36: the report said that no
case ran under an injected fault, because the plugin always wrote null). Real cases on the reference peers, run in
a pytest of their own: a proxy toxic, a kill -9 and restart, a link outage, and a case without a fault."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
CASES = [
    "suites/faults/test_faults.py::test_reset_mid_stream_then_resend_gets_everything_through",
    "suites/broker/test_durability.py::test_kill_9_during_durable_send_loses_no_accepted_message",
    "suites/network/test_faults.py::test_a_network_link_outage_loses_nothing_and_forwarding_resumes_when_it_ends[same]",
    "suites/routing/test_addresses.py",
]


def test_each_injected_fault_is_in_its_cases_record_and_a_case_without_one_has_none(tmp_path):
    done = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:randomly", "-p", "no:cacheprovider",
                           "--results", str(tmp_path), *CASES], cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    records = [json.loads(line) for path in tmp_path.glob("*/results.jsonl") for line in path.read_text().splitlines()]
    by_case = {r["case"].split("::")[1].split("[")[0]: r for r in records}

    reset = by_case["test_reset_mid_stream_then_resend_gets_everything_through"]["fault"]
    assert (reset["name"], reset["target"]) == ("reset_peer", "link R1->B1"), reset
    assert reset["faults"][0]["stream"] == "downstream" and reset["at_s"] >= 0

    killed = {r["case"].split("[")[1].rstrip("]"): r["fault"] for r in records
              if "test_kill_9_during_durable_send" in r["case"]}
    assert (killed["idle"]["name"], killed["idle"]["target"]) == ("kill -9 and restart", "broker B1"), killed
    # on the slow disk, the disk comes first (the fixture), then the kill, each with its own figures
    assert [(f["name"], f.get("delay_ms")) for f in killed["slow"]["faults"]] == [
        ("slow disk", 250), ("kill -9 and restart", None)], killed["slow"]

    outage = by_case["test_a_network_link_outage_loses_nothing_and_forwarding_resumes_when_it_ends"]["fault"]
    assert outage["name"] == "link outage" and outage["target"].startswith("link "), outage

    plain = [r for r in records if r["suite"] == "routing"]
    assert plain and all(r["fault"] is None for r in plain)
