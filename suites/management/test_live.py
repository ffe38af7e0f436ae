"""Live configuration: CREATE and DELETE of address, linkRoute, autoLink, listener and connector on a running
router take effect at once, and bad ones are refused with qdrouterd's status and description. Topologies
`single-router` and `management-broker` (R1 with a route-container connection to broker B1 and nothing routed)."""

import socket

import pytest

from harness.clients import ClientSecurity
from harness.management import PREFIX
from harness.ports import free_port
from harness.tlsca import TestPki
from harness.wait import wait_for

from ..conftest import attach_when_routed
from .support import management, need_tools, qdmanage, qdstat, unique, wait_for_link_counts

N = 10


@pytest.fixture
def router(topology):
    return topology("single-router")


@pytest.fixture
def broker_side(topology):
    return topology("management-broker")


def _unrouted(conn, address: str) -> str | None:
    """Why a new sender on `address` cannot send: `refused: ...` (its attach refused) or `no credit` (attached, and
    no credit once the router has handled the attach); None when it was given credit, so it could send."""
    try:
        sender = conn.sender(address)
    except ConnectionError as refused:
        return f"refused: {refused}"
    conn.sync()
    credit = sender.credit
    sender.detach()
    return None if credit else "no credit"


@pytest.mark.spec("MGMT-LIVE-1")
def test_a_created_address_governs_new_addresses_and_a_deleted_one_no_longer(router, clients, details):
    prefix = unique("mgmt.mc")
    conn = clients.connect(router.client_url("producer"))
    with management(router) as mgmt:
        created = mgmt.create("address", name=prefix, prefix=prefix, distribution="multicast")
        assert created["distribution"] == "multicast" and created["prefix"] == prefix
        receivers = [conn.receiver(f"{prefix}.a") for _ in range(2)]
        sender = conn.sender(f"{prefix}.a")
        sender.send(N)
        sender.wait_outcomes(N)
        counts = [len(r.wait_received(N)) for r in receivers]
        mgmt.delete("address", name=prefix)
        gone = mgmt.call("READ", type="address", name=prefix)
    after = [conn.receiver(f"{prefix}.b") for _ in range(2)]
    sender_b = conn.sender(f"{prefix}.b")
    sender_b.send(N)
    sender_b.wait_outcomes(N)
    wait_for(lambda: sum(r.count for r in after) >= N, 10, "the messages sent after the delete")
    conn.sync()
    details.update(multicast=counts, after_delete=[r.count for r in after])
    assert counts == [N, N], "while the address section exists, each receiver gets every message"
    assert gone.code == 404
    assert sum(r.count for r in after) == N, "after the delete a new address is balanced: each message once"


