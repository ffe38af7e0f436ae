"""The reference broker's address resolution, without sockets: auto-creation of addresses and queues on attach
(seed 000's address model; Artemis's `auto-create-addresses` / `auto-create-queues` address settings)."""

from __future__ import annotations

from reference.broker.broker import ANYCAST, MULTICAST, Broker
from reference.broker.config import parse_config


def broker_with(settings: str) -> Broker:
    broker = Broker(parse_config(f"""\
<configuration xmlns="urn:activemq">
  <core xmlns="urn:activemq:core">
    <persistence-enabled>false</persistence-enabled>
    <security-enabled>false</security-enabled>
    <acceptors><acceptor name="clients">tcp://127.0.0.1:0?protocols=AMQP</acceptor></acceptors>
    <address-settings>
      <address-setting match="#">{settings}</address-setting>
    </address-settings>
    <addresses>
      <address name="orders"><anycast><queue name="orders"/></anycast></address>
    </addresses>
  </core>
</configuration>
"""))
    broker.start()
    return broker


def test_an_unknown_address_is_created_with_the_default_routing_type():
    broker = broker_with("<default-address-routing-type>ANYCAST</default-address-routing-type>")
    info, routing = broker._resolve("invoices", None, for_consumer=False)
    assert routing == ANYCAST
    assert broker.addresses["invoices"] is info
    assert [q.name for q in info["queues"]] == ["invoices"], "and its anycast queue (auto-create-queues)"


def test_without_auto_create_addresses_an_unknown_address_is_refused():
    broker = broker_with("<auto-create-addresses>false</auto-create-addresses>")
    assert broker._resolve("invoices", None, for_consumer=False) == (None, "")
    assert "invoices" not in broker.addresses
    info, routing = broker._resolve("orders", None, for_consumer=True)
    assert (info is broker.addresses["orders"], routing) == (True, ANYCAST), "a declared address still resolves"


def test_without_auto_create_addresses_a_new_routing_type_is_refused():
    broker = broker_with("<auto-create-addresses>false</auto-create-addresses>")
    assert broker._resolve("orders", MULTICAST, for_consumer=True) == (None, "")
    assert broker.addresses["orders"]["routings"] == {ANYCAST}


def test_with_auto_create_addresses_a_new_routing_type_is_added():
    broker = broker_with("")
    info, routing = broker._resolve("orders", MULTICAST, for_consumer=False)
    assert routing == MULTICAST
    assert info["routings"] == {ANYCAST, MULTICAST}
