"""A federation pull refused because what it asks for is not there yet, and how it is tried again
(reference/broker/federation.py), as Artemis 2.40's AMQP federation does it:

* the serving broker refuses the pull with amqp:not-found and watches for the queue (or address) it named
  (AMQPFederationQueueSenderController / AMQPFederationAddressSenderController -> AMQPFederation.registerMissingQueue);
* when that queue or address is added, it sends the puller one REQUESTED_QUEUE_ADDED_EVENT (or
  REQUESTED_ADDRESS_ADDED_EVENT) on the event link (AMQPFederationEventDispatcher), and forgets the watch;
* the puller's AMQPFederationEventProcessor has its policy manager recover the consumer, which it does only while a
  local consumer still wants it. Artemis 2.40 has no timer for this: no delay, no attempt count, no setting.

The engines are joined in memory (tests/test_attach_caps.py); the brokers around the federation are stand-ins
that hold only what the federation reads.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from proton import Data, Endpoint

from reference.broker import federation
from reference.broker import federation_wire as wire
from reference.broker.config import ConnectionElement, FederationPolicy
from tests.test_federation_wire import (QUEUES, answer_event_links, dialling_broker, fake_broker, section_types,
                                        settle)

JOBS = "jobs"


def consumer(node: str | None = None, closed: bool = False):
    """A consumer as Side._demand reads it: a client's (node None) or another broker's pull (its node)."""
    return SimpleNamespace(closed=closed, federation_node=node)


def anycast(name: str, *consumers):
    return SimpleNamespace(name=name, address=name, routing="anycast", internal=False, consumers=list(consumers))


def control_answered(policies, b1_setup=lambda broker: None):
    """B1 dials B2 with `policies` and B2 answers the control link, nothing more: (client, server, B1's federation,
    B2's federation, B2's end of the control link). `b1_setup(broker)` prepares B1's fake broker before it dials."""
    client, server, session, b1 = dialling_broker("B1")
    b1_setup(b1.broker)
    control = b1.dialled(client[0], ConnectionElement("federation", policies=tuple(policies)), session, "b1-b2")
    settle(client, server)
    remote = server[0].link_head(0)
    server[0].container = "B2"
    server[0].open()
    server[0].session_head(0).open()
    b2_broker = fake_broker("B2")
    b2_broker.add_outgoing_producer = lambda *args: None
    b2 = federation.Federation(b2_broker)
    assert b2.control_attach(remote) is None
    settle(server, client)
    assert b1.control_answered(control) is None
    return client, server, b1, b2, remote


def federated(policies=(QUEUES,)):
    """B1 dials B2 with `policies`; B2 answers the control link and the event links, then takes the remote policies:
    (client, server, B1's federation, B2's federation). B2 pulls from B1 by them (the connector's direction)."""
    client, server, b1, b2, remote = control_answered(policies)
    settle(client, server)
    answer_event_links(client, server, b1, b2)
    while remote.current is not None:  # the policies, as the broker's on_delivery hands them over
        remote.broker_federation_deliveries(remote.current)
    settle(server, client)
    return client, server, b1, b2


def pull_of(connection, address: str, selector: str | None = None):
    """Another broker's pull as Federation.serve reads it."""
    filters = Data()
    wire.put_filters(filters, no_local=False, selector=selector)
    return SimpleNamespace(connection=connection, remote_source=SimpleNamespace(address=address, filter=filters))


def event_end(b2):
    """B2's end of the event link B1 sends on."""
    return next(link for link in b2.sides[0].event_links if link.is_receiver)


def read_events(client, server, b2) -> list[tuple[str, dict]]:
    """The events B1 sent that B2 has, read and settled here (not handed to B2's federation)."""
    settle(client, server)
    end, seen = event_end(b2), []
    while end.current is not None:
        dlv = end.current
        seen.append(wire.read_event(end.recv(dlv.pending)))
        dlv.settle()
    return seen


def hand_events_over(client, server, b2) -> int:
    """The events B1 sent, each handed to B2's federation as the broker's on_delivery does; how many."""
    settle(client, server)
    end, count = event_end(b2), 0
    while end.current is not None:
        end.broker_federation_deliveries(end.current)
        count += 1
    settle(server, client)
    return count


# ---- the serving broker: refuse, watch, tell once --------------------------------------------------------------------


def test_a_pull_for_a_queue_not_here_is_refused_and_its_puller_told_once_when_the_queue_comes():
    client, server, b1, b2 = federated()
    why, *_ = b1.serve(pull_of(client[0], f"{JOBS}::{JOBS}"), wire.QUEUE_RECEIVER)
    assert why == "Queue: 'jobs' does not exist on address 'jobs'"
    assert read_events(client, server, b2) == [], "nothing is said before the queue is there"
    b1.added(JOBS)  # the address comes first (a producer's attach creates both): not what the pull asked for
    b1.added(JOBS, JOBS)
    b1.added(JOBS, JOBS)  # made again later (deleted in between): the watch was for one time only
    assert read_events(client, server, b2) == [(wire.QUEUE_ADDED, {wire.ADDRESS_NAME: JOBS, wire.QUEUE_NAME: JOBS})]