@pytest.mark.spec("MGMT-LIVE-2", "MGMT-TOOLS-1", "MGMT-COUNTERS-1")
def test_a_link_route_created_with_qdmanage_carries_traffic_to_the_broker(broker_side, clients, details):
    need_tools()
    names = [unique("mgmt-lr-in"), unique("mgmt-lr-out")]
    for name, direction in zip(names, ("in", "out"), strict=True):
        made = qdmanage(broker_side, "R1", "create", "--type=linkRoute", f"name={name}", "prefix=mgmt.lr",
                        f"direction={direction}", "connection=B1")
        assert made["name"] == name and made["direction"] == direction and made["prefix"] == "mgmt.lr"
    try:
        with management(broker_side) as mgmt:  # active once R1's connection to B1 is up (it may still be dialling)
            status = {}

            def active():
                status.update({n: mgmt.read("linkRoute", name=n)["operStatus"] for n in names})
                return set(status.values()) == {"active"}
            wait_for(active, 15, "the created link routes to be active", describe=lambda: str(status))
        conn = clients.connect(broker_side.client_url("producer"))
        sender = attach_when_routed(conn, lambda: conn.sender("mgmt.lr.queue", timeout=3))
        sender.send(N)
        assert {o.outcome for o in sender.wait_outcomes(N).values()} == {"accepted"}
        receiver = attach_when_routed(conn, lambda: conn.receiver("mgmt.lr.queue", timeout=3))
        got = receiver.wait_received(N)
        routes = qdstat(broker_side, "R1", "--linkroutes")  # both carried traffic: both have their broker
        with management(broker_side) as mgmt:  # a link-routed link counts what it relays, like any other
            routed = wait_for_link_counts(mgmt, sender.name, "in", {"deliveryCount": N, "acceptedCount": N},
                                          "the routed sender's counters")
        receiver.detach()
        sender.detach()
    finally:
        with management(broker_side) as mgmt:
            for name in names:
                mgmt.call("DELETE", type="linkRoute", name=name)
    details.update(linkroutes=routes, received=len(got), routed_sender={k: routed[k] for k in (
        "deliveryCount", "acceptedCount", "linkType")})
    assert sorted((r["address"], r["dir"], r["status"]) for r in routes) == [("mgmt.lr", "in", "active"),
                                                                              ("mgmt.lr", "out", "active")]
    assert [m.seq for m in got if m.producer == sender.name] == list(range(N))
    gone = qdmanage(broker_side, "R1", "read", "--type=linkRoute", f"--name={names[0]}", expect_ok=False)
    assert gone.returncode != 0 and "Not Found" in gone.stdout + gone.stderr
    # Deleted: an attach on the prefix is no longer routed to the broker. It is refused while the router still takes
    # the prefix for a link route without a destination (qdrouterd, for a moment), else it is message-routed and,
    # with no consumer, given no credit
    unrouted = _unrouted(clients.connect(broker_side.client_url("producer")), "mgmt.lr.queue")
    details.update(after_delete=unrouted)
    assert unrouted is not None, "a sender on the deleted link route's prefix was given credit"


@pytest.mark.spec("MGMT-LIVE-3", "MGMT-TOOLS-1")
def test_autolinks_created_live_attach_and_move_traffic_through_the_broker(broker_side, clients, details):
    need_tools()
    queue = "mgmt.al.queue"
    names = {"address": unique("mgmt-al-addr"), "out": unique("mgmt-al-out"), "in": unique("mgmt-al-in")}
    with management(broker_side) as mgmt:
        mgmt.create("address", name=names["address"], prefix=queue, waypoint=True)
        try:
            for direction in ("out", "in"):
                mgmt.create("autoLink", name=names[direction], address=queue, direction=direction, connection="B1")
            statuses = {}

            def active():
                statuses.update({d: mgmt.read("autoLink", name=names[d])["operStatus"] for d in ("out", "in")})
                return set(statuses.values()) == {"active"}
            wait_for(active, 15, "both autolinks to attach", describe=lambda: str(statuses))
            shown = {row["dir"]: row for row in qdstat(broker_side, "R1", "--autolinks") if row["addr"] == queue}
            conn = clients.connect(broker_side.client_url("producer"))
            sender = conn.sender(queue)
            sender.send(N)
            assert {o.outcome for o in sender.wait_outcomes(N).values()} == {"accepted"}
            receiver = conn.receiver(queue)
            got = receiver.wait_received(N)
            receiver.detach()
            sender.detach()
        finally:
            for key in ("out", "in", "address"):
                mgmt.call("DELETE", type="address" if key == "address" else "autoLink", name=names[key])
        gone = mgmt.call("READ", type="autoLink", name=names["out"])
    details.update(statuses=statuses, received=len(got), qdstat=shown)
    assert {d: (row["status"], row["phs"]) for d, row in shown.items()} == {"out": ("active", "0"),
                                                                          "in": ("active", "1")}
    assert [m.seq for m in got if m.producer == sender.name] == list(range(N))
    assert gone.code == 404
    # Deleted: nothing takes phase 0 of the address any more, so a new producer is given no credit
    assert _unrouted(clients.connect(broker_side.client_url("producer")), queue) == "no credit"


