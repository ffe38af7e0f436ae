"""Toxics: what each Toxiproxy toxic type accepts, and how it treats the bytes of one direction of a connection.

A toxic is configured through the API (`ToxicSpec`: name, type, stream, toxicity, attributes). Each open
connection runs, per direction, a chain of stages, one per toxic of that stream in creation order; a stage
runs its toxic's behaviour (an async function below) over a queue of `Item`s. The behaviours follow
Toxiproxy 2.x (toxics/*.go in Shopify/toxiproxy), including its less obvious choices:

- latency: each chunk is released `latency +/- jitter` ms after it was read from the socket; chunks stay in
  order, and several latency toxics add up. The end of the stream is not delayed.
- bandwidth: at most `rate` KB/s (1 KB = 1000 bytes), sent in pieces of at most 100 ms worth of data.
- slow_close: data flows; the end of the stream (and so the close) is held for `delay` ms.
- timeout: no data gets through (it is swallowed, as Toxiproxy does); with `timeout` > 0 the connection is
  closed once no data has arrived for that long, with 0 it is held open. Removing the toxic closes the
  connection, because the stream lost bytes.
- reset_peer: the first chunk (or the end of the stream) arms it; `timeout` ms later both sockets are closed.
  Toxiproxy sets SO_LINGER 0 on a connection's sockets only when it opens with a reset_peer toxic in its chain
  (link.go, ToxicLink.Start): such a connection is closed with a TCP RST, so each side sees ECONNRESET (and
  keeps closing with RST after the toxic goes); a connection already open when the toxic is added is closed
  with a plain FIN. The proxy does the same (measured against toxiproxy-server 2.12.0: a client of an open
  connection read b'' where ours used to raise ECONNRESET).
- slicer: each chunk is cut into slices of about `average_size` +/- `size_variation` bytes, `delay`
  microseconds apart, each sent with its own write.
- limit_data: `bytes` bytes get through, then the stream ends (its destination socket closes; the other direction
  still delivers what its chain holds, then closes, as toxiproxy-server's does). The count survives toxic updates.

Toxicity is drawn when a stage starts (a new connection, or an update of the toxic): with probability
`toxicity` the stage runs the toxic, otherwise it passes data through untouched, as Toxiproxy does.
"""

from __future__ import annotations

import asyncio
import random
import time
from collections import deque
from dataclasses import dataclass, field

UPSTREAM, DOWNSTREAM = "upstream", "downstream"
STREAMS = (UPSTREAM, DOWNSTREAM)  # the order Toxiproxy lists toxics in

# Item kinds flowing through a chain.
DATA, EOF = 0, 1

# Attribute names and defaults of each toxic type (all integers, as in Toxiproxy's Go structs).
TOXIC_TYPES: dict[str, dict[str, int]] = {
    "latency": {"latency": 0, "jitter": 0},
    "bandwidth": {"rate": 0},
    "slow_close": {"delay": 0},
    "timeout": {"timeout": 0},
    "reset_peer": {"timeout": 0},
    "slicer": {"average_size": 0, "size_variation": 0, "delay": 0},
    "limit_data": {"bytes": 0},
}


class ToxicError(Exception):
    """A toxic definition the API refuses; `status` is the HTTP status Toxiproxy answers with."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


INT64 = (-(2**63), 2**63 - 1)


def _integer(name: str, value) -> int:
    # Toxiproxy decodes attributes into Go int64 fields: 100.0 and 1e2 are refused like 1.5 (measured: 400
    # "cannot unmarshal number 100.0 into Go struct field LatencyToxic.attributes.latency of type int64").
    if isinstance(value, bool) or not isinstance(value, int) or not INT64[0] <= value <= INT64[1]:
        raise ToxicError(f"bad request body: attribute {name!r} must be an integer, got {value!r}")
    return value


def _toxicity(value) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ToxicError(f"bad request body: toxicity must be a number, got {value!r}")
    return float(value)


def parse_attributes(toxic_type: str, given, base: dict[str, int] | None = None) -> dict[str, int]:
    """Attributes of `toxic_type` from a JSON value, over `base` (the defaults when None). Unknown keys are
    ignored, as Toxiproxy's JSON decoding does."""
    attrs = dict(base if base is not None else TOXIC_TYPES[toxic_type])
    if given is None:
        return attrs
    if not isinstance(given, dict):
        raise ToxicError(f"bad request body: attributes must be an object, got {given!r}")
    for key in TOXIC_TYPES[toxic_type]:
        if key in given:
            attrs[key] = _integer(key, given[key])
    return attrs


