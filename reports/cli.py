"""`interop report` (also `python -m reports` and `spark-submit reports/submit.py`): runs -> Parquet -> HTML.

    interop report [INPUTS ...] [--out DIR] [--master URL | --remote sc://HOST:PORT] [--rebuild] [--catalog FILE]
                   [--no-allure] [--title TEXT]
    interop report [INPUT] [--out DIR | --html DIR] --serve [--port N]

INPUTS are run folders, results folders (holding run folders), globs, results.jsonl files, or URIs Spark can
list (hdfs://, s3a://, ...); default: results. DIR/tables/ is the store (Parquet; DIR may be a URI): runs already
in it are not read again unless their files changed, and the report covers every run it holds (reports/store.py);
--rebuild starts it anew from INPUTS. Writes the aggregate tables beside it, and locally index.html
(self-contained) and, where the Allure command line is installed, allure/index.html for the latest run with Allure
results (into --html, default DIR when it is local).
Damaged result lines are counted and shown in the report; they never stop it. Exit 0 when a report was written,
2 for a user mistake (no input found), 1 when Spark itself failed. --serve builds nothing: it serves the report
folder over HTTP on 127.0.0.1 (threaded; --port, default 8000, 0 for a free one) and prints its URL.
"""

from __future__ import annotations

import argparse
import glob
import sys
import time
from pathlib import Path

if __package__ in (None, ""):
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from reports.job.session import ReportError  # noqa: E402

REPO = Path(__file__).resolve().parent.parent
DEFAULT_CATALOG = REPO / "suites" / "spec" / "catalog.yaml"

__all__ = ["ReportError", "add_arguments", "main", "run"]


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("inputs", nargs="*", metavar="INPUT",
                        help="run folders, results folders, globs, results.jsonl files or URIs (default: results)")
    parser.add_argument("--out", metavar="DIR",
                        help="output folder: index.html, tables/*.parquet, allure/ (default: <first input>/report "
                             "for a local results folder, else ./report)")
    parser.add_argument("--html", metavar="DIR",
                        help="local folder for index.html and allure/ (default: --out when it is local, else ./report)")
    parser.add_argument("--master", metavar="URL",
                        help="Spark master (default: local[*], or what spark-submit was given)")
    parser.add_argument("--remote", metavar="sc://HOST:PORT",
                        help="run the job on a Spark Connect server (a long-lived Spark: no JVM starts here; "
                             "`python -m reports.connect_server` runs one on this machine)")
    parser.add_argument("--rebuild", action="store_true",
                        help="start the store in DIR/tables anew from INPUTS (default: read only new and changed "
                             "runs, keep the rest)")
    parser.add_argument("--catalog", metavar="FILE",
                        help="spec catalog YAML, so clauses no case covers show as 'not run' "
                             "(default: suites/spec/catalog.yaml when present)")
    parser.add_argument("--no-allure", action="store_true", help="do not build the Allure HTML report")
    parser.add_argument("--title", default="AMQP 1.0 interop: vendor comparison", help="report title")
    parser.add_argument("--serve", action="store_true",
                        help="serve the report folder (--html, else --out, else <first input>/report) over HTTP on "
                             "127.0.0.1 instead of building it; Ctrl-C stops it")
    parser.add_argument("--port", type=int, default=8000, metavar="N",
                        help="with --serve: the port on 127.0.0.1 (default 8000; 0: a free one, printed)")


def _default_out(inputs: list[str]) -> str:
    first = inputs[0] if inputs else "results"
    if "://" not in first and not any(c in first for c in "*?[{") and Path(first).is_dir() and \
            not (Path(first) / "results.jsonl").is_file():
        return str(Path(first) / "report")
    return "report"


def load_catalog(path: str | None) -> tuple[list[str], dict[str, dict]]:
    """Clause ids (in file order) and their text/source, from the spec catalog; empty if there is none."""
    import yaml

    file = Path(path) if path else DEFAULT_CATALOG
    if not file.is_file():
        if path:
            raise ReportError(f"--catalog {path}: no such file")
        return [], {}
    try:
        data = yaml.safe_load(file.read_text(encoding="utf-8")) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise ReportError(f"{file}: cannot read the catalog: {' '.join(str(exc).split())[:200]}") from None
    clauses = data.get("clauses") if isinstance(data, dict) else None
    if not isinstance(clauses, list):
        raise ReportError(f"{file}: expected a mapping with a 'clauses' list")
    info = {str(c["id"]): {"text": " ".join(str(c.get("text", "")).split()), "source": str(c.get("source", ""))}
            for c in clauses if isinstance(c, dict) and c.get("id")}
    return list(info), info


def serve_folder(folder: Path, port: int = 8000):
    """A threaded HTTP server of `folder` on 127.0.0.1 only (never another interface: the report names hosts and
    findings), started in a thread of its own; returns (server, url). `port` 0 takes a free port."""
    import functools
    import threading
    from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer

    class Quiet(SimpleHTTPRequestHandler):
        def log_message(self, format, *args):  # noqa: A002 - the base class's name
            pass

    handler = functools.partial(Quiet, directory=str(folder))
    try:
        server = ThreadingHTTPServer(("127.0.0.1", port), handler)
    except OSError as exc:
        raise ReportError(f"--port {port}: cannot listen on 127.0.0.1: {exc.strerror or exc}") from None
    server.daemon_threads = True
    threading.Thread(target=server.serve_forever, name="report-http", daemon=True).start()
    return server, f"http://127.0.0.1:{server.server_address[1]}/"