@pytest.mark.spec("MGMT-LIVE-4")
def test_a_listener_created_live_accepts_and_a_deleted_one_stops_accepting(router, clients, details):
    port = free_port()
    name = unique("mgmt-listener")
    with management(router) as mgmt:
        made = mgmt.create("listener", name=name, host="127.0.0.1", port=str(port), role="normal")
        assert made["name"] == name and str(made["port"]) == str(port)
        url = f"amqp://127.0.0.1:{port}"
        conn = clients.connect(url)
        receiver = clients.connect(router.client_url("consumer")).receiver("mgmt.listener")
        sender = conn.sender("mgmt.listener")
        sender.send(3)
        assert {o.outcome for o in sender.wait_outcomes(3).values()} == {"accepted"}
        receiver.wait_received(3)
        mgmt.delete("listener", name=name)
        gone = mgmt.call("READ", type="listener", name=name)

    def refused():
        try:
            socket.create_connection(("127.0.0.1", port), timeout=2).close()
        except OSError:
            return True
        return False
    wait_for(refused, 10, f"the deleted listener's port {port} to refuse connections")
    details.update(port=port, read_after_delete=gone.code)
    assert gone.code == 404


@pytest.mark.spec("MGMT-LIVE-5")
def test_a_connector_created_live_dials_and_a_deleted_one_hangs_up(broker_side, details):
    host_port = broker_side["B1"].url.split("://", 1)[-1]
    host, port = host_port.rsplit(":", 1)
    name = unique("mgmt-connector")

    def containers(mgmt):
        return sorted(r["role"] for r in mgmt.query("connection", ["role", "dir"]) if r["dir"] == "out")
    with management(broker_side) as mgmt:
        before = containers(mgmt)
        mgmt.create("connector", name=name, host=host, port=port, role="route-container")
        try:
            wait_for(lambda: mgmt.read("connector", name=name)["connectionStatus"] == "SUCCESS", 15,
                     "the created connector to connect")
            wait_for(lambda: len(containers(mgmt)) == len(before) + 1, 10, "one more outgoing connection")
        finally:
            mgmt.delete("connector", name=name)
        wait_for(lambda: containers(mgmt) == before, 10, "the deleted connector's connection to close",
                 describe=lambda: str(containers(mgmt)))
        gone = mgmt.call("READ", type="connector", name=name)
    details.update(before=before, read_after_delete=gone.code)
    assert gone.code == 404


@pytest.mark.spec("MGMT-LIVE-6")
def test_bad_configuration_is_refused_with_qdrouterd_status_and_description(router, details):
    name = unique("mgmt-bad")
    with management(router) as mgmt:
        no_prefix = mgmt.call("CREATE", type="linkRoute", name=name, body={"direction": "in"})
        bad_direction = mgmt.call("CREATE", type="linkRoute", name=name, body={"prefix": "x", "direction": "up"})
        no_direction = mgmt.call("CREATE", type="autoLink", name=name, body={"address": "x"})
        made = mgmt.call("CREATE", type="address", name=name, body={"prefix": name, "distribution": "closest"})
        try:
            same_name = mgmt.call("CREATE", type="address", name=name, body={"prefix": name + ".2"})
            same_prefix = mgmt.call("CREATE", type="address", name=name + "-2", body={"prefix": name})
        finally:
            mgmt.call("DELETE", type="address", name=name)
    seen = {"no prefix": no_prefix, "bad direction": bad_direction, "no direction": no_direction,
            "same name": same_name, "same prefix": same_prefix}
    details.update({k: [v.code, v.description] for k, v in seen.items()})
    assert made.code == 201
    assert (no_prefix.code, no_prefix.description) == (400, "Either a 'prefix' or 'pattern' attribute must be "
                                                            "provided")
    assert (bad_direction.code, bad_direction.description) == (400, "Invalid value for 'direction'")
    assert (no_direction.code, no_direction.description) == (400, "address and direction fields are mandatory")
    assert (same_name.code, same_name.description) == (400, "Name conflicts with an existing entity")
    assert (same_prefix.code, same_prefix.description) == (400, "Already exists")


