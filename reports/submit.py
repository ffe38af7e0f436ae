"""`spark-submit reports/submit.py INPUTS... --out DIR`: the report as a file Spark can submit (the same as
`interop report`). spark-submit runs a file, not a module: this one makes `reports` importable, and keeps its own
folder off the path so that the modules beside it (html.py, ...) cannot shadow others."""

import sys
from pathlib import Path

if __package__ in (None, ""):
    _here = str(Path(__file__).resolve().parent)
    sys.path[:] = [p for p in sys.path if p and str(Path(p).resolve()) != _here]
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from reports.cli import main  # noqa: E402

if __name__ == "__main__":
    sys.exit(main())