def serve(args: argparse.Namespace) -> int:
    """`interop report --serve`: the report folder over HTTP on the loopback until Ctrl-C or SIGTERM."""
    import signal
    import threading

    inputs = list(args.inputs) or ["results"]
    out = args.out or _default_out(inputs)
    folder = Path(args.html or (out if "://" not in out else "report"))
    if not (folder / "index.html").is_file():
        raise ReportError(f"--serve: {folder}/index.html: no report there (run `interop report` first, or give "
                          "--out/--html the folder that holds it)")
    if not 0 <= args.port <= 65535:
        raise ReportError(f"--port {args.port}: expected a port from 0 to 65535")
    server, url = serve_folder(folder, args.port)
    stop = threading.Event()
    signal.signal(signal.SIGTERM, lambda *_: stop.set())
    print(f"report: serving {folder.resolve()} at {url} (127.0.0.1 only; Ctrl-C stops it)", flush=True)
    try:
        stop.wait()
    except KeyboardInterrupt:
        pass
    finally:
        server.shutdown()
        server.server_close()
    return 0


def run(args: argparse.Namespace) -> int:
    if getattr(args, "serve", False):
        return serve(args)
    from reports import allure_report, page
    from reports.job.run import run_job
    from reports.job.session import spark_session

    inputs = list(args.inputs) or ["results"]
    out = args.out or _default_out(inputs)
    catalog_ids, catalog = load_catalog(args.catalog)
    if "://" not in out:
        try:
            Path(out).mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ReportError(f"--out {out}: cannot create: {exc.strerror or exc}") from None
    missing = [i for i in inputs if "://" not in i and not i.startswith("file:") and not glob.glob(i)]
    if len(missing) == len(inputs):
        raise ReportError(f"{' '.join(missing)}: no such file or folder (expected run folders, a results folder, "
                          "a glob, or results.jsonl files)")
    from pyspark.sql import SparkSession

    t0 = time.monotonic()
    where = f"Spark Connect server {args.remote}" if args.remote else \
        args.master or "as spark-submit says, else local[*]"
    print(f"report: starting Spark ({where})", flush=True)
    # A caller's session is left running: the one spark_session() gets back below. The active session is kept per
    # thread, so a session this process made on another thread (a test fixture, say) counts too.
    shared = None if args.remote else (SparkSession.getActiveSession() or SparkSession._instantiatedSession)
    # the JVM's own start-up output (incubator modules, log4j's profile, native-hadoop) is for a log, not the user
    jvm_log = Path(out if "://" not in out else (args.html or "report")) / "spark.log"
    try:
        spark = spark_session(args.master, log=lambda line: print(f"report: {line}", flush=True), remote=args.remote,
                              jvm_log=jvm_log)
    except ReportError:
        raise
    except Exception as exc:  # noqa: BLE001 - a server that is not there, a URL gRPC refuses, a JVM that won't start
        first = next((line for line in str(exc).splitlines() if line.strip()), type(exc).__name__)
        if not args.remote:
            raise ReportError(f"Spark did not start ({args.master or 'local[*]'}): {first[:200]} "
                              f"(the JVM's output: {jvm_log})") from None
        raise ReportError(f"--remote {args.remote}: cannot reach a Spark Connect server there: {first[:200]}") \
            from None
    timings = {"spark session start": round(time.monotonic() - t0, 3)}
    if jvm_log.exists():
        print(f"report: Spark's own log: {jvm_log}", flush=True)
    try:
        result = run_job(spark, inputs, out, catalog_ids, log=lambda line: print(f"report: {line}", flush=True),
                         rebuild=args.rebuild)
    except ReportError:
        raise
    except Exception as exc:  # noqa: BLE001 - Spark's own failure (a cluster gone, a file system refusing)
        from py4j.protocol import Py4JError
        from pyspark.errors import PySparkException

        if not isinstance(exc, (PySparkException, Py4JError)):
            raise
        first = next((line for line in str(exc).splitlines() if line.strip()), type(exc).__name__)
        print(f"interop report: Spark failed: {first[:300]}", file=sys.stderr)
        return 1
    finally:
        if shared is None:
            spark.stop()
    timings.update(result.timings)
    for given in result.inputs.empty:
        print(f"report: {given}: no results.jsonl found there (ignored)", file=sys.stderr)

    allure_note = None
    html_dir = Path(args.html or (out if "://" not in out else "report"))
    if not args.no_allure:
        allure_note = allure_report.build([run.results for run in result.inputs.runs], result.data["runs"],
                                          html_dir / "allure")
        print(f"report: allure: {allure_note['text']}", flush=True)
    index = page.write(html_dir / "index.html", result.data, title=args.title, inputs=inputs, catalog=catalog,
                       timings=timings, allure=allure_note)
    totals = result.data["totals"][0]
    print(f"report: {totals['runs']} run(s), {totals['records']} records, {totals['rejects']} rejected line(s); "
          f"{len(result.plan.to_read)} run(s) read this time; tables in {out.rstrip('/')}/tables")
    print(f"report: {index.resolve()}")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="interop report", description=__doc__.split("\n\n")[0])
    add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        return run(args)
    except ReportError as exc:
        print(f"interop report: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