@pytest.mark.spec("MGMT-LIVE-6")
def test_a_value_outside_the_schema_is_refused(router, details):
    """qdrouter.json lists the distributions an address may have; a CREATE with another one is a bad request."""
    name = unique("mgmt-bad-dist")
    with management(router) as mgmt:
        answer = mgmt.call("CREATE", type="address", name=name, body={"prefix": name, "distribution": "bogus"})
        if answer.code == 201:
            created = mgmt.read("address", name=name)
            mgmt.call("DELETE", type="address", name=name)
            details.update(created_as=created.get("distribution"))
    details.update(answer=[answer.code, answer.description])
    assert answer.code == 400, f"CREATE address distribution=bogus: {answer.code} {answer.description}"


# ---- sslProfile: CREATE and DELETE, and listeners and connectors made with one afterwards ----------------------

TLS_DEADLINE = 10.0  # seconds: a TLS open or its refusal takes well under one on every router here


def _tls_files(tmp_path):
    """A CA of the case's own and a certificate from it for `localhost` (server and client use)."""
    pki = TestPki(tmp_path / "pki")
    issued = pki.issue("mgmt-ca", "localhost", purpose="both")
    return issued, str(pki.ca_file("mgmt-ca"))


def _opens(clients, url: str, security: ClientSecurity | None) -> str | None:
    """None when a connection to `url` opens; else the condition it ended with."""
    try:
        conn = clients.connect(url, security=security, wait=False)
        conn.wait_open(TLS_DEADLINE)
        conn.close()
        return None
    except ConnectionError as exc:
        return str(exc) or type(exc).__name__


def _profile(mgmt, name: str, issued, ca: str) -> dict:
    return mgmt.create("sslProfile", name=name, certFile=str(issued.cert), privateKeyFile=str(issued.key),
                       caCertFile=ca)


def _tls_listener(mgmt, name: str, port: int, profile: str) -> dict:
    """A listener that speaks TLS only (requireSsl), with the profile's certificate."""
    return mgmt.create("listener", name=name, host="127.0.0.1", port=str(port), role="normal", sslProfile=profile,
                       requireSsl=True, saslMechanisms="ANONYMOUS")


def _cleanup(mgmt, *entities: tuple[str, str]) -> None:
    for entity_type, name in entities:
        mgmt.call("DELETE", type=entity_type, name=name)


@pytest.mark.spec("MGMT-LIVE-7")
@pytest.mark.requires("router:tls")
def test_an_ssl_profile_created_live_serves_a_listener_and_a_connector_made_after_it(router, clients, tmp_path,
                                                                                     details):
    issued, ca = _tls_files(tmp_path)
    profile, listener, connector = unique("mgmt-tls"), unique("mgmt-tls-in"), unique("mgmt-tls-out")
    port = free_port()
    url = f"amqps://localhost:{port}"
    address = unique("mgmt.tls")
    with management(router) as mgmt:
        made = _profile(mgmt, profile, issued, ca)
        try:
            read = mgmt.read("sslProfile", name=profile)
            _tls_listener(mgmt, listener, port, profile)
            trusting = ClientSecurity(ca=ca)
            refused_plain = _opens(clients, f"amqp://127.0.0.1:{port}", None)
            conn = clients.connect(url, security=trusting)
            receiver = clients.connect(router.client_url("consumer")).receiver(address)
            sender = conn.sender(address)
            sender.send(3)
            outcomes = {o.outcome for o in sender.wait_outcomes(3).values()}
            received = len(receiver.wait_received(3))
            # A connector naming the profile dials the TLS-only listener (the router's own): only TLS gets in there
            mgmt.create("connector", name=connector, host="localhost", port=str(port), role="route-container",
                        sslProfile=profile)
            status = {}

            def connected():
                status.update(mgmt.read("connector", name=connector))
                return status.get("connectionStatus") == "SUCCESS"
            wait_for(connected, 15, "the connector made with the sslProfile to connect",
                     describe=lambda: f"{status.get('connectionStatus')} {status.get('connectionMsg')}")
        finally:
            _cleanup(mgmt, ("connector", connector), ("listener", listener), ("sslProfile", profile))
    details.update(plain=refused_plain, outcomes=sorted(outcomes), received=received,
                   connector=status.get("connectionStatus"))
    assert made["name"] == profile and made["identity"] == f"sslProfile/{profile}"
    assert {k: read[k] for k in ("certFile", "privateKeyFile", "caCertFile")} == {
        "certFile": str(issued.cert), "privateKeyFile": str(issued.key), "caCertFile": ca}
    assert refused_plain is not None, "a client without TLS opened a connection on the TLS-only listener"
    assert outcomes == {"accepted"} and received == 3


