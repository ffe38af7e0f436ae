"""The reference router's management agent: AMQP Management (the OASIS working draft) as qdrouterd 1.19 speaks it.

Requests come to the address `$management` of the router a client is attached to, or to
`_topo/0/<router-id>/$management` of any router of the network (routed there over the mesh like any mobile
address: each router advertises its own). A request is a message whose application-properties say what to do:
`operation` (QUERY, READ, CREATE, UPDATE, DELETE, GET-TYPES, GET-ATTRIBUTES, GET-OPERATIONS, GET-MGMT-NODES,
GET-ANNOTATIONS, GET-LOG, GET-SCHEMA, GET-JSON-SCHEMA), `type`, `name` or `identity` and for the node operations
`entityType`; the body is a map (the attributes of CREATE/UPDATE; `attributeNames` of QUERY). The response goes
to the request's `reply-to` with its `correlation-id`, with `statusCode` and `statusDescription` in its
application-properties.

Entity types, attribute names and the operations allowed on each are qdrouterd 1.19's (mgmt_schema.py, from its
qdrouter.json), prefixed `org.apache.qpid.dispatch.` (or not: qdrouterd takes both); `linkRoute`, `autoLink` and
`address` are qdmanage's short names for `router.config.*`, which it spells out before it asks. Status codes and
descriptions are the ones qdrouterd 1.19 returns, measured against it (a missing entity: 404 `Not Found` from its
core types, `No entity with name=X` from the others; a bad type: 400 `No such entity type 'T'`; an operation its
core forbids: 403 `Forbidden`). Where qdrouterd gives no answer at all (READ or DELETE of a router.link, CREATE of a
connection or router.address, UPDATE of a link route: its core agent drops those requests), the reference answers
403 `Forbidden`: the draft wants a response to every request. Where qdrouterd accepts a value its schema does not
allow (an address `distribution: bogus` becomes balanced), the reference refuses it with 400. Application properties
that are not a map (a list, a string) are a 400 too, never an error that ends the connection (found by the frame
fuzzer's `management` family).

CREATE and DELETE of linkRoute, autoLink, address, listener, connector and sslProfile change the running router
(live configuration); the configuration file stays what the router started with. A created section is checked the
way the configuration file is (reference/router/config.py), so what a file may not say, a CREATE may not either; a
listener or connector may name the sslProfiles the router has now (Router.ssl_profiles), and one that is deleted
while in use leaves what was made with it as it was (qdrouterd's python agent allows that DELETE too).

UPDATE of a router.link is answered as qdrouterd 1.19's core answers it and, like it, does not act on adminStatus
(`_update_link`). GET-SCHEMA answers with the reference's schema as qdrouterd's python agent dumps its own
(`schema()`), which `qdmanage get-schema` prints unchanged.

Pure logic over the router's state: `Agent.handle(properties, body)` -> (status, description, body). The router
feeds it requests and sends its answers (router.py: `_route` hands it messages for its addresses, `inject` sends).
"""

from __future__ import annotations

import itertools
import json
import logging
import os
import time

from proton import Endpoint, Message

from .. import serving
from .addressing import normalize_pattern
from .config import (
    AddressSection,
    AutoLink,
    ConfigError,
    Connector,
    LinkRoute,
    Listener,
    SslProfile,
    check_supported,
    parse_config,
)
from .keys import FALLBACK, PHASE1
from .mgmt_schema import ATTRIBUTE_TYPES, DESCRIPTIONS, PREFIX, SCHEMA, SINGLETONS

log = logging.getLogger("AGENT")

MANAGEMENT = "$management"
NODE_TYPE = "org.amqp.management"
OK, CREATED, NO_CONTENT = 200, 201, 204
BAD_REQUEST, FORBIDDEN, NOT_FOUND, INTERNAL, NOT_IMPLEMENTED = 400, 403, 404, 500, 501
STATUS_TEXT = {OK: "OK", CREATED: "Created", NO_CONTENT: "No Content", BAD_REQUEST: "Bad Request",
               FORBIDDEN: "Forbidden", NOT_FOUND: "Not Found", INTERNAL: "Internal Server Error",
               NOT_IMPLEMENTED: "Not Implemented"}

# qdrouterd's core agent serves these types (its C code): its answers and refusals differ from its python agent's
CORE_TYPES = frozenset({"router", "connection", "router.link", "router.address", "router.config.linkRoute",
                        "router.config.autoLink", "router.config.address"})
# What CREATE and DELETE may change on a running router
LIVE_TYPES = ("router.config.linkRoute", "router.config.autoLink", "router.config.address", "listener", "connector",
              "sslProfile")
# config.py's section name for each type a CREATE is checked as
_SECTION_OF = {"router.config.linkRoute": "linkRoute", "router.config.autoLink": "autoLink",
               "router.config.address": "address", "listener": "listener", "connector": "connector",
               "sslProfile": "sslProfile"}
# router.link's adminStatus: the one attribute an UPDATE may name, and the values qdrouter.json allows it
_LINK_ADMIN_STATUS = ("enabled", "disabled")
_DIRECTIONS = ("in", "out")
# qdrouter.json's distributions; the configuration check refuses `unavailable` ("not supported yet")
_DISTRIBUTIONS = ("multicast", "closest", "balanced", "unavailable")
# Attributes qdrouterd's core returns and takes beside the schema's (its column lists): deprecated spellings, and
# the link's connection that qdstat -l asks for
EXTRA_ATTRIBUTES = {"router.link": ("connectionId",), "router.config.linkRoute": ("dir",),
                    "router.config.autoLink": ("addr", "dir", "externalAddr"), "router.config.address": ("fallback",)}
