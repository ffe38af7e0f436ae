"""`python -m reference.broker -c broker.xml`: the same as `interop broker -c broker.xml`."""

import sys

from .server import main

sys.exit(main())
