"""Artemis broker.xml files for the config differential (`interop fuzz --configs --peer broker=artemis`), as
Hypothesis strategies: valid files, near misses and hostile ones.

A case is a `BrokerDoc`: an element tree shaped like the files harness/vendors/artemis/render.py writes (a
`<configuration>` holding `<core>`: name, persistence and journal flags, security, acceptors, addresses with
queues, address-settings, security-settings, broker-connections, and now and then an element the reference broker
ignores or refuses), values mostly valid with near misses mixed in (`TRUE`, `1`, `+5`, ` 10 `, `10M` ...), then a
few `edits`: an element twice, dropped, renamed or moved, an unknown attribute, no or another namespace, a
comment, CDATA or a character reference in a value, an XML declaration with another encoding, a DOCTYPE with an
internal entity, a BOM, an unclosed tag, garbage after the root.

Safety: acceptors listen on loopback port 0 (or on an address that cannot be bound; an acceptor URL always names
its port, since Artemis would take 61616 for one that does not); broker connections dial 127.0.0.1 port 1, where
nothing listens. With security on, the session writes the properties login files beside each copy.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from xml.sax.saxutils import escape, quoteattr

from hypothesis import strategies as st

CORE_NS = "urn:activemq:core"
ROOT_NS = "urn:activemq"


@dataclass
class El:
    tag: str
    attrs: list[tuple[str, str]] = field(default_factory=list)
    children: list[El] = field(default_factory=list)
    text: str | None = None


@dataclass
class BrokerDoc:
    core: El
    edits: list[tuple] = field(default_factory=list)  # (kind, element index, value)

    def render(self) -> str:
        return render(self)


def _copy(el: El) -> El:
    return El(el.tag, list(el.attrs), [_copy(c) for c in el.children], el.text)


def _xml(el: El, depth: int, out: list[str], raw_text: bool = False) -> None:
    pad = "  " * depth
    attrs = "".join(f" {k}={quoteattr(v)}" for k, v in el.attrs)
    if el.children:
        out.append(f"{pad}<{el.tag}{attrs}>")
        for child in el.children:
            _xml(child, depth + 1, out)
        out.append(f"{pad}</{el.tag}>")
    elif el.text is not None:
        out.append(f"{pad}<{el.tag}{attrs}>{el.text if el.text.startswith(_RAW) else escape(el.text)}</{el.tag}>"
                   .replace(_RAW, ""))
    else:
        out.append(f"{pad}<{el.tag}{attrs}/>")


_RAW = "\x00raw:"  # marks a text an edit wrote as XML (a CDATA section, a character reference): not escaped


def _all(el: El) -> list[El]:
    """Every element below `el`, depth first (the targets of the edits)."""
    found = []
    for child in el.children:
        found.append(child)
        found.extend(_all(child))
    return found


def _parent_of(root: El, target: El) -> El | None:
    for el in [root, *_all(root)]:
        if any(c is target for c in el.children):
            return el
    return None


def _dup(core, el, value):
    parent = _parent_of(core, el)
    if parent is not None:
        parent.children.insert(parent.children.index(el) + 1, _copy(el))


def _drop(core, el, value):
    parent = _parent_of(core, el)
    if parent is not None and not _keep(el):
        parent.children.remove(el)


def _keep(el: El) -> bool:
    """Acceptors and their list stay: the broker must not fall back to Artemis's default 61616."""
    return el.tag in ("acceptors", "acceptor")


def _rename(core, el, value):
    if not _keep(el):
        el.tag = value


def _set_text(core, el, value):
    if not el.children and not _keep(el):
        el.text = value


def _add_attr(core, el, value):
    el.attrs.append((value, "x"))


def _drop_attr(core, el, value):
    if el.attrs and el.tag != "acceptor":
        el.attrs.pop(len(value) % len(el.attrs))


