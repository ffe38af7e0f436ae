"""`python -m reference.router -c FILE`: the same as `interop router -c FILE`."""

import sys

from .server import main

sys.exit(main())
