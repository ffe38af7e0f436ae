"""The properties a fuzz program's history must have, from the documents (003 §12.1-§12.2, AMQP 1.0).

Each check reads a finished or running `World` (harness/fuzz/program.py) and returns `Violation`s with stable
signatures `<address class>:<property>`. They encode what the documents promise and nothing a particular
router chose where the documents leave it open: which of several balanced receivers gets a message, whether
idle credit is kept after the last consumer left, how fast routes come back. Where the reference is stricter
than the documents (REFERENCE_ROUTER_CHOICES), nothing here relies on it.

Two moments: `during(world)` after every step (cheap, no waiting) and `at_end(world)` once the program is
finished and its brokered queues drained. `multicast_coverage(world)` waits, with a deadline, while the
receivers are still attached, so it runs between the two.
"""

from __future__ import annotations

from collections import defaultdict

from .. import history as h
from ..checkers import combine_multicast
from ..wait import WaitTimeout, wait_for
from .program import DYNAMIC, PROGRAM_EVENTS, SHORT_TTL, Violation, World, family

COVERAGE_WAIT_S = 1.0  # the send step already waited for its copies: this is slack, not the main wait
FINAL = {"accept": "accepted", "reject": "rejected", "release": "released", "modify": "modified",
         "modify-undeliverable": "modified"}


def _v(world: World, signature: str, kind: str, message: str, **evidence) -> Violation:
    return Violation(signature, kind, f"[{world.label}] {message}", evidence)


# ---- what the history says, per message ------------------------------------------------------------------


def copies(world: World) -> dict[tuple, list[dict]]:
    """(producer, seq) -> one entry per receipt, in history order: {receiver, i, settled_as (the receiver's
    verb, 'presettled', or None while unsettled), lost (the receiver's link was lost abnormally)}."""
    out: dict[tuple, list[dict]] = defaultdict(list)
    unsettled: dict[str, list[dict]] = defaultdict(list)
    lost = {world.wire(i.handle) for i in world.links.values() if i.lost_abnormally}
    for i, e in enumerate(world.history.events()):
        if e.client == PROGRAM_EVENTS and e.kind == "closing":
            lost.update(e.data.get("links", []))  # settles from now on may never leave this side
        elif e.kind == h.RECEIVE:
            entry = {"receiver": e.client, "i": i, "settled_as": "presettled" if e.data.get("settled") else None,
                     "lost": e.client in lost, "delivery_count": e.data.get("delivery_count") or 0,
                     "priority": e.data.get("priority"), "address": e.data.get("address")}
            out[(e.data.get("producer"), e.data.get("seq"))].append(entry)
            if entry["settled_as"] is None:
                unsettled[e.client].append(entry)
        elif e.kind == h.SETTLE and unsettled[e.client]:
            entry = unsettled[e.client].pop(0)  # oldest first (harness/clients)
            entry["settled_as"] = e.data.get("outcome")
            entry["lost"] = entry["lost"] or e.client in lost
    return out


def outcomes(world: World) -> dict[tuple, str]:
    return {(e.client, e.data.get("seq")): e.data.get("outcome") for e in world.history.events(h.OUTCOME)}


def _class_of(world: World, key: tuple) -> str | None:
    info = world.sent.get(key)
    return info.cls if info is not None else None


# ---- during the program ----------------------------------------------------------------------------------


def during(world: World) -> list[Violation]:
    found = list(world.violations)
    world.violations.clear()
    peer = world.target.peer
    reason = peer.down_reason() if hasattr(peer, "down_reason") else None
    if reason:
        found.append(_v(world, f"{world.target.role}:crashed", "crash",
                        f"the {world.target.role} under fuzz went down: {reason}"))
    for e in world.history.events(h.DISCONNECTED):
        handle = world.handle_of(e.client)
        if handle in world.conns and handle not in world.closed_by_us:
            found.append(_v(world, "connection:closed-by-peer", "crash",
                            f"connection {handle} was closed by the peer: {e.data.get('condition')}"))
            world.closed_by_us.add(handle)  # reported once
    found += credit_exceeded(world)
    found += duplicates(world)
    found += phantoms(world)
    return found


