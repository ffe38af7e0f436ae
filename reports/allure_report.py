"""The Allure HTML report of the latest run that has Allure results, where the Allure command line is installed.

The command line comes from the npm package `allure-commandline` (`make setup` installs it into
reports/node_modules from reports/package.json) or from `allure` on PATH; it needs Java. Without it the report
says so and the rest is unaffected.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from urllib.parse import unquote, urlparse

HERE = Path(__file__).resolve().parent
LOCAL_ALLURE = HERE / "node_modules" / ".bin" / "allure"
ALLURE_RESULTS = "allure-results"
TIMEOUT_S = 300


def allure_binary() -> str | None:
    if LOCAL_ALLURE.exists():
        return str(LOCAL_ALLURE)
    return shutil.which("allure")


def _local_folder(uri: str) -> Path | None:
    parsed = urlparse(uri)
    if parsed.scheme not in ("", "file"):
        return None
    return Path(unquote(parsed.path)).parent


def build(results_files: list[str], runs: list[dict], out: Path) -> dict:
    """{'text': what happened, 'href': relative link to the Allure report or None}."""
    binary = allure_binary()
    if binary is None:
        return {"text": "not built: the Allure command line is not installed (npm allure-commandline; make setup "
                        "installs it)", "href": None}
    if shutil.which("java") is None and not os.environ.get("JAVA_HOME"):
        return {"text": "not built: Allure needs Java (no java on PATH, JAVA_HOME unset)", "href": None}
    folders = {}
    for uri in results_files:
        folder = _local_folder(uri)
        if folder is not None and (folder / ALLURE_RESULTS).is_dir() and any((folder / ALLURE_RESULTS).iterdir()):
            folders[folder.name] = folder / ALLURE_RESULTS
    latest = next((r["run_id"] for r in sorted(runs, key=lambda r: r["run_index"], reverse=True)
                   if r["run_id"] in folders), None)
    if latest is None:
        return {"text": "not built: no run among the inputs has Allure results (interop run writes "
                        "<run>/allure-results)", "href": None}
    try:
        done = subprocess.run([binary, "generate", str(folders[latest]), "-o", str(out), "--clean"],
                              capture_output=True, text=True, timeout=TIMEOUT_S)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return {"text": f"not built: allure generate failed: {exc}", "href": None}
    if done.returncode != 0 or not (out / "index.html").is_file():
        tail = " ".join((done.stderr or done.stdout).split())[-300:]
        return {"text": f"not built: allure generate exited {done.returncode}: {tail}", "href": None}
    return {"text": f"run {latest}: {out / 'index.html'}", "href": f"{out.name}/index.html", "run_id": latest}
