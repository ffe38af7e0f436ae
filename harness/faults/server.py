"""`interop proxy`: the fault proxy as a server, in the foreground, like `toxiproxy-server`.

    interop proxy [--host 127.0.0.1] [--port 8474] [--config proxies.json] [--log-level info]
    python -m harness.faults ...            (the same, without the console script)

It logs to stderr, and is ready when it logs `API listening on http://HOST:PORT; ready` (with `--port 0` the
line carries the port the kernel gave). SIGTERM or SIGINT closes every proxy and connection and exits 0. A
port that is taken or a bad --config file is one line on stderr and exit status 1, before anything listens.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import logging
import signal
import sys

from .api import ApiServer
from .proxy import ApiError, ProxyCollection

log = logging.getLogger("interop.faults")

DEFAULT_HOST = "127.0.0.1"
DEFAULT_PORT = 8474  # toxiproxy-server's


class StartError(Exception):
    """A one-line reason the server cannot start."""


class _Formatter(logging.Formatter):
    def format(self, record: logging.LogRecord) -> str:
        return f"FAULTS ({record.levelname.lower()}) {record.getMessage()}"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="interop proxy",
                                     description="Fault proxy speaking Toxiproxy's HTTP API (like toxiproxy-server)")
    parser.add_argument("--host", default=DEFAULT_HOST, help=f"API address (default {DEFAULT_HOST})")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT,
                        help=f"API port (default {DEFAULT_PORT}; 0 for a free one, logged when ready)")
    parser.add_argument("--config", metavar="FILE", help="JSON list of proxies to create at start (as /populate)")
    parser.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    return parser


async def serve(host: str, port: int, config: list | None = None, ready=None) -> None:
    """Run the API and proxies until SIGTERM/SIGINT (or until the task is cancelled)."""
    loop = asyncio.get_running_loop()
    collection = ProxyCollection()
    api = ApiServer(collection)
    try:
        if config is not None:
            _, error = collection.populate(config)
            if error is not None:
                raise error
        server = await asyncio.start_server(api.handle, host, port, reuse_address=True)
    except ApiError as exc:
        collection.close()
        raise StartError(f"--config: {exc}") from None
    except OSError as exc:
        collection.close()
        raise StartError(f"cannot listen on {host}:{port}: {exc.strerror or exc}") from None
    stop = asyncio.Event()
    for sig in (signal.SIGTERM, signal.SIGINT):
        try:
            loop.add_signal_handler(sig, stop.set)
        except (ValueError, RuntimeError):  # not the main thread
            pass
    bound = server.sockets[0].getsockname()
    address = f"[{bound[0]}]:{bound[1]}" if ":" in bound[0] else f"{bound[0]}:{bound[1]}"
    log.info("API listening on http://%s; ready", address)
    if ready is not None:
        ready(bound[1])
    try:
        await stop.wait()
        log.info("stopping")
    finally:
        server.close()
        collection.close()
        await server.wait_closed()
        for sig in (signal.SIGTERM, signal.SIGINT):
            try:
                loop.remove_signal_handler(sig)
            except (ValueError, RuntimeError):
                pass


def _load_config(path: str) -> list:
    try:
        with open(path) as f:
            data = json.load(f)
    except OSError as exc:
        raise StartError(f"{path}: {exc.strerror or exc}") from None
    except ValueError as exc:
        raise StartError(f"{path}: not valid JSON: {exc}") from None
    if not isinstance(data, list):
        raise StartError(f"{path}: expected a JSON list of proxies")
    return data


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(_Formatter())
    root = logging.getLogger("interop.faults")
    root.handlers[:] = [handler]
    root.setLevel(args.log_level.upper())
    root.propagate = False
    logging.getLogger("asyncio").setLevel(logging.CRITICAL)  # a peer resetting a socket is routine here
    try:
        config = _load_config(args.config) if args.config else None
        asyncio.run(serve(args.host, args.port, config))
    except StartError as exc:
        print(f"interop proxy: {exc}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        pass
    return 0


if __name__ == "__main__":
    sys.exit(main())
