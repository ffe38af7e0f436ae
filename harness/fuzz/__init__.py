"""Fuzzing sessions: stateful property-based programs (Hypothesis) and hostile frames on raw TCP.

`session.py` holds what both modes share (the target, findings, the session's result records, budgets,
progress); `stateful.py` and `frames.py` are the two modes. Peers start the same way as for `interop run`
(harness.peers.launch.start_topology): this package adds no second way to start them.
"""