def _set_attr(core, el, value):
    if el.attrs and el.tag != "acceptor":
        key, _ = el.attrs[len(value) % len(el.attrs)]
        el.attrs[len(value) % len(el.attrs)] = (key, value)


def _hoist(core, el, value):
    """Move an element up to <core> (or into it from deeper): right name, wrong place."""
    parent = _parent_of(core, el)
    if parent is not None and parent is not core and not _keep(el):
        parent.children.remove(el)
        core.children.append(el)


def _cdata(core, el, value):
    if el.text:
        el.text = f"{_RAW}<![CDATA[{el.text}]]>"


def _char_ref(core, el, value):
    if el.text:
        el.text = f"{_RAW}&#{ord(el.text[0])};{escape(el.text[1:])}"


def _pad(core, el, value):
    if el.text is not None and not _keep(el):
        el.text = f"{value}{el.text}{value}"


TREE_EDITS = {"dup": _dup, "drop": _drop, "rename": _rename, "set-text": _set_text, "add-attr": _add_attr,
              "drop-attr": _drop_attr, "set-attr": _set_attr, "hoist": _hoist, "cdata": _cdata,
              "char-ref": _char_ref, "pad": _pad}


def render(doc: BrokerDoc) -> str:
    core = _copy(doc.core)
    elements = _all(core)
    text_edits = []
    for kind, index, value in doc.edits:
        if kind in TREE_EDITS:
            if elements:
                TREE_EDITS[kind](core, elements[index % len(elements)], value)
                elements = _all(core)
        else:
            text_edits.append((kind, value))
    namespace = next((v for k, v in text_edits if k == "namespace"), None)
    body: list[str] = []
    core_attrs = f' xmlns="{CORE_NS if namespace is None else namespace}"' if namespace != "" else ""
    _xml(El("core", [], core.children, core.text), 2, body)
    body[0] = body[0].replace("<core", f"<core{core_attrs}", 1)
    lines = ['<?xml version="1.0" encoding="UTF-8" standalone="no"?>',
             f'<configuration xmlns="{ROOT_NS}" xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance">',
             *body, "</configuration>"]
    text = "\n".join(lines) + "\n"
    for kind, value in text_edits:
        if kind != "namespace":
            text = TEXT_EDITS[kind](text, value)
    return text


def _bare_core(text: str, value: str) -> str:
    """`<core>` as the document root, without `<configuration>`."""
    lines = text.splitlines()
    return "\n".join([lines[0], *[ln[2:] for ln in lines[2:-1]]]) + "\n"


def _comment(text: str, value: str) -> str:
    return text.replace("<acceptors>", f"<!-- {value} --><acceptors>", 1)


def _declaration(text: str, value: str) -> str:
    return text.replace('<?xml version="1.0" encoding="UTF-8" standalone="no"?>', value, 1)


def _doctype(text: str, value: str) -> str:
    head, _, rest = text.partition("\n")
    return f'{head}\n<!DOCTYPE configuration [<!ENTITY v "{value}">]>\n{rest}'.replace(
        "<persistence-enabled>false<", "<persistence-enabled>&v;<", 1)


def _bom(text: str, value: str) -> str:
    return "\ufeff" + text


def _unclosed(text: str, value: str) -> str:
    return text.replace("</addresses>", "", 1) if "</addresses>" in text else text.replace("</acceptors>", "", 1)


def _after_root(text: str, value: str) -> str:
    return text + value + "\n"


def _before_root(text: str, value: str) -> str:
    return value + text


TEXT_EDITS = {"bare-core": _bare_core, "comment": _comment, "declaration": _declaration, "doctype": _doctype,
              "bom": _bom, "unclosed": _unclosed, "after-root": _after_root, "before-root": _before_root,
              "namespace": None}

# ---- values ----------------------------------------------------------------------------------------------