def test_an_event_is_written_as_artemis_reads_it():
    """AMQPFederationEventProcessor compares the event type with String.equals (a symbol would be an unknown event,
    and an unknown event ends Artemis's federation) and reads the names from an amqp-value map of strings."""
    data = wire.added_event("orders", "orders")
    assert section_types(data, 0x72) == {wire.EVENT_TYPE: "string"}
    assert section_types(data, 0x77) == {wire.ADDRESS_NAME: "string", wire.QUEUE_NAME: "string"}
    assert wire.read_event(wire.added_event("prices")) == (wire.ADDRESS_ADDED, {wire.ADDRESS_NAME: "prices"})


def test_a_queue_destroyed_under_a_pull_is_watched_like_a_refused_one():
    client, server, b1, b2 = federated()
    link = SimpleNamespace(connection=client[0])
    queue = anycast(JOBS, SimpleNamespace(federation_node="B2", max_hops=-1, link=link),
                    SimpleNamespace(federation_node=None, max_hops=-1, link=SimpleNamespace(connection=object())))
    b1.queue_deleted(queue)
    assert b1.sides[0].watches == {("queue", JOBS): -1}, "the other broker's pull only, not the local consumer's"


def test_an_address_pull_creates_a_missing_address_where_the_settings_let_it_and_is_watched_where_not():
    client, server, b1, b2 = federated()
    created = {}
    b1.broker.auto_create = lambda address, routing: created.setdefault(address, {
        "routings": {routing}, "queues": []}) if address != "locked" else None
    why, queue, address, _ = b1.serve(pull_of(client[0], "prices"), wire.ADDRESS_RECEIVER)
    assert (why, queue, address, created) == (None, None, "prices", {"prices": {"routings": {"multicast"},
                                                                                "queues": []}})
    why, *_ = b1.serve(pull_of(client[0], "locked"), wire.ADDRESS_RECEIVER)
    assert why == "address 'locked' does not exist" and list(b1.sides[0].watches) == [("address", "locked")]
    b1.added("locked")
    assert read_events(client, server, b2) == [(wire.ADDRESS_ADDED, {wire.ADDRESS_NAME: "locked"})]


# ---- the puller: try again on the event, only while demand lasts ----------------------------------------------------


@pytest.mark.parametrize("demand", [True, False], ids=["consumer-still-there", "consumer-gone"])
def test_the_puller_pulls_again_on_the_event_only_while_a_consumer_wants_the_queue(demand):
    client, server, b1, b2 = federated()
    waiting = anycast(JOBS, consumer())
    b2.broker.addresses = {JOBS: {"routings": {"anycast"}, "queues": [waiting]}}
    side = b2.sides[0]
    side.evaluate()
    pull = side.pulls[("queue", JOBS)]
    why, *_ = b1.serve(pull_of(client[0], f"{JOBS}::{JOBS}"), wire.QUEUE_RECEIVER)  # B1 refuses it...
    assert why is not None
    side.link_lost(pull)  # ...and its detach reaches B2: forgotten, and not opened again by itself (no loop of
    assert side.pulls == {}  # refusals; a consumer coming or going here would evaluate demand again, once)
    if not demand:
        waiting.consumers[0].closed = True
    b1.added(JOBS, JOBS)
    assert hand_events_over(client, server, b2) == 1
    assert (("queue", JOBS) in side.pulls) == demand


def test_an_event_that_overtakes_the_refusal_of_its_pull_still_gets_the_pull_tried_again():
    """Artemis sends its events from another executor than the refused link's detach, so the event can come first
    (seen in make test under load: the pull was never tried again and 100 messages stayed on B1)."""
    client, server, b1, b2 = federated()
    b2.broker.addresses = {JOBS: {"routings": {"anycast"}, "queues": [anycast(JOBS, consumer())]}}
    side = b2.sides[0]
    side.evaluate()
    pull = side.pulls[("queue", JOBS)]
    why, *_ = b1.serve(pull_of(client[0], f"{JOBS}::{JOBS}"), wire.QUEUE_RECEIVER)  # B1 refuses it...
    assert why is not None
    b1.added(JOBS, JOBS)
    assert hand_events_over(client, server, b2) == 1  # ...its event reaches B2 while the pull is still open there
    assert side.pulls == {("queue", JOBS): pull}, "the pull is still open: nothing to open yet"
    side.link_lost(pull)  # then the refusal arrives
    assert ("queue", JOBS) in side.pulls and side.pulls[("queue", JOBS)] is not pull, "pulled again"


