"""qdrouterd in several versions side by side: which binary runs a version, and building one that is missing.

No registry ships a qdrouterd binary, so a version is built from its source archive by the install script that
sits beside the clone (`../shared/peers/qdrouterd/install.sh`, or QDROUTERD_INSTALL; the Makefile's
`make qdrouterd` runs the same script). `QDROUTERD_VERSION=V bash install.sh` builds V into /opt/qpid-dispatch-V
with wrappers `qdrouterd-V`, `qdstat-V` and `qdmanage-V` in /usr/local/bin (about 30-60 s on 2 cores), beside
the others; the default build also installs the plain `qdrouterd`.

A choice without a version runs the `qdrouterd` on PATH, whatever its version, as before; `qdrouterd@V` runs
`qdrouterd-V` from PATH, or the plain `qdrouterd` when that one says it is V.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import time
from pathlib import Path

from ...peers.base import PeerUnavailable
from ...peers.versions import Versions, cache_dir

ROOT = Path(__file__).resolve().parents[2]
INSTALL_SCRIPT = ROOT.parent / "shared" / "peers" / "qdrouterd" / "install.sh"


@functools.cache
def reported_version(binary: str) -> str:
    """What `BINARY --version` prints (once per binary per process: it starts an embedded Python)."""
    done = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=30)
    return done.stdout.strip() or "unknown"


def binary_for(version: str | None) -> str | None:
    """The qdrouterd binary that runs `version` (None: the one on PATH), or None when there is none."""
    plain = shutil.which("qdrouterd")
    if version is None:
        return plain
    own = shutil.which(f"qdrouterd-{version}")
    if own is not None:
        return own
    return plain if plain is not None and reported_version(plain) == version else None


def missing(version: str) -> str | None:
    if binary_for(version) is not None:
        return None
    plain = shutil.which("qdrouterd")
    have = f"the qdrouterd on PATH is {reported_version(plain)}" if plain else "no qdrouterd is on PATH"
    return f"qdrouterd {version} is not installed here (no qdrouterd-{version} on PATH; {have})"


def install_script() -> Path:
    """QDROUTERD_INSTALL (relative to the checkout, as the Makefile reads it), else the one beside the clone."""
    named = os.environ.get("QDROUTERD_INSTALL")
    return ROOT / named if named else INSTALL_SCRIPT


def archive(version: str) -> Path:
    return install_script().parent / f"qpid-dispatch-{version}.tar.gz"


def cannot_build(version: str) -> str | None:
    """Why qdrouterd `version` cannot be built here (None: it can): the script, its source archive, root."""
    script = install_script()
    if not script.is_file():
        return (f"qdrouterd {version} is not installed and there is no install script to build it ({script}; "
                "QDROUTERD_INSTALL names another)")
    if not archive(version).is_file():
        return f"qdrouterd {version} is not installed and there is no source archive {archive(version)} to build it"
    if os.geteuid() != 0:
        return f"qdrouterd {version} is not installed, and building it ({script}) installs into /opt as root"
    return None


def build(version: str, say) -> None:
    """Build and install `version` with the install script; its output goes to a log in the cache."""
    script = install_script()
    log = cache_dir() / f"qdrouterd-build-{version}.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    say(f"qdrouterd: building {version} from {archive(version)} into /opt/qpid-dispatch-{version} "
        f"(about 30-60 s; log {log})")
    began = time.monotonic()
    with open(log, "w") as out:
        done = subprocess.run(["bash", str(script)], env={**os.environ, "QDROUTERD_VERSION": version},
                              stdout=out, stderr=subprocess.STDOUT, cwd=os.environ.get("TMPDIR") or "/tmp")
    if done.returncode != 0:
        tail = log.read_text(errors="replace").strip().splitlines()[-1:] or ["(no output)"]
        raise PeerUnavailable(f"building qdrouterd {version} failed (exit {done.returncode}): {tail[0]} "
                              f"(log {log})")
    say(f"qdrouterd: built {version} in {time.monotonic() - began:.0f} s")


# previous: the release before the 1.19.0 that `make qdrouterd` builds as the plain `qdrouterd`
def installed() -> str | None:
    """The version of the plain `qdrouterd` on PATH (what a choice without a version runs), None without one."""
    plain = binary_for(None)
    said = None if plain is None else reported_version(plain)
    return None if said == "unknown" else said


VERSIONS = Versions("qdrouterd", None, missing, cannot_build, build, previous="1.18.0", installed=installed)


# ---- a qdrouterd that serves AMQP over WebSocket (`http: yes`) --------------------------------------------------
#
# Only a qdrouterd built with libwebsockets has an HTTP listener; one built without it logs "No HTTP support to
# listen on ..." and exits 1 for a listener with `http: yes`. The install script builds one beside the default
# installation, with its own wrappers, so that no running qdrouterd is replaced:
#   WEBSOCKETS=1 PREFIX=/opt/qpid-dispatch-1.19.0-ws BINDIR=/opt/qpid-dispatch-1.19.0-ws/wrappers bash install.sh
WEBSOCKET_ENV = "QDROUTERD_WEBSOCKET"  # a qdrouterd (binary or wrapper) built with libwebsockets
WEBSOCKET_DEFAULT = Path("/opt/qpid-dispatch-1.19.0-ws/wrappers/qdrouterd")


@functools.cache
def has_websockets(binary: str) -> bool:
    """Whether `binary` (a qdrouterd, or the install script's wrapper that execs one) is linked with libwebsockets:
    its executable names libwebsockets.so among the libraries it needs."""
    path = Path(binary)
    try:
        head = path.read_bytes()[:4096]
        if head.startswith(b"#!"):  # the install script's wrapper: `exec "PREFIX/sbin/qdrouterd" "$@"`
            line = next((x for x in head.decode(errors="replace").splitlines() if x.startswith("exec ")), "")
            path = Path(line.split('"')[1]) if line.count('"') >= 2 else path
        return b"libwebsockets.so" in path.read_bytes()
    except OSError:
        return False


def websocket_binary(version: str | None = None) -> tuple[str | None, str]:
    """(a qdrouterd of `version` (None: any) that serves `http: yes` listeners, or None; why none / where it is
    from). Looked for in order: $QDROUTERD_WEBSOCKET, the chosen qdrouterd itself, the install script's
    WebSocket build in /opt/qpid-dispatch-1.19.0-ws."""
    tried = []
    named = os.environ.get(WEBSOCKET_ENV)
    candidates = [*([(named, f"${WEBSOCKET_ENV}")] if named else []), (binary_for(version), "the chosen qdrouterd"),
                  (str(WEBSOCKET_DEFAULT), "the WebSocket build")]
    for binary, where in candidates:
        if not binary or not Path(binary).is_file():
            continue
        if not has_websockets(binary):
            tried.append(f"{binary} ({where}) is built without libwebsockets")
            continue
        if version is not None and reported_version(binary) != version:
            tried.append(f"{binary} ({where}) is {reported_version(binary)}, not {version}")
            continue
        return binary, f"{binary} ({where})"
    why = "; ".join(tried) or "no qdrouterd found"
    return None, (f"no qdrouterd with WebSocket support here ({why}); build one: WEBSOCKETS=1 "
                  f"PREFIX=/opt/qpid-dispatch-1.19.0-ws BINDIR={WEBSOCKET_DEFAULT.parent} bash {INSTALL_SCRIPT} "
                  f"(needs libwebsockets-dev), or name one in ${WEBSOCKET_ENV}")