@pytest.mark.spec("MGMT-LIVE-8")
@pytest.mark.requires("router:tls")
def test_an_ssl_profile_in_use_may_be_deleted_and_its_listener_keeps_serving_tls(router, clients, tmp_path,
                                                                                  details):
    """qdrouterd deletes an sslProfile that a listener uses (204) and the listener goes on with the TLS settings
    it was made with; the profile itself is gone (404). A second profile of the same name is refused while the
    first exists, and a profile cannot be updated (its schema allows CREATE, DELETE and READ)."""
    issued, ca = _tls_files(tmp_path)
    profile, listener = unique("mgmt-tls"), unique("mgmt-tls-in")
    port = free_port()
    url = f"amqps://localhost:{port}"
    trusting = ClientSecurity(ca=ca)
    with management(router) as mgmt:
        _profile(mgmt, profile, issued, ca)
        try:
            _tls_listener(mgmt, listener, port, profile)
            twice = mgmt.call("CREATE", type="sslProfile", name=profile, body={"certFile": str(issued.cert)})
            update = mgmt.call("UPDATE", type="sslProfile", name=profile, body={"ciphers": "HIGH"})
            before = _opens(clients, url, trusting)
            deleted = mgmt.call("DELETE", type="sslProfile", name=profile)
            gone = mgmt.call("READ", type="sslProfile", name=profile)
            after = _opens(clients, url, trusting)
            plain_after = _opens(clients, f"amqp://127.0.0.1:{port}", None)
        finally:
            _cleanup(mgmt, ("listener", listener), ("sslProfile", profile))
    seen = {"twice": twice, "update": update, "delete": deleted, "read after": gone}
    details.update({k: [v.code, v.description] for k, v in seen.items()}, before=before, after=after)
    assert twice.code == 400 and "duplicates unique attribute 'name'" in (twice.description or "")
    assert (update.code, update.description) == (
        501, f"Operation 'UPDATE' not implemented for '{PREFIX}sslProfile' ['CREATE', 'DELETE', 'READ']")
    assert before is None, f"TLS client refused before the delete: {before}"
    assert (deleted.code, deleted.description) == (204, "No Content")
    assert (gone.code, gone.description) == (404, f"No entity with name={profile}")
    assert after is None, f"the listener stopped serving TLS clients once its sslProfile was deleted: {after}"
    assert plain_after is not None, "the listener let a client without TLS in once its sslProfile was deleted"


@pytest.mark.spec("MGMT-LIVE-9")
def test_a_listener_naming_an_ssl_profile_the_router_does_not_have_is_refused(router, details):
    """The draft: a CREATE with a value an attribute cannot take MUST be refused with 400. A listener's sslProfile
    names a profile; one the router does not have (never made, or deleted) can serve nobody."""
    profile, listener = unique("mgmt-no-profile"), unique("mgmt-tls-in")
    port = free_port()
    with management(router) as mgmt:
        answer = mgmt.call("CREATE", type="listener", name=listener,
                           body={"host": "127.0.0.1", "port": str(port), "role": "normal", "sslProfile": profile})
        if answer.code == 201:
            _cleanup(mgmt, ("listener", listener))
    details.update(answer=[answer.code, answer.description])
    assert answer.code == 400, f"CREATE listener sslProfile={profile} (no such profile): {answer.code} " \
                               f"{answer.description}"
