"""Reference implementations: the executable specification the suites are checked against first."""

__version__ = "0.1.0"
