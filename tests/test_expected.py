"""Known vendor differences (harness/vendors/<vendor>/expected.yaml): which entries apply to a run's peers."""

import pytest

from harness import pytest_plugin
from harness.pytest_plugin import _load_expected


@pytest.fixture
def expected_dir(tmp_path, monkeypatch):
    monkeypatch.setattr(pytest_plugin, "expected_file", lambda name: tmp_path / f"{name}.yaml")
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


def test_an_entry_with_versions_applies_only_to_the_releases_it_names(expected_dir):
    (expected_dir / "artemis.yaml").write_text(
        "vendor: artemis\ncases:\n"
        "  - {case: 'suites/a.py::test_old', reason: fixed in 2.40, versions: '<2.40.0'}\n"
        "  - {case: 'suites/a.py::test_new', reason: new in 2.40, versions: '>=2.40.0'}\n"
        "  - {case: 'suites/a.py::test_all', reason: always}\n")
    previous = _load_expected({"router": "reference", "broker": "artemis@2.39.0"})
    assert sorted(previous) == ["suites/a.py::test_all", "suites/a.py::test_old"]
    current = _load_expected({"router": "reference", "broker": "artemis"})  # the pinned default, 2.40.0
    assert sorted(current) == ["suites/a.py::test_all", "suites/a.py::test_new"]


def test_a_choice_without_a_version_is_judged_on_the_release_it_runs(monkeypatch):
    from harness.peers import versions
    from harness.vendors.qdrouterd import build as qdrouterd_build

    assert versions.chosen_version("artemis@2.39.0") == "2.39.0"
    assert versions.chosen_version("artemis") == versions.versions_of("artemis").default
    assert versions.chosen_version("rabbitmq") is None and versions.chosen_version("reference") is None
    monkeypatch.setattr(qdrouterd_build, "binary_for", lambda version: "/opt/qdrouterd")
    monkeypatch.setattr(qdrouterd_build, "reported_version", lambda binary: "1.19.0")
    assert versions.chosen_version("qdrouterd") == "1.19.0"


@pytest.mark.parametrize("spec", ["'not a version'", "''", "[2.39]"])
def test_a_bad_version_range_is_one_line_naming_the_entry(expected_dir, spec):
    (expected_dir / "artemis.yaml").write_text(
        f"vendor: artemis\ncases:\n  - {{case: 'suites/a.py::test_x', reason: r, versions: {spec}}}\n")
    with pytest.raises(pytest.UsageError) as exc:
        _load_expected({"broker": "artemis"})
    assert "artemis.yaml: cases[0].versions: expected PEP 440 version specifiers" in str(exc.value)
    assert "\n" not in str(exc.value)