_ENTITY_TYPES = tuple(t for t in SCHEMA if t not in ("entity", "configurationEntity", "operationalEntity"))
LOG_MODULES = ("DEFAULT", "ROUTER", "ROUTER_HELLO", "ROUTER_CORE", "SERVER", "AGENT", "MESSAGE", "CONN_MGR")
VERSION = "1.19.0-reference"  # what qdstat -g prints as the version: the qdrouterd release whose agent it follows


class Status(Exception):
    """A request refused: its status code and description."""

    def __init__(self, code: int, description: str | None = None):
        super().__init__(code, description)
        self.code = code
        self.description = description or STATUS_TEXT[code]


def short_type(name: str | None) -> str | None:
    """An entity type as the schema names it (`router.config.linkRoute`), with or without the prefix. None stays
    None; an unknown type is a Status. The short names `linkRoute`, `autoLink` and `address` are qdmanage's (it
    spells them out before it asks): qdrouterd's agent refuses them, and so does this one."""
    if name is None:
        return None
    name = str(name)
    bare = name[len(PREFIX):] if name.startswith(PREFIX) else name
    if bare in (NODE_TYPE, "management"):
        return bare
    if bare not in SCHEMA or bare not in _ENTITY_TYPES:
        raise Status(BAD_REQUEST, f"No such entity type '{name}'")
    return bare


def full_type(short: str) -> str:
    return short if short == NODE_TYPE else PREFIX + short


def attributes_of(short: str) -> tuple[str, ...]:
    return SCHEMA[short][2]


def operations_of(short: str) -> tuple[str, ...]:
    return SCHEMA[short][1]


def is_a(short: str, other: str) -> bool:
    return short == other or other in SCHEMA[short][0]


class Entity:
    """One entity as management shows it: its type and its attribute values (a snapshot, or a config record
    whose `target` is the router object it stands for)."""

    __slots__ = ("type", "attributes", "target")

    def __init__(self, type_: str, attributes: dict, target=None):
        self.type = type_
        self.attributes = {"type": full_type(type_), **attributes}
        self.target = target

    @property
    def name(self):
        return self.attributes.get("name")

    @property
    def identity(self):
        return self.attributes.get("identity")

    def full(self) -> dict:
        """Every schema attribute (None where it has no value) and the extra ones qdrouterd also returns."""
        out = {name: self.attributes.get(name) for name in attributes_of(self.type)}
        out.update({k: v for k, v in self.attributes.items() if k not in out})
        return out


