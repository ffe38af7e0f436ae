"""AMQP management, as ActiveMQ Artemis speaks it: request messages to the management address, answers to reply-to.

Sources: Artemis 2.40.0's ServerSessionImpl.handleManagementMessage, ManagementServiceImpl (handleMessage,
invokeOperation, getAttribute), ManagementHelper, ActiveMQServerControlImpl, QueueView/AddressView and their
filter predicates, BrokerConnectionControlImpl; its manual's "Management" chapter ("Using Management Message
API": "send it to the management address", "the name of the managed resource", "the name of the management
operation", "the parameters of the management operation", the reply to the reply-to address).

* The address: broker.xml's `<management-address>` (config.py), by default `activemq.management`. A message to
  it (from a producer on that address, or through the anonymous relay with that `to`) is not routed: it is a
  request, handled here on the event loop's thread, and the delivery is accepted (a refused operation is still
  an accepted request: the reply says it failed).
* A request: application properties `_AMQ_ResourceName` (`broker`, `queue.NAME`, `address.NAME`,
  `brokerconnection.NAME`) and either `_AMQ_OperationName`, whose arguments are a JSON array in the body (an
  AMQP string; an AMQP list is taken too), or `_AMQ_Attribute`, the attribute to read. As in Artemis, an
  operation is matched by name and number of arguments, and an attribute `foo` is also the operation
  `getFoo` / `isFoo` without arguments.
* The reply: to the request's reply-to (a `queue://` or `topic://` prefix dropped, as Artemis does), routed like
  any message to that address's queues (dropped when the address does not exist: Artemis routes it without
  creating anything); correlation-id the request's correlation-id, else its message-id; application property
  `_AMQ_OperationSucceeded`; body an AMQP string holding a JSON array of one value (the result, or the error
  text), or no body for a void operation's success. No reply-to: the request is carried out, nothing is sent.
* Errors in Artemis's words: `AMQ229067: Cannot find resource with name X`, `AMQ229069: no operation OP/N`,
  `Problem while retrieving attribute A` (here followed by `: AMQ229068: no getter method for A`),
  `AMQ229017: Queue X does not exist`, `broker connection X not found`. An operation the reference does not
  serve is `no operation` too, whatever Artemis has. A request that names neither an operation nor an attribute,
  or whose application-properties are not a map (a list, a string), is refused with a one-line text (Artemis
  answers the first with neither result nor status). No request crashes the broker: an unexpected error becomes a
  refused reply and a logged stack trace.
* Security (security on): a message to the management address needs `manage` on that address for the link's user
  (Artemis's handleManagementMessage: securityCheck(address, MANAGE)); without it the delivery is rejected with
  `amqp:unauthorized-access` and nothing is done. A producer's attach to the address needs `send` on it, as any
  producer's does (Artemis's attach-time check). The reply needs nothing (Artemis sends it internally); the
  client's receiver on its reply queue needs what any consumer's attach needs. Artemis's per-operation RBAC
  (`management-message-rbac`, off by default) is not read.

What is served:
* `broker`: operations listQueues(options, page, pageSize), listAddresses(options, page, pageSize),
  listAddresses(separator), listBrokerConnections(), startBrokerConnection(name), destroyQueue(name
  [, removeConsumers[, forceAutoDeleteAddress]]); attributes name, version, started, addressNames, queueNames.
  `options` is the JSON filter Artemis's views take: {"field", "operation" (EQUALS, NOT_EQUALS, CONTAINS,
  NOT_CONTAINS; GREATER_THAN and LESS_THAN match nothing, as in 2.40), "value"}; an empty field lists all. The
  answer is {"data": [rows], "count": N} with every value a string, as Artemis writes them; page -1 is all.
  A queue row has id, name, address, filter, durable, paused, temporary, consumerCount, maxConsumers,
  routingType, messageCount, deliveringCount, scheduledCount, internalQueue; an address row id, name,
  internal, routingTypes (`[ANYCAST]`, `[MULTICAST, ANYCAST]`), queueCount. listBrokerConnections answers a JSON
  text array of {name, protocol, started, uri, connected}.
* `queue.NAME`: attributes name, address, routingType, durable, temporary, messageCount (available, scheduled
  for redelivery and being delivered, as Artemis counts it), deliveringCount, consumerCount, scheduledCount;
  operation countMessages() (and countMessages(filter) with an empty filter: the reference has no selectors).
* `address.NAME`: attributes address, routingTypes, queueNames, messageCount.
* `brokerconnection.NAME`: attributes name, uri, protocol, user, started, connected, retryInterval,
  reconnectAttempts; operation start().
"""

