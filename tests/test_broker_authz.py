"""The reference broker's authorisation (reference/broker/authz.py): Artemis's role-based security-settings,
keyed on a user name, and its properties-file login module. No sockets: what the broker does with the answers
is checked end to end in suites/security/test_broker_*.py."""

from __future__ import annotations

import pytest

from reference.broker.authz import Authorizer
from reference.broker.logins import load_roles, load_users, read_properties
from reference.broker.config import ConfigError, SecuritySetting


def setting(match: str, **ops) -> SecuritySetting:
    return SecuritySetting(match, {op: frozenset(roles) for op, roles in ops.items()})


ROLES = {"alice": frozenset({"senders"}), "bob": frozenset({"receivers"}), "carol": frozenset({"admins", "senders"})}


def test_each_operation_goes_by_role():
    authz = Authorizer([setting("orders.#", send=["senders"], consume=["receivers"], createAddress=["admins"])],
                       ROLES)
    assert authz.check("alice", "send", "orders.new") is None
    assert authz.check("carol", "send", "orders.new") is None
    assert authz.check("bob", "consume", "orders.new") is None
    assert authz.check("carol", "createAddress", "orders") is None  # `orders.#` covers `orders` itself
    assert authz.check("bob", "send", "orders.new") == (
        "user 'bob' (roles: receivers) may not send on 'orders.new': security-setting 'orders.#' gives send to "
        "senders")
    assert authz.check("alice", "consume", "orders.new") is not None
    assert authz.check("alice", "manage", "orders.new") == (
        "user 'alice' (roles: senders) may not manage on 'orders.new': security-setting 'orders.#' gives manage to "
        "no role")


def test_no_matching_setting_and_no_user_are_refused():
    authz = Authorizer([setting("orders.#", send=["senders"])], ROLES)
    assert authz.check("alice", "send", "invoices") == (
        "user 'alice' may not send on 'invoices': no security-setting matches it")
    assert authz.check(None, "send", "orders.x") == "no authenticated user may send on 'orders.x'"
    assert authz.check("mallory", "send", "orders.x").startswith("user 'mallory' (roles: none) may not send")


def test_the_most_specific_match_wins_and_is_not_merged():
    """Artemis keeps the roles of the one most specific setting: `orders.#` granting only send leaves consume on
    orders.x refused although `#` grants it; `orders.vip` (no wildcard) beats `orders.*` and `orders.#`."""
    authz = Authorizer([setting("#", send=["receivers"], consume=["receivers"]),
                        setting("orders.#", send=["senders"]),
                        setting("orders.*", send=["admins"]),
                        setting("orders.vip", consume=["senders"])], ROLES)
    assert authz.check("bob", "consume", "invoices") is None
    assert authz.check("bob", "consume", "orders.x") is not None  # orders.* wins over # and grants no consume
    assert authz.setting_for("orders.x").match == "orders.*"
    assert authz.setting_for("orders.x.y").match == "orders.#"
    assert authz.setting_for("orders.vip").match == "orders.vip"
    assert authz.check("alice", "consume", "orders.vip") is None
    assert authz.check("alice", "send", "orders.vip") is not None
    assert authz.check("carol", "send", "orders.x") is None and authz.check("alice", "send", "orders.x") is not None


def test_a_repeated_match_replaces_the_earlier_one():
    authz = Authorizer([setting("#", send=["senders"]), setting("#", send=["receivers"])], ROLES)
    assert authz.check("bob", "send", "a") is None and authz.check("alice", "send", "a") is not None


def test_unknown_operation_is_a_programming_error():
    with pytest.raises(ValueError):
        Authorizer([], ROLES).check("alice", "write", "a")


# ---- the login module's files ------------------------------------------------------------------------------


def test_properties_files(tmp_path):
    users = tmp_path / "artemis-users.properties"
    users.write_text("# comment\n! another\n\nalice = alice-secret\nbob:bob=secret\n  carol=  c  \n")
    assert load_users(str(users)) == {"alice": "alice-secret", "bob": "bob=secret", "carol": "c"}
    roles = tmp_path / "artemis-roles.properties"
    roles.write_text("senders = alice, carol\nreceivers=bob\nempty=\n")
    assert load_roles(str(roles), load_users(str(users))) == {
        "alice": frozenset({"senders"}), "carol": frozenset({"senders"}), "bob": frozenset({"receivers"})}


