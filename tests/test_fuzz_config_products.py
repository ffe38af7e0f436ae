"""The config differential against the real products (qdrouterd 1.19, Artemis 2.40), each case skipped where
its product is not here:

* issue 53's own file (a section on one line) is refused by qdrouterd and by the reference;
* a session with a planted fault (the reference router reading one-line sections as it once did) finds the
  difference, exits 1 and prints the file;
* the Artemis config checker (one JVM running Artemis's own start-up) agrees with `artemis run` on files of each
  kind: accepted, refused by the XSD, refused at activation, refused by an Artemis rule, and one Artemis accepts
  that a careless reader would refuse;
* without the product the session says so, writes a `skipped` record and exits 1 (as the other modes do when a
  peer cannot start).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from harness.fuzz.config_judges import QdrouterdJudge, ReferenceJudge

ROOT = Path(__file__).resolve().parent.parent
needs_qdrouterd = pytest.mark.skipif(shutil.which("qdrouterd") is None, reason="qdrouterd is not on PATH")


def _artemis():
    from harness.fuzz.artemis_check import ArtemisJudge

    judge = ArtemisJudge()
    if judge.unavailable():
        pytest.skip(judge.unavailable())
    return judge


def _interop(*args: str, env: dict | None = None, timeout: float = 240) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "harness.cli", *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout, env=env)


@needs_qdrouterd
def test_a_section_on_one_line_is_refused_by_qdrouterd_and_by_the_reference(tmp_path):
    conf = tmp_path / "qdrouterd.conf"
    conf.write_text("router { mode: interior id: R1 }\n")
    reference = ReferenceJudge("router")
    try:
        ours = reference.judge(conf)
    finally:
        reference.close()
    theirs = QdrouterdJudge().judge(conf)
    assert theirs.decision == "refuse" and "Expecting value" in theirs.reason
    assert ours.decision == "refuse"
    assert ours.reason.startswith(f"{conf}:1: a section on one line"), ours.reason


@needs_qdrouterd
def test_the_session_finds_a_planted_difference(tmp_path):
    """With the reference router handed the unfolded file (the reading of before issue 53), the session finds
    a file the reference accepts and qdrouterd refuses; seed 7 meets one among its first cases."""
    done = _interop("fuzz", "--configs", "--peer", "router=qdrouterd", "--break",
                    "router=reference:one-line-sections", "--seed", "7", "--budget", "30s", "--results",
                    str(tmp_path))
    assert done.returncode == 1, done.stderr[-3000:]
    assert "router:reference-accepts:expecting-value" in done.stderr
    printed = [line.removeprefix("      | ") for line in done.stderr.splitlines() if line.startswith("      | ")]
    assert any(line.rstrip().endswith("}") and "{" in line and ":" in line for line in printed), printed
    (run,) = [d for d in tmp_path.iterdir() if d.is_dir()]
    records = [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines()]
    session = next(r for r in records if r["case"] == "FUZZ-CONFIGS")
    assert session["outcome"] == "failed" and session["config_fault"] == "router=reference:one-line-sections"
    assert session["peers"]["router"]["vendor"] == "qdrouterd"
    finding = next(r for r in records if r["case"].startswith("FUZZ-CONFIGS/router:reference-accepts"))
    assert Path(finding["details"]["reproducer"]).read_text() == finding["details"]["evidence"]["file_text"]


def test_an_absent_product_is_said_and_skipped(tmp_path):
    env = {**os.environ, "PATH": os.path.dirname(sys.executable) + os.pathsep + "/usr/bin:/bin"}
    if shutil.which("qdrouterd", path=env["PATH"]):
        pytest.skip("qdrouterd is in /usr/bin here: cannot hide it")
    done = _interop("fuzz", "--configs", "--peer", "router=qdrouterd", "--seed", "1", "--budget", "5s",
                    "--results", str(tmp_path), env=env)
    assert done.returncode == 1
    assert "qdrouterd is not available here, session skipped: qdrouterd is not on PATH" in done.stderr
    (run,) = [d for d in tmp_path.iterdir() if d.is_dir()]
    (record,) = [json.loads(line) for line in (run / "results.jsonl").read_text().splitlines()]
    assert (record["case"], record["outcome"]) == ("FUZZ-CONFIGS", "skipped")


BROKER = """<?xml version="1.0" encoding="UTF-8"?>
<configuration xmlns="urn:activemq">
  <core xmlns="urn:activemq:core">
    <name>B1</name>
    <persistence-enabled>false</persistence-enabled>
    <security-enabled>false</security-enabled>
    <acceptors>
      <acceptor name="clients">tcp://127.0.0.1:0?protocols=AMQP</acceptor>
    </acceptors>
    <addresses>
      <address name="orders"><anycast><queue name="orders"/></anycast></address>
    </addresses>
  </core>
</configuration>
"""
# file -> what `artemis run` does with it (each checked against `artemis run` below)
BROKER_FILES = {
    "valid": (BROKER, "accept"),
    "xsd: a value element twice": (BROKER.replace("<name>B1</name>", "<name>B1</name><name>B2</name>"), "refuse"),
    "activation: '#' inside a match": (BROKER.replace("</addresses>", '</addresses><address-settings>'
                                                      '<address-setting match="a#b"/></address-settings>'), "refuse"),
    "AMQ229247: an address without routing": (BROKER.replace('<anycast><queue name="orders"/></anycast>', ""),
                                              "refuse"),
    "xs:boolean 1 (which Artemis reads as false)": (BROKER.replace("<persistence-enabled>false<",
                                                                    "<persistence-enabled>1<"), "accept"),
}


def test_the_artemis_checker_agrees_with_artemis_run(tmp_path):
    judge = _artemis()
    try:
        for name, (text, expected) in BROKER_FILES.items():
            folder = tmp_path / name.split(":")[0].replace(" ", "-").replace("'", "")
            folder.mkdir()
            (folder / "broker.xml").write_text(text)
            checked = judge.judge(folder / "broker.xml")
            real = judge.confirm(folder / "broker.xml")
            assert (name, checked.decision, real.decision) == (name, expected, expected), \
                f"checker: {checked.reason}; artemis run: {real.reason}"
    finally:
        judge.close()
