"""The JVM the report's Spark session runs on: which JDK, its options, and its ahead-of-time cache.

Most of a report's CPU time on a small machine is the JVM warming up, not the data: compiling Spark's planner,
Janino and the generated code while the job runs. Two things cut that down:

* a newer JDK. Spark 4 runs on 17, 21 and 25; a 25 does the same job with less CPU. When JAVA_HOME is not set and
  the default `java` is older, the newest JDK 21+ found under /usr/lib/jvm is used (and logged).
  INTEROP_REPORT_JAVA_HOME chooses one explicitly; JAVA_HOME set by the user is always respected.
* an ahead-of-time cache (JDK 25+, JEP 483/514/515): the classes Spark loads, already parsed and linked, and the
  method profiles of a training run, so the JIT compiles the hot code without first profiling it.
  `python -m reports.jvm --build-cache` (run by `make setup`) writes one by running the report over small
  synthetic runs; every later session uses it. A cache that no longer matches the JDK or Spark's jars is ignored
  by the JVM (the session is then only slower), and its name carries both versions, so an upgrade builds anew.

The cache lives in $INTEROP_CACHE_DIR (default ~/.cache/interop-harness); delete it at any time, or set
INTEROP_REPORT_AOT_CACHE=off to run without it.
"""

from __future__ import annotations

import argparse
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

SUPPORTED_MAJORS = (17, 21, 25)  # the Java versions Spark 4 runs on
JVM_ROOTS = ("/usr/lib/jvm",)
# One set of options for the training run and every session: a cache is only used by a JVM started like the one
# that wrote it. The parallel collector costs less CPU than G1 on two cores; Spark's generated methods are often
# larger than HotSpot's 8000-byte limit for compiling a method, and would otherwise run in the interpreter.
BASE_OPTIONS = ("-XX:+UseParallelGC", "-XX:-DontCompileHugeMethods")


@dataclass(frozen=True)
class Jdk:
    home: str | None      # None: whatever `java` Spark's launcher finds (JAVA_HOME or PATH)
    major: int            # 0 when unknown
    version: str          # as its `release` file says, or "default"
    why: str              # one line for the log


def _release_version(home: Path) -> str | None:
    try:
        text = (home / "release").read_text(errors="replace")
    except OSError:
        return None
    found = re.search(r'^JAVA_VERSION="([^"]+)"', text, re.M)
    return found.group(1) if found else None


def _major(version: str | None) -> int:
    found = re.match(r"(\d+)(?:\.(\d+))?", version or "")
    if not found:
        return 0
    first = int(found.group(1))
    return int(found.group(2) or 0) if first == 1 else first  # 1.8 -> 8


def _default_java_version() -> str | None:
    java = shutil.which("java")
    if not java:
        return None
    return _release_version(Path(os.path.realpath(java)).parent.parent)


def choose_jdk(env: dict[str, str] | None = None, roots: tuple[str, ...] = JVM_ROOTS) -> Jdk:
    """The JDK for the report's JVM (see the module's doc). Raises ValueError for an INTEROP_REPORT_JAVA_HOME that
    is not a JDK."""
    env = os.environ if env is None else env
    chosen = env.get("INTEROP_REPORT_JAVA_HOME")
    if chosen:
        if not os.access(Path(chosen) / "bin" / "java", os.X_OK):
            raise ValueError(f"INTEROP_REPORT_JAVA_HOME={chosen}: no bin/java there (expected a JDK folder)")
        version = _release_version(Path(chosen)) or "?"
        return Jdk(chosen, _major(version), version, f"JDK {version} at {chosen} (INTEROP_REPORT_JAVA_HOME)")
    if env.get("JAVA_HOME"):
        home = env["JAVA_HOME"]
        version = _release_version(Path(home)) or "?"
        return Jdk(home, _major(version), version, f"JDK {version} at {home} (JAVA_HOME)")
    default = _default_java_version()
    candidates = []
    for root in roots:
        for home in sorted(Path(root).glob("*")) if Path(root).is_dir() else []:
            version = _release_version(home)
            if version and _major(version) in SUPPORTED_MAJORS and os.access(home / "bin" / "java", os.X_OK):
                candidates.append((_major(version), version, str(home)))
    best = max(candidates, default=None)
    if best and best[0] >= 21 and best[0] > _major(default):
        return Jdk(best[2], best[0], best[1], f"JDK {best[1]} at {best[2]} (newest found; the default java is "
                                               f"{default or 'unknown'}; INTEROP_REPORT_JAVA_HOME chooses another)")
    return Jdk(None, _major(default), default or "default", f"the default java ({default or 'version unknown'})")


