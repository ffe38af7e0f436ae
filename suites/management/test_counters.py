"""Counters that tell the truth: the same traffic on any router, read back through management and qdstat, gives
the numbers the traffic implies (qdrouterd 1.19's schema: router.link deliveryCount/acceptedCount/releasedCount...,
router.address deliveriesIngress/deliveriesEgress, subscriberCount). Topology `single-router`."""

import pytest

from .support import address_row, management, need_tools, qdstat, unique, wait_for_link_counts

N = 20


@pytest.fixture
def router(topology):
    return topology("single-router")


@pytest.mark.spec("MGMT-COUNTERS-1", "MGMT-COUNTERS-2")
def test_link_and_address_counters_agree_with_the_traffic(router, clients, details):
    address = unique("mgmt.count")
    conn = clients.connect(router.client_url("producer"))
    receiver = conn.receiver(address)
    sender = conn.sender(address)
    sender.send(N)
    assert {o.outcome for o in sender.wait_outcomes(N).values()} == {"accepted"}
    receiver.wait_received(N)
    with management(router) as mgmt:
        produced = wait_for_link_counts(mgmt, sender.name, "in", {"deliveryCount": N, "acceptedCount": N},
                                        "the producer link's counters")
        consumed = wait_for_link_counts(mgmt, receiver.name, "out", {"deliveryCount": N, "acceptedCount": N},
                                        "the consumer link's counters")
        row = address_row(mgmt, address)
    details.update(producer={k: produced[k] for k in ("deliveryCount", "acceptedCount", "releasedCount")},
                   consumer={k: consumed[k] for k in ("deliveryCount", "acceptedCount", "unsettledCount")},
                   address=row)
    for link in (produced, consumed):
        assert link["presettledCount"] == 0 and link["rejectedCount"] == 0 and link["releasedCount"] == 0
        assert link["modifiedCount"] == 0 and link["linkType"] == "endpoint"
    assert produced["owningAddr"] == consumed["owningAddr"] == "M0" + address
    assert consumed["unsettledCount"] == 0 and consumed["undeliveredCount"] == 0
    assert row is not None, f"no router.address M0{address}"
    assert (row["deliveriesIngress"], row["deliveriesEgress"], row["subscriberCount"]) == (N, N, 1)
    assert row["deliveriesTransit"] == 0 and row["distribution"] == "balanced"


@pytest.mark.spec("MGMT-COUNTERS-1")
def test_presettled_and_released_deliveries_are_counted_on_their_links(router, clients, details):
    address = unique("mgmt.release")
    conn = clients.connect(router.client_url("producer"))
    releasing = conn.receiver(address, outcome="release", credit=5, auto_credit=False)
    sender = conn.sender(address)
    sender.send(5)
    outcomes = sender.wait_outcomes(5)
    releasing.wait_received(5)
    with management(router) as mgmt:
        produced = wait_for_link_counts(mgmt, sender.name, "in", {"deliveryCount": 5, "releasedCount": 5},
                                        "the producer link's released count")
        consumed = wait_for_link_counts(mgmt, releasing.name, "out", {"deliveryCount": 5, "releasedCount": 5},
                                        "the consumer link's released count")
    details.update(outcomes=sorted({o.outcome for o in outcomes.values()}))
    assert {o.outcome for o in outcomes.values()} == {"released"}
    assert produced["acceptedCount"] == consumed["acceptedCount"] == 0
    presettled_address = unique("mgmt.presettled")
    receiver = conn.receiver(presettled_address)
    fire = conn.sender(presettled_address, presettled=True)
    fire.send(7)
    receiver.wait_received(7)
    with management(router) as mgmt:
        produced = wait_for_link_counts(mgmt, fire.name, "in", {"deliveryCount": 7, "presettledCount": 7},
                                        "the pre-settled producer's counts")
        consumed = wait_for_link_counts(mgmt, receiver.name, "out", {"deliveryCount": 7, "presettledCount": 7},
                                        "the consumer's pre-settled counts")
    assert produced["acceptedCount"] == consumed["acceptedCount"] == 0


@pytest.mark.spec("MGMT-COUNTERS-3", "MGMT-TOOLS-1")
def test_qdstat_shows_the_same_counts_as_management(router, clients, details):
    need_tools()
    address = unique("mgmt.qdstat")
    conn = clients.connect(router.client_url("producer"))
    receiver = conn.receiver(address)
    sender = conn.sender(address)
    with management(router) as mgmt:
        before = mgmt.query("router", ["acceptedDeliveries", "deliveriesIngress", "deliveriesEgress"])[0]
        sender.send(N)
        sender.wait_outcomes(N)
        receiver.wait_received(N)
        wait_for_link_counts(mgmt, sender.name, "in", {"acceptedCount": N}, "the producer's acceptances")
        after = mgmt.query("router", ["acceptedDeliveries", "deliveriesIngress", "deliveriesEgress"])[0]
    addresses = {row["addr"]: row for row in qdstat(router, "R1", "-a")}
    links = [row for row in qdstat(router, "R1", "-l") if row["addr"] == address]
    details.update(qdstat_address=addresses.get(address), before=before, after=after)
    assert address in addresses, f"qdstat -a lists no {address}: {sorted(addresses)}"
    row = addresses[address]
    assert (row["class"], row["phs"], row["local"], row["in"], row["out"]) == ("mobile", "0", "1", str(N), str(N))
    assert sorted((link["dir"], link["deliv"], link["acc"]) for link in links) == [("in", str(N), str(N)),
                                                                                   ("out", str(N), str(N))]
    # The router's totals moved by at least this traffic (management's own requests count too)
    assert after["acceptedDeliveries"] - before["acceptedDeliveries"] >= N
    assert after["deliveriesIngress"] - before["deliveriesIngress"] >= N
    assert after["deliveriesEgress"] - before["deliveriesEgress"] >= N
