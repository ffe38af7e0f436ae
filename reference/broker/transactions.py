"""Local transactions of the reference broker (AMQP 1.0 part 4), as the broker's transaction coordinator.

* **Coordinator.** A link whose target is a `coordinator` (§4.5.1) is the control link. It is answered with
  a coordinator target offering `amqp:local-transactions`, `amqp:multi-txns-per-ssn` and
  `amqp:multi-ssns-per-txn`, and given credit. `declare` (§4.2) is answered with `declared` carrying a fresh
  txn-id; `discharge` (§4.3) commits (fail=false) or rolls back (fail=true) and is answered `accepted`, or
  `rejected` with `amqp:transaction:unknown-id` when the txn-id is not a live transaction of that
  connection. Control messages sent settled detach the control link (§4.2: they must be unsettled).
* **Scope.** Work may name a transaction on any link of the connection whose control link declared it
  (multi-ssns-per-txn): through a router's link routes, every routed link of every client arrives on the
  router's one session, so a session scope would mean nothing there. When the control link detaches or
  closes, or its connection drops, its open transactions are rolled back (§4.1).
* **Posting** (§4.4.1). A transfer whose state is `transactional-state(txn-id)` is answered, and settled,
  with `transactional-state(txn-id, accepted)`; the message is routed only at commit, in commit order.
* **Retirement** (§4.4.2). A consumer's disposition `transactional-state(txn-id, outcome)` takes the message
  out of the consumer's hands into the transaction. At commit the outcome is applied as the broker applies
  it outside transactions (and an unsettled delivery is settled). At rollback a delivery the consumer had
  settled goes back in its place counted as a failed delivery (as modified with delivery-failed: Artemis
  does so, and a JMS consumer then sees it redelivered), because nobody can give it another outcome; one it
  had not settled reverts to acquired by that consumer, which may settle it again.
* **Durability.** What a commit enqueues and deletes in the journal is one atomic group (journal.py), and
  the discharge is accepted only once that group is on disk.
* Transactional acquisition (a `txn-id` in flow properties, §4.4.3) is not supported: proton does not expose
  flow properties to the broker.
"""

from __future__ import annotations

import contextlib
import logging
import uuid
from dataclasses import dataclass, field

from proton import Condition, Delivery, Described, Message, Terminus, ulong

from ..links import put_symbols, read_message

log = logging.getLogger("BROKER")

DECLARED, TRANSACTIONAL_STATE = 0x33, 0x34  # delivery-state descriptors of AMQP 1.0 §4.5
UNKNOWN_ID = "amqp:transaction:unknown-id"
CAPABILITIES = ("amqp:local-transactions", "amqp:multi-txns-per-ssn", "amqp:multi-ssns-per-txn")
CONTROL_CREDIT = 100
_BINARY = (bytes, bytearray, memoryview)  # proton decodes AMQP binary in described lists as memoryview
_DECLARE, _DISCHARGE = (0x31, "amqp:declare:list"), (0x32, "amqp:discharge:list")
# Outcomes (AMQP 1.0 §3.5) by descriptor code and name, as the delivery-state numbers proton uses.
_OUTCOMES = {
    0x24: Delivery.ACCEPTED, "amqp:accepted:list": Delivery.ACCEPTED,
    0x25: Delivery.REJECTED, "amqp:rejected:list": Delivery.REJECTED,
    0x26: Delivery.RELEASED, "amqp:released:list": Delivery.RELEASED,
    0x27: Delivery.MODIFIED, "amqp:modified:list": Delivery.MODIFIED,
}


@dataclass(eq=False)
class Retirement:
    """A consumer's transactional outcome for one message, applied at commit."""

    consumer: object  # model.Consumer
    dlv: Delivery | None  # until it is settled (then let go: see _let_go)
    entry: object  # model.Entry
    state: int
    failed: bool = False
    undeliverable: bool = False
    settled: bool = False  # by the consumer: then only the broker can decide its fate after a rollback


@dataclass(eq=False)
class Transaction:
    id: bytes
    control: object  # the coordinator link that declared it
    posted: list = field(default_factory=list)  # (address info, data, durable, expiry), in arrival order
    retired: list = field(default_factory=list)  # Retirement


