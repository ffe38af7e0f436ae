"""Start a reference server's `main()` on one config file after another, each in a forked child: the reference
side of the config differential (`interop fuzz --configs`).

    python -m harness.fuzz.forkserver reference.router.server

`interop router -c FILE` costs ~0.25 s of interpreter start and imports before it reads FILE; the differential
starts it hundreds of times. This process imports the server module once, then for each request forks a child
that runs the module's `main(["-c", FILE])` - the very function `interop router` / `interop broker` run, on a
fresh process state - with its stdout and stderr on a pipe, and watches that start like any other product's
(harness.fuzz.startwatch: ready line, exit status, or still running at the deadline). The child is stopped with
SIGTERM as the command line's would be.

Protocol: one JSON object per line on stdin, `{"argv": [...], "cwd": DIR, "ready": REGEX, "deadline_s": S}`;
one JSON object per line on stdout, `{"status": ..., "code": ..., "output": ..., "elapsed_s": ...}`
(harness.fuzz.startwatch.Start); `ready` on stdout first, once the module is imported. This process starts no
threads, so forking it is safe.
"""

from __future__ import annotations

import importlib
import json
import os
import re
import signal
import sys
import traceback
from dataclasses import asdict

from .startwatch import watch


def _child(main, argv: list[str], cwd: str, write_fd: int) -> None:
    """In the forked child: run main() with its output on the pipe; never returns."""
    code = 1
    try:
        os.chdir(cwd)
        null = os.open(os.devnull, os.O_RDONLY)
        os.dup2(null, 0)
        os.dup2(write_fd, 1)
        os.dup2(write_fd, 2)
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGPIPE):
            signal.signal(sig, signal.SIG_DFL)
        sys.stdin = open(0, closefd=False)  # noqa: SIM115 - the child's own fds, closed by _exit
        sys.stdout = open(1, "w", buffering=1, closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", buffering=1, closefd=False)  # noqa: SIM115
        code = main(argv)
        code = 0 if code is None else int(code)
    except SystemExit as exc:  # argparse and friends
        code = exc.code if isinstance(exc.code, int) else 1
    except BaseException:  # noqa: BLE001 - a traceback is the finding; print it like the command line would
        traceback.print_exc()
        code = 1
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except Exception:  # noqa: BLE001, S110 - nothing left to report to
                pass
        os._exit(code)


def start(main, argv: list[str], cwd: str, ready: str, deadline_s: float) -> dict:
    """Fork, run main(argv) in the child, watch it start; the Start as a dict."""
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_fd)
        _child(main, argv, cwd, write_fd)
    os.close(write_fd)
    exit_code: list[int] = []

    def poll() -> int | None:
        if not exit_code:
            done, status = os.waitpid(pid, os.WNOHANG)
            if done:
                exit_code.append(os.waitstatus_to_exitcode(status))
        return exit_code[0] if exit_code else None

    def send(sig: int) -> None:
        if not exit_code:
            os.kill(pid, sig)

    pattern = re.compile(ready)
    try:
        result = watch(read_fd, poll, send, lambda text: pattern.search(text) is not None, deadline_s)
    finally:
        os.close(read_fd)
    return asdict(result)


def serve(module_name: str) -> int:
    main = importlib.import_module(module_name).main
    out = sys.stdout
    out.write("ready\n")
    out.flush()
    for line in sys.stdin:
        if not line.strip():
            continue
        request = json.loads(line)
        result = start(main, request["argv"], request["cwd"], request["ready"], float(request["deadline_s"]))
        out.write(json.dumps(result) + "\n")
        out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(serve(sys.argv[1]))