@dataclass
class ToxicSpec:
    name: str
    type: str
    stream: str
    toxicity: float
    attributes: dict[str, int] = field(default_factory=dict)

    @property
    def direction(self) -> str:
        """UPSTREAM or DOWNSTREAM: `stream` is kept as the client wrote it ('UpStream'), as Toxiproxy echoes it."""
        return self.stream.lower()

    @classmethod
    def from_json(cls, body, taken=()) -> ToxicSpec:
        """A new toxic from a POST /proxies/{proxy}/toxics body (defaults: downstream, toxicity 1); `taken`
        holds the names in use. Checked in Toxiproxy's order (AddToxicJson): stream, type, name in use (409),
        then the attributes."""
        if not isinstance(body, dict):
            raise ToxicError("bad request body: expected a JSON object")
        for key in ("name", "type", "stream"):
            if body.get(key) is not None and not isinstance(body[key], str):
                raise ToxicError(f"bad request body: {key} must be a string, got {body[key]!r}")
        if body.get("attributes") is not None and not isinstance(body["attributes"], dict):
            raise ToxicError(f"bad request body: attributes must be an object, got {body['attributes']!r}")
        toxicity = _toxicity(body["toxicity"]) if body.get("toxicity") is not None else 1.0
        stream = body["stream"] if body.get("stream") is not None else DOWNSTREAM  # "" is invalid, as in Go
        if stream.lower() not in STREAMS:
            raise ToxicError("stream was invalid, can be either upstream or downstream")
        toxic_type = body.get("type") or ""
        name = body.get("name") or f"{toxic_type}_{stream}"
        if toxic_type not in TOXIC_TYPES:
            raise ToxicError("invalid toxic type")
        if name in taken:
            raise ToxicError("toxic already exists", 409)
        return cls(name, toxic_type, stream, toxicity, parse_attributes(toxic_type, body.get("attributes")))

    def updated(self, body) -> ToxicSpec:
        """This toxic with a PATCH/POST update applied: attributes merge over the current ones, toxicity
        replaces the current one; name, type and stream cannot change."""
        if not isinstance(body, dict):
            raise ToxicError("bad request body: expected a JSON object")
        toxicity = _toxicity(body["toxicity"]) if body.get("toxicity") is not None else self.toxicity
        attrs = parse_attributes(self.type, body.get("attributes"), self.attributes)
        return ToxicSpec(self.name, self.type, self.stream, toxicity, attrs)

    def as_json(self) -> dict:
        toxicity = int(self.toxicity) if float(self.toxicity).is_integer() else self.toxicity
        return {"attributes": dict(self.attributes), "name": self.name, "type": self.type,
                "stream": self.stream, "toxicity": toxicity}


class Item:
    """A piece of one direction's stream: data, or the end of the stream (EOF).

    `t` is when the data was read from the socket (a latency toxic moves it forward, so latencies add up).
    """

    __slots__ = ("t", "data", "kind")

    def __init__(self, t: float, data: bytes | None, kind: int = DATA):
        self.t, self.data, self.kind = t, data, kind

    @property
    def size(self) -> int:
        return len(self.data) if self.data is not None else 0


class Stage:
    """One toxic in one direction of one connection: a queue and the task that runs the toxic over it.

    Behaviours only pop an item from the queue once it has been fully passed on (a partly sent item is
    replaced by its remainder), so cancelling the task at any await leaves the queue exact: removing or
    updating a toxic never loses or reorders bytes.
    """

    def __init__(self, link, spec: ToxicSpec):
        self.link = link
        self.spec = spec
        self.queue: deque[Item] = deque()
        self.state: dict = {}  # per-connection state that survives updates (limit_data's count)
        self.active = False
        self.task: asyncio.Task | None = None
        self._wakeup: asyncio.Future | None = None

    def start(self) -> None:
        self.active = random.random() < self.spec.toxicity
        behaviour = BEHAVIOURS[self.spec.type] if self.active else _noop
        self.task = asyncio.get_running_loop().create_task(behaviour(self, self.spec.attributes))

    def cancel(self) -> None:
        if self.task is not None:
            self.task.cancel()
            self.task = None

    # queue operations used by the link and by behaviours
    def put(self, item: Item) -> None:
        self.queue.append(item)
        self.link.queued_add(item.size)
        if self._wakeup is not None and not self._wakeup.done():
            self._wakeup.set_result(None)

    def pop(self) -> Item:
        item = self.queue.popleft()
        self.link.queued_add(-item.size)
        return item

    def replace_head(self, data: bytes) -> None:
        head = self.queue[0]
        self.link.queued_add(len(data) - head.size)
        head.data = data

    def emit(self, item: Item) -> None:
        self.link.emit_after(self, item)

    async def peek(self, timeout: float | None = None) -> Item | None:
        """The oldest queued item, left in the queue; None if `timeout` seconds pass first."""
        if not self.queue:
            self._wakeup = asyncio.get_running_loop().create_future()
            try:
                if timeout is None:
                    await self._wakeup
                else:
                    await asyncio.wait_for(asyncio.shield(self._wakeup), timeout)
            except TimeoutError:
                return None
            finally:
                self._wakeup = None
        return self.queue[0]


