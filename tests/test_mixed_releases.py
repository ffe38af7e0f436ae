"""The previous release of each product (harness/peers/versions.py `previous_choice`), the suites' mixed-release
pairings built on it (suites/conftest.py `mixed_releases`), and the record of a topology that mixes releases
(RunningTopology.node_records). No product is started."""

from types import SimpleNamespace

import pytest

from harness.peers.base import PeerInfo
from harness.peers.launch import RunningTopology
from harness.peers.registry import REGISTRY
from harness.peers.versions import previous_choice, versions_of
from harness.pytest_plugin import NOT_APPLICABLE
from suites.conftest import PREVIOUS, mixed_releases


@pytest.mark.parametrize("choice,previous", [
    ("artemis", "artemis@2.39.0"), ("artemis@2.40.0", "artemis@2.39.0"), ("artemis@native", "artemis@2.39.0@native"),
    ("qdrouterd", "qdrouterd@1.18.0"), ("activemq-classic", "activemq-classic@6.1.8"),
])
def test_a_product_with_versions_has_its_previous_release(choice, previous):
    assert previous_choice(choice) == (previous, "")


@pytest.mark.parametrize("choice,why", [
    ("reference", "one version only"), ("rabbitmq", "one version only"),
    ("external:amqp://127.0.0.1:5672?vendor=x", "someone else runs"),
    ("artemis@2.39.0", "the previous release itself"), ("qdrouterd@1.18.0", "the previous release itself"),
])
def test_there_is_no_previous_release_to_mix_with(choice, why):
    previous, reason = previous_choice(choice)
    assert previous is None and why in reason


def test_every_product_with_versions_names_a_previous_release_other_than_its_pinned_one():
    for entry in REGISTRY:
        if entry.versions:
            versions = versions_of(entry.spec.vendor)
            assert versions.previous and versions.previous != versions.default, entry.spec.vendor


def _session(**choices):
    return SimpleNamespace(choices=choices)


def test_a_previous_node_gets_the_previous_release_of_the_sessions_vendor_and_the_others_stay():
    pair = mixed_releases(_session(broker="artemis"), "broker", {"DC1": PREVIOUS, "DC3": "reference"})
    assert pair == {"DC1": "artemis@2.39.0", "DC3": "reference"}
    assert mixed_releases(_session(broker="reference"), "broker", None) is None
    assert mixed_releases(_session(broker="reference"), "broker", {"DC2": "reference"}) == {"DC2": "reference"}


@pytest.mark.parametrize("role,choice", [("broker", "rabbitmq"), ("broker", "reference"), ("router", "reference"),
                                         ("router", "qdrouterd@1.18.0")])
def test_a_mixed_release_pairing_without_a_previous_release_is_not_applicable(role, choice):
    with pytest.raises(pytest.skip.Exception) as skipped:
        mixed_releases(_session(**{role: choice}), role, {"N": PREVIOUS})
    assert str(skipped.value.msg).startswith(NOT_APPLICABLE)


class _Peer:
    def __init__(self, role, vendor, version):
        self.role, self.info = role, PeerInfo(vendor, version, "native")


def test_a_topology_that_mixes_releases_records_each_node():
    mixed = RunningTopology(topology=None, peers={"DC1": _Peer("broker", "artemis", "2.39.0"),
                                                 "DC2": _Peer("broker", "artemis", "2.40.0")})
    assert mixed.peer_records() == {"broker": {"vendor": "artemis", "version": "2.39.0", "provider": "native"}}
    assert mixed.node_records() == {"DC1": {"vendor": "artemis", "version": "2.39.0", "provider": "native"},
                                    "DC2": {"vendor": "artemis", "version": "2.40.0", "provider": "native"}}


def test_a_topology_of_one_release_per_role_records_no_nodes():
    alike = RunningTopology(topology=None, peers={"R1": _Peer("router", "qdrouterd", "1.19.0"),
                                                 "B1": _Peer("broker", "artemis", "2.40.0"),
                                                 "B2": _Peer("broker", "artemis", "2.40.0")})
    assert alike.node_records() is None
