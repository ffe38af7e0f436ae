"""Fuzzing sessions: stateful property-based programs (Hypothesis), hostile frames on raw TCP, and the
configuration differential (generated config files read by the reference and by qdrouterd or Artemis).

`session.py` holds what the modes share (the target, findings, the session's result records, budgets,
progress); `stateful.py`, `frames.py` and `configs.py` are the modes. Peers of a topology start the same way as
for `interop run` (harness.peers.launch.start_topology): this package adds no second way to start them. The
configs mode starts no topology: it starts each product on one file at a time (config_judges.py, forkserver.py,
artemis_check.py, startwatch.py), which is what it judges.
"""
