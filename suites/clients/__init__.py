"""Routing and broker semantics through the client stack chosen with --client (harness/drivers.py)."""