def cache_dir(env: dict[str, str] | None = None) -> Path:
    env = os.environ if env is None else env
    return Path(env.get("INTEROP_CACHE_DIR") or Path.home() / ".cache" / "interop-harness")


def cache_path(jdk: Jdk, env: dict[str, str] | None = None) -> Path | None:
    """Where this JDK's cache for this Spark installation lives; None where the JDK has no AOT cache (before 25).

    The JVM accepts a cache only with the class path it was trained on, i.e. Spark's jars at the same place: the
    name carries a fingerprint of the pyspark folder, so that two checkouts (two venvs) do not share a cache that
    one of them would silently ignore."""
    if jdk.major < 25:
        return None
    import pyspark

    where = hashlib.sha1(str(Path(pyspark.__file__).resolve().parent).encode()).hexdigest()[:8]
    name = f"report-jdk{re.sub(r'[^0-9A-Za-z.+-]', '_', jdk.version)}-spark{pyspark.__version__}-{where}.aot"
    return cache_dir(env) / name


def java_options(jdk: Jdk, env: dict[str, str] | None = None) -> list[str]:
    """Options for the session's JVM: the base options, the cache where one was built, then the user's own
    (INTEROP_REPORT_JAVA_OPTS, last so that they win)."""
    env = os.environ if env is None else env
    options = list(BASE_OPTIONS)
    cache = cache_path(jdk, env)
    if cache is not None and cache.is_file() and env.get("INTEROP_REPORT_AOT_CACHE", "on") != "off":
        # a cache that does not match is skipped by the JVM; say nothing about it on the report's output
        options += [f"-XX:AOTCache={cache}", "-Xlog:aot=off", "-Xlog:cds=off"]
    return options + env.get("INTEROP_REPORT_JAVA_OPTS", "").split()


def apply(jdk: Jdk) -> None:
    """Point Spark's launcher at the chosen JDK (before the session's JVM starts)."""
    if jdk.home:
        os.environ["JAVA_HOME"] = jdk.home


# ---- building the cache -------------------------------------------------------------------------------------------

def build_cache(jdk: Jdk | None = None, force: bool = False, log=print) -> int:
    """Write the AOT cache of the chosen JDK; 0 when written or already there, or when this JDK has none."""
    jdk = jdk or choose_jdk()
    target = cache_path(jdk)
    if target is None:
        log(f"report JVM cache: not built: {jdk.why} has no ahead-of-time cache (JDK 25 or later has)")
        return 0
    if target.is_file() and not force:
        log(f"report JVM cache: {target} is there ({target.stat().st_size / 1e6:.0f} MB)")
        return 0
    target.parent.mkdir(parents=True, exist_ok=True)
    partial = target.with_name(target.name + ".partial")
    partial.unlink(missing_ok=True)
    log(f"report JVM cache: a training run of the report on {jdk.why}, writing {target} (about a minute)")
    started = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="interop-jvm-training-") as work:
        # the training run writes a cache; it must not read the one it replaces
        env = dict(os.environ, INTEROP_REPORT_AOT_CACHE="off", INTEROP_REPORT_JAVA_OPTS=" ".join(
            [f"-XX:AOTCacheOutput={partial}", *os.environ.get("INTEROP_REPORT_JAVA_OPTS", "").split()]))
        done = subprocess.run([sys.executable, "-m", "reports.jvm_cache", work], env=env,
                              capture_output=True, text=True)
    if done.returncode != 0 or not partial.is_file():
        partial.unlink(missing_ok=True)
        tail = (done.stderr or done.stdout).strip().splitlines()[-3:]
        log(f"report JVM cache: the training run failed (exit {done.returncode}): {' | '.join(tail)}")
        return 1
    partial.replace(target)
    log(f"report JVM cache: written in {time.monotonic() - started:.0f}s ({target.stat().st_size / 1e6:.0f} MB)")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m reports.jvm", description=__doc__.split("\n\n")[0])
    parser.add_argument("--build-cache", action="store_true", help="write the AOT cache for the chosen JDK")
    parser.add_argument("--force", action="store_true", help="with --build-cache: rebuild an existing cache")
    args = parser.parse_args(argv)
    try:
        jdk = choose_jdk()
    except ValueError as exc:
        print(f"interop report: {exc}", file=sys.stderr)
        return 2
    if args.build_cache:
        return build_cache(jdk, force=args.force)
    cache = cache_path(jdk)
    print(f"JVM: {jdk.why}")
    print(f"AOT cache: {cache if cache and cache.is_file() else 'none' if cache is None else f'{cache} (not built)'}")
    print(f"options: {' '.join(java_options(jdk))}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
