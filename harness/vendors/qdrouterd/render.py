"""Render one router node of a topology as a qdrouterd.conf (Qpid Dispatch Router 1.19 syntax).

The same file is read by a real qdrouterd and by the reference router, so it sticks to the plain form of
the format: one `section {` per line, one `attribute: value` per line, a lone `}` to close, camelCase
attribute names. qdrouterd's reader turns each line into JSON by pattern, so a value holding whitespace, a
quote, a backslash or a brace, or a '#' (a comment start everywhere but in `pattern`), cannot be written;
such a value is refused here rather than rendered into a file that means something else (saslMechanisms
alone takes a space-separated list, as qdrouterd documents it).

Security (issue 20), from the topology's fields and the run's test PKI (harness/tlsca.py):
* a listener with TLS gets an `sslProfile` (its certificate, key and the CA that verifies clients) and
  `requireSsl`; `authenticatePeer` and `saslMechanisms` come from `Topology.listener_mechanisms`;
* a link with TLS gives the dialler's connector an `sslProfile` (its client certificate and the CA it trusts)
  and `verifyHostname`; its `mechanisms`, `user` and `password` become `saslMechanisms`, `saslUsername` and
  `saslPassword`. A TLS connector dials `localhost`, the name the listener's certificate carries;
* the node's `users` go into `files_dir`: the reference router's `qdrouterd.users` (name:password lines,
  reference/security/users.py), Cyrus's `qdrouterd.conf` pointing at `qdrouterd.sasldb`, and that sasldb made
  with `saslpasswd2` when it is installed; the router section names the folder in `saslConfigDir`. (qdrouterd
  1.19 here links Debian's proton-core 0.37, built without Cyrus: it cannot check PLAIN whatever the sasldb.)
"""

from __future__ import annotations

import re
import shutil
import subprocess
from pathlib import Path

from ...peers.provider import NodeSetup, RenderError
from ...topology import Link, Node, Topology, display_path

_UNSAFE = re.compile(r'[\s"\\{}]')


def render_router(
    topology: Topology,
    node_name: str,
    listen_ports: dict[str, int],
    connect_ports: dict[str, int] | None = None,
    *,
    listen_host: str = "127.0.0.1",
    connect_host: str = "127.0.0.1",
    external_address=None,
    pki=None,
    files_dir: Path | None = None,
) -> str:
    """qdrouterd.conf text for router `node_name`.

    `listen_ports` maps each name from `topology.listeners_for(node_name)` to its port ("clients" always);
    port 0 asks the router to pick one, for peers that report the bound port back.
    `connect_ports` maps each node this router dials (its outbound links) to the port to dial: the peer's
    listener, or the fault proxy's port when the link goes `via: proxy`.
    Connectors, autolinks and link routes name the connection after the peer node, so an autolink with
    `connection: B1` uses the connector (or inbound listener) called B1.
    `external_address(broker_node, address)` gives what the broker behind a connection expects on the wire
    for an address (RabbitMQ: `/amq/queue/NAME`); autolinks then carry `externalAddress` and link routes
    `addExternalPrefix`, so the same topology works in front of every broker vendor.
    """
    node = topology.node(node_name)
    if node.role != "router":
        raise RenderError(f"{node_name}: is a {node.role}; qdrouterd.conf is rendered for routers only")
    connect_ports = connect_ports or {}
    r = _Renderer(node_name)
    out = [
        f"# qdrouterd.conf for router {node_name} of topology '{topology.name}'.",
        (
            f"# Generated from {display_path(topology.path)} by harness.vendors.qdrouterd.render;"
            " change the topology, not this file."
        ),
        "",
    ]
    listeners = topology.listeners_for(node_name)
    plain_offered = any("PLAIN" in topology.listener_mechanisms(node_name, ls.name)[1] for ls in listeners)
    sasl_dir = _users_files(node_name, node.users, files_dir) if (node.users or plain_offered) else None
    out += r.section("router", [("mode", node.mode), ("id", node_name),
                                ("saslConfigDir", sasl_dir), ("saslConfigName", "qdrouterd" if sasl_dir else None)])
    for listener in listeners:
        port = _port(listen_ports, listener.name, node_name, "listen_ports", "listener")
        authenticate, mechanisms = topology.listener_mechanisms(node_name, listener.name)
        tls = topology.listener_tls(node_name, listener.name)
        profile = None
        if tls is not None:
            profile = f"{listener.name}-tls"
            issued = _need_pki(pki, node_name).node_files(topology, node_name, listener=listener.name)
            out += _ssl_profile(r, profile, issued.cert, issued.key, issued.ca)
        out += r.section(
            "listener",
            [
                ("name", listener.name),
                ("host", listen_host),
                ("port", port),
                ("role", listener.role),
                ("sslProfile", profile),
                ("requireSsl", ("yes" if tls.require else "no") if tls is not None else None),
                ("saslMechanisms", " ".join(mechanisms)),
                ("authenticatePeer", "yes" if authenticate else "no"),
            ],
        )
    for link in topology.links_from(node_name):
        port = _port(connect_ports, link.to, node_name, "connect_ports", "link to")
        if link.tls is not None:
            issued = _need_pki(pki, node_name).node_files(topology, node_name, link=link)
            out += _ssl_profile(r, f"{link.to}-tls", issued.cert, issued.key, issued.ca)
            host = "localhost" if connect_host == "127.0.0.1" else connect_host
            out += _connector(r, link, port, host)
        else:
            out += _connector(r, link, port, connect_host)
    out += _addresses(r, node)
    for i, al in enumerate(node.autolinks):
        out += r.section(
            "autoLink",
            [
                ("address", al.address),
                ("externalAddress", _external(external_address, al.connection, al.address)),
                ("direction", al.direction),
                ("connection", al.connection),
                ("phase", al.phase),
                ("fallback", "yes" if al.fallback else None),
            ],
            f"autolinks[{i}]",
        )
    for i, lr in enumerate(node.link_routes):
        out += r.section(
            "linkRoute",
            [
                ("prefix", lr.prefix),
                ("pattern", lr.pattern),
                ("direction", lr.direction),
                ("connection", lr.connection),
                ("addExternalPrefix", _external_prefix(external_address, topology, lr)),
            ],
            f"link_routes[{i}]",
        )
    return "\n".join(out)


