"""The config differential's own logic (harness/fuzz/configs.py and the modules it uses), without real products:
the generators, the start watcher, qdrouterd's ready rule, the verdicts and their classification (agreements,
recorded differences, findings), the planted faults, and a session over judges that follow a written rule (the
only stand-ins here: they play the products above the real ones, to check the session, not the products;
tests/test_fuzz_config_products.py runs the real ones).
"""

from __future__ import annotations

import html
import re
import sys
import xml.parsers.expat
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from harness.breaks import BreakError
from harness.fuzz import config_known
from harness.fuzz.config_breaks import parse_file_break, rewrite_for, unfold_one_line_sections
from harness.fuzz.config_broker_gen import broker_docs
from harness.fuzz.config_judges import QdrouterdJudge, Verdict, verdict_of
from harness.fuzz.config_router_gen import RouterDoc, Section, render, router_docs
from harness.fuzz.configs import ConfigSession, _slug, run_session
from harness.fuzz.startwatch import Start, watch

FEW = settings(max_examples=60, deadline=None, suppress_health_check=list(HealthCheck), database=None)

# ---- generators -----------------------------------------------------------------------------------------------


@FEW
@given(router_docs())
def test_router_files_listen_on_loopback_port_0_only(doc):
    """Every listener keeps its host and port lines (edits never remove or rewrite them): a loopback address (or
    one that cannot be bound) and port 0 or a near miss that is no fixed well-known port."""
    text = doc.render()
    for section in doc.sections:
        if section.name != "listener":
            continue
        host, port = dict(section.attrs)["host"], dict(section.attrs)["port"]
        assert host in ("127.0.0.1", "localhost", "192.0.2.1", "256.1.1.1", "127.0.0.1:0")
        assert port.strip() in ("0", "00", "+0", "-1", "65536", "x", "nosuchservice", "0.0")
        assert f"host: {host}" in text and f"port: {port}" in text


@FEW
@given(router_docs())
def test_router_documents_render_the_same_twice(doc):
    assert doc.render() == doc.render()


def test_router_rendering_and_edits():
    doc = RouterDoc([Section("router", [("mode", "interior"), ("id", "R1")]),
                     Section("listener", [("host", "127.0.0.1"), ("port", "0")])])
    assert render(doc) == "router {\n    mode: interior\n    id: R1\n}\n\nlistener {\n    host: 127.0.0.1\n" \
                          "    port: 0\n}\n"
    doc.edits = [("one-line", 0, 0, "")]
    assert render(doc).splitlines()[0] == "router { mode: interior id: R1 }"
    doc.edits = [("drop-attr", 1, 0, ""), ("set-value", 1, 1, "5672")]  # a listener's host and port stay
    assert "host: 127.0.0.1" in render(doc) and "port: 0" in render(doc)
    doc.edits = [("key-case", 0, 0, "snake"), ("crlf", 0, 0, "")]
    assert render(doc).startswith("router {\r\n    mode: interior\r\n")


@FEW
@given(broker_docs())
def test_broker_acceptors_always_name_their_port_on_a_local_address(doc):
    """Artemis would take 61616 for an acceptor URL without a port: every acceptor names one, on loopback or on
    an address that cannot be bound; edits leave acceptors alone."""
    acceptors = [el for el in _all(doc.core) if el.tag == "acceptor"]
    assert acceptors
    for acceptor in acceptors:
        assert re.match(r"^(tcp|TCP|amqp|vm|tcp:)://(127\.0\.0\.1|localhost|192\.0\.2\.1|\[::1\]|256\.1\.1\.1):"
                        r"(0|-1|65536|x|00)\?", acceptor.text), acceptor.text
        # as a value: a char-ref edit may write a character of it as &#116; (Hypothesis found one), the same URL
        assert acceptor.text in html.unescape(doc.render())


def _all(el):
    return [c for child in el.children for c in (child, *_all(child))]


@FEW
@given(broker_docs())
def test_broker_documents_without_edits_are_well_formed(doc):
    doc.edits = []
    parser = xml.parsers.expat.ParserCreate()
    parser.Parse(doc.render(), True)  # raises when not well-formed
    assert '<core xmlns="urn:activemq:core">' in doc.render()


# ---- planted faults ---------------------------------------------------------------------------------------------


def test_unfold_one_line_sections():
    text = "router { mode: interior id: R1 }\n  address { prefix: a distribution: multicast }\nlog {\n}\n"
    assert unfold_one_line_sections(text) == ("router {\n    mode: interior\n    id: R1\n}\n  address {\n"
                                              "      prefix: a\n      distribution: multicast\n  }\nlog {\n}\n")