def credit_exceeded(world: World) -> list[Violation]:
    """AMQP 1.0 §2.6.7: a sender never sends beyond the credit its receiver granted."""
    out = []
    for info in world.links.values():
        if info.kind != "receiver" or info.auto_credit or info.link is None:
            continue
        got = world.history.count(h.RECEIVE, world.wire(info.handle))
        if got > info.granted:
            out.append(_v(world, f"{info.cls}:credit-exceeded", "credit",
                          f"receiver {info.handle} on {info.address} got {got} messages for {info.granted} "
                          "credit granted (AMQP 1.0 §2.6.7)", receiver=info.handle, got=got,
                          granted=info.granted))
    return out


def duplicates(world: World) -> list[Violation]:
    """Multicast: each consumer one copy (003 §12.1.1.3). Anycast through the router alone: a message is
    delivered again only if no consumer took it for good (accepted, rejected, pre-settled), since the router
    stores nothing. Brokered: a message a consumer accepted is not delivered again unless that acceptance may
    have been lost (its link dropped, the broker killed)."""
    out = []
    for key, entries in copies(world).items():
        cls = _class_of(world, key)
        fam = family(cls)
        if cls is None or len(entries) < 2:
            continue
        if fam == "multicast":
            per = defaultdict(int)
            for entry in entries:
                per[entry["receiver"]] += 1
            twice = sorted(world.handle_of(r) for r, n in per.items() if n > 1)
            if twice:
                out.append(_v(world, f"{cls}:duplicate", "duplicate",
                              f"message {_name(world, key)} reached receivers {twice} more than once "
                              "(003 §12.1.1.3: one copy per consumer)", delivery=list(key)))
            continue
        for n, entry in enumerate(entries[1:], 1):
            earlier = entries[:n]
            taken = [c for c in earlier if c["settled_as"] in ("accept", "reject", "presettled")
                     and c["i"] < entry["i"] and not (c["lost"] and c["settled_as"] != "presettled")]
            if fam == "brokered":
                taken = [c for c in taken if not c["lost"] and not world.broker_faults]
            if taken:
                out.append(_v(world, f"{cls}:duplicate-after-settlement", "duplicate",
                              f"message {_name(world, key)} was delivered to {world.handle_of(entry['receiver'])} "
                              f"after {world.handle_of(taken[0]['receiver'])} had settled it "
                              f"({taken[0]['settled_as']})", delivery=list(key)))
                break
    return out


def phantoms(world: World) -> list[Violation]:
    """Nothing arrives that this program's producers did not send."""
    out = []
    for e in world.history.events(h.RECEIVE):
        key = (e.data.get("producer"), e.data.get("seq"))
        if world.handle_of(key[0]) is not None and key not in world.sent:
            out.append(_v(world, "any:phantom", "duplicate",
                          f"receiver {world.handle_of(e.client)} got {_name(world, key)}, which was never sent"))
            break
    return out


# ---- while the receivers are still attached, at the end ---------------------------------------------------


