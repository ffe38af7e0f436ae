"""One package per vendor: everything the harness knows about running one product (docs/adding-a-vendor.md).

Each package declares its vendor in `__init__.py` (`VENDOR = Vendor(...)`, harness/peers/declaration.py) and holds
its providers and peers, its renderer, its container spec, its known differences (`expected.yaml`) and how to get
it. The registry (harness/peers/registry.py) finds the packages; nothing else lists them. The generic peers (a
local process, a container, a peer someone else runs) stay in harness/peers/.
"""
