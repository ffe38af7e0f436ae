"""Artemis's management by AMQP messages, as the harness speaks it to ActiveMQ Artemis and the reference broker.

A request is a message to the broker's management address (broker.xml's `management-address`, by default
`activemq.management`) with application properties `_AMQ_ResourceName` (`broker`, `queue.NAME`, `address.NAME`,
`brokerconnection.NAME`) and either `_AMQ_OperationName` (its arguments a JSON array in the body) or
`_AMQ_Attribute`. The broker answers on the request's reply-to, with the request's message-id as the
correlation-id, `_AMQ_OperationSucceeded` (bool) and a JSON body: an array of one value, the result or the
broker's error text (a void operation's reply has no body). Sources: Artemis 2.40.0's ManagementServiceImpl
(handleMessage, invokeOperation, getAttribute) and ManagementHelper; its "Management" chapter, "Using
Management Message API".

ManagementClient keeps one AMQP connection: a sender to the management address and a receiver on a reply queue
of its own under the management address's name. `call` returns the value or raises ManagementError with the
broker's words; `request` returns (succeeded, value) for a case that judges refusals too.
"""

from __future__ import annotations

import contextlib
import json
import threading
import time
import uuid

from .peers.base import ManagementError

MANAGEMENT_ADDRESS = "activemq.management"  # Artemis's default management-address
SUCCEEDED = "_AMQ_OperationSucceeded"
RESOURCE = "_AMQ_ResourceName"
OPERATION = "_AMQ_OperationName"
ATTRIBUTE = "_AMQ_Attribute"


def management_request(resource: str, reply_to: str, *, operation: str | None = None,
                       attribute: str | None = None, arguments: list | tuple = (), request_id: str | None = None,
                       address: str = MANAGEMENT_ADDRESS):
    """The request message Artemis's management address understands: the resource (`broker`, `queue.NAME`,
    `address.NAME`, `brokerconnection.NAME`) and the operation or attribute as application properties, the
    arguments as a JSON array in the body. Artemis answers with the request's id as the correlation id."""
    from proton import Message

    if (operation is None) == (attribute is None):
        raise ValueError("a management request names an operation or an attribute, not both")
    properties = {RESOURCE: resource}
    if operation is not None:
        properties[OPERATION] = operation
    else:
        properties[ATTRIBUTE] = attribute
    return Message(id=request_id, address=address, reply_to=reply_to, properties=properties,
                   body=json.dumps(list(arguments)))


def answer_of(message) -> tuple[bool, object]:
    """(succeeded, value) of a management reply: the body's one value (the result, or the broker's error text);
    ValueError when the body is not JSON."""
    properties = message.properties or {}
    values = json.loads(message.body) if isinstance(message.body, str) else message.body
    value = (values[0] if values else None) if isinstance(values, list) else values
    return bool(properties.get(SUCCEEDED, False)), value


def management_answer(message, what: str):
    """The value a management reply carries (its body is a JSON array of one value); ManagementError with the
    broker's own words when the operation failed."""
    try:
        succeeded, value = answer_of(message)
    except ValueError:
        raise ManagementError(f"cannot {what}: the broker answered something that is not JSON: "
                              f"{str(message.body)[:120]!r}") from None
    if not succeeded:
        raise ManagementError(f"cannot {what}: the broker answered: {value}")
    return value


class ManagementClient:
    """One AMQP connection to a broker's management acceptor: a sender to the management address and a receiver
    on a reply queue of its own, reopened when the broker restarted. Calls are serialised."""

    def __init__(self, url: str, user: str | None = None, password: str | None = None, timeout: float = 10.0,
                 address: str = MANAGEMENT_ADDRESS):
        self.url, self.user, self.password, self.timeout = url, user, password, timeout
        self.address = address
        self.reply_to = ""
        self._lock = threading.Lock()
        self._conn = self._sender = self._receiver = None

    def _open(self) -> None:
        from proton.utils import BlockingConnection

        auth = {"user": self.user, "password": self.password, "allowed_mechs": "PLAIN"} if self.user else {}
        # A reply queue per connection, so that an answer that came too late for a closed one is never taken
        # for the answer to a later request; under the management address's name, so that the one security
        # setting that lets the harness manage (harness.vendors.artemis.render, management_role) covers it too.
        self.reply_to = f"{self.address}.reply.{uuid.uuid4().hex}"
        self._conn = BlockingConnection(self.url, timeout=self.timeout, **auth)
        self._receiver = self._conn.create_receiver(self.reply_to, credit=10)
        self._sender = self._conn.create_sender(self.address)

    def close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(Exception):
                conn.close()

    def __enter__(self):
        return self

    def __exit__(self, *_exc):
        self.close()

    def call_for(self, peer_name: str, resource: str, what: str, **request):
        """call(), its ManagementError naming the peer it manages: what the providers' `_manage` raises."""
        try:
            return self.call(resource, what, **request)
        except ManagementError as exc:
            raise ManagementError(f"{peer_name}: {exc}") from None

    def call(self, resource: str, what: str, **request):
        """One request and its answer's value; ManagementError with the broker's words when it failed, or when
        management itself failed twice (a broken connection is reopened once: the broker may have restarted)."""
        succeeded, value, reply = self._exchange(resource, what, **request)
        if not succeeded:
            raise ManagementError(f"cannot {what}: the broker answered: {value}")
        return value

    def request(self, resource: str, **request) -> tuple[bool, object]:
        """(succeeded, value) of one request, refusals included: `value` is the result or the broker's error
        text. ManagementError only when no answer came (or it was not JSON)."""
        what = f"{request.get('operation') or request.get('attribute')} on {resource}"
        succeeded, value, _reply = self._exchange(resource, what, **request)
        return succeeded, value

    def _exchange(self, resource: str, what: str, **request):
        with self._lock:
            for attempt in (1, 2):
                try:
                    if self._conn is None:
                        self._open()
                    request_id = uuid.uuid4().hex
                    self._sender.send(management_request(resource, self.reply_to, request_id=request_id,
                                                         address=self.address, **request))
                    deadline = time.monotonic() + self.timeout
                    while True:  # skip answers to earlier requests that timed out
                        reply = self._receiver.receive(timeout=max(0.1, deadline - time.monotonic()))
                        self._receiver.accept()
                        if reply.correlation_id == request_id:
                            break
                except Exception as exc:  # proton's timeouts, link and connection errors
                    self.close()
                    if attempt == 2:
                        raise ManagementError(f"cannot {what}: management over {self.url} failed: "
                                              f"{type(exc).__name__}: {exc}") from None
                    continue
                try:
                    succeeded, value = answer_of(reply)
                except ValueError:
                    raise ManagementError(f"cannot {what}: the broker answered something that is not JSON: "
                                          f"{str(reply.body)[:120]!r}") from None
                return succeeded, value, reply
        raise AssertionError("unreachable")
