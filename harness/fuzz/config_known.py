"""Recorded differences of the config differential: files that the reference and the real product judge
differently on purpose, each with its evidence. A disagreement that matches an entry is counted under the entry's
id (the session's figures) instead of being reported; every other disagreement is a finding.

An entry matches only when both sides say what it records: the reference's refusal (or acceptance) line matches
`reference`, and the product's own output matches `product` - so an entry cannot hide a disagreement for
another reason. Each says which way the difference goes and why it is kept.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Known:
    id: str
    role: str  # router | broker
    product: str  # qdrouterd | artemis
    refused_by: str  # reference | product: which side refuses the file
    reference: str  # regex searched in the reference's verdict line (its refusal, or "ready")
    product_evidence: str  # regex searched in the product's output (its refusal, or a line of its log)
    why: str

    def matches(self, role: str, product: str, reference_verdict, product_verdict) -> bool:
        refused_by = "reference" if not reference_verdict.accepted else "product"
        return (self.role == role and self.product == product and self.refused_by == refused_by
                and re.search(self.reference, reference_verdict.reason) is not None
                and re.search(self.product_evidence, product_verdict.output + "\n" + product_verdict.reason)
                is not None)


# qdrouterd read and applied the file, and runs: its ready line, or, where the file's log section silences notices
# (enable: warning+), still running at the judge's deadline (config_judges.verdict_of; make run, seed 538119116)
_STARTED = r"SERVER \(notice\) Operational|still running after [\d.]+s \(no ready line\)"


def _router(id_: str, reference: str, product: str, why: str) -> Known:
    return Known(f"router.{id_}", "router", "qdrouterd", "reference", reference, product, why)


def _broker(id_: str, reference: str, why: str) -> Known:
    """Artemis accepted: its checker's line starts `accept` (harness/fuzz/artemis_check.py)."""
    return Known(f"broker.{id_}", "broker", "artemis", "reference", reference, r"^accept ", why)


