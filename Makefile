# Two entry points (see README): `make run` (the main job) and `make test` (the project's tests).
# Both create .venv and install the project into it on first use; nothing else needs to be installed.
PYTHON ?= python3
VENV := .venv
STAMP := $(VENV)/.installed-stamp

.PHONY: setup system-packages qdrouterd report-jvm-cache run test clean client-stacks

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check -e '.[test]'
	touch $(STAMP)

# Debian packages listed in system-packages.txt (real peers, browsers): installed when missing.
system-packages:
	@bash scripts/install-system-packages.sh system-packages.txt

# The Allure command line for `interop report` (npm package, offline renderer; needs Java).
ALLURE := reports/node_modules/.installed-stamp
$(ALLURE): reports/package.json reports/package-lock.json
	npm ci --prefix reports --no-audit --no-fund --loglevel=error
	touch $(ALLURE)

# The report JVM's ahead-of-time cache (JDK 25 or later; reports/jvm.py): a training run of the report, about a
# minute, once per JDK and Spark version. Without it the report works, only its JVM warms up more slowly.
report-jvm-cache: $(STAMP)
	$(VENV)/bin/python -m reports.jvm --build-cache || echo "report JVM cache: not built (see above); the report runs without it"

# Qpid Dispatch Router for the router suites. No package registry has it (Debian dropped it), so where the
# workplace's source archive sits beside this clone it is built from it (about 30 s, once; a second run only
# checks). Elsewhere put a qdrouterd on PATH yourself (README: "Getting a qdrouterd"); without one its cases
# are skipped with the reason.
QDROUTERD_INSTALL ?= ../shared/peers/qdrouterd/install.sh
qdrouterd:
	@# From a scratch folder: its build leaves a config.sh in the folder it is started from.
	@if [ -f "$(QDROUTERD_INSTALL)" ]; then cd "$${TMPDIR:-/tmp}" && bash "$(abspath $(QDROUTERD_INSTALL))"; \
	elif ! command -v qdrouterd >/dev/null; then \
	  echo "qdrouterd: not on PATH and no $(QDROUTERD_INSTALL); its cases will be skipped (README: Getting a qdrouterd)"; fi

# The client stacks of the type interop suite and --client (harness/drivers.py): rhea from npm (clients/rhea), and
# the Qpid Proton C++ shim built against Debian's libqpid-proton-cpp12-dev (clients/cpp; the driver also builds it on
# first use). A stack that cannot be installed has its cases skipped, with the reason.
RHEA := clients/rhea/node_modules/.installed-stamp
$(RHEA): clients/rhea/package.json clients/rhea/package-lock.json
	npm ci --prefix clients/rhea --no-audit --no-fund --loglevel=error
	touch $(RHEA)
client-stacks: $(RHEA)
	$(MAKE) -s -C clients/cpp || echo "cpp client stack: not built (see above); its cases will be skipped"

setup: system-packages qdrouterd $(STAMP) $(ALLURE) report-jvm-cache client-stacks

# The main job: the conformance matrix (matrix.yaml: the reference peers plus every real product found
# here), then the Spark report over every run in results/ (results/report/index.html).
run: setup
	$(VENV)/bin/interop run --matrix matrix.yaml --report

# The project's own tests (unit tests under tests/) and every suite against the reference peers; then the
# suites that involve a broker against RabbitMQ, those that involve a router against qdrouterd, and those that
# involve both against qdrouterd in front of RabbitMQ (each skipped, with the reason, where its product cannot
# run). The two fallback cases that fail in some runs of that last pairing are RabbitMQ's crash when
# qdrouterd drains its fallback autolink: recorded, not strict, in suites/expected/rabbitmq.yaml.
#
# The type interop suite (suites/types: every AMQP type, all 9 ordered pairs of the python, C++ and rhea client stacks)
# runs in the first line through the reference router and broker (about 5 s), then through RabbitMQ (its broker cases,
# under 2 minutes: RabbitMQ takes about 3 s to reset each connection a value breaks) and qdrouterd (its router cases,
# about 1 minute).
#
# Then a short (30 s) fuzzing session of each mode on the reference router and broker (and the frames mode once more
# behind SASL PLAIN and TLS: --secured), fixed seeds so that CI runs
# the same programs and hostile cases every time (`interop fuzz`; longer sessions with random seeds are
# for a nightly job or by hand). A session that finds something exits 1.
#
# Every run of these tests writes its records under $(TEST_RESULTS) (INTEROP_RESULTS, the default of every
# --results), never into the checkout's results/: that folder is what `make run` reports on, and test runs there
# showed up in the report as targets of their own. The last step checks that results/ gained no run.
BROKER_SUITES := suites/broker suites/brokered suites/linkroutes suites/fallback suites/faults suites/robustness \
                 suites/brokerconnections suites/network $(wildcard suites/security/test_broker_*.py)
ROUTER_SUITES := suites/routing suites/mesh suites/brokered suites/linkroutes suites/fallback suites/faults \
                 suites/robustness suites/brokerconnections/test_peers.py $(wildcard suites/security/test_router_*.py)
PAIRED_SUITES := suites/fallback suites/faults suites/brokered suites/linkroutes
FUZZ_BUDGET ?= 30s
FUZZ_SEED ?= 15
TEST_RESULTS ?= $(or $(TMPDIR),/tmp)/interop-test-results
test: export INTEROP_RESULTS = $(TEST_RESULTS)
test: setup
	@ls results 2>/dev/null | sort > "$(TEST_RESULTS).before" || true
	$(VENV)/bin/python -m pytest -q
	$(VENV)/bin/python -m pytest -q $(BROKER_SUITES) --peer broker=rabbitmq
	$(VENV)/bin/python -m pytest -q $(ROUTER_SUITES) --peer router=qdrouterd
	$(VENV)/bin/python -m pytest -q $(PAIRED_SUITES) --peer router=qdrouterd --peer broker=rabbitmq
	$(VENV)/bin/python -m pytest -q suites/types -k broker --peer broker=rabbitmq
	$(VENV)/bin/python -m pytest -q suites/types -k router --peer router=qdrouterd
	$(VENV)/bin/interop fuzz --peer router=reference --budget $(FUZZ_BUDGET) --seed $(FUZZ_SEED)
	$(VENV)/bin/interop fuzz --peer broker=reference --budget $(FUZZ_BUDGET) --seed $(FUZZ_SEED)
	$(VENV)/bin/interop fuzz --frames --peer router=reference --budget $(FUZZ_BUDGET) --seed $(FUZZ_SEED)
	$(VENV)/bin/interop fuzz --frames --peer broker=reference --budget $(FUZZ_BUDGET) --seed $(FUZZ_SEED)
	$(VENV)/bin/interop fuzz --frames --secured --peer router=reference --budget $(FUZZ_BUDGET) --seed $(FUZZ_SEED)
	@ls results 2>/dev/null | sort | comm -13 "$(TEST_RESULTS).before" - > "$(TEST_RESULTS).added"; \
	if [ -s "$(TEST_RESULTS).added" ]; then echo "make test: these runs were written into results/ (expected under \
	$(TEST_RESULTS)):"; cat "$(TEST_RESULTS).added"; exit 1; fi; echo "test records: $(TEST_RESULTS)"

clean:
	rm -rf $(VENV) results build *.egg-info
