# Loads the harness pytest plugin for every test under this tree (suites and unit tests).
pytest_plugins = ["harness.pytest_plugin"]