BOOL_MISSES = ("TRUE", "True", "1", "0", " true ", "yes", "", "tru")
INT_MISSES = ("+10", " 10 ", "-1", "0", "abc", "1.5", "99999999999", "1_0", "", "0x10", "-2")
TEXT_MISSES = ("a b", "ünï", "", " ", "x&y", "a<b", "${no.such.property}", "$HOME", "a" * 300)
SIZE_VALUES = ("10M", "1048576", "10MB", "10 M", "x", "-1", "1K")


def _weighted(valid, miss, miss_percent: int):
    cut = 100 - min(100, round(miss_percent))
    # both drawn, one kept: much cheaper for Hypothesis than a flatmap per value
    return st.tuples(st.integers(0, 99), valid, miss).map(lambda t: t[2] if t[0] >= cut else t[1])


def _bool(valid=("true", "false"), percent: int = 4):
    return _weighted(st.sampled_from(valid), st.sampled_from(BOOL_MISSES), percent)


def _int(valid: tuple[str, ...], percent: int = 4):
    return _weighted(st.sampled_from(valid), st.sampled_from(INT_MISSES), percent)


def _text(valid: tuple[str, ...], percent: int = 3):
    return _weighted(st.sampled_from(valid), st.sampled_from(TEXT_MISSES), percent)


def _leaf(tag: str, value) -> st.SearchStrategy:
    return value.map(lambda text: El(tag, text=text))


def _maybe(strategy, percent: int) -> st.SearchStrategy:
    return st.tuples(st.integers(0, 99), strategy).map(lambda t: [t[1]] if t[0] >= 100 - percent else [])


HOSTS = ("127.0.0.1", "localhost")
ACCEPTOR_PARAMS = ("protocols=AMQP", "protocols=AMQP,CORE", "protocols=CORE", "protocols=amqp", "tcpNoDelay=true",
                   "amqpCredits=1000", "amqpCredits=10", "foo=bar", "anycastPrefix=q.", "useEpoll=true",
                   "amqpMinLargeMessageSize=102400", "sslEnabled=false", "sslEnabled=maybe", "protocols=",
                   "amqpDuplicateDetection=true", "supportAdvisory=false")


def _acceptor_url():
    host = _weighted(st.sampled_from(HOSTS), st.sampled_from(("192.0.2.1", "[::1]", "256.1.1.1")), 4)
    port = _weighted(st.just("0"), st.sampled_from(("-1", "65536", "x", "00")), 4)
    scheme = _weighted(st.just("tcp"), st.sampled_from(("TCP", "amqp", "vm", "tcp:")), 3)
    params = st.lists(st.sampled_from(ACCEPTOR_PARAMS), max_size=3)
    first = _weighted(st.just("protocols=AMQP"), st.sampled_from(ACCEPTOR_PARAMS), 20)
    return st.tuples(scheme, host, port, first, params).map(
        lambda p: f"{p[0]}://{p[1]}:{p[2]}?" + ";".join([p[3], *p[4]]))


def acceptors():
    acceptor = st.tuples(_text(("clients", "amqp", "a b")), _acceptor_url()).map(
        lambda p: El("acceptor", [("name", p[0])], text=p[1]))
    return st.lists(acceptor, min_size=1, max_size=2).map(lambda items: El("acceptors", children=items))


ADDRESS_NAMES = ("orders", "news", "DLQ", "a.b", "q1", "jms.queue.x", "$sys")


def queue():
    attrs = st.lists(st.sampled_from((("max-consumers", "-1"), ("exclusive", "false"), ("purge-on-no-consumers",
                                                                                            "false"))), max_size=1)
    children = st.lists(st.sampled_from((El("durable", text="true"), El("durable", text="false"),
                                         El("durable", text="TRUE"), El("user", text="u"),
                                         El("filter", [("string", "color='red'")]))), max_size=2)
    return st.tuples(_text(ADDRESS_NAMES), attrs, children).map(
        lambda p: El("queue", [("name", p[0]), *p[1]], p[2]))


