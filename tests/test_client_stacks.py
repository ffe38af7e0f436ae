"""The client axis: the stack drivers' typed-value comparison and the client stacks' expected differences."""

import pytest

from harness import pytest_plugin
from harness.drivers import STACKS, ClientStackError, Stacks
from harness.pytest_plugin import _load_expected
from suites.types.values import FAMILIES, f32, f64, mp, n, s, same


@pytest.fixture
def expected_dir(tmp_path, monkeypatch):
    monkeypatch.setattr(pytest_plugin, "expected_file", lambda name: tmp_path / f"{name}.yaml")
    return tmp_path


def test_a_client_stacks_file_applies_whatever_the_peers(expected_dir):
    (expected_dir / "client-rhea.yaml").write_text(
        "client: rhea\ncases:\n  - {case: 'suites/types/t.py::test_x[router-python-to-rhea-a-body]', reason: r}\n")
    for peers in ({"router": "reference", "broker": "reference"}, {"router": "qdrouterd", "broker": "rabbitmq"}):
        case = "suites/types/t.py::test_x[router-python-to-rhea-a-body]"
        assert _load_expected(peers) == {case: ("client-rhea: r", True, None)}


def test_same_compares_type_and_value():
    assert same(n("ubyte", 1), n("ubyte", 1))
    assert not same(n("ubyte", 1), n("uint", 1)), "the type is part of the value"
    assert not same(f64(-0.0), f64(0.0)), "-0.0 is its own value"
    assert same({"t": "double", "v": "7ff8000000000001"}, f64(float("nan"))), "any NaN equals any NaN"
    assert not same(f32(1.5), f64(1.5))
    assert same(mp((s("a"), n("int", 1)), (s("b"), n("int", 2))), mp((s("b"), n("int", 2)), (s("a"), n("int", 1))))
    assert not same(mp((s("a"), n("int", 1))), mp((s("a"), n("int", 1)), (s("b"), n("int", 2))))


def test_the_type_table_names_every_value_once_per_family():
    for family, values in FAMILIES.items():
        names = [name for name, _ in values]
        assert len(names) == len(set(names)), family


def test_an_unknown_stack_is_a_one_line_error():
    with pytest.raises(ClientStackError) as exc:
        Stacks().get("cobol")
    assert "cobol" in str(exc.value) and "\n" not in str(exc.value)


@pytest.mark.parametrize("stack", STACKS)
def test_each_stack_answers_hello_or_says_why_not(stack):
    stacks = Stacks()
    try:
        shim = stacks.get(stack)
    except ClientStackError as exc:
        pytest.skip(str(exc))
    try:
        assert shim.stack == stack
        # JMS has no described values (nor outcomes to choose, nor pre-settled links): it says so by leaving them out
        assert ("types.described" in shim.capabilities) == (stack != "jms")
        with pytest.raises(ClientStackError) as exc:
            shim.request("connect", 5.0, conn="c1", url="amqp://127.0.0.1:1")  # nothing listens on port 1
        assert str(exc.value).startswith(f"{stack} client: connect:") and "\n" not in str(exc.value)
    finally:
        stacks.close()


def test_the_jms_stack_without_java_is_unavailable_with_the_fix(monkeypatch):
    from harness import drivers

    monkeypatch.setattr(drivers.shutil, "which", lambda name: None)
    with pytest.raises(drivers.ClientStackUnavailable) as exc:
        drivers.stack_command("jms")
    message = str(exc.value)
    assert message.startswith("jms: no `java` on PATH") and "make setup builds clients/jms" in message
    assert "\n" not in message


def test_the_jms_jar_missing_without_maven_is_unavailable_with_the_fix(monkeypatch, tmp_path):
    from harness import drivers

    monkeypatch.setattr(drivers, "_JMS_JAR", tmp_path / "target" / "jms-shim.jar")  # never built
    monkeypatch.setattr(drivers.shutil, "which", lambda name: None if name == "mvn" else f"/usr/bin/{name}")
    with pytest.raises(drivers.ClientStackUnavailable) as exc:
        drivers.build_jms_shim()
    assert "no `mvn` on PATH" in str(exc.value) and "\n" not in str(exc.value)


def test_the_type_suite_crosses_only_the_stacks_that_carry_every_amqp_type():
    from harness.drivers import AMQP_STACKS

    assert set(AMQP_STACKS) == set(STACKS) - {"jms"}