def test_file_breaks_parse_and_apply_to_the_matching_peer_only():
    b = parse_file_break("router=reference:one-line-sections")
    assert (b.role, b.vendor, b.fault) == ("router", "reference", "one-line-sections")
    text = "router { id: R1 }\n"
    assert rewrite_for(text, "router", "reference", [b]) == "router {\n    id: R1\n}\n"
    assert rewrite_for(text, "router", "qdrouterd", [b]) == text
    with pytest.raises(BreakError, match="unknown fault 'no-priority' for --configs"):
        parse_file_break("router:no-priority")
    with pytest.raises(BreakError, match="breaks a router, not a broker"):
        parse_file_break("broker:one-line-sections")


# ---- watching a start -----------------------------------------------------------------------------------------


def _watch(code: str, deadline_s: float = 5.0) -> Start:
    import subprocess

    proc = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    try:
        return watch(proc.stdout.fileno(), proc.poll, proc.send_signal, lambda text: "READY" in text, deadline_s)
    finally:
        proc.kill()
        proc.wait()
        proc.stdout.close()


def test_watch_sees_ready_exit_and_deadline():
    ready = _watch("import sys, time; print('READY', flush=True); time.sleep(30)")
    assert (ready.status, ready.accepted) == ("ready", True)
    refused = _watch("import sys; print('bad.conf:3: no', flush=True); sys.exit(1)")
    assert (refused.status, refused.code, refused.accepted) == ("exited", 1, False)
    assert "bad.conf:3: no" in refused.output
    silent = _watch("import time; time.sleep(30)", deadline_s=0.5)
    assert (silent.status, silent.accepted) == ("running", True)


def test_qdrouterd_ready_rule():
    start = "SERVER (notice) Operational, 4 Threads Running\n"
    listener = "CONN_MGR (info) Configured Listener: 127.0.0.1:0 proto=any, role=normal\n"
    assert not QdrouterdJudge.ready(listener)
    assert not QdrouterdJudge.ready(listener + start)
    assert QdrouterdJudge.ready(listener + start + "SERVER (notice) Listening on 127.0.0.1:4000\n")
    failed = "SERVER (error) Listener error on 127.0.0.1:0: Servname not supported\n"
    assert not QdrouterdJudge.ready(listener + start + failed), "the first listener failing ends qdrouterd"
    connector = "CONN_MGR (info) Configured Connector: 127.0.0.1:1 proto=any, role=normal\n"
    assert QdrouterdJudge.ready(connector + listener + start + failed), "with a connector it runs on"
    assert QdrouterdJudge.ready(start), "no listener: ready once operational"


# ---- verdicts and their classification --------------------------------------------------------------------------


def _v(decision: str, reason: str, output: str = "") -> Verdict:
    return Verdict(decision, reason, output or reason)


class _Judge:
    """Stands in for a product: the verdict of `rule(text)`."""

    def __init__(self, rule):
        self.rule = rule

    def judge(self, path: Path) -> Verdict:
        return self.rule(path.read_text())


def _session(tmp_path, reference, product, role="router") -> ConfigSession:
    return ConfigSession(role, _Judge(reference), _Judge(product), tmp_path)


def test_agreements_are_counted(tmp_path):
    session = _session(tmp_path, lambda t: _v("accept", "ready"), lambda t: _v("accept", "ready"))
    assert session.run_case("router {\n}\n").finding is None
    session.reference.rule = session.product.rule = lambda t: _v("refuse", "f.conf:1: no")
    session.run_case("x")
    assert (session.counts["both-accept"], session.counts["both-refuse"], session.cases) == (1, 1, 2)
    assert not list(tmp_path.iterdir()), "each case's files are removed once judged"


def test_a_disagreement_is_a_finding_with_a_stable_signature(tmp_path):
    session = _session(tmp_path, lambda t: _v("accept", "ready"),
                       lambda t: _v("refuse", "Exception: Cannot load configuration file /tmp/x/q.conf: Expecting "
                                              "value: line 1 column 2 (char 1)"))
    result = session.run_case("router { mode: interior }\n")
    assert result.finding[0] == "router:reference-accepts:expecting-value-line-column"
    assert result.finding[1] == "divergence"
    assert session.failing[result.finding[0]] is result
    session2 = _session(tmp_path, lambda t: _v("refuse", "/a/b.conf:7: listener: 'port' must be a port number, "
                                                         "got 'x'"), lambda t: _v("accept", "ready"))
    assert session2.run_case("y").finding[0] == "router:reference-refuses:listener-port-must-be-a-port"