def test_the_dialling_side_pulls_by_its_local_policies_only_once_its_event_receiver_is_answered():
    """Else the other broker (Artemis registers a watch only when it has an event sender) could refuse a pull with
    nowhere to send the event, and the pull would never be tried again."""
    local = FederationPolicy("queue", "local", "b1-b2-back", (("#", "#"),), ())

    def with_a_consumer_of_jobs(broker):
        broker.add_outgoing_producer = lambda *args: None
        broker.addresses = {JOBS: {"routings": {"anycast"}, "queues": [anycast(JOBS, consumer())]}}

    client, server, b1, b2, _ = control_answered((local,), with_a_consumer_of_jobs)
    side = b1.sides[0]
    side.evaluate()
    assert side.pulls == {} and [link.is_receiver for link in side.event_links] == [True]
    settle(client, server)
    answer_event_links(client, server, b1, b2)
    assert ("queue", JOBS) in side.pulls
    assert b2.sides[0].events is not None, "B2 sends its events on the link B1 opened to receive them"


def test_a_refused_event_link_leaves_the_federation_working_without_events():
    client, server, b1, b2, remote = control_answered((QUEUES,))
    settle(client, server)
    refused = server[0].link_head(Endpoint.LOCAL_UNINIT)  # a broker that takes no event links: null target, detach
    refused.target.type = refused.target.UNSPECIFIED
    refused.source.copy(refused.remote_source)
    refused.open()
    refused.close()
    settle(server, client)
    sender = b1.sides[0].event_links[0]
    sender.broker_federation_answer(sender)
    settle(client, server)
    assert b1.sides[0].events is None
    while remote.current is not None:
        remote.broker_federation_deliveries(remote.current)
    assert [p.name for p in b2.sides[0].policies] == [QUEUES.name], "the policies went all the same"


# ---- a broker in the middle: creating the queue so that demand travels on -------------------------------------------


def middle_broker(include_federated: bool, connected: bool = True):
    """B2 between B1 and B3: it pulls from B1 by a queue policy (`include_federated` or not) over one connection,
    and B3 pulls from it over another. (B2's federation, B3's connection, the queues auto_create made)."""
    broker = fake_broker("B2")
    made = []

    def auto_create(address, routing):
        broker.queues[address] = anycast(address)
        made.append((address, routing))
        return {"routings": {routing}, "queues": [broker.queues[address]]}
    broker.auto_create = auto_create
    feds = federation.Federation(broker)
    towards_b1 = FederationPolicy("queue", "local", "b1-b2-queues", (("#", "#"),), (),
                                  include_federated=include_federated)
    if connected:
        feds.sides.append(federation.Side(feds, object(), [towards_b1], "b1-b2", "B1"))
    b3 = object()
    feds.sides.append(federation.Side(feds, b3, [], "b2-b3", "B3"))
    feds.towards_b1 = towards_b1
    return feds, b3, made


@pytest.mark.parametrize(("include_federated", "selector", "created"), [
    (True, None, True),  # Artemis's queue pulls carry no selector; nor do the reference's with include-federated
    (True, wire.address_selector(2), True),
    (True, wire.address_selector(1), False),  # the pull takes no message from further away: nothing to carry on
    (False, None, False),  # B2 would not pull for another broker's consumer (Side._demand): nothing to carry on
])
def test_a_broker_in_the_middle_creates_a_missing_queue_only_where_demand_can_travel_on(include_federated, selector,
                                                                                         created):
    feds, b3, made = middle_broker(include_federated)
    why, queue, address, _ = feds.serve(pull_of(b3, f"{JOBS}::{JOBS}", selector), wire.QUEUE_RECEIVER)
    assert (why is None) == created
    assert made == ([(JOBS, "anycast")] if created else [])
    assert list(feds.sides[1].watches) == ([] if created else [("queue", JOBS)])
    if created:
        assert (queue.name, address) == (JOBS, JOBS)


def test_the_broker_a_queue_pull_came_over_is_no_third_broker_to_carry_demand_to():
    feds, b3, made = middle_broker(True)
    why, *_ = feds.serve(pull_of(feds.sides[0].connection, f"{JOBS}::{JOBS}"), wire.QUEUE_RECEIVER)
    assert why is not None and made == []


def test_a_queue_refused_before_the_middle_broker_pulled_from_anyone_is_created_once_it_does():
    """Seen on the reference: B2 -> B3 came up before B1 -> B2, so B3's pull reached B2 while B2 could carry demand
    nowhere; it was refused and watched. When B1's policy arrives, B2 creates the queue, which tells B3 (added)."""
    feds, b3, made = middle_broker(True, connected=False)
    why, *_ = feds.serve(pull_of(b3, f"{JOBS}::{JOBS}"), wire.QUEUE_RECEIVER)
    assert why is not None and made == []
    feds.carry_on_watched()
    assert made == [], "still nobody to pull from"
    feds.sides.insert(0, federation.Side(feds, object(), [feds.towards_b1], "b1-b2", "B1"))
    feds.carry_on_watched()
    assert made == [(JOBS, "anycast")]