class Transactions:
    """The coordinator of one broker: live transactions by id, and the hooks broker.py calls."""

    def __init__(self, broker):
        self.broker = broker
        self.live: dict[bytes, Transaction] = {}

    # ---- the control link --------------------------------------------------------------------------------

    def attach(self, link) -> None:
        link.target.type = Terminus.COORDINATOR
        put_symbols(link.target.capabilities, CAPABILITIES)
        link.source.copy(link.remote_source)
        self.broker.link_states.of(link).coordinator = True
        link.open()
        link.flow(CONTROL_CREDIT)

    def control(self, link, dlv: Delivery) -> None:
        """A declare or discharge message on a control link."""
        data = read_message(link, dlv)
        if data is None:
            return
        if link.credit < CONTROL_CREDIT // 2:
            link.flow(CONTROL_CREDIT - link.credit)
        if dlv.settled:  # §4.2, §4.3: the controller must see the outcome, so a settled one is an error
            self.broker.close_link(link, "amqp:illegal-state", "declare and discharge must be sent unsettled")
            return
        try:
            kind, fields = _control_body(data)
        except ValueError as exc:
            _answer(dlv, Delivery.REJECTED, condition=Condition("amqp:decode-error", str(exc)))
            return
        if kind == _DECLARE:
            if fields and fields[0] is not None:
                _answer(dlv, Delivery.REJECTED, condition=Condition(
                    "amqp:not-implemented", "declare: global-id given, but only local transactions are offered"))
                return
            txn = Transaction(uuid.uuid4().bytes, link)
            self.live[txn.id] = txn
            _answer(dlv, DECLARED, data=[txn.id])
            log.info("Transaction %s declared", txn.id.hex())
            return
        txn_id = fields[0] if fields else None
        fail = bool(fields[1]) if len(fields) > 1 else False
        txn = self._lookup(txn_id, link.connection)
        if txn is None or txn.control != link:
            _answer(dlv, Delivery.REJECTED, condition=Condition(
                UNKNOWN_ID, f"discharge: txn-id {_show(txn_id)} is not a live transaction of this control link"))
            return
        del self.live[txn.id]
        if fail:
            self._rollback(txn, "the controller asked for it")
            _answer(dlv, Delivery.ACCEPTED)
        elif self._commit(txn):
            self.broker.after_journal_commit(dlv)  # accepted once the transaction's group is on disk
        else:
            _answer(dlv, Delivery.ACCEPTED)

    def link_gone(self, link) -> None:
        """The control link detached or closed, or its connection dropped: roll back what it left open."""
        for txn in [t for t in self.live.values() if t.control == link]:
            del self.live[txn.id]
            self._rollback(txn, "its control link ended")

    # ---- transactional work ------------------------------------------------------------------------------

    def post(self, dlv: Delivery, info: dict, data: bytes, durable: bool, expiry: float | None) -> None:
        """A producer's message whose transfer carries a transactional-state: held for the commit, and the
        delivery answered here."""
        txn_id = _first(dlv.remote.data)
        txn = self._lookup(txn_id, dlv.link.connection)
        if txn is None:
            _answer(dlv, Delivery.REJECTED, condition=Condition(
                UNKNOWN_ID, f"transfer: txn-id {_show(txn_id)} is not a live transaction of this connection"))
            return
        txn.posted.append((info, data, durable, expiry))
        _answer(dlv, TRANSACTIONAL_STATE, data=[txn.id, Described(ulong(0x24), [])])  # §4.4.1

    def retire(self, consumer, dlv: Delivery) -> None:
        """A consumer's disposition whose state is a transactional-state."""
        if dlv.tag not in consumer.unsettled:  # already in a transaction (or settled): only settling is left
            retirement = getattr(dlv, "txn_retirement", None)
            if dlv.settled and (retirement is None or not retirement.settled):
                dlv.settle()
                if retirement is not None:
                    retirement.settled = True
                    _let_go(retirement)
            return
        txn_id, outcome = (list(dlv.remote.data or []) + [None, None])[:2]
        txn = self._lookup(txn_id, consumer.link.connection)
        if txn is None:
            self.broker.close_link(consumer.link, UNKNOWN_ID,
                                   f"disposition: txn-id {_show(txn_id)} is not a live transaction of this connection")
            return
        state = _OUTCOMES.get(_descriptor(outcome))
        if state is None:  # no terminal outcome: nothing to apply at commit, the message stays acquired
            return
        fields = list(getattr(outcome, "value", None) or [])
        entry = consumer.unsettled.pop(dlv.tag)
        retirement = Retirement(consumer, dlv, entry, state, failed=bool(fields[:1] and fields[0]),
                                undeliverable=bool(fields[1:2] and fields[1]), settled=dlv.settled)
        dlv.txn_retirement = retirement  # proton keeps attributes with the delivery: a later settle finds it
        txn.retired.append(retirement)
        if retirement.settled:
            dlv.settle()
            _let_go(retirement)

    # ---- discharge ----------------------------------------------------------------------------------------

    def _commit(self, txn: Transaction) -> bool:
        """Apply the transaction's work; True when it wrote to the journal (the answer waits for the fsync)."""
        broker, journal = self.broker, self.broker.journal
        with journal.atomic() if journal is not None else contextlib.nullcontext():
            for info, data, durable, expiry in txn.posted:
                broker.route_new(info, data, durable, expiry)
            for r in txn.retired:
                broker.apply_outcome(r.consumer, r.entry, r.state, r.failed, r.undeliverable)
                if not r.settled:
                    r.settled = True
                    r.dlv.settle()  # the outcome is final now: the resource may settle (§4.4.2)
                    _let_go(r)
        log.info("Transaction %s committed: %d posted, %d retired", txn.id.hex(), len(txn.posted), len(txn.retired))
        return journal is not None and journal.dirty

    def _rollback(self, txn: Transaction, why: str) -> None:
        for r in txn.retired:
            if r.settled or r.consumer.closed:
                # The broker decides the fate of a message its consumer settled (§4.4.2): it comes back, its
                # delivery counted as a failed attempt (as modified with delivery-failed), as Artemis counts a
                # rolled back delivery towards max-delivery-attempts, and as a JMS consumer expects it
                # (JMSRedelivered, JMSXDeliveryCount) when a transacted session rolls back.
                self.broker.apply_outcome(r.consumer, r.entry, Delivery.MODIFIED, failed=True)
            else:
                r.consumer.unsettled[r.dlv.tag] = r.entry  # §4.4.2: back to acquired by the consumer
        log.info("Transaction %s rolled back (%s): %d posted discarded, %d retired undone", txn.id.hex(), why,
                 len(txn.posted), len(txn.retired))

    def _lookup(self, txn_id, connection) -> Transaction | None:
        txn = self.live.get(bytes(txn_id)) if isinstance(txn_id, _BINARY) else None
        if txn is None or txn.control.connection != connection:
            return None
        return txn


