"""The report's tables, a module per kind of table: most have a per-run part (run_<kind>, made once as a run is
read into the store) and the aggregate over every run built from it."""