def multicast_coverage(world: World, wait_s: float = COVERAGE_WAIT_S) -> list[Violation]:
    """003 §12.1.1.3: a multicast message goes to every consumer attached to the address. Owed: each unsettled
    (at-least-once) message, to every auto-credit receiver that was attached before the step that sent it and
    is still attached now."""
    owed: dict[tuple, set[str]] = {}
    for key, info in world.sent.items():
        if family(info.cls) != "multicast" or info.presettled or (info.ttl is not None and info.ttl <= SHORT_TTL):
            continue
        if not any(e.data.get("seq") == key[1] for e in world.history.events(h.SEND, key[0])):
            continue  # never left the sender (no credit)
        rcvs = {world.wire(r.handle) for r in world.links.values()
                if r.kind == "receiver" and r.address == info.address and r.link is not None and r.auto_credit
                and r.step < info.step and r.link.attached.is_set() and not r.link.detached.is_set()}
        if rcvs:
            owed[key] = rcvs

    def missing():
        got = defaultdict(set)
        for e in world.history.events(h.RECEIVE):
            got[(e.data.get("producer"), e.data.get("seq"))].add(e.client)
        return {k: sorted(v - got[k]) for k, v in owed.items() if v - got[k]}

    if not owed:
        return []
    try:
        wait_for(lambda: not missing(), wait_s, "every multicast receiver to get its copy")
        return []
    except WaitTimeout:
        pass
    out = []
    gaps = missing()
    for cls in sorted({world.sent[k].cls for k in gaps}):
        keys = [k for k in gaps if world.sent[k].cls == cls]
        k = keys[0]
        out.append(_v(world, f"{cls}:not-all-receivers", "lost",
                      f"{len(keys)} multicast message(s) to {world.sent[k].address} missed receivers attached "
                      f"before they were sent, e.g. {_name(world, k)} never reached "
                      f"{[world.handle_of(r) for r in gaps[k]]} (003 §12.1.1.3: every consumer gets a copy)",
                      missing={_name(world, x): [world.handle_of(r) for r in gaps[x]] for x in keys[:5]}))
    return out


# ---- at the end ------------------------------------------------------------------------------------------


def owed_by_broker(world: World) -> dict[str, set]:
    """Brokered class -> messages the broker accepted that no consumer took for good, so it must still hold
    them: not expired (short TTL), not accepted, rejected or refused (modified undeliverable) by a consumer,
    and durable if the broker was killed after they were sent."""
    got = copies(world)
    result = outcomes(world)
    owed: dict[str, set] = defaultdict(set)
    for key, info in world.sent.items():
        if family(info.cls) != "brokered" or info.presettled or result.get(key) != "accepted":
            continue
        if info.ttl is not None and info.ttl <= SHORT_TTL:
            continue
        if any(c["settled_as"] in ("accept", "reject", "modify-undeliverable", "presettled") for c in got[key]):
            continue
        if len(got[key]) >= 3:  # a broker may dead-letter a message after a few failed deliveries (its own setting)
            continue
        if any(step > info.step for step in world.broker_faults) and not info.durable:
            continue
        owed[info.cls].add(key)
    return owed


def at_end(world: World, owed: dict[str, set]) -> list[Violation]:
    out = during(world)
    out += missing_outcomes(world)
    out += lost(world, owed)
    out += outcome_table(world)
    out += ordering(world)
    out += credit_gating(world)
    return out


def missing_outcomes(world: World) -> list[Violation]:
    """Once nothing blocks them (credit granted, held messages settled, the broker back), unsettled messages on
    attached senders get their outcome (003 §12.1.1.4: the router propagates the final state)."""
    pending = [tuple(k) for e in world.history.events(kind="quiesced") for k in e.data.get("outstanding", [])]
    out = []
    for cls in sorted({str(_class_of(world, k)) for k in pending}):
        keys = [k for k in pending if str(_class_of(world, k)) == cls]
        out.append(_v(world, f"{cls}:no-outcome", "hang",
                      f"{len(keys)} unsettled message(s), e.g. {_name(world, keys[0])}, got no outcome although "
                      "nothing blocked them any more", messages=[_name(world, k) for k in keys[:5]]))
    return out


def lost(world: World, owed: dict[str, set]) -> list[Violation]:
    out = []
    for cls, keys in sorted(owed.items()):
        gone = sorted(keys - world.drained.get(cls, set()), key=repr)
        if gone:
            out.append(_v(world, f"{cls}:lost-accepted", "lost",
                          f"{len(gone)} message(s) the broker accepted through {world.address(cls)} never came back,"
                          f" e.g. {_name(world, gone[0])}", messages=[_name(world, k) for k in gone[:5]]))
    return out