# ---- helpers ---------------------------------------------------------------------------------------------------


def _let_go(retirement: Retirement) -> None:
    """Drop a settled delivery. Proton keeps a settled delivery that Python still holds at the tail of its link's
    unsettled list, its transport state reset, so that it looks unsent; while it is there, proton withholds the
    flow that answers a drain (it waits for that "unsent" delivery). Qpid JMS drains its consumer before every
    rollback, after settling its transactional acknowledgements: held, the drain went unanswered and the rollback
    timed out."""
    retirement.dlv = None


def _control_body(data: bytes) -> tuple[tuple, list]:
    """(_DECLARE or _DISCHARGE, the body's fields) of a control message; ValueError names what is wrong."""
    message = Message()
    try:
        message.decode(data)
    except Exception as exc:  # noqa: BLE001 - any decode failure is the controller's problem
        raise ValueError(f"cannot decode control message: {exc}") from None
    body = message.body
    code = _descriptor(body)
    for kind in (_DECLARE, _DISCHARGE):
        if code in kind:
            # Copied: a binary decodes as a memoryview into `message`, which is freed when this function returns
            # (a txn-id read later came back as heap pointers; found by Qpid JMS's discharge, issue 37).
            fields = [bytes(f) if isinstance(f, _BINARY) else f for f in (body.value or [])]
            if kind == _DISCHARGE and (not fields or not isinstance(fields[0], _BINARY)):
                raise ValueError("discharge: field txn-id: expected binary")
            return kind, fields
    raise ValueError(f"control message body: expected a described declare or discharge, got {code!r}")


def _descriptor(value):
    """A described value's descriptor as an int code or a str name (None if not described)."""
    descriptor = getattr(value, "descriptor", None)
    if isinstance(descriptor, int):
        return int(descriptor)
    return str(descriptor) if descriptor is not None else None


def _first(data):
    return data[0] if data else None


def _show(txn_id) -> str:
    return bytes(txn_id).hex() if isinstance(txn_id, _BINARY) else repr(txn_id)


def _answer(dlv: Delivery, state: int, data: list | None = None, condition: Condition | None = None) -> None:
    if data is not None:
        dlv.local.data = data
    if condition is not None:
        dlv.local.condition = condition
    dlv.update(state)
    dlv.settle()