from __future__ import annotations

import json
import logging

from proton import Condition, Delivery, Message

from .config import ANYCAST, MULTICAST

log = logging.getLogger("BROKER")

RESOURCE = "_AMQ_ResourceName"
OPERATION = "_AMQ_OperationName"
ATTRIBUTE = "_AMQ_Attribute"
SUCCEEDED = "_AMQ_OperationSucceeded"
UNAUTHORIZED = "amqp:unauthorized-access"

_VOID = object()  # an operation's result when it returns nothing (Artemis: a reply without a body)


class Failed(Exception):
    """An operation or attribute refused: its text is the reply's body."""


class _Resource:
    """One managed resource: operations by (name, argument types) and attributes by name."""

    def operations(self) -> dict[str, list[tuple[tuple, object]]]:
        return {}

    def attributes(self) -> dict[str, object]:
        return {}


def _fits(value, kind) -> bool:
    if kind is str:
        return value is None or isinstance(value, str)
    if kind is bool:
        return isinstance(value, bool)
    if kind is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return True


def _text(value) -> str:
    """A view's cell as Artemis writes it (toString; null is "")."""
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _routing(routing: str) -> str:
    return routing.upper()


class AmqpManagement:
    """The broker's management address: `handle` answers one request delivered there."""

    def __init__(self, broker):
        self.broker = broker
        self.address = broker.config.management_address

    def is_management(self, address: str | None) -> bool:
        return bool(address) and address == self.address

    # ---- one request -------------------------------------------------------------------------------------------

    def handle(self, link, data: bytes) -> tuple[int, Condition | None]:
        """Carry out the request in `data` (sent on `link`) and send its reply: the outcome for the delivery."""
        access = self.broker.access
        if access is not None:
            why = access.refuse_message(link, ["manage"], self.address)
            if why is not None:
                return Delivery.REJECTED, Condition(UNAUTHORIZED, why)
        request = Message()
        try:
            request.decode(data)
        except Exception as exc:  # noqa: BLE001 - the sender's problem
            return Delivery.REJECTED, Condition("amqp:decode-error", f"cannot decode the management request: {exc}")
        succeeded, value = self.answer(request)
        props = request.properties if isinstance(request.properties, dict) else {}
        log.debug("Management %s on %r: %s", props.get(OPERATION) or props.get(ATTRIBUTE), props.get(RESOURCE),
                  "succeeded" if succeeded else f"failed: {value}")
        if request.reply_to:
            self._reply(request, succeeded, value)
        return Delivery.ACCEPTED, None

    def answer(self, request: Message) -> tuple[bool, object]:
        """(succeeded, value) of one request; value is _VOID for a void operation's success."""
        properties = request.properties
        if properties is not None and not isinstance(properties, dict):  # a list, a string, ...: nothing to read
            return False, f"the request's application-properties are not a map: {type(properties).__name__}"
        properties = properties or {}
        resource_name = properties.get(RESOURCE)
        operation, attribute = properties.get(OPERATION), properties.get(ATTRIBUTE)
        if operation is None and attribute is None:
            return False, f"a management request names {OPERATION} or {ATTRIBUTE}; this one names neither"
        resource = self.resource(str(resource_name)) if resource_name is not None else None
        try:
            if operation is not None:
                return True, self._invoke(resource, str(resource_name), str(operation), request.body)
            return True, self._read(resource, str(resource_name), str(attribute))
        except Failed as exc:
            return False, str(exc)
        except Exception as exc:  # noqa: BLE001 - a bug here must not take the broker down
            log.exception("Management %s on %r failed", operation or attribute, resource_name)
            return False, f"{type(exc).__name__}: {exc}"

    def _invoke(self, resource, resource_name: str, operation: str, body):
        if resource is None:
            raise Failed(f"AMQ229067: Cannot find resource with name {resource_name}")
        params = _parameters(body)
        for kinds, function in resource.operations().get(operation, []):
            if len(kinds) == len(params) and all(_fits(p, k) for p, k in zip(params, kinds, strict=True)):
                result = function(*params)
                return _VOID if result is None else result
        if not params:  # a getter is an operation too (Artemis finds any public method)
            for prefix in ("get", "is"):
                if operation.startswith(prefix) and len(operation) > len(prefix):
                    name = operation[len(prefix)].lower() + operation[len(prefix) + 1:]
                    getter = resource.attributes().get(name)
                    if getter is not None:
                        return getter()
        raise Failed(f"AMQ229069: no operation {operation}/{len(params)}")

    def _read(self, resource, resource_name: str, attribute: str):
        if resource is None:
            raise Failed(f"Problem while retrieving attribute {attribute}: AMQ229067: Cannot find resource with "
                         f"name {resource_name}")
        getter = resource.attributes().get(attribute)
        if getter is None:
            raise Failed(f"Problem while retrieving attribute {attribute}: AMQ229068: no getter method for "
                         f"{attribute}")
        return getter()

    def _reply(self, request: Message, succeeded: bool, value) -> None:
        reply_to = request.reply_to
        for prefix in ("queue://", "topic://", "temp-queue://", "temp-topic://"):
            if reply_to.startswith(prefix):
                reply_to = reply_to[len(prefix):]
                break
        correlation = request.correlation_id if request.correlation_id is not None else request.id
        body = None if value is _VOID else json.dumps([value])
        reply = Message(address=reply_to, correlation_id=correlation, properties={SUCCEEDED: succeeded}, body=body)
        info = self.broker.addresses.get(reply_to)
        if info is None:
            log.debug("Management reply to %r dropped: no such address", reply_to)
            return
        self.broker.route_reply(info, reply.encode())

    # ---- resources -----------------------------------------------------------------------------------------------

    def resource(self, name: str) -> _Resource | None:
        if name == "broker":
            return _BrokerResource(self.broker)
        for prefix, kind in (("queue.", _QueueResource), ("address.", _AddressResource),
                             ("brokerconnection.", _ConnectionResource)):
            if name.startswith(prefix):
                found = kind.find(self.broker, name[len(prefix):])
                if found is not None:
                    return found
        return None


