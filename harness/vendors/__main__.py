"""`python -m harness.vendors fetch [VENDOR...]`: get every product that has to be fetched (or the ones named) into
the cache, one after another, each through its package's own command line (`fetch=` in its declaration).

One after another on purpose: Maven 3.8 does not lock its local repository, and two fetches into ~/.m2 at once could
each write the same artifact on a first run. A product that cannot be got is reported, with the reason, and the others
are still fetched: its cases are skipped. The exit status is 0 unless a name is unknown (2): a missing product is not
an error of the setup.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import time

from ..peers.registry import VENDORS, qualified


def main(argv: list[str] | None = None) -> int:
    fetchable = [v for v in VENDORS if v.fetch]
    parser = argparse.ArgumentParser(prog="python -m harness.vendors",
                                     description="Get the products the harness runs into the cache.")
    parser.add_argument("command", choices=["fetch"])
    parser.add_argument("vendors", nargs="*", metavar="VENDOR",
                        help=f"only these (default: every one that is fetched: {', '.join(v.name for v in fetchable)})")
    args = parser.parse_args(argv)
    known = {v.name for v in fetchable}
    if unknown := [name for name in args.vendors if name not in known]:
        print(f"python -m harness.vendors fetch: unknown or not fetched vendor {unknown[0]!r} "
              f"(expected one of: {', '.join(sorted(known))})", file=sys.stderr)
        return 2
    for vendor in fetchable:
        if args.vendors and vendor.name not in args.vendors:
            continue
        module_name, _, function = qualified(vendor.name, vendor.fetch).partition(":")
        began = time.monotonic()
        status = getattr(importlib.import_module(module_name), function)(["--fetch"])
        took = time.monotonic() - began
        if status:
            print(f"{vendor.name}: not fetched (see above, {took:.0f} s); its cases will be skipped")
    return 0


if __name__ == "__main__":
    sys.exit(main())
