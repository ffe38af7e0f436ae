"""Dual mirror (002_f23507c2891d6d06.txt, "Dual Mirror (Disaster Recovery)"): DC1 and DC2 mirror each other;
sends and acknowledgements made on either are replayed on the other, and nothing echoes back. Where the session's
broker vendor is not the reference, the case also runs with DC1 a reference broker (`with-reference`): each
side's mirror then speaks the other vendor's wire form both ways; and with DC1 on the previous release of the
session's vendor (`with-previous`, where it has one here: harness/peers/versions.py), two releases mirroring each
other as during an upgrade (UPGRADE-MIXED-1)."""

import pytest

from harness import checkers
from harness.wait import wait_for

from ..conftest import MIXED_RELEASES, PREVIOUS
from .conftest import (WAIT, depth, empty, paired_with_reference, send_accepted, sender, wait_connected, wait_depth,
                       wait_mirror_idle)

pytestmark = pytest.mark.requires("mirror", "store-and-forward")


@pytest.mark.spec("MIRROR-DUAL-1", "MIRROR-DUAL-2")
@pytest.mark.parametrize("pair", [None, {"DC1": "reference"},
                                  pytest.param({"DC1": PREVIOUS}, marks=MIXED_RELEASES)],
                         ids=["same", "with-reference", "with-previous"])
def test_each_side_gets_the_others_sends_once_and_acks_flow_back(topology, clients, details, interop, pair):
    running = topology("broker-dual-mirror", vendors=paired_with_reference(interop, pair))
    dc1, dc2 = running["DC1"], running["DC2"]
    # DC1's mirror connection is named DC2 (its events wait on $ACTIVEMQ_ARTEMIS_MIRROR_DC2) and the other way.
    mirrors = {dc1: "DC2", dc2: "DC1"}

    def idle():
        for peer, name in mirrors.items():
            wait_mirror_idle(peer, name)
    for peer, name in mirrors.items():
        wait_connected(peer, name)
    empty(clients, dc1, "orders")
    idle()
    empty(clients, dc2, "orders")
    idle()
    n1, n2 = 12, 7
    on_dc1 = sender(clients.connect(running.client_url("dc1")), "orders")
    on_dc2 = sender(clients.connect(running.client_url("dc2")), "orders")
    send_accepted(on_dc1, n1)
    send_accepted(on_dc2, n2)
    total = n1 + n2
    wait_depth(dc1, "orders", total, what=f" ({n1} sent there, {n2} mirrored from DC2)")
    wait_depth(dc2, "orders", total, what=f" ({n2} sent there, {n1} mirrored from DC1)")
    # An echo would be a replayed event mirrored back: once both mirrors have nothing left to send, twice over,
    # each side still holds each message once.
    idle()
    idle()
    depths = {"DC1": depth(dc1, "orders"), "DC2": depth(dc2, "orders")}
    reader = clients.connect(running.client_url("dc2")).receiver("orders", credit=total)
    wait_for(lambda: len(reader.seqs(on_dc1.name)) + len(reader.seqs(on_dc2.name)) >= total, WAIT,
             f"all {total} messages at a consumer on DC2",
             describe=lambda: f"{len(reader.seqs(on_dc1.name))} from DC1, {len(reader.seqs(on_dc2.name))} from DC2")
    wait_depth(dc2, "orders", 0)
    wait_depth(dc1, "orders", 0, what=" (DC2's acknowledgements mirrored back)")
    idle()
    reader.conn.sync()
    verdict = checkers.total_queue(clients.history, producer=[on_dc1.name, on_dc2.name], receivers=reader.name,
                                   allow_duplicates=False)
    details.update(sent={"DC1": n1, "DC2": n2}, depths_after_mirroring=depths,
                   **checkers.checks_details(total_queue=verdict))
    assert depths == {"DC1": total, "DC2": total}, f"each side must hold every message once: {depths}"
    assert verdict.ok, verdict.as_details()
