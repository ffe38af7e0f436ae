"""Benchmark clients: one sender and one receiver per stack (C on proton's proactor, Python on proton's
Container), with one command line and one JSON report line, so bench/routing.py drives both alike."""