class Agent:
    def __init__(self, router):
        self.router = router
        self.router_id = router.router_id
        self.started = time.time()
        self._ids = itertools.count(1)
        self.config_entities: list[Entity] = []  # configured entities, in creation order
        self.log_levels: dict[str, str] = {}
        # The addresses requests come to (asked of every message routed: a set, made once)
        self.keys = frozenset({MANAGEMENT, "amqp:/" + MANAGEMENT, *self.own_topological})
        cfg = router.config
        for section in cfg.link_routes:
            self._add_config("router.config.linkRoute", section)
        for section in cfg.auto_links:
            self._add_config("router.config.autoLink", section)
        for section in cfg.addresses:
            self._add_config("router.config.address", section)
        for section in cfg.listeners:
            self._add_config("listener", section)
        for dialer in router.connectors.dialers:
            self._add_config("connector", dialer)
        for profile in cfg.ssl_profiles:
            self._add_config("sslProfile", profile)
        for section in cfg.logs:
            self.log_levels[(section.module or "DEFAULT").upper()] = section.enable

    # ---- addresses ---------------------------------------------------------------------------------------------

    @property
    def own_topological(self) -> tuple[str, ...]:
        """The addresses of this router's agent as the rest of the network reaches it (an edge router's also as
        `_edge/<id>/$management`, which `qdstat --edge-router` asks its interior router for)."""
        addresses = (f"_topo/0/{self.router_id}/{MANAGEMENT}", f"amqp:/_topo/0/{self.router_id}/{MANAGEMENT}")
        if self.router.config.router.mode == "edge":
            addresses += (f"_edge/{self.router_id}/{MANAGEMENT}",)
        return addresses

    def is_mine(self, address: str) -> bool:
        return address in self.keys

    def identity(self, obj) -> int:
        """A number that names a connection or link for as long as it lives (qdrouterd numbers them too)."""
        found = getattr(obj, "mgmt_id", None)
        if found is None:
            found = next(self._ids)
            obj.mgmt_id = found
        return found

    # ---- requests ----------------------------------------------------------------------------------------------

    def respond(self, request: Message) -> Message | None:
        """The response message to one request (None: it has no reply-to, so nobody to answer)."""
        if not request.reply_to:
            return None
        raw = request.properties
        props = dict(raw) if isinstance(raw, dict) else {}
        body = request.body
        try:
            if raw is not None and not isinstance(raw, dict):  # application-properties that are a list, a string, ...
                raise Status(BAD_REQUEST, f"Application properties are not a map: {type(raw).__name__}")
            code, description, out = self.handle(props, body, request)
        except Status as exc:
            code, description, out = exc.code, exc.description, {}
        except Exception as exc:  # the agent answers every request; a bug here is a 500, not a lost answer
            log.exception("management request %r failed", props)
            code, description, out = INTERNAL, f"{type(exc).__name__}: {exc}", {}
        if code >= 300:
            log.info("Error performing %s: %s", props.get("operation"), description)
        return Message(address=request.reply_to, correlation_id=request.correlation_id,
                       properties={"statusCode": code, "statusDescription": description}, body=out)

    def handle(self, props: dict, body, request=None) -> tuple[int, str, object]:
        operation = props.get("operation")
        if operation is None:
            raise Status(BAD_REQUEST, f"No 'operation' property: {request if request is not None else props}")
        operation = str(operation).upper()
        requested = short_type(props.get("type"))
        if operation == "CREATE":
            return self._create(requested, props, body)
        ids = {k: props[k] for k in ("name", "identity") if props.get(k) is not None}
        if requested == "router.link" and operation == "UPDATE":
            return self._update_link(ids, body)
        if requested in (None, NODE_TYPE, "management") and (not ids or ids.get("name") == "self"
                                                             or ids.get("identity") == "self"):
            return self._node_operation(operation, props, body)
        if not ids:
            if requested in CORE_TYPES:
                raise Status(BAD_REQUEST, "No name or identity provided")
            raise Status(BAD_REQUEST, f"{full_type(requested)}: No name or identity provided")
        if requested in CORE_TYPES and operation not in operations_of(requested):
            raise Status(FORBIDDEN)  # qdrouterd's core refuses before it looks for the entity
        entity = self._find(requested, ids)
        if operation not in operations_of(entity.type):
            if entity.type in CORE_TYPES:
                raise Status(FORBIDDEN)
            raise Status(NOT_IMPLEMENTED, f"Operation '{operation}' not implemented for '{full_type(entity.type)}' "
                                          f"{sorted(o for o in operations_of(entity.type) if o != 'QUERY')}")
        if operation == "READ":
            return OK, "OK", entity.full()
        if operation == "DELETE":
            self._delete(entity)
            return NO_CONTENT, "No Content", {}
        if operation == "UPDATE":
            return self._update(entity, body)
        raise Status(NOT_IMPLEMENTED, f"Operation '{operation}' not implemented for '{full_type(entity.type)}'")

    # ---- the management node's own operations ------------------------------------------------------------------

    def _node_operation(self, operation: str, props: dict, body) -> tuple[int, str, object]:
        entity_type = short_type(props.get("entityType"))
        if entity_type in (NODE_TYPE, "management"):
            entity_type = None
        types = [entity_type] if entity_type else list(_ENTITY_TYPES)
        if operation == "QUERY":
            return self._query(entity_type, props, body)
        if operation == "GET-TYPES":
            return OK, "OK", {full_type(t): [full_type(b) for b in SCHEMA[t][0]] for t in types}
        if operation == "GET-OPERATIONS":
            return OK, "OK", {full_type(t): list(operations_of(t)) for t in types}
        if operation == "GET-ATTRIBUTES":
            return OK, "OK", {full_type(t): list(attributes_of(t)) for t in types}
        if operation == "GET-ANNOTATIONS":
            return OK, "OK", {}
        if operation == "GET-MGMT-NODES":
            return OK, "OK", [f"amqp:/_topo/0/{e.attributes['id']}/{MANAGEMENT}" for e in self.router_nodes()]
        if operation == "GET-LOG":
            return OK, "OK", []
        if operation == "GET-SCHEMA":
            return OK, "OK", schema()
        if operation == "GET-JSON-SCHEMA":
            indent = props.get("indent")
            if indent is not None and not str(indent).lstrip("-").isdigit():
                raise Status(BAD_REQUEST, f"invalid literal for int(): {indent!r}")
            return OK, "OK", json.dumps(schema(), indent=int(indent) if indent is not None else None)
        raise Status(NOT_IMPLEMENTED, f"Operation '{operation}' not implemented on {NODE_TYPE}")

    def _query(self, entity_type: str | None, props: dict, body) -> tuple[int, str, object]:
        names = list((body or {}).get("attributeNames") or []) if isinstance(body, dict) else []
        known = attributes_of(entity_type) if entity_type else tuple(
            dict.fromkeys(a for t in _ENTITY_TYPES for a in attributes_of(t)))
        unknown = [n for n in names if n not in known and n not in EXTRA_ATTRIBUTES.get(entity_type, ())]
        if unknown and entity_type in CORE_TYPES:  # qdrouterd's core leaves out what it does not know
            names = [n for n in names if n not in unknown]
        elif unknown:
            for_type = f" for type {full_type(entity_type)}" if entity_type else ""
            raise Status(NOT_FOUND, f"Unknown attributes {unknown}{for_type}.")
        names = names or list(known)
        entities = self.entities(entity_type)
        offset = int(props.get("offset") or 0)
        count = props.get("count")
        entities = entities[offset:] if count is None else entities[offset:offset + int(count)]
        results = []
        for entity in entities:
            row = [entity.attributes.get(n) for n in names]
            if any(v is not None for v in row):
                results.append(row)
        return OK, "OK", {"attributeNames": names, "results": results}

    def entities(self, entity_type: str | None = None) -> list[Entity]:
        """Every entity of a type (and of the types that extend it); all of them for None."""
        makers = {
            "router": lambda: [self.router_entity()],
            "connection": self.connections,
            "router.link": self.links,
            "router.address": self.addresses,
            "router.node": self.router_nodes,
            "log": self.logs,
        }
        out: list[Entity] = []
        for t in _ENTITY_TYPES:
            if entity_type is not None and not is_a(t, entity_type):
                continue
            if t in makers:
                out += makers[t]()
            elif t in (NODE_TYPE, "management"):
                if t == "management" or entity_type == NODE_TYPE:
                    out.append(Entity("management", {"name": "self", "identity": "self"}))
            else:
                out += [self._refreshed(e) for e in self.config_entities if e.type == t]
        return out

    def _find(self, requested: str | None, ids: dict) -> Entity:
        key, value = next(iter(ids.items()))
        candidates = self.entities(requested)
        found = [e for e in candidates if e.attributes.get(key) == value or str(e.attributes.get(key)) == str(value)]
        if not found:
            if requested in CORE_TYPES:
                if requested == "router":  # qdrouterd's core forbids any request naming its router entity
                    raise Status(FORBIDDEN)
                raise Status(NOT_FOUND)
            raise Status(NOT_FOUND, "No entity with " + " ".join(f"{k}={v}" for k, v in ids.items()))
        entity = found[0]
        for k, v in ids.items():
            if str(entity.attributes.get(k)) != str(v):
                raise Status(BAD_REQUEST, "Conflicting " + " ".join(f"{k}={v}" for k, v in ids.items()))
        return entity

    # ---- operational entities: snapshots of the router's state -------------------------------------------------

    def router_entity(self) -> Entity:
        r = self.router
        totals = r.counters.totals
        return Entity("router", {
            "name": self.router_id, "identity": self.router_id, "id": self.router_id,
            "mode": r.config.router.mode, "area": "0", "version": VERSION, "workerThreads": 1,
            "defaultDistribution": r.config.router.default_distribution,
            "saslConfigDir": r.config.router.sasl_config_dir, "saslConfigName": r.config.router.sasl_config_name,
            "addrCount": len(self.addresses()), "linkCount": sum(1 for _ in self._all_links()),
            "blockedLinkCount": 0, "nodeCount": max(len(self.router_nodes()) - 1, 0),
            "linkRouteCount": len(r.link_router.sections), "autoLinkCount": len(r.autolinks.configs),
            "connectionCount": len(self._open_connections()),
            "presettledDeliveries": totals["presettled"], "droppedPresettledDeliveries": 0,
            "acceptedDeliveries": totals["accepted"], "rejectedDeliveries": totals["rejected"],
            "releasedDeliveries": totals["released"], "modifiedDeliveries": totals["modified"],
            "deliveriesDelayed1Sec": 0, "deliveriesDelayed10Sec": 0, "deliveriesStuck": 0,
            "deliveriesIngress": totals["ingress"], "deliveriesEgress": totals["egress"],
            "deliveriesTransit": totals["transit"],
            "deliveriesIngressRouteContainer": totals["ingress_route_container"],
            "deliveriesEgressRouteContainer": totals["egress_route_container"],
            "deliveriesRedirectedToFallback": totals["fallback"],
            "uptimeSeconds": int(time.time() - self.started), "memoryUsage": _memory_usage(),
            "linksBlocked": 0,
        })

    def _open_connections(self) -> list:
        return [c for c in self.router._connections if c.state & Endpoint.REMOTE_ACTIVE
                and not c.state & Endpoint.LOCAL_CLOSED]

    def connections(self) -> list[Entity]:
        out = []
        now = time.time()
        for conn in sorted(self._open_connections(), key=self.identity):
            state = getattr(conn, "router_state", None)
            host = getattr(conn, "mgmt_host", None) or "?"
            sasl_mech = getattr(conn, "mgmt_sasl", None)
            user = getattr(conn, "mgmt_user", None)
            out.append(Entity("connection", {
                "name": f"connection/{host}", "identity": str(self.identity(conn)), "host": host,
                "role": state.role if state else "normal", "protocol": "amqp",
                "dir": "out" if getattr(conn, "router_dialer", None) is not None else "in",
                "container": conn.remote_container, "isAuthenticated": sasl_mech is not None,
                "user": user or "anonymous", "isEncrypted": bool(getattr(conn, "mgmt_encrypted", False)),
                "sasl": sasl_mech, "ssl": bool(getattr(conn, "mgmt_encrypted", False)), "sslSsf": 0,
                "properties": {}, "opened": True, "active": True, "adminStatus": "enabled", "operStatus": "up",
                "uptimeSeconds": int(now - getattr(conn, "mgmt_opened", now)),
                "lastDlvSeconds": _since(state.last_delivery if state else None, now),
                "enableProtocolTrace": False,
            }))
        return out

    def _all_links(self):
        for conn in self._open_connections():
            for link in _links_of(conn):
                if link.state & Endpoint.LOCAL_ACTIVE and link.state & Endpoint.REMOTE_ACTIVE:
                    yield conn, link

    def links(self) -> list[Entity]:
        out = []
        r = self.router
        for conn, link in sorted(self._all_links(), key=lambda cl: (self.identity(cl[0]), self.identity(cl[1]))):
            role = getattr(getattr(conn, "router_state", None), "role", "normal")
            producer = getattr(link, "router_producer", None)
            consumer = getattr(link, "router_consumer", None)
            counted = producer or consumer
            pair = getattr(link, "router_pair", None)
            if getattr(link, "control_from", False) or link.name.endswith("-control") and role == "inter-router":
                link_type = "router-control"
            elif role == "inter-router" and (counted is not None and getattr(counted, "neighbour", False)
                                             or getattr(counted, "from_neighbour", False)):
                link_type = "inter-router"
            else:
                link_type = "endpoint"
            owning = None
            if producer is not None and producer.address is not None:
                owning = self.address_name(producer.address)
            elif consumer is not None and not consumer.neighbour:
                owning = self.address_name(consumer.address)
            elif getattr(link, "router_pair", None) is not None:
                terminus = link.remote_target if link.is_receiver else link.remote_source
                owning = None if terminus.address is None else ("C" if link.is_receiver else "D") + terminus.address
            undelivered = len(consumer.pending) if consumer is not None else 0
            unsettled = len(consumer.in_flight) if consumer is not None else (
                producer.undelivered if producer is not None else 0)
            counts = counted.counts if counted is not None else (
                pair.counts_of(link) if pair is not None else _ZERO_COUNTS)
            out.append(Entity("router.link", {
                "name": link.name, "identity": str(self.identity(link)), "linkName": link.name,
                "linkType": link_type, "linkDir": "in" if link.is_receiver else "out",
                "owningAddr": owning, "capacity": r.link_capacity, "peer": None,
                "connectionId": str(self.identity(conn)),
                "undeliveredCount": undelivered, "unsettledCount": unsettled,
                "deliveryCount": counts["delivered"], "presettledCount": counts["presettled"],
                "droppedPresettledCount": 0, "acceptedCount": counts["accepted"],
                "rejectedCount": counts["rejected"], "releasedCount": counts["released"],
                "modifiedCount": counts["modified"], "deliveriesDelayed1Sec": 0, "deliveriesDelayed10Sec": 0,
                "deliveriesStuck": 0, "creditAvailable": link.credit, "zeroCreditSeconds": 0, "settleRate": 0,
                "adminStatus": "enabled", "operStatus": "up", "priority": 4,
            }))
        return out

    def address_name(self, key: str) -> str:
        """qdrouterd's name for a routing key: a class letter, and for mobile addresses the phase (`M0orders`)."""
        local_prefix = f"amqp:/_topo/0/{self.router_id}/"
        if key.startswith(local_prefix):
            return "L" + key[len(local_prefix):]
        if key.startswith(PHASE1):
            return "M1" + key[len(PHASE1):]
        if key.startswith(FALLBACK):
            return "M0" + key  # the reference's fallback destinations: shown under the key it routes them on
        return "M0" + key

    def addresses(self) -> list[Entity]:
        r = self.router
        keys = set(r.consumers) | set(r.producers) | set(r.counters.address_stats) | r._reachable_remote
        keys.discard(None)
        rows: dict[str, dict] = {}
        for key in keys:
            if key.startswith("amqp:/_topo/") and not key.startswith(f"amqp:/_topo/0/{self.router_id}/"):
                continue  # another router's topological addresses: reached through its router address below
            if key.startswith(("_topo/", "_edge/")) or key in self.own_topological:
                continue  # other routers' agents, reached through their router addresses
            if key.startswith("amqp:/") and not r.consumers.get(key) and not r.producers.get(key):
                continue  # a dynamic address is gone with its link
            plain = key[len(PHASE1):] if key.startswith(PHASE1) else key
            section = r.address_config.lookup(plain) if not key.startswith("amqp:/") else None
            stats = r.counters.address_stats.get(key) or _ZERO_ADDRESS
            local = [c for c in r.consumers.get(key, ()) if not c.closed and not c.neighbour]
            remote = r.mesh.state.routers_with(key) if r.mesh is not None and hasattr(r.mesh.state, "routers_with") \
                else set()
            name = self.address_name(key)
            rows[name] = {
                "name": name, "identity": name, "key": name,
                "distribution": "closest" if key == MANAGEMENT else (section.distribution if section else "balanced"),
                "inProcess": 1 if key == MANAGEMENT else 0, "subscriberCount": len(local),
                "remoteCount": len(remote), "containerCount": 0,
                "remoteHostRouters": sorted(remote),
                "deliveriesIngress": stats["ingress"], "deliveriesEgress": stats["egress"],
                "deliveriesTransit": stats["transit"], "deliveriesToContainer": stats["to_container"],
                "deliveriesFromContainer": stats["from_container"],
                "deliveriesIngressRouteContainer": stats["from_container"],
                "deliveriesEgressRouteContainer": stats["to_container"],
                "deliveriesRedirectedToFallback": stats["fallback"], "transitOutstanding": None,
                "trackedDeliveries": 0, "priority": section.priority if section and section.priority is not None
                else -1,
            }
        if MANAGEMENT not in keys:
            rows["M0" + MANAGEMENT] = self._address_row("M0" + MANAGEMENT, "closest", in_process=1)
        rows["L" + MANAGEMENT] = self._address_row("L" + MANAGEMENT, "closest")
        for section in r.link_router.sections:
            letter = ("C" if section.direction == "in" else "D") if section.prefix is not None else (
                "E" if section.direction == "in" else "F")
            name = letter + (section.prefix if section.prefix is not None else str(section.pattern))
            row = self._address_row(name, "linkBalanced")
            row["containerCount"] = 1 if r.link_router._holder(section) is not None else 0
            rows[name] = row
        if r.mesh is not None:
            for rid in r.mesh.routes():
                rows["R" + rid] = self._address_row("R" + rid, "closest")
                rows["R" + rid]["remoteCount"] = 1
        return [Entity("router.address", row) for _, row in sorted(rows.items())]

    @staticmethod
    def _address_row(name: str, distribution: str, in_process: int = 0) -> dict:
        return {"name": name, "identity": name, "key": name, "distribution": distribution, "inProcess": in_process,
                "subscriberCount": 0, "remoteCount": 0, "containerCount": 0, "remoteHostRouters": [],
                "deliveriesIngress": 0, "deliveriesEgress": 0, "deliveriesTransit": 0, "deliveriesToContainer": 0,
                "deliveriesFromContainer": 0, "deliveriesIngressRouteContainer": 0,
                "deliveriesEgressRouteContainer": 0, "deliveriesRedirectedToFallback": 0,
                "transitOutstanding": None, "trackedDeliveries": 0, "priority": -1}

    def router_nodes(self) -> list[Entity]:
        """This router and every router reachable through the network (interior routers only: an edge or a
        standalone router has no router network to show)."""
        r = self.router
        if r.mesh is None or r.config.router.mode != "interior":
            return []
        state = r.mesh.state
        routes = r.mesh.routes()
        ids = sorted({self.router_id, *routes})
        out = []
        for index, rid in enumerate(ids):
            neighbours = sorted(state.link_state.get(rid, (0, {}))[1])
            if rid == self.router_id:
                next_hop, router_link, cost = "(self)", None, 0
            else:
                route = routes[rid]
                neighbour = r.mesh.neighbours.get(rid)
                if route.next_hop == rid and neighbour is not None:
                    data = neighbour.data_consumer
                    next_hop = None
                    router_link = self.identity(data.link) if data is not None else 0
                else:
                    next_hop, router_link = route.next_hop, None
                cost = route.cost
            out.append(Entity("router.node", {
                "name": f"router.node/{rid}", "identity": f"router.node/{rid}", "id": rid, "protocolVersion": 1,
                "instance": int(self.started), "linkState": neighbours, "nextHop": next_hop,
                "validOrigins": [], "address": f"amqp:/_topo/0/{rid}", "routerLink": router_link, "cost": cost,
                "lastTopoChange": int(self.started), "index": index,
            }))
        return out

    def logs(self) -> list[Entity]:
        modules = dict.fromkeys(LOG_MODULES)
        modules.update(dict.fromkeys(self.log_levels))
        return [Entity("log", {"name": f"log/{m}", "identity": f"log/{m}", "module": m,
                               "enable": self.log_levels.get(m, "info+" if m == "DEFAULT" else None),
                               "includeTimestamp": True, "includeSource": False,
                               "outputFile": "stderr" if m == "DEFAULT" else None})
                for m in modules]

    # ---- configuration entities --------------------------------------------------------------------------------

    def _add_config(self, type_: str, target) -> Entity:
        identity = str(next(self._ids)) if type_ in CORE_TYPES else None
        entity = Entity(type_, {"identity": identity}, target)
        self._refreshed(entity)
        if type_ == "sslProfile":
            entity.attributes["identity"] = f"sslProfile/{target.name}"
        if entity.attributes.get("identity") is None:
            entity.attributes["identity"] = f"{type_}/{entity.attributes.get('host')}:{entity.attributes.get('port')}" \
                + (f":{entity.attributes['name']}" if entity.attributes.get("name") else "")
        if type_ in ("listener", "connector") and entity.attributes.get("name") is None:
            entity.attributes["name"] = entity.attributes["identity"]
        self.config_entities.append(entity)
        return entity

    def _refreshed(self, entity: Entity) -> Entity:
        """A configured entity with its operational attributes (status, port, link) as they are now."""
        r = self.router
        t, obj, a = entity.type, entity.target, entity.attributes
        if t == "router.config.linkRoute":
            a.update(name=obj.name, prefix=obj.prefix, pattern=obj.pattern, addExternalPrefix=obj.add_external_prefix,
                     delExternalPrefix=obj.del_external_prefix, containerId=obj.container_id,
                     connection=obj.connection, distribution="linkBalanced", direction=obj.direction,
                     dir=obj.direction,
                     operStatus="active" if r.link_router._holder(obj) is not None else "inactive")
        elif t == "router.config.autoLink":
            link = r.autolinks.link_of(obj)
            a.update(name=obj.name, address=obj.address, addr=obj.address, direction=obj.direction,
                     dir=obj.direction, phase=obj.phase if obj.phase is not None else (
                         1 if obj.direction == "in" else 0), containerId=obj.container_id,
                     connection=obj.connection, externalAddress=obj.external_address,
                     externalAddr=obj.external_address, fallback=obj.fallback,
                     linkRef=str(self.identity(link)) if link is not None else None,
                     operStatus="active" if link is not None else "inactive", lastError=None)
        elif t == "router.config.address":
            a.update(name=obj.name, prefix=obj.prefix, pattern=obj.pattern, distribution=obj.distribution,
                     waypoint=obj.waypoint, ingressPhase=obj.ingress_phase if obj.ingress_phase is not None else 0,
                     egressPhase=obj.egress_phase if obj.egress_phase is not None else 0,
                     priority=obj.priority if obj.priority is not None else -1, enableFallback=obj.enable_fallback,
                     fallback=obj.enable_fallback)
        elif t == "listener":
            port = r.listening_port(obj)
            a.update(name=a.get("name") or obj.name, host=obj.host, port=str(port if port else obj.port),
                     role=obj.role, cost=obj.cost,
                     saslMechanisms=" ".join(obj.sasl_mechanisms) or None, authenticatePeer=obj.authenticate_peer,
                     requireEncryption=obj.require_encryption, requireSsl=obj.require_ssl, sslProfile=obj.ssl_profile,
                     maxFrameSize=obj.max_frame_size or 16384, idleTimeoutSeconds=obj.idle_timeout_seconds or 16,
                     linkCapacity=obj.link_capacity, http=obj.http, multiTenant=obj.multi_tenant)
        elif t == "sslProfile":  # its password is not shown
            a.update(name=obj.name, certFile=obj.cert_file, privateKeyFile=obj.private_key_file,
                     caCertFile=obj.ca_cert_file, passwordFile=obj.password_file, ciphers=obj.ciphers,
                     protocols=obj.protocols)
        elif t == "connector":
            cfg = obj.config
            conn = obj.connection
            up = conn is not None and conn.state & Endpoint.REMOTE_ACTIVE and not conn.state & Endpoint.LOCAL_CLOSED
            a.update(name=a.get("name") or cfg.name, host=cfg.host, port=str(cfg.port), role=cfg.role, cost=cfg.cost,
                     sslProfile=cfg.ssl_profile, saslMechanisms=" ".join(cfg.sasl_mechanisms) or None,
                     saslUsername=cfg.sasl_username, verifyHostname=cfg.verify_hostname,
                     maxFrameSize=cfg.max_frame_size or 16384, idleTimeoutSeconds=cfg.idle_timeout_seconds or 16,
                     linkCapacity=cfg.link_capacity, connectionStatus="SUCCESS" if up else "CONNECTING",
                     connectionMsg=f"Connection Opened: dir=out host={cfg.host}:{cfg.port}" if up else None)
        return entity

    def _create(self, requested: str | None, props: dict, body) -> tuple[int, str, object]:
        attributes = dict(body) if isinstance(body, dict) else {}
        for key in ("type", "name"):
            value = props.get(key)
            if value is not None:
                old = attributes.setdefault(key, value)
                if old is not None and old != value:
                    raise Status(BAD_REQUEST, f"Conflicting values for '{key}'")
        if attributes.get("type") is None:
            raise Status(BAD_REQUEST, f"No 'type' attribute in {attributes}")
        t = short_type(attributes["type"])
        if t in (NODE_TYPE, "management"):
            raise Status(FORBIDDEN)
        if attributes.get("identity") is not None:
            raise Status(BAD_REQUEST, f"'identity' attribute cannot be specified {attributes}")
        if "CREATE" not in operations_of(t):
            if t in CORE_TYPES:
                raise Status(FORBIDDEN)
            raise Status(NOT_IMPLEMENTED, f"Operation 'CREATE' not implemented for '{full_type(t)}' "
                                          f"{sorted(o for o in operations_of(t) if o != 'QUERY')}")
        if t not in LIVE_TYPES:
            raise Status(NOT_IMPLEMENTED, f"Operation 'CREATE' of '{full_type(t)}' is not implemented by the "
                                          "reference router")
        name = attributes.get("name")
        if name is not None and any(e.type == t and e.name == name for e in self.config_entities):
            if t in CORE_TYPES:
                raise Status(BAD_REQUEST, "Name conflicts with an existing entity")
            raise Status(BAD_REQUEST, f"adding {t} {name!r} duplicates unique attribute 'name'")
        section = self._section_of(t, attributes)
        self._check_conflicts(t, section)
        target = self._apply(t, section)
        entity = self._add_config(t, target)
        if t in ("listener", "connector") and name is None:
            entity.attributes["name"] = entity.attributes["identity"]
        log.info("Created %s %s", full_type(t), entity.name or entity.identity)
        return CREATED, "Created", entity.full()

    def _section_of(self, t: str, attributes: dict):
        """The created entity as the configuration file would give it, checked the way a file is."""
        attrs = {k: v for k, v in attributes.items() if k not in ("type", "identity") and v is not None}
        if t in ("router.config.linkRoute", "router.config.autoLink"):
            direction = attrs.get("direction", attrs.get("dir"))
            if direction is not None and direction not in _DIRECTIONS:
                raise Status(BAD_REQUEST, "Invalid value for 'direction'")
        if t in ("router.config.linkRoute", "router.config.address") and "prefix" not in attrs \
                and "pattern" not in attrs:
            raise Status(BAD_REQUEST, "Either a 'prefix' or 'pattern' attribute must be provided")
        if t == "router.config.autoLink" and ("address" not in attrs and "addr" not in attrs
                                               or "direction" not in attrs and "dir" not in attrs):
            raise Status(BAD_REQUEST, "address and direction fields are mandatory")
        if t == "router.config.address" and attrs.get("distribution", "balanced") not in _DISTRIBUTIONS:
            raise Status(BAD_REQUEST, "Invalid value for 'distribution'")
        for operational in ("operStatus", "linkRef", "lastError", "connectionStatus", "connectionMsg"):
            attrs.pop(operational, None)
        if t == "router.config.linkRoute":
            attrs.pop("distribution", None)  # linkBalanced, the only value
        section = _SECTION_OF[t]
        lines = [f"{section} {{"]
        for key, value in attrs.items():
            text = ("yes" if value else "no") if isinstance(value, bool) else str(value)
            if "\n" in text or "\r" in text:
                raise Status(BAD_REQUEST, f"Invalid value for '{key}'")
            lines.append(f"    {key}: {text}")
        lines.append("}")
        connection = attrs.get("connection")
        if t == "router.config.autoLink" and connection:  # it may name a connection that does not exist yet
            lines += ["connector {", f"    name: {connection}", "    port: 1", "    role: route-container", "}"]
        if t in ("listener", "connector"):  # the profiles it may name: those the router has now
            lines += [f"sslProfile {{\n    name: {name}\n}}" for name in self.router.ssl_profiles]
        mode = self.router.config.router.mode
        text = "\n".join([f"router {{\n    mode: {mode}\n    id: {self.router_id}\n}}", *lines]) + "\n"
        try:
            cfg = parse_config(text, path="management")
            check_supported(cfg)
        except ConfigError as exc:
            raise Status(BAD_REQUEST, exc.message) from None
        found = {"router.config.linkRoute": cfg.link_routes, "router.config.autoLink": cfg.auto_links,
                 "router.config.address": cfg.addresses, "listener": cfg.listeners, "connector": cfg.connectors,
                 "sslProfile": cfg.ssl_profiles}[t]
        return found[0]

    def _check_conflicts(self, t: str, section) -> None:
        r = self.router
        if t == "router.config.address":
            if any(normalize_pattern(s.match_pattern) == normalize_pattern(section.match_pattern)
                   for s in r.address_sections()):
                raise Status(BAD_REQUEST, "Already exists")
        elif t == "router.config.linkRoute":
            if any(s.direction == section.direction
                   and normalize_pattern(s.match_pattern) == normalize_pattern(section.match_pattern)
                   for s in r.link_router.sections):
                raise Status(BAD_REQUEST, "Already exists")

    def _apply(self, t: str, section):
        r = self.router
        if t == "router.config.linkRoute":
            r.add_link_route(section)
            return section
        if t == "router.config.autoLink":
            r.add_autolink(section)
            return section
        if t == "router.config.address":
            r.add_address_section(section)
            return section
        if t == "sslProfile":
            r.add_ssl_profile(section)
            return section
        if t == "listener":
            try:
                r.add_listener(section)
            except OSError as exc:
                raise Status(BAD_REQUEST, f"cannot listen on {section.host}:{section.port}: "
                                          f"{exc.strerror or exc}") from None
            except ConfigError as exc:  # its sslProfile's files cannot be used
                raise Status(BAD_REQUEST, exc.message) from None
            return section
        try:
            return r.add_connector(section)
        except ConfigError as exc:
            raise Status(BAD_REQUEST, exc.message) from None

    def _delete(self, entity: Entity) -> None:
        if entity not in self.config_entities:
            raise Status(FORBIDDEN)
        r = self.router
        t, target = entity.type, entity.target
        if t == "router.config.linkRoute":
            r.remove_link_route(target)
        elif t == "router.config.autoLink":
            r.remove_autolink(target)
        elif t == "router.config.address":
            r.remove_address_section(target)
        elif t == "listener":
            if target.http:
                raise Status(BAD_REQUEST, "HTTP listeners cannot be deleted")
            r.remove_listener(target)
        elif t == "connector":
            r.remove_connector(target)
        elif t == "sslProfile":  # in use or not, as qdrouterd: what uses it keeps its TLS settings
            r.remove_ssl_profile(target)
        else:
            raise Status(NOT_IMPLEMENTED, f"Operation 'DELETE' of '{full_type(t)}' is not implemented by the "
                                          "reference router")
        self.config_entities.remove(entity)
        log.info("Deleted %s %s", full_type(t), entity.name or entity.identity)

    def _update_link(self, ids: dict, body) -> tuple[int, str, object]:
        """UPDATE of a router.link, checked in qdrouterd 1.19's order (src/router_core/agent_link.c,
        qdra_link_update_CT): a body that is not a map, or a map without adminStatus (the one attribute the schema
        lets an UPDATE change), is a bare 400; then the link, by identity else by name (404 `Not Found`). qdrouterd
        answers 200 with the link's attributes as they are and does not act on the value ("TODO - set the adm_state
        on the link"): the link stays attached and its adminStatus stays enabled. The draft lets the answer differ
        from the request, so the reference does the same. Where qdrouterd answers 200 to what the draft says MUST
        be a 400 (a value outside the schema's enabled/disabled, an attribute router.link does not have), the
        reference answers 400."""
        if not isinstance(body, dict) or "adminStatus" not in body or not ids:
            raise Status(BAD_REQUEST)
        entity = self._find("router.link", {"identity": ids["identity"]} if "identity" in ids else ids)
        value = body["adminStatus"]
        if value is not None and (not isinstance(value, str) or value not in _LINK_ADMIN_STATUS):
            raise Status(BAD_REQUEST, f"Invalid value for 'adminStatus': {value!r} (one of {list(_LINK_ADMIN_STATUS)})")
        known = set(attributes_of("router.link")) | set(EXTRA_ATTRIBUTES["router.link"])
        unknown = sorted(str(k) for k in body if k not in known)
        if unknown:
            raise Status(BAD_REQUEST, f"Unknown attributes {unknown} for type {full_type('router.link')}")
        return OK, "OK", entity.full()

    def _update(self, entity: Entity, body) -> tuple[int, str, object]:
        if entity.type != "log":
            raise Status(NOT_IMPLEMENTED, f"Operation 'UPDATE' of '{full_type(entity.type)}' is not implemented by "
                                          "the reference router")
        attrs = dict(body) if isinstance(body, dict) else {}
        module = entity.attributes["module"]
        if "enable" in attrs:
            enable = attrs["enable"]
            logger = logging.getLogger() if module == "DEFAULT" else logging.getLogger(module)
            logger.setLevel(serving.level_of(enable))
            self.log_levels[module] = enable
        return OK, "OK", next(e for e in self.logs() if e.attributes["module"] == module).full()