def address():
    routing = st.tuples(st.sampled_from(("anycast", "multicast")), st.lists(queue(), max_size=2)).map(
        lambda p: El(p[0], children=p[1]))
    return st.tuples(_text(ADDRESS_NAMES), st.lists(routing, max_size=2)).map(
        lambda p: El("address", [("name", p[0])], p[1]))


MATCHES = ("#", "orders", "news.#", "a.*.b", "a#", "a#b", "*", "", "activemq.management#")


def address_setting():
    children = st.lists(st.one_of(
        _leaf("dead-letter-address", _text(("DLQ",))), _leaf("expiry-address", _text(("ExpiryQueue",))),
        _leaf("max-delivery-attempts", _int(("10", "1", "-1"))), _leaf("redelivery-delay", _int(("0", "100"))),
        _leaf("auto-create-queues", _bool()), _leaf("auto-create-addresses", _bool()),
        _leaf("default-address-routing-type", st.sampled_from(("ANYCAST", "MULTICAST", "anycast", "BOTH", ""))),
        _leaf("default-queue-routing-type", st.sampled_from(("ANYCAST", "MULTICAST"))),
        _leaf("max-size-bytes", st.sampled_from(SIZE_VALUES)), _leaf("address-full-policy",
                                                                     st.sampled_from(("PAGE", "BLOCK", "FAIL", "x"))),
        _leaf("auto-delete-queues", _bool()), _leaf("redelivery-delay-multiplier", st.sampled_from(("1.0", "2", "x"))),
        _leaf("send-to-dla-on-no-route", _bool()), _leaf("default-ring-size", _int(("-1", "5"))),
        _leaf("slow-consumer-threshold", _int(("-1",))), _leaf("bogus-setting", st.just("1"))), max_size=4)
    return st.tuples(st.sampled_from(MATCHES), children).map(
        lambda p: El("address-setting", [("match", p[0])], p[1]))


def security_setting():
    perm = st.tuples(st.sampled_from(("send", "consume", "createAddress", "manage", "browse", "SEND", "bogus")),
                     st.sampled_from(("admin", "a, b", ""))).map(
        lambda p: El("permission", [("type", p[0]), ("roles", p[1])]))
    return st.tuples(st.sampled_from(MATCHES), st.lists(perm, max_size=3)).map(
        lambda p: El("security-setting", [("match", p[0])], p[1]))


def broker_connection():
    uri = st.sampled_from(("tcp://127.0.0.1:1", "tcp://127.0.0.1:1#127.0.0.1:1", "tcp://127.0.0.1",
                           "127.0.0.1:1", "tcp://127.0.0.1:1?sslEnabled=false", "tcp://127.0.0.1:1?foo=bar", "x"))
    element = st.one_of(
        st.sampled_from(("sender", "receiver", "peer")).flatmap(
            lambda tag: st.sampled_from((("address-match", "#"), ("queue-name", "orders"), ("address-match", "a#b"),
                                         ("bogus", "1"))).map(lambda a: El(tag, [a]))),
        st.lists(st.sampled_from((("queue-creation", "true"), ("queue-removal", "false"),
                                  ("message-acknowledgements", "TRUE"), ("sync", "false"),
                                  ("address-filter", "a"))), max_size=2, unique=True).map(lambda a: El("mirror", a)))
    attrs = st.lists(st.sampled_from((("auto-start", "true"), ("auto-start", "false"), ("reconnect-attempts", "-1"),
                                      ("retry-interval", "5000"), ("retry-interval", "-5"), ("user", "u"),
                                      ("password", "p"), ("bogus", "x"))), max_size=3, unique_by=lambda a: a[0])
    connection = st.tuples(st.sampled_from(("c1", "c2", "")), uri, attrs, st.lists(element, max_size=2)).map(
        lambda p: El("amqp-connection", [("uri", p[1]), ("name", p[0]), *p[2]], p[3]))
    return st.lists(connection, min_size=1, max_size=2).map(lambda items: El("broker-connections", children=items))