def outcome_table(world: World) -> list[Violation]:
    """003 §12.1.1.4, for unsettled messages the router routes itself. Anycast: the producer's outcome is the
    consumer's (accepted/rejected: a consumer did so; released: it reached no consumer). Multicast: rejected if
    any consumer rejected, else accepted if any accepted, else modified if it may have reached one, else
    released (harness.checkers.combine_multicast)."""
    got = copies(world)
    out = []
    seen: set[str] = set()
    for key, outcome in sorted(outcomes(world).items(), key=repr):
        info = world.sent.get(key)
        if info is None or info.presettled or family(info.cls) not in ("anycast", "multicast"):
            continue
        states = [FINAL.get(c["settled_as"], "accepted" if c["settled_as"] == "presettled" else "modified")
                  for c in got[key]]
        if family(info.cls) == "multicast":
            expected = combine_multicast(states)
            bad = expected != outcome
            why = f"its copies were {sorted(states) or 'none'}, so §12.1.1.4 gives {expected}"
        else:
            if outcome in ("accepted", "rejected"):
                bad = outcome not in states
            elif outcome == "released":
                bad = any(s != "released" for s in states)
            else:
                bad = False
            why = f"its consumers' states were {sorted(states) or 'none (it reached no consumer)'}"
        if bad and info.cls not in seen:
            seen.add(str(info.cls))
            out.append(_v(world, f"{info.cls}:outcome-table", "outcome",
                          f"message {_name(world, key)} to {info.address} was {outcome} at its producer, but {why}",
                          delivery=list(key), outcome=outcome, states=states))
    return out


def ordering(world: World) -> list[Violation]:
    """One producer's messages reach one consumer in the order sent (AMQP 1.0 §2.6.1 link order, kept by a
    router that stores nothing), per message priority (003 §12.1.3 lets higher priority overtake) and address.
    A message may come back earlier only as a redelivery: seen before, given back to its producer, or carrying
    a delivery-count. Brokered queues are judged only when nothing in the program could requeue a message
    (003 §12.1.4.3 lets a fallback's stored messages interleave with new ones: never judged)."""
    requeue_ops = {"kill", "detach", "close", "broker", "settle"}
    requeuing = any(s.op in requeue_ops for s in world.steps) or any(
        i.outcome != "accept" for i in world.links.values() if i.kind == "receiver")
    given_back: set = set()
    seen: set = set()
    top: dict[tuple, int] = {}
    out = []
    for e in world.history.events():
        if e.kind == h.OUTCOME and e.data.get("outcome") in ("released", "modified"):
            given_back.add((e.client, e.data.get("seq")))
        if e.kind != h.RECEIVE:
            continue
        key = (e.data.get("producer"), e.data.get("seq"))
        info = world.sent.get(key)
        if info is None:
            continue
        judged = family(info.cls) in ("anycast", "multicast") or (
            info.cls in ("waypoint", "linkroute") and not requeuing)
        stream = (e.client, key[0], info.priority, info.address)
        if judged and stream in top and key[1] < top[stream]:
            if not (key in seen or key in given_back or (e.data.get("delivery_count") or 0) > 0):
                out.append(_v(world, f"{info.cls}:reordered", "order",
                              f"receiver {world.handle_of(e.client)} got {_name(world, key)} after seq "
                              f"{top[stream]} of the same producer, priority and address"))
                break
        top[stream] = max(top.get(stream, -1), key[1])
        seen.add(key)
    return out


def credit_gating(world: World) -> list[Violation]:
    """003 §12.1.1.1: a producer gets credit only once a consumer is available. Judged for the router-only
    classes (a fresh address per program): a sender's first credit must come after the first request to attach
    a receiver to its address. How long credit lasts after consumers leave is left open, so not judged."""
    events = world.history.events()
    first_receiver: dict[str, int] = {}
    for i, e in enumerate(events):
        if e.client == PROGRAM_EVENTS and e.kind == "step" and e.data.get("op") == "receiver":
            first_receiver.setdefault(e.data.get("cls"), i)
    out = []
    for info in world.links.values():
        if info.kind != "sender" or family(info.cls) not in ("anycast", "multicast") or info.cls == DYNAMIC:
            continue
        name = world.wire(info.handle)
        credited = next((i for i, e in enumerate(events)
                         if e.client == name and e.kind == h.CREDIT and (e.data.get("credit") or 0) > 0), None)
        if credited is not None and credited < first_receiver.get(info.cls, len(events)):
            out.append(_v(world, f"{info.cls}:credit-without-consumer", "credit",
                          f"sender {info.handle} on {info.address} got credit before any consumer of the address "
                          "existed (003 §12.1.1.1)"))
    return out


