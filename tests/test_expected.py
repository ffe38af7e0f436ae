"""Known vendor differences (suites/expected/<vendor>.yaml): which entries apply to a run's peers."""

import pytest

from harness import pytest_plugin
from harness.pytest_plugin import _load_expected


@pytest.fixture
def expected_dir(tmp_path, monkeypatch):
    monkeypatch.setattr(pytest_plugin, "EXPECTED", tmp_path)
    return tmp_path


def test_an_entry_applies_whenever_its_vendor_plays_a_role(expected_dir):
    (expected_dir / "qdrouterd.yaml").write_text(
        "vendor: qdrouterd\ncases:\n  - {case: 'suites/a.py::test_x', reason: differs}\n")
    got = _load_expected({"router": "qdrouterd", "broker": "reference"})
    assert got == {"suites/a.py::test_x": ("qdrouterd: differs", True, None)}
    assert _load_expected({"router": "reference", "broker": "reference"}) == {}


def test_an_entry_with_peers_applies_only_to_that_pairing(expected_dir):
    (expected_dir / "qdrouterd.yaml").write_text(
        "vendor: qdrouterd\ncases:\n"
        "  - {case: 'suites/a.py::test_x', reason: crashes, peers: {broker: rabbitmq}, strict: false}\n")
    assert _load_expected({"router": "qdrouterd", "broker": "reference"}) == {}
    assert _load_expected({"router": "qdrouterd@native", "broker": "rabbitmq"}) == {
        "suites/a.py::test_x": ("qdrouterd: crashes", False, None)}


def test_an_entry_that_leaves_the_peer_hung_names_its_vendor(expected_dir):
    (expected_dir / "artemis.yaml").write_text(
        "vendor: artemis\ncases:\n  - {case: 'suites/a.py::test_x', reason: spins, leaves_peer_hung: true}\n")
    got = _load_expected({"router": "reference", "broker": "artemis"})["suites/a.py::test_x"]
    assert got.leaves_hung == "artemis" and got.strict
    (expected_dir / "artemis.yaml").write_text(
        "vendor: artemis\ncases:\n  - {case: 'suites/a.py::test_x', reason: spins, leaves_peer_hung: 'yes'}\n")
    with pytest.raises(pytest.UsageError, match=r"artemis.yaml: cases\[0\].leaves_peer_hung: expected true or false"):
        _load_expected({"router": "reference", "broker": "artemis"})


@pytest.mark.parametrize("peers, shown", [("broker", "'broker'"), ("{broker: [rabbitmq]}", "['rabbitmq']"),
                                          ("{nobody: rabbitmq}", "nobody")])
def test_a_bad_peers_condition_is_one_line_naming_the_entry(expected_dir, peers, shown):
    (expected_dir / "qdrouterd.yaml").write_text(
        f"vendor: qdrouterd\ncases:\n  - {{case: 'suites/a.py::test_x', reason: r, peers: {peers}}}\n")
    with pytest.raises(pytest.UsageError) as exc:
        _load_expected({"router": "qdrouterd"})
    assert "qdrouterd.yaml: cases[0].peers: expected a mapping of role" in str(exc.value)
    assert shown in str(exc.value) and "\n" not in str(exc.value)


def test_the_shipped_files_load_for_every_vendor_pairing():
    for router in ("reference", "qdrouterd"):
        for broker in ("reference", "rabbitmq", "artemis", "activemq-classic"):
            _load_expected({"router": router, "broker": broker})  # raises on a malformed entry