def schema() -> dict:
    """GET-SCHEMA's answer: the reference's schema as qdrouterd 1.19's agent dumps its own (schema.py, Schema.dump):
    the prefix without its dot, and each type under its short name (router.config.* without `router.config.`)
    with its attributes (but `type`), operations, description and fully qualified type, `singleton` where set."""
    types = {}
    for t, (_bases, operations, _names) in SCHEMA.items():
        entry: dict = {"attributes": {a: dict(d) for a, d in ATTRIBUTE_TYPES[t].items()}}
        if operations:
            entry["operations"] = list(operations)
        if t in DESCRIPTIONS:
            entry["description"] = DESCRIPTIONS[t]
        entry["fullyQualifiedType"] = PREFIX + t
        if t in SINGLETONS:
            entry["singleton"] = True
        types[t.replace("router.config.", "")] = entry
    return {"prefix": PREFIX.rstrip("."), "entityTypes": types}


_ZERO_COUNTS = {"delivered": 0, "presettled": 0, "accepted": 0, "rejected": 0, "released": 0, "modified": 0}
_ZERO_ADDRESS = {"ingress": 0, "egress": 0, "transit": 0, "to_container": 0, "from_container": 0, "fallback": 0}


def _links_of(conn):
    link = conn.link_head(0)
    while link is not None:
        yield link
        link = link.next(0)


def _since(when: float | None, now: float) -> int | None:
    return None if when is None else int(now - when)


def _memory_usage() -> int | None:
    try:
        with open(f"/proc/{os.getpid()}/status") as status:
            for line in status:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


__all__ = ["Agent", "Status", "MANAGEMENT", "AddressSection", "AutoLink", "Connector", "LinkRoute", "Listener",
           "SslProfile", "schema"]