# ---- the differential view -------------------------------------------------------------------------------


def observation(world: World) -> dict:
    """What a program showed, normalised so that two conforming peers agree: per-step results (attach
    accepted or refused, ...), per multicast receiver the messages it got, per routed anycast address the
    messages that got through (not which receiver: balancing is the router's choice), per sender its outcomes
    where the receivers of its address all settle alike, and per broker queue every message it gave to a
    consumer or back to the final drain. Ids carry handles,
    never the program id; timings are left out."""
    def norm(key):
        return (world.handle_of(key[0]), key[1])

    got = copies(world)
    per_receiver: dict[str, list] = {}
    per_address: dict[str, set] = defaultdict(set)
    # A brokered queue's messages: what its consumers got and what the final drain took back, as one set. Whether a
    # message reached a consumer before the program's steps ended, during the finish (which grants credit and
    # settles what receivers hold) or only in the drain is a matter of the peers' speed, not of conformance: a
    # session against Artemis reported the same programs diverging one way, then the other. What the set
    # catches is a message lost or made up; duplicates are judged per peer (during()).
    given_by_queue: dict[str, set] = defaultdict(set)
    for cls, keys in world.drained.items():
        given_by_queue[str(cls)].update(norm(k) for k in keys)
    for key, entries in got.items():
        info = world.sent.get(key)
        if info is None:
            continue
        for c in entries:
            if family(info.cls) == "multicast":
                per_receiver.setdefault(world.handle_of(c["receiver"]), []).append(norm(key))
            elif c["receiver"].startswith(f"{world.pid}.drain-"):
                continue
            elif family(info.cls) == "brokered":
                given_by_queue[str(info.cls)].add(norm(key))
            else:
                per_address[str(info.cls)].add(norm(key))
    policies: dict[str, set] = defaultdict(set)
    for i in world.links.values():
        if i.kind == "receiver":
            policies[str(i.address)].add(i.outcome)
    result = outcomes(world)
    per_sender: dict[str, dict] = {}
    for key, outcome in result.items():
        info = world.sent.get(key)
        if info is None or len(policies.get(info.address, set())) > 1:
            continue
        counts = per_sender.setdefault(world.handle_of(key[0]), {})
        counts[outcome] = counts.get(outcome, 0) + 1
    return {"steps": [[op, r] for op, r in world.observations],
            "multicast": {k: sorted(v) for k, v in sorted(per_receiver.items())},
            "anycast": {k: sorted(v) for k, v in sorted(per_address.items())},
            "outcomes": dict(sorted(per_sender.items())),
            "drained": {k: sorted(v) for k, v in sorted(given_by_queue.items())}}


def differences(a: dict, b: dict) -> list[tuple[str, str]]:
    """Where two observations differ: (category with no ids, one short line) for the first few."""
    out = []
    for i, (x, y) in enumerate(zip(a["steps"], b["steps"], strict=False)):
        if x != y:
            out.append((f"steps:{x[0]}", f"step {i} {x[0]}: {x[1]} vs {y[1]}"))
    for part in ("multicast", "anycast", "outcomes", "drained"):
        for k in sorted(set(a[part]) | set(b[part])):
            if a[part].get(k) != b[part].get(k):
                category = f"{part}:{k}" if part in ("anycast", "drained") else part
                out.append((category, f"{part} {k}: {_short(a[part].get(k))} vs {_short(b[part].get(k))}"))
    return out[:8]


def _short(value) -> str:
    text = repr(value)
    return text if len(text) <= 120 else text[:117] + "..."


def _name(world: World, key: tuple) -> str:
    return f"{world.handle_of(key[0]) or key[0]}#{key[1]}"
