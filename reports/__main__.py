"""`python -m reports ...`: the same as `interop report ...`."""

import sys

from reports.cli import main

sys.exit(main())