def _external(external_address, node: str, address: str) -> str | None:
    if external_address is None:
        return None
    wire = external_address(node, address)
    return wire if wire != address else None


COORDINATOR = "$coordinator"  # 003 §12.2.2: the link-route prefix that carries transactions


def _external_prefix(external_address, topology: Topology, route) -> str | None:
    """The prefix a broker puts before queue names, learned from a queue the broker declares under the route
    (or a sample name when it declares none)."""
    if external_address is None or route.prefix is None or route.prefix == COORDINATOR:
        return None  # a coordinator link has no address to prefix: it goes to the broker's coordinator
    declared = [q.address for q in topology.node(route.connection).queues
                if q.address == route.prefix or q.address.startswith(route.prefix + ".")]
    sample = declared[0] if declared else f"{route.prefix}.sample"
    wire = external_address(route.connection, sample)
    return wire[: -len(sample)] if wire != sample and wire.endswith(sample) else None


def _port(ports: dict[str, int], key: str, node: str, argname: str, what: str) -> int:
    if key not in ports:
        have = ", ".join(sorted(ports)) or "nothing"
        raise RenderError(f"{node}: no port for {what} {key!r} in {argname} (it has {have})")
    port = ports[key]
    # 0 is allowed: a peer that binds port 0 itself (the reference router) reports the real port back.
    if not isinstance(port, int) or isinstance(port, bool) or not 0 <= port < 65536:
        raise RenderError(f"{node}: {argname}[{key!r}]: expected a TCP port 0..65535, got {port!r}")
    return port


def _connector(r: _Renderer, link: Link, port: int, host: str) -> list[str]:
    attrs: list[tuple[str, object]] = [("name", link.to), ("host", host), ("port", port), ("role", link.role)]
    if link.role == "inter-router":
        attrs.append(("cost", link.cost))  # qdrouterd uses cost for inter-router paths only
    mechanisms = getattr(link, "mechanisms", None) or ("ANONYMOUS",)
    attrs.append(("saslMechanisms", " ".join(mechanisms)))
    tls = getattr(link, "tls", None)
    if tls is not None:
        attrs += [("sslProfile", f"{link.to}-tls"), ("verifyHostname", "yes" if tls.verify_hostname else "no")]
    if "PLAIN" in mechanisms:
        attrs += [("saslUsername", link.user), ("saslPassword", link.password)]
    return r.section("connector", attrs, f"link {link.name}")