async def _sleep_until(deadline: float) -> None:
    delay = deadline - time.monotonic()
    if delay > 0:
        await asyncio.sleep(delay)


async def _noop(stage: Stage, attrs: dict) -> None:
    while True:
        await stage.peek()
        stage.emit(stage.pop())


async def _latency(stage: Stage, attrs: dict) -> None:
    latency, jitter = attrs["latency"], attrs["jitter"]
    while True:
        item = await stage.peek()
        if item.kind == DATA:
            delay = latency + (random.randint(-jitter, jitter - 1) if jitter > 0 else 0)
            release = item.t + max(delay, 0) / 1000.0
            await _sleep_until(release)
            item.t = max(item.t, release)
        stage.emit(stage.pop())


async def _bandwidth(stage: Stage, attrs: dict) -> None:
    rate = attrs["rate"]  # KB/s, i.e. bytes per millisecond
    free_at = 0.0  # when the link is free to send again
    while True:
        item = await stage.peek()
        if item.kind != DATA or rate <= 0:
            stage.emit(stage.pop())
            continue
        piece = item.data[:rate * 100]  # at most 100 ms worth at a time
        free_at = max(free_at, time.monotonic()) + len(piece) / (rate * 1000.0)
        await _sleep_until(free_at)
        if len(piece) == item.size:
            stage.emit(stage.pop())
        else:
            stage.emit(Item(item.t, piece))
            stage.replace_head(item.data[len(piece):])


async def _slow_close(stage: Stage, attrs: dict) -> None:
    while True:
        item = await stage.peek()
        if item.kind != DATA:
            await asyncio.sleep(max(attrs["delay"], 0) / 1000.0)
        stage.emit(stage.pop())


async def _timeout(stage: Stage, attrs: dict) -> None:
    timeout = attrs["timeout"] / 1000.0
    while True:
        item = await stage.peek(timeout if timeout > 0 else None)
        if item is None:  # nothing arrived for `timeout`: close, as Toxiproxy does
            stage.link.conn.close()
            return
        stage.pop()
        if item.kind != DATA:
            stage.emit(item)
            return
        stage.state["swallowed"] = stage.state.get("swallowed", 0) + item.size


async def _reset_peer(stage: Stage, attrs: dict) -> None:
    await stage.peek()
    await asyncio.sleep(max(attrs["timeout"], 0) / 1000.0)
    stage.link.conn.close()  # an RST if the connection opened with this toxic (SO_LINGER 0), else a FIN


def slice_points(size: int, average: int, variation: int) -> list[int]:
    """End offsets of the slices a slicer cuts a chunk of `size` bytes into (Toxiproxy's halving scheme:
    split near the middle, +/- variation, until a piece is within `variation` of `average`)."""
    average = max(average, 1)
    variation = max(0, min(variation, average - 1))
    ends: list[int] = []
    todo = [(0, size)]
    while todo:
        start, end = todo.pop()
        if (end - start) - average <= variation:
            if end > start:
                ends.append(end)
            continue
        mid = start + (end - start) // 2
        if variation:
            mid += random.randint(-variation, variation - 1)
        mid = min(max(mid, start + 1), end - 1)
        todo.append((mid, end))  # popped after the left half: slices come out in order
        todo.append((start, mid))
    return ends


async def _slicer(stage: Stage, attrs: dict) -> None:
    delay = max(attrs["delay"], 0) / 1_000_000.0
    while True:
        item = await stage.peek()
        if item.kind != DATA:
            stage.emit(stage.pop())
            continue
        data = item.data
        ends = slice_points(len(data), attrs["average_size"], attrs["size_variation"])
        start = 0
        for end in ends:
            if end == len(data):
                stage.emit(stage.pop())
            else:
                stage.emit(Item(item.t, data[start:end]))
                stage.replace_head(data[end:])
            start = end
            if delay:
                await asyncio.sleep(delay)


async def _limit_data(stage: Stage, attrs: dict) -> None:
    limit = attrs["bytes"]
    while True:
        item = await stage.peek()
        if item.kind != DATA:
            stage.emit(stage.pop())
            return
        sent = stage.state.get("sent", 0)
        allowed = max(limit - sent, 0)
        stage.pop()
        data = item.data[:allowed]
        if data:
            stage.emit(Item(item.t, data))
            stage.state["sent"] = sent + len(data)
        if limit - stage.state.get("sent", 0) <= 0:
            # Toxiproxy's limit_data closes its stub: the end of this direction, as if its source had closed (the
            # destination socket closes; the other direction still delivers what it holds, then closes).
            stage.emit(Item(item.t, None, EOF))
            return


BEHAVIOURS = {
    "latency": _latency,
    "bandwidth": _bandwidth,
    "slow_close": _slow_close,
    "timeout": _timeout,
    "reset_peer": _reset_peer,
    "slicer": _slicer,
    "limit_data": _limit_data,
}
assert set(BEHAVIOURS) == set(TOXIC_TYPES)