def test_a_recorded_difference_needs_both_sides_evidence(tmp_path):
    reference = lambda t: _v("refuse", "/f.conf:3: address: 'prefix' and 'pattern' cannot both be given")  # noqa: E731
    ignored = "ROUTER (warning) Cannot set both 'prefix' and 'pattern': ignoring configured address a, b\n"
    started = "SERVER (notice) Operational, 4 Threads Running\n"
    session = _session(tmp_path, reference, lambda t: _v("accept", "ready", ignored + started))
    result = session.run_case("address {\n}\n")
    assert (result.known, result.finding) == ("router.address-prefix-and-pattern", None)
    assert session.known == {"router.address-prefix-and-pattern": 1}
    # the same refusal, but qdrouterd said nothing about ignoring the address: not this recorded difference
    session = _session(tmp_path, reference, lambda t: _v("accept", "ready", started))
    assert session.run_case("address {\n}\n").finding is not None


def test_the_references_own_rules(tmp_path):
    traceback = "Traceback (most recent call last):\n  File ...\nValueError: duplicate pattern 'a' (same as 'a')"
    session = _session(tmp_path, lambda t: _v("refuse", "ValueError: duplicate pattern 'a'", traceback),
                       lambda t: _v("refuse", "no"))
    assert session.run_case("x").finding[:2] == ("reference-traceback:valueerror", "crash")
    session = _session(tmp_path, lambda t: _v("refuse", "something went wrong"), lambda t: _v("refuse", "no"))
    assert session.run_case("x").finding[1] == "message", "a refusal must start with FILE:LINE:"


def test_an_undecided_judge_is_counted_not_reported(tmp_path):
    session = _session(tmp_path, lambda t: _v("undecided", "checker died"), lambda t: _v("accept", "ready"))
    assert session.run_case("x").finding is None and session.counts["undecided"] == 1


def test_verdict_of_a_start():
    assert verdict_of(Start("ready", None, "x", 0.1), lambda o: "?").accepted
    running = verdict_of(Start("running", None, "", 3.0), lambda o: "?")
    assert running.accepted and "no ready line" in running.reason
    refused = verdict_of(Start("exited", 1, "a\nf.conf:2: bad\n", 0.1), lambda o: o.splitlines()[-1])
    assert (refused.decision, refused.reason) == ("refuse", "f.conf:2: bad")


def test_slugs_drop_values_paths_and_numbers():
    assert _slug("listener: 'port' must be a port number, got '65536'") == "listener-port-must-be-a-port"
    assert _slug("IllegalArgumentException: AMQ229071: # can only be at end of match") == \
        "illegalargumentexception-amq-can-only-be-at"


def test_every_recorded_difference_says_why_and_is_unique():
    ids = [k.id for k in config_known.KNOWN]
    assert len(ids) == len(set(ids))
    for known in config_known.KNOWN:
        assert known.why.startswith(("deliberate:", "harmless:")), known.id
        re.compile(known.reference), re.compile(known.product_evidence)


# ---- a whole session over rule-following judges ----------------------------------------------------------------


def test_a_session_finds_shrinks_and_reports_a_planted_difference(tmp_path):
    """The stand-in product refuses any file with a section on one line (as qdrouterd does), the stand-in
    reference takes everything: the session must find it, shrink it (to a few short sections) and write it out."""
    one_line = re.compile(r"^\s*[\w-]+\s*\{.*\}\s*$", re.MULTILINE)

    def product(text):
        return _v("refuse", "Cannot load configuration file q.conf: Expecting value") if one_line.search(text) \
            else _v("accept", "ready")

    report = run_session("router", _Judge(lambda t: _v("accept", "ready")), _Judge(product), seed=3, budget_s=20,
                         out_dir=tmp_path)
    (finding,) = report.findings
    assert finding.signature == "router:reference-accepts:expecting-value"
    text = finding.evidence["file_text"]
    assert one_line.search(text) and len(text.splitlines()) <= 25, text
    assert Path(finding.reproducer).read_text() == text
    records = report.records(_Target())
    assert [r["case"] for r in records] == ["FUZZ-CONFIGS", "FUZZ-CONFIGS/" + finding.signature]
    assert records[0]["outcome"] == "failed" and records[0]["details"]["executed"] == report.executed > 0


class _Target:
    topology, peer_records = "config-files", {"router": {"vendor": "qdrouterd"}}


@pytest.mark.parametrize("text", ["router {\n    id: R1\n}\n"])
def test_a_session_with_agreeing_judges_finds_nothing(tmp_path, text):
    agree = _Judge(lambda t: _v("accept", "ready"))
    report = run_session("broker", agree, agree, seed=1, budget_s=3, out_dir=tmp_path)
    assert report.findings == [] and report.executed > 0
    assert report.figures["both-accept"] == report.executed


@settings(max_examples=20, deadline=None, database=None)
@given(st.text(max_size=80))
def test_slugs_are_safe_signature_words(text):
    assert re.fullmatch(r"[a-z0-9.-]+", _slug(text))