def _ssl_profile(r: _Renderer, name: str, cert, key, ca) -> list[str]:
    return r.section("sslProfile", [("name", name), ("certFile", cert), ("privateKeyFile", key),
                                    ("caCertFile", ca)])


def _need_pki(pki, node_name: str):
    if pki is None:
        raise RenderError(f"{node_name}: TLS needs the run's test PKI (pki=), and none was given")
    return pki


def _users_files(node_name: str, users: dict[str, str], files_dir: Path | None) -> str:
    """Write the node's users where both routers find them; returns the folder for saslConfigDir."""
    if files_dir is None:
        raise RenderError(f"{node_name}: users need a folder for the users files (files_dir=), and none was given")
    folder = Path(files_dir) / f"sasl-{node_name}"
    folder.mkdir(parents=True, exist_ok=True)
    for name, password in users.items():
        if _UNSAFE.search(name) or ":" in name or "\n" in password:
            raise RenderError(f"{node_name}: users: {name!r} cannot be written to a users file")
    users_file = folder / "qdrouterd.users"
    users_file.write_text("".join(f"{n}:{p}\n" for n, p in users.items()), encoding="utf-8")
    users_file.chmod(0o600)
    sasldb = folder / "qdrouterd.sasldb"
    (folder / "qdrouterd.conf").write_text(  # Cyrus's own config, named by saslConfigName
        f"pwcheck_method: auxprop\nauxprop_plugin: sasldb\nsasldb_path: {sasldb}\n"
        "mech_list: PLAIN EXTERNAL ANONYMOUS\n")
    saslpasswd2 = shutil.which("saslpasswd2") or ("/usr/sbin/saslpasswd2" if Path("/usr/sbin/saslpasswd2").exists()
                                                  else None)
    if saslpasswd2 is not None:
        for name, password in users.items():
            subprocess.run([saslpasswd2, "-c", "-p", "-f", str(sasldb), name], input=password.encode(), check=True,
                           capture_output=True, timeout=10)
    return str(folder)


def _addresses(r: _Renderer, node: Node) -> list[str]:
    out: list[str] = []
    for i, spec in enumerate(node.addresses):
        out += r.section(
            "address",
            [
                ("prefix", spec.prefix),
                ("pattern", spec.pattern),
                ("distribution", spec.distribution),
                ("priority", spec.priority),
                # Written only when set, so the file shows just what the topology asked for.
                ("waypoint", "yes" if spec.waypoint else None),
                ("enableFallback", "yes" if spec.enable_fallback else None),
            ],
            f"addresses[{i}]",
        )
    return out


class _Renderer:
    def __init__(self, node_name: str) -> None:
        self.node_name = node_name

    def section(self, kind: str, attrs: list[tuple[str, object]], origin: str | None = None) -> list[str]:
        lines = [f"{kind} {{"]
        for key, value in attrs:
            if value is None:
                continue
            text = str(value)
            spaced = key == "saslMechanisms" and re.fullmatch(r"[A-Z0-9-]+( [A-Z0-9-]+)*", text)
            if not text or (_UNSAFE.search(text) and not spaced) or ("#" in text and key != "pattern"):
                where = f"{origin}: " if origin else ""
                raise RenderError(
                    f"{self.node_name}: {where}{kind} {key}: {text!r} cannot be written to qdrouterd.conf "
                    "(no whitespace, quotes, backslashes or braces; '#' only in patterns)"
                )
            lines.append(f"    {key}: {text}")
        return [*lines, "}", ""]


def render_for(setup: NodeSetup, ports: dict[str, int] | None = None) -> str:
    """The node's qdrouterd.conf as a provider renders it (the reference router and qdrouterd both read it): the
    ports the node was told to listen on and dial, with `ports` over them."""
    return render_router(setup.topology, setup.node_name, listen_ports={**setup.listen_ports, **(ports or {})},
                         connect_ports=setup.connect_ports, external_address=setup.wiring.external_address,
                         files_dir=setup.wiring.files, **setup.pki)