@pytest.mark.parametrize("users, roles, line, message", [
    ("a=1\nENC(x)\n", None, 2, "expected key = value, got 'ENC(x)'"),
    ("a=1\n=x:y\n", None, 2, "expected key = value, got '=x:y'"),  # a separator first: no key
    ("a=ENC(abc)\n", None, 1, "user 'a': hashed passwords (ENC(...)) are not supported by the reference broker "
     "(expected the password in plain text)"),
    ("a=1\na=2\n", None, 2, "user 'a' is listed twice"),
    ("a=x\\\n  y\n", None, 1, "backslash escapes and continued lines are not supported by the reference broker "
     "(expected key = value on one line)"),
    ("a=1\n", "r=a,b\n", 1, "role 'r': user 'b' is not in artemis-users.properties"),
    ("a=1\n", "r=a\nr=a\n", 2, "role 'r' is listed twice"),
])
def test_properties_errors_name_file_and_line(tmp_path, users, roles, line, message):
    users_path = tmp_path / "artemis-users.properties"
    users_path.write_text(users)
    roles_path = tmp_path / "artemis-roles.properties"
    with pytest.raises(ConfigError) as info:
        if roles is None:
            load_users(str(users_path))
        else:
            roles_path.write_text(roles)
            load_roles(str(roles_path), load_users(str(users_path)))
    err = info.value
    assert (err.path, err.line, err.message) == (str(roles_path if roles else users_path), line, message)
    assert "\n" not in str(err)


def test_an_unreadable_file_is_one_line(tmp_path):
    with pytest.raises(ConfigError) as info:
        read_properties(str(tmp_path / "nope.properties"))
    assert str(info.value) == f"{tmp_path / 'nope.properties'}:0: cannot read: No such file or directory"


# ---- what an attach needs (access.py), as Broker._resolve would create it --------------------------------------


def _config(auto: bool = True):
    from reference.broker.config import parse_config

    text = ('<configuration><core xmlns="urn:activemq:core"><security-enabled>true</security-enabled>'
            '<acceptors><acceptor name="a">tcp://127.0.0.1:0</acceptor></acceptors>'
            f'<address-settings><address-setting match="#"><auto-create-queues>{str(auto).lower()}'
            f'</auto-create-queues><auto-create-addresses>{str(auto).lower()}</auto-create-addresses>'
            '<default-address-routing-type>ANYCAST</default-address-routing-type></address-setting>'
            '</address-settings></core></configuration>')
    return parse_config(text)


class _Queue:
    def __init__(self, routing):
        self.routing = routing


@pytest.mark.parametrize("addresses, address, hint, consumer, subscription, needed", [
    ({}, "new", None, False, None, ["send", "createAddress", "createDurableQueue"]),
    ({}, "new", None, True, None, ["consume", "createAddress", "createDurableQueue"]),
    ({}, "new", "multicast", False, None, ["send", "createAddress"]),
    ({}, "new", "multicast", True, "non-durable", ["consume", "createAddress", "createNonDurableQueue"]),
    ({}, "new", "multicast", True, "durable", ["consume", "createAddress", "createDurableQueue"]),
    ({"q": {"routings": {"anycast"}, "queues": [_Queue("anycast")]}}, "q", None, False, None, ["send"]),
    ({"q": {"routings": {"anycast"}, "queues": [_Queue("anycast")]}}, "q", None, True, None, ["consume"]),
    ({"t": {"routings": {"multicast"}, "queues": []}}, "t", None, True, "non-durable",
     ["consume", "createNonDurableQueue"]),
    ({"t": {"routings": {"multicast"}, "queues": []}}, "t", None, True, None, ["consume"]),
    ({"t": {"routings": {"multicast"}, "queues": []}}, "t", "anycast", False, None,
     ["send", "createAddress", "createDurableQueue"]),
])
def test_needed_follows_what_the_attach_would_create(addresses, address, hint, consumer, subscription, needed):
    from reference.broker.access import AccessControl

    assert AccessControl(_config()).needed(addresses, address, hint, consumer, subscription) == needed


def test_nothing_to_create_when_auto_create_is_off():
    from reference.broker.access import AccessControl

    assert AccessControl(_config(auto=False)).needed({}, "new", None, False) == ["send"]
