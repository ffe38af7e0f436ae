"""The reference broker's management of its broker connections (Artemis's startBrokerConnection), as a real process.

A broker connection configured with auto-start="false" (002_f23507c2891d6d06.txt, "auto-start") stays down until
an operator starts it; the harness starts one through the management endpoint (harness/vendors/reference/broker.py),
whose answers follow harness/peers/base.py's ManagementError: 404 for no such connection, 409 for one already in
the state asked for. The connection here dials a port nothing listens on: starting it is what is judged, not the
link it would make.
"""

from __future__ import annotations

from harness.ports import free_port
from tests.test_broker_process import broker_xml, start_broker  # noqa: F401 - start_broker is a fixture


def test_a_broker_connection_that_does_not_start_itself_is_started_once(tmp_path, start_broker):  # noqa: F811
    connection = f"""\
    <broker-connections>
      <amqp-connection uri="tcp://127.0.0.1:{free_port()}" name="to-nowhere" auto-start="false"
                       retry-interval="100" reconnect-attempts="-1">
        <sender address-match="orders"/>
      </amqp-connection>
    </broker-connections>
"""
    (tmp_path / "broker.xml").write_text(broker_xml(core=connection))
    broker = start_broker("broker.xml").wait_ready()
    status, listed = broker.get("/broker-connections")
    assert status == 200 and [(c["name"], c["started"]) for c in listed] == [("to-nowhere", False)], listed

    assert broker.get("/broker-connections/to-nowhere/start", method="POST") == (
        200, {"name": "to-nowhere", "started": True})
    assert broker.get("/broker-connections/to-nowhere/start", method="POST") == (
        409, {"error": "broker connection 'to-nowhere' is already started"})
    status, listed = broker.get("/broker-connections")
    assert [(c["name"], c["started"]) for c in listed] == [("to-nowhere", True)], listed
    assert broker.get("/broker-connections/elsewhere/start", method="POST") == (
        404, {"error": "no broker connection 'elsewhere' (known: to-nowhere)"})