def _parameters(body) -> list:
    """The operation's arguments: a JSON array in an AMQP string (what Artemis's ManagementHelper writes), or an
    AMQP list; none for an empty body."""
    if body is None or body == "":
        return []
    if isinstance(body, (list, tuple)):
        return list(body)
    if isinstance(body, str):
        try:
            params = json.loads(body)
        except ValueError:
            raise Failed(f"the request's body is not a JSON array of arguments: {body[:80]!r}") from None
        if isinstance(params, list):
            return params
    raise Failed(f"the request's body is not a JSON array of arguments: {str(body)[:80]!r}")


# ---- broker -------------------------------------------------------------------------------------------------------


class _BrokerResource(_Resource):
    def __init__(self, broker):
        self.broker = broker

    def operations(self):
        return {
            "listQueues": [((str, int, int), self.list_queues)],
            "listAddresses": [((str, int, int), self.list_addresses), ((str,), self.list_address_names)],
            "listBrokerConnections": [((), self.list_broker_connections)],
            "startBrokerConnection": [((str,), self.start_broker_connection)],
            "destroyQueue": [((str,), self.destroy_queue), ((str, bool), self.destroy_queue),
                             ((str, bool, bool), self.destroy_queue)],
        }

    def attributes(self):
        from .. import __version__

        return {"name": lambda: self.broker.config.name, "version": lambda: __version__, "started": lambda: True,
                "addressNames": lambda: sorted(self.broker.addresses),
                "queueNames": lambda: sorted(self.broker.queues)}

    def list_queues(self, options, page, page_size):
        rows = [_queue_row(q, i) for i, q in enumerate(self.broker.queues.values(), 1)]
        return _view(rows, options, page, page_size)

    def list_addresses(self, options, page, page_size):
        rows = [{"id": str(i), "name": name, "internal": "false",
                 "routingTypes": "[" + ", ".join(_routing(r) for r in sorted(info["routings"], reverse=True)) + "]",
                 "queueCount": str(len(info["queues"]))}
                for i, (name, info) in enumerate(self.broker.addresses.items(), 1)]
        return _view(rows, options, page, page_size)

    def list_address_names(self, separator):
        return (separator or "").join(self.broker.addresses)

    def list_broker_connections(self):
        return json.dumps([{"name": bc.name, "protocol": "AMQP", "started": bc.started, "uri": bc.definition.uri,
                            "connected": bc.connected} for bc in self.broker.connections.items.values()])

    def start_broker_connection(self, name):
        status, reply = self.broker.connections.start(name)
        if status == 404:
            raise Failed(f"broker connection {name} not found")
        # 409 (already started): Artemis's start() does nothing then, and succeeds

    def destroy_queue(self, name, remove_consumers=False, _force_auto_delete_address=False):
        queue = self.broker.queues.get(name)
        if queue is None:
            raise Failed(f"AMQ229017: Queue {name} does not exist")
        if queue.internal:
            raise Failed(f"queue {name} is a mirror's store-and-forward queue: the reference broker does not "
                         "destroy it through management")
        if queue.consumers and not remove_consumers:
            raise Failed(f"AMQ229025: Cannot delete queue {name} on binding {name} - it has consumers = "
                         f"{len(queue.consumers)}")
        self.broker.delete_queue(queue)


