"""A present-but-empty source or target survives a pass through the reference (reference/attach_caps.py).

proton-C 0.40 reads an empty source (no address, not dynamic: what a client's sender attaches with) as no source,
and writes it back as null. A link route must pass the attach on as the client sent it: Qpid Broker-J refuses a
sender attach with a null source. These run proton's real engines, in memory, with the tap reading the bytes.
"""

from proton import Connection, Terminus, Transport

from reference.attach_caps import AttachTap, copy_termini, remote_termini


def _pair():
    """A client connection and a server connection whose server side is tapped, opened, bytes moved by `pump`."""
    client, server = Connection(), Connection()
    ct, st = Transport(), Transport(Transport.SERVER)
    ct.bind(client)
    st.bind(server)
    tap = AttachTap(writes=False)
    server.loop_tap = tap

    def pump():
        moved = True
        while moved:
            moved = False
            for src, dst, tapped in ((ct, st, True), (st, ct, False)):
                n = min(src.pending(), dst.capacity())
                if n > 0:
                    data = src.peek(n)
                    if tapped:
                        tap.feed_in(bytes(data))
                    dst.push(data)
                    src.pop(n)
                    moved = True
    client.open()
    server.open()
    pump()
    return client, server, pump


def _sender_with_empty_source(client, pump):
    session = client.session()
    session.open()
    sender = session.sender("orders-in")
    sender.source.type = Terminus.SOURCE  # present, with no address: as proton, Qpid JMS and rhea clients send it
    sender.target.address = "lr.orders"
    sender.open()
    pump()


def test_proton_reads_an_empty_source_as_none_which_is_why_the_tap_is_needed():
    client, server, pump = _pair()
    _sender_with_empty_source(client, pump)
    near = server.link_head(0)
    assert near.remote_source.type == Terminus.UNSPECIFIED, "proton-C reads it as no source (if this fails, proton " \
                                                             "changed: the tap may no longer be needed)"
    assert remote_termini(near) == (True, True)


def test_a_link_route_passes_an_empty_source_on_as_a_source():
    client, server, pump = _pair()
    _sender_with_empty_source(client, pump)
    near = server.link_head(0)
    # the router's twin towards the broker, and the broker behind it, tapped the same way
    router_out, broker, pump_out = _pair()
    session = router_out.session()
    session.open()
    far = session.receiver(near.name)
    copy_termini(far, near, remote_termini(near))
    far.open()
    pump_out()
    at_broker = broker.link_head(0)
    assert remote_termini(at_broker) == (True, True), "the broker got a source (no address) and a target"
    assert at_broker.remote_target.address == "lr.orders"


def test_a_terminus_the_client_left_out_stays_out():
    client, server, pump = _pair()
    session = client.session()
    session.open()
    sender = session.sender("no-source")
    sender.source.type = Terminus.UNSPECIFIED  # null source: legal for a sender, and passed on as null
    sender.target.address = "lr.orders"
    sender.open()
    pump()
    near = server.link_head(0)
    present = remote_termini(near)
    assert present == (False, True)
    router_out, broker, pump_out = _pair()
    s2 = router_out.session()
    s2.open()
    far = s2.receiver(near.name)
    copy_termini(far, near, present)
    assert far.source.type == Terminus.UNSPECIFIED and far.target.type == Terminus.TARGET


def test_unasked_termini_do_not_grow_without_bound():
    client, server, pump = _pair()
    session = client.session()
    session.open()
    for i in range(300):
        link = session.sender(f"s{i}")
        link.source.type = Terminus.SOURCE
        link.target.address = "q"
        link.open()
    pump()
    assert len(server.loop_tap.termini) == 256, "the oldest are dropped: a handler asks in the attach's own turn"
