"""The real `toxiproxy-server`, built from its Go module into the download cache, pinned and checked.

    python -m harness.faults.toxiproxy_server           build it once (needs Go), later runs only check it
    python -m harness.faults.toxiproxy_server --check   check only: exit 0 if usable, else say why, exit 1

It lands in ${INTEROP_CACHE:-~/.cache/amqp-interop}/toxiproxy-2.12.0/toxiproxy-server, never in the checkout.
`go install` names the binary after its package folder (`server`), so it is built into a scratch GOBIN and
renamed. The build stamps the version the way Toxiproxy's own release build does (-X ...Version=2.12.0);
without it `toxiproxy-server -version` and GET /version would answer "git", and the pin could not be checked.

Without Go the build step says so in one line and exits 0 (a machine without Go runs the harness's own proxy;
cases asking for the real one are skipped with the reason `unavailable_reason()` gives).
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

VERSION = "2.12.0"
MODULE = "github.com/Shopify/toxiproxy/v2"
PACKAGE = f"{MODULE}/cmd/server"
BINARY = "toxiproxy-server"
_BUILD_TIMEOUT = 900.0  # a first build downloads the module and its dependencies: minutes on a slow link


class ToxiproxyUnavailable(Exception):
    """toxiproxy-server cannot be had here; str() is a one-line reason."""


def cache_root() -> Path:
    return Path(os.environ.get("INTEROP_CACHE") or Path.home() / ".cache" / "amqp-interop")


def install_dir() -> Path:
    return cache_root() / f"toxiproxy-{VERSION}"


def binary_path() -> Path:
    return install_dir() / BINARY


def installed_version(path: Path) -> str | None:
    """What `path -version` says it is ('toxiproxy-server version 2.12.0' -> '2.12.0'), None if it cannot run."""
    try:
        out = subprocess.run([str(path), "-version"], capture_output=True, text=True, timeout=30,
                             stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired):
        return None
    words = out.stdout.split()
    return words[-1] if out.returncode == 0 and words[:2] == [BINARY, "version"] else None


def unavailable_reason() -> str | None:
    """None when the pinned toxiproxy-server is installed, else a one-line reason (with what to do)."""
    path = binary_path()
    if not path.exists():
        how = "run `make toxiproxy`" if shutil.which("go") else "it is built with Go, and `go` is not on PATH"
        return f"toxiproxy-server {VERSION} is not installed at {path} ({how})"
    found = installed_version(path)
    if found != VERSION:
        return (f"{path} is not toxiproxy-server {VERSION} (its -version says {found or 'nothing'}); "
                "run `make toxiproxy`")
    return None


def require() -> Path:
    """The checked binary, or ToxiproxyUnavailable with the reason."""
    if (why := unavailable_reason()) is not None:
        raise ToxiproxyUnavailable(why)
    return binary_path()


def install() -> Path:
    """Build the pinned toxiproxy-server into the cache unless it is there already; returns its path."""
    if unavailable_reason() is None:
        return binary_path()
    go = shutil.which("go")
    if go is None:
        raise ToxiproxyUnavailable(f"cannot build toxiproxy-server {VERSION}: `go` is not on PATH")
    target = install_dir()
    target.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="gobin-", dir=target) as scratch:
        env = {**os.environ, "GOBIN": scratch}
        command = [go, "install", "-ldflags", f"-X {MODULE}.Version={VERSION}", f"{PACKAGE}@v{VERSION}"]
        try:
            built = subprocess.run(command, env=env, capture_output=True, text=True, timeout=_BUILD_TIMEOUT,
                                   stdin=subprocess.DEVNULL)
        except subprocess.TimeoutExpired:
            raise ToxiproxyUnavailable(f"`{' '.join(command)}` took longer than {_BUILD_TIMEOUT:g} s") from None
        if built.returncode != 0:
            last = (built.stderr.strip().splitlines() or ["no output"])[-1]
            raise ToxiproxyUnavailable(f"`{' '.join(command)}` failed: {last}")
        os.replace(Path(scratch) / "server", binary_path())  # same folder: the rename is atomic
    if (why := unavailable_reason()) is not None:
        raise ToxiproxyUnavailable(f"built, but {why}")
    return binary_path()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m harness.faults.toxiproxy_server",
                                     description=f"Build toxiproxy-server {VERSION} into the download cache "
                                                 "(once; later runs only check it).")
    parser.add_argument("--check", action="store_true", help="only check the installed binary")
    args = parser.parse_args(argv)
    if args.check:
        why = unavailable_reason()
        print(f"toxiproxy: {why}" if why else f"toxiproxy: {binary_path()} ({VERSION})")
        return 1 if why else 0
    if shutil.which("go") is None and unavailable_reason() is not None:
        print(f"toxiproxy: skipped, `go` is not on PATH: the real toxiproxy-server {VERSION} cannot be built here "
              "(fault cases run the harness's own proxy)")
        return 0
    try:
        path = install()
    except ToxiproxyUnavailable as exc:
        print(f"toxiproxy: {exc}", file=sys.stderr)
        return 1
    print(f"toxiproxy: {path} ({VERSION})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
