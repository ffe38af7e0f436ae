"""`python -m harness.faults`: the fault proxy server (see harness/faults/server.py)."""

import sys

from .server import main

sys.exit(main())