KNOWN: tuple[Known, ...] = (
    # ---- router: the reference refuses, qdrouterd starts -------------------------------------------------
    _router("not-supported-yet", r"not supported yet by the reference router", _STARTED,
            "deliberate: the reference router refuses, at its line, a construct it does not implement (an edge "
            "router, a policy section, an http listener, ...) instead of running without it; qdrouterd runs it"),
    _router("address-prefix-and-pattern", r"address: 'prefix' and 'pattern' cannot both be given",
            r"Cannot set both 'prefix' and 'pattern': ignoring",
            "deliberate: qdrouterd starts without the address (a warning in its log); the reference refuses the "
            "file rather than run without a section it was given"),
    _router("match-target-missing", r"(address|linkRoute): one of 'prefix' or 'pattern' is required",
            r"Must set either 'prefix' or 'pattern' attribute:\s+ignoring",
            "deliberate: qdrouterd starts without the section (a warning in its log); the reference refuses"),
    _router("entity-refused-by-core", r"^\S+:\d+: (address|linkRoute|autoLink): ",
            r"AGENT \(error\) Error performing CREATE of org\.apache\.qpid\.dispatch\.router\.config\."
            r"(address|linkRoute|autoLink)|ROUTER_CORE \(error\) Error configuring (address|linkRoute|autoLink)",
            "deliberate: qdrouterd's core refuses the entity (an error in its log: a priority or phase out of "
            "range, a pattern it cannot read, ...) and runs without it; the reference refuses the file"),
    _router("match-target-text", r"(address|linkRoute): (prefix|pattern) '.*' must not contain whitespace"
            r"|(address|linkRoute): pattern '.*': word '.*' mixes a wildcard", _STARTED,
            "deliberate: qdrouterd takes a prefix or pattern with white space, or a word mixing '*' or '#' with "
            "other characters, as literal text, silently; the reference refuses it as the likely typo it is"),
    _router("unknown-ssl-profile", r"sslProfile '.*' does not name an sslProfile section", _STARTED,
            "deliberate: qdrouterd runs a listener or connector that names no existing sslProfile without TLS, "
            "and says nothing; the reference refuses the file"),
    _router("require-ssl-without-profile", r"listener: requireSsl/requireEncryption needs an sslProfile", _STARTED,
            "deliberate: qdrouterd runs a listener that requires TLS it cannot offer (every client is turned "
            "away); the reference refuses the file"),
    _router("duplicate-address", r"address: .* duplicates .* of line \d+", _STARTED,
            "deliberate: two address sections for one pattern; qdrouterd keeps one of them, silently; the "
            "reference refuses the file"),
    _router("duplicate-link-route", r"linkRoute: .* duplicates .* of line \d+", _STARTED,
            "deliberate: two link routes for one pattern and direction; qdrouterd keeps both and uses one, "
            "silently; the reference refuses the file"),
    _router("auto-link-unbound", r"autoLink: exactly one of 'connection' or 'containerId' is required", _STARTED,
            "deliberate: an autoLink with no connection or containerId (never attaches) or with both; qdrouterd "
            "keeps it idle; the reference refuses the file"),
    _router("auto-link-unknown-connection", r"autoLink: connection '.*' does not name any listener or connector",
            _STARTED, "deliberate: an autoLink over a connection this router does not have never attaches; the "
            "reference refuses the file (a linkRoute may name one: 003 12.2.3 shares link-route configuration)"),
    _router("security-checked-at-start",
            r"sslProfile '.*': (a listener's profile needs|certFile|privateKeyFile|caCertFile|password)"
            r"|: cannot use its TLS files|EXTERNAL needs|authenticatePeer with only ANONYMOUS|router: saslConfigDir:"
            r"|saslMechanisms PLAIN needs saslUsername|saslMechanisms EXTERNAL needs an sslProfile", _STARTED,
            "deliberate: the reference loads TLS files, the users file and checks that the SASL settings can "
            "work before it listens; qdrouterd starts and fails each connection that needs them"),
    _router("listener-cannot-listen", r"listener: 'port' must be a port number|listener .*: cannot listen on",
            r"SERVER \(error\) (Listener error on|No HTTP support to listen on)",
            "deliberate: a listener that cannot listen (a port or host that does not resolve or bind) ends qdrouterd "
            "unless it has connectors, then it runs without the listener (an error in its log); the reference "
            "refuses the file either way"),
    _router("sasl-mechanisms", r"'saslMechanisms' must be a space-separated list of", _STARTED,
            "deliberate: the reference offers ANONYMOUS, PLAIN and EXTERNAL and refuses a listener or connector "
            "configured with another; qdrouterd passes any list to its SASL library"),
    # ---- broker: the reference refuses, Artemis starts -----------------------------------------------------
    _broker("not-supported-yet", r"not supported (yet )?by the reference broker|is not supported yet",
            "deliberate: the reference broker refuses, at its line, an element or value that would change behaviour "
            "it does not implement (clustering, diverts, filters, non-default delivery knobs, ...)"),
    _broker("no-amqp-acceptor", r"does not include AMQP, and no other acceptor does",
            "deliberate: the reference broker serves AMQP only; a file whose acceptors all exclude AMQP would "
            "start a broker no client of it can reach, and is refused; Artemis serves the other protocols"),
    _broker("in-vm-acceptor", r"expected tcp://HOST:PORT\?protocols=AMQP, got 'vm://",
            "deliberate: Artemis starts a vm:// acceptor, which only clients inside its own JVM can use; the "
            "reference serves AMQP over TCP only and refuses it at its line (make run of 2026-12-07, seed "
            "914143491: three files, each with a vm:// acceptor)"),
    _broker("unknown-acceptor-parameter", r"acceptor '.*': unknown parameter",
            "deliberate: Artemis ignores an acceptor URL parameter it does not know (a typo is silently lost); "
            "the reference refuses it, since it cannot tell whether it would change behaviour"),
    _broker("duplicate-declaration", r"(address|queue|acceptor) '.*' is declared twice",
            "deliberate: Artemis takes an address, a queue or an acceptor name declared twice (it deploys one of "
            "them, silently; for acceptors which one depends on Java hash order); the reference refuses the second "
            "declaration at its line"),
    _broker("repeated-permission", r"security-setting '.*': permission '.*' is given twice",
            "deliberate: Artemis keeps one of two <permission>s of a type in a setting, silently; the reference "
            "refuses the file"),
    _broker("login-files", r"needs \S+ \(the reference reads Artemis's properties login module files",
            "deliberate: the reference reads the properties login files when it starts; Artemis reads them at the "
            "first login"),
)


def match(role: str, product: str, reference_verdict, product_verdict) -> Known | None:
    return next((k for k in KNOWN if k.matches(role, product, reference_verdict, product_verdict)), None)