def _queue_row(queue, index: int) -> dict:
    return {"id": str(index), "name": queue.name, "address": queue.address, "filter": "",
            "durable": _text(queue.durable), "paused": "false", "temporary": _text(queue.temporary),
            "consumerCount": str(len(queue.consumers)), "maxConsumers": "-1",
            "routingType": _routing(queue.routing), "messageCount": str(queue.depth),
            "deliveringCount": str(queue.in_flight), "scheduledCount": str(len(queue.delayed)),
            "internalQueue": _text(queue.internal)}


def _view(rows: list[dict], options, page: int, page_size: int) -> str:
    """Artemis's views (ActiveMQAbstractView.getResultsAsJson): rows filtered by `options`, then one page."""
    field, operation, value = "", "", ""
    if options and options.strip():
        try:
            spec = json.loads(options)
        except ValueError:
            raise Failed(f"the options are not JSON: {options[:80]!r}") from None
        if not isinstance(spec, dict):
            raise Failed(f"the options are not a JSON object: {options[:80]!r}")
        field, operation, value = (str(spec.get(k) or "") for k in ("field", "operation", "value"))
    if field:
        operation = operation.upper()
        if operation not in ("EQUALS", "NOT_EQUALS", "CONTAINS", "NOT_CONTAINS", "GREATER_THAN", "LESS_THAN"):
            raise Failed(f"No enum constant {operation}")  # Artemis's Operation.valueOf

        def keep(row):
            cell = row.get(field)
            if cell is None:  # a field the reference's rows do not have: Artemis's predicate has no case: all
                return True
            return {"EQUALS": cell == value, "NOT_EQUALS": cell != value, "CONTAINS": value in cell,
                    "NOT_CONTAINS": value not in cell}.get(operation, False)
        rows = [row for row in rows if keep(row)]
    if page == -1 or page_size == -1:
        chosen = rows
    else:
        chosen = rows[max(0, (page - 1) * page_size):max(0, page * page_size)]
    return json.dumps({"data": chosen, "count": len(rows)})


# ---- queues, addresses, broker connections --------------------------------------------------------------------


class _QueueResource(_Resource):
    def __init__(self, queue):
        self.queue = queue

    @classmethod
    def find(cls, broker, name: str):
        queue = broker.queues.get(name)
        return cls(queue) if queue is not None else None

    def operations(self):
        return {"countMessages": [((), self.count_messages), ((str,), self.count_messages)]}

    def attributes(self):
        q = self.queue
        return {"name": lambda: q.name, "address": lambda: q.address, "routingType": lambda: _routing(q.routing),
                "durable": lambda: q.durable, "temporary": lambda: q.temporary, "messageCount": lambda: q.depth,
                "deliveringCount": lambda: q.in_flight, "consumerCount": lambda: len(q.consumers),
                "scheduledCount": lambda: len(q.delayed)}

    def count_messages(self, selector=None):
        if selector:
            raise Failed(f"countMessages({selector!r}): the reference broker applies no filters (selectors)")
        return self.queue.depth


class _AddressResource(_Resource):
    def __init__(self, info):
        self.info = info

    @classmethod
    def find(cls, broker, name: str):
        info = broker.addresses.get(name)
        return cls(info) if info is not None else None

    def attributes(self):
        info = self.info
        return {"address": lambda: info["name"],
                "routingTypes": lambda: [_routing(r) for r in (MULTICAST, ANYCAST) if r in info["routings"]],
                "queueNames": lambda: [q.name for q in info["queues"]],
                "messageCount": lambda: sum(q.depth for q in info["queues"])}


class _ConnectionResource(_Resource):
    def __init__(self, broker, bc):
        self.broker, self.bc = broker, bc

    @classmethod
    def find(cls, broker, name: str):
        bc = broker.connections.items.get(name)
        return cls(broker, bc) if bc is not None else None

    def operations(self):
        return {"start": [((), self.start)]}

    def attributes(self):
        bc, d = self.bc, self.bc.definition
        return {"name": lambda: bc.name, "uri": lambda: d.uri, "protocol": lambda: "AMQP",
                "user": lambda: d.user, "started": lambda: bc.started, "connected": lambda: bc.connected,
                "retryInterval": lambda: d.retry_interval_ms, "reconnectAttempts": lambda: d.reconnect_attempts}

    def start(self):
        self.broker.connections.start(self.bc.name)