# Elements of <core> the reference broker ignores (tuning) or refuses (features it lacks), with values.
OTHER_CORE = (
    El("journal-type", text="NIO"), El("journal-file-size", text="1M"), El("journal-min-files", text="2"),
    El("journal-pool-files", text="10"), El("max-disk-usage", text="90"), El("critical-analyzer", text="false"),
    El("global-max-size", text="100Mb"), El("paging-directory", text="data/paging"),
    El("bindings-directory", text="data/bindings"), El("large-messages-directory", text="data/large"),
    El("jmx-management-enabled", text="false"), El("graceful-shutdown-enabled", text="false"),
    El("message-counter-enabled", text="false"), El("wild-card-routing-enabled", text="true"),
    El("journal-buffer-timeout", text="abc"), El("thread-pool-max-size", text="-1"),
    El("diverts"), El("cluster-user", text="u"), El("connectors"),
    El("wildcard-addresses", children=[El("delimiter", text="/")]),
    El("metrics", children=[El("jvm-memory", text="false")]), El("bogus-element", text="1"),
    El("max-redelivery-records", text="1"), El("id-cache-size", text="20000"),
)


def core():
    return st.tuples(
        _leaf("name", _text(("B1", "broker-x"))).map(lambda e: [e]),
        _leaf("persistence-enabled", _bool(("false", "false", "true"))).map(lambda e: [e]),
        _maybe(_leaf("journal-directory", _text(("data/journal",))), 20),
        _maybe(_leaf("journal-datasync", _bool()), 20),
        _maybe(_leaf("journal-sync-non-transactional", _bool()), 15),
        _leaf("security-enabled", _bool(("false", "false", "false", "true"))).map(lambda e: [e]),
        acceptors().map(lambda e: [e]),
        _maybe(st.lists(address(), min_size=1, max_size=3).map(lambda items: El("addresses", children=items)), 60),
        _maybe(st.lists(address_setting(), min_size=1, max_size=2).map(
            lambda items: El("address-settings", children=items)), 50),
        _maybe(st.lists(security_setting(), min_size=1, max_size=2).map(
            lambda items: El("security-settings", children=items)), 15),
        _maybe(broker_connection(), 12),
        st.lists(st.sampled_from(OTHER_CORE), max_size=2, unique_by=lambda e: e.tag).map(
            lambda items: [_copy(e) for e in items]),
    ).map(lambda groups: El("core", children=[e for group in groups for e in group]))


_EDIT_VALUES = st.sampled_from(("bogus", "Name", "acceptor", "address", "queue", "core", "x-y", "name", "match",
                                *BOOL_MISSES, *INT_MISSES, *TEXT_MISSES))
_TEXT_EDIT_VALUES = st.sampled_from(("", "x", "urn:activemq", "urn:activemq:core:x", "<x/>", "garbage", " ",
                                     "<?xml version='1.0' encoding='ISO-8859-1'?>", "<?xml version='1.1'?>",
                                     "<?xml version='1.0'?>", "true", "-- x", "<!-- c -->", "\n"))


def _edit():
    tree = st.tuples(st.sampled_from(tuple(TREE_EDITS)), st.integers(0, 60), _EDIT_VALUES)
    text = st.tuples(st.sampled_from(tuple(TEXT_EDITS)), st.just(0), _TEXT_EDIT_VALUES)
    return st.one_of(tree, tree, tree, text)


def edits():
    return st.integers(0, 99).flatmap(
        lambda n: st.just([]) if n < 50 else st.lists(_edit(), min_size=1, max_size=1 if n < 88 else 4))


def broker_docs():
    return _BROKER_DOCS


_BROKER_DOCS = st.builds(BrokerDoc, core(), edits())  # built once: building strategies costs, drawing does not
