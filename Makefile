# Two entry points (see README): `make run` (the main job) and `make test` (the project's tests).
# Both create .venv and install the project into it on first use; nothing else needs to be installed.
PYTHON ?= python3
VENV := .venv
STAMP := $(VENV)/.installed-stamp

.PHONY: setup setup-test system-packages qdrouterd products toxiproxy report-jvm-cache run test clean client-stacks docs

$(STAMP): pyproject.toml | system-packages
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --disable-pip-version-check -e '.[test]'
	touch $(STAMP)

# Debian packages listed in system-packages.txt (real peers, browsers): installed when missing.
system-packages:
	@bash scripts/install-system-packages.sh system-packages.txt

# The Allure command line for `interop report` (npm package, offline renderer; needs Java).
ALLURE := reports/node_modules/.installed-stamp
$(ALLURE): reports/package.json reports/package-lock.json | system-packages
	npm ci --prefix reports --no-audit --no-fund --loglevel=error
	touch $(ALLURE)

# The report JVM's ahead-of-time cache (JDK 25 or later; reports/jvm.py): a training run of the report, about a
# minute, once per JDK and Spark version. Without it the report works, only its JVM warms up more slowly.
report-jvm-cache: $(STAMP)
	$(VENV)/bin/python -m reports.jvm --build-cache || echo "report JVM cache: not built (see above); the report runs without it"

# Qpid Dispatch Router for the router suites. No package registry has it (Debian dropped it), so where the
# workplace's source archive sits beside this clone it is built from it (about 30 s, once; a second run only
# checks). Elsewhere put a qdrouterd on PATH yourself (docs/getting-products.md); without one its cases
# are skipped with the reason. The previous release (QDROUTERD_PREVIOUS, `--peer router=qdrouterd@1.18.0`) is
# built beside it as qdrouterd-1.18.0 where its archive is there too (about 30-60 s more, once).
QDROUTERD_INSTALL ?= ../shared/peers/qdrouterd/install.sh
QDROUTERD_PREVIOUS ?= 1.18.0
QDROUTERD_WS ?= /opt/qpid-dispatch-1.19.0-ws
qdrouterd: system-packages
	@# From a scratch folder: its build leaves a config.sh in the folder it is started from.
	@if [ -f "$(QDROUTERD_INSTALL)" ]; then cd "$${TMPDIR:-/tmp}" && bash "$(abspath $(QDROUTERD_INSTALL))"; \
	elif ! command -v qdrouterd >/dev/null; then \
	  echo "qdrouterd: not on PATH and no $(QDROUTERD_INSTALL); its cases will be skipped (docs/getting-products.md)"; fi
	@if [ -f "$(dir $(QDROUTERD_INSTALL))qpid-dispatch-$(QDROUTERD_PREVIOUS).tar.gz" ]; then \
	  cd "$${TMPDIR:-/tmp}" && QDROUTERD_VERSION=$(QDROUTERD_PREVIOUS) bash "$(abspath $(QDROUTERD_INSTALL))"; \
	elif ! command -v qdrouterd-$(QDROUTERD_PREVIOUS) >/dev/null; then \
	  echo "qdrouterd $(QDROUTERD_PREVIOUS): no source archive beside $(QDROUTERD_INSTALL); router=qdrouterd@$(QDROUTERD_PREVIOUS) is skipped"; fi
	@# The same release built with libwebsockets beside it (about 20 s, once): the suites' `http: yes` listeners
	@# (suites/websocket; harness/vendors/qdrouterd/build.py, websocket_binary). Its own scratch folder (WORK): the
	@# script empties its default one, which the build above uses.
	@if [ -f "$(QDROUTERD_INSTALL)" ]; then cd "$${TMPDIR:-/tmp}" && WEBSOCKETS=1 PREFIX=$(QDROUTERD_WS) \
	  BINDIR=$(QDROUTERD_WS)/wrappers WORK="$${TMPDIR:-/tmp}/qpid-dispatch-build-ws" bash "$(abspath $(QDROUTERD_INSTALL))"; fi

# The client stacks of the type interop suite and --client (harness/drivers.py): rhea from npm (clients/rhea),
# the Qpid Proton C++ shim built against Debian's libqpid-proton-cpp12-dev (clients/cpp; the driver also builds it on
# first use), and the Qpid JMS shim, one jar built by Maven from Maven Central (clients/jms; ~/.m2 is its cache, a
# second run with nothing changed does nothing). A stack that cannot be installed has its cases skipped, with the
# reason.
RHEA := clients/rhea/node_modules/.installed-stamp
$(RHEA): clients/rhea/package.json clients/rhea/package-lock.json | system-packages
	npm ci --prefix clients/rhea --no-audit --no-fund --loglevel=error
	touch $(RHEA)
JMS_JAR := clients/jms/target/jms-shim.jar
$(JMS_JAR): clients/jms/pom.xml $(wildcard clients/jms/src/main/java/interop/*.java) | system-packages
	@if ! command -v mvn >/dev/null || ! command -v java >/dev/null; then \
	  echo "jms client stack: not built (needs mvn and a JDK 11+ on PATH); its cases will be skipped"; \
	else cd clients/jms && mvn -q -B package || echo "jms client stack: not built (see above); its cases will be skipped"; fi
client-stacks: system-packages $(RHEA) $(JMS_JAR)
	$(MAKE) -s -C clients/cpp || echo "cpp client stack: not built (see above); its cases will be skipped"

# The products fetched from Maven Central (ActiveMQ Artemis, ActiveMQ Classic, and any vendor package that declares
# `fetch=`: `python -m harness.vendors fetch`), into a cache outside the checkout ($$INTEROP_CACHE, default
# ~/.cache/amqp-interop), pinned and checked: fetched once, a second run only checks. Without Maven or the network
# their cases are skipped, with the reason (docs/getting-products.md); ARTEMIS_HOME and ACTIVEMQ_HOME name installs of
# your own. After the JMS shim and one after the other: Maven 3.8 does not lock its local repository, and two fetches
# into ~/.m2 at once could each write the same artifact on a first run, as `make -j` would start them.
products: $(STAMP) | $(JMS_JAR)
	$(VENV)/bin/python -m harness.vendors fetch

# The real Toxiproxy (toxiproxy-server 2.12.0) for sessions that choose it as the fault proxy (--fault-proxy
# toxiproxy, or INTEROP_FAULT_PROXY=toxiproxy): built with Go into $$INTEROP_CACHE (default ~/.cache/amqp-interop),
# once; a second run only checks it. Without Go it says so; cases that ask for it are skipped with the reason.
toxiproxy: $(STAMP)
	$(VENV)/bin/python -m harness.faults.toxiproxy_server

# What the tests need; `make run` adds the report JVM's cache (a training run of the report, minutes), which no
# test needs: without it the report's JVM only warms up more slowly. `make test` makes it with -j: the venv (about
# 27 s in a fresh clone, most of it writing pyspark's 480 MB) while the client stacks build (about 11 s); the Debian
# packages go first (every part that needs one orders itself after system-packages).
setup-test: system-packages qdrouterd $(STAMP) $(ALLURE) client-stacks products toxiproxy
setup: setup-test report-jvm-cache

# The main job, the nightly (`interop nightly`, harness/nightly.py; docs/nightly.md): into one
# results store (results/, or $$INTEROP_RESULTS), one step after another, each printed as [i/N] with its wall time:
#   1. the configuration differential (`interop fuzz --configs`) against qdrouterd and Artemis;
#   2. per product present (the reference router and broker, qdrouterd, Artemis, ActiveMQ Classic, RabbitMQ: the
#      matrix's probes decide; an absent one is listed as skipped with the reason) a hostile-frame session and a
#      stateful session (`interop fuzz [--frames] --role ROLE`), fixed seeds;
#   3. the side-by-side benchmarks with --results: bench/routing.py (reference router vs qdrouterd), bench/broker.py
#      (the reference broker vs every broker present), bench/network.py (the network of brokers, per vendor);
#   4. the conformance matrix (matrix.yaml: the reference peers plus every real product found here);
#   5. the Spark report over every run in the store (results/report/index.html).
# BUDGET=quick (the default: a newcomer's first run, 20 s sessions and short benchmarks) or BUDGET=nightly (5 min
# sessions, the benchmarks' own sizes); docs/nightly.md gives what each costs. Every step runs even when one fails; each
# step's output is kept in results/nightly/<stamp>/; `make run` fails at the end, after the report, when a step
# failed or a session found something. NIGHTLY_ARGS adds options (e.g. --only fuzz,bench --products artemis).
# deploy/ has a systemd service and timer that run this every night in a checkout that keeps its results/.
BUDGET ?= quick
NIGHTLY_ARGS ?=
run: setup
	$(VENV)/bin/interop nightly --budget $(BUDGET) $(NIGHTLY_ARGS)

# The documentation (docs/, mkdocs.yml) as a site in site/: --strict, so a link to a missing page or anchor fails
# it. `make test` builds it too, as a step beside the fuzz sessions.
docs: $(STAMP)
	$(VENV)/bin/mkdocs build --strict

# The project's own tests, in timed steps (the last lines print each step's wall time):
#
# 1. reference: the unit tests (tests/) and every suite against the reference router and broker, on three
#    pytest-xdist workers ($(REFERENCE_WORKERS); harness/parallel.py: files as units, the report's Spark modules as two
#    units handed out first, so that the Spark JVMs' minutes run beside the suites' waits: the suites wait far more
#    than they compute, so a third worker pays on two cores, docs/performance-log.md); it ends with
#    its 20 slowest tests (--durations=20), the first place to look when the step grows;
# 2. products: every suite that involves a broker against each real broker found here, those that involve a
#    router against qdrouterd, and the paired suites with qdrouterd in front of each broker, as the cells of
#    tests/products.yaml run by `interop run -j $(PRODUCT_JOBS)`: cells side by side, the longest first, two of one
#    product together too (each skipped, with the reason, where its product cannot run). Its output is a line per
#    cell, the failures in full at the end;
# 3. side by side, each a timed step of its own (scripts/side-by-side.sh; their outputs are printed one after
#    another when all have ended):
#    - the fault suites once more through the real toxiproxy-server instead of the harness's own proxy, so the
#      claim that ours speaks Toxiproxy's API is checked by Toxiproxy itself;
#    - fuzz: a short (30 s) fuzzing session of each mode on the reference router and broker (and the frames mode
#      once more behind SASL PLAIN and TLS: --secured), fixed seeds so that CI runs the same programs and hostile
#      cases every time (`interop fuzz`; longer sessions with random seeds are for a nightly job or by hand). A
#      session that finds something exits 1. Each session has its own peers and ports; run together, the frames
#      sessions kept their pace (65-68 cases/s against 63 alone) and their sentinel's longest gap (115-142 ms,
#      against 331 ms alone in CI; a stall is 1 s);
#    - fuzz: the configuration differential (--configs, docs/fuzzing.md), 30 s each with the
#      fixed seed: generated qdrouterd.conf files read by the reference router and by qdrouterd 1.19, broker.xml
#      files by the reference broker and by Artemis 2.40; a file they judge differently, unless recorded in
#      harness/fuzz/config_known.py, exits 1.
#
# A failed step does not stop the later ones (their results are worth having); `make test` fails at the end.
# Every run of these tests writes its records under $(TEST_RESULTS) (INTEROP_RESULTS, the default of every
# --results), never into the checkout's results/: that folder is what `make run` reports on, and test runs there
# showed up in the report as targets of their own. The last step checks that results/ gained no run.
FUZZ_BUDGET ?= 30s
FUZZ_SEED ?= 15
PRODUCT_JOBS ?= 6
REFERENCE_WORKERS ?= 3
TEST_RESULTS ?= $(or $(TMPDIR),/tmp)/interop-test-results
STEPS = $(TEST_RESULTS).steps
STEP = scripts/timed-step.sh $(STEPS)
FUZZ = $(VENV)/bin/interop fuzz --budget $(FUZZ_BUDGET) --seed $(FUZZ_SEED)
test: export INTEROP_RESULTS = $(TEST_RESULTS)
# The report tests' JVM compiles with C1 only: their reports are small, and C2's compiler threads were a sixth of
# their CPU (tests/test_report.py alone on a quiet machine: 173 -> 142 busy CPU-s, the same wall time). A report a
# user runs keeps the JVM's own compilers; INTEROP_REPORT_JAVA_OPTS set by the caller wins here too.
test: export INTEROP_REPORT_JAVA_OPTS ?= -XX:TieredStopAtLevel=1
test:
	@mkdir -p "$(TEST_RESULTS)"; rm -f "$(STEPS)" "$(STEPS)".*.out
	@ls results 2>/dev/null | sort > "$(TEST_RESULTS).before" || true
	@$(STEP) setup $(MAKE) -s -j 4 --output-sync=target setup-test
	-@$(STEP) "reference: unit tests and every suite, -n $(REFERENCE_WORKERS)" $(VENV)/bin/python -m pytest -q \
	  -n $(REFERENCE_WORKERS) --dist loadfile --durations=20
	-@$(STEP) "products: tests/products.yaml, -j $(PRODUCT_JOBS)" \
	  $(VENV)/bin/interop run --matrix tests/products.yaml -j $(PRODUCT_JOBS)
	-@scripts/side-by-side.sh $(STEPS) $(TEST_RESULTS).side-by-side \
	  "faults through the real toxiproxy-server=INTEROP_FAULT_PROXY=toxiproxy $(VENV)/bin/python -m pytest -q \
	  suites/faults suites/network/test_faults.py suites/brokerconnections/test_mirror_faults.py \
	  tests/test_fault_proxy.py tests/test_toxiproxy_real.py" \
	  "fuzz: router programs=$(FUZZ) --peer router=reference" \
	  "fuzz: broker programs=$(FUZZ) --peer broker=reference" \
	  "fuzz: router frames=$(FUZZ) --frames --peer router=reference" \
	  "fuzz: broker frames=$(FUZZ) --frames --peer broker=reference" \
	  "fuzz: router frames, SASL PLAIN + TLS=$(FUZZ) --frames --secured --peer router=reference" \
	  "fuzz: router configs vs qdrouterd=$(FUZZ) --configs --peer router=qdrouterd" \
	  "fuzz: broker configs vs Artemis=$(FUZZ) --configs --peer broker=artemis" \
	  "docs: every link and anchor=$(VENV)/bin/mkdocs build --strict --quiet -d $(TEST_RESULTS).site"
	@ls results 2>/dev/null | sort | comm -13 "$(TEST_RESULTS).before" - > "$(TEST_RESULTS).added"; \
	if [ -s "$(TEST_RESULTS).added" ]; then echo "make test: these runs were written into results/ (expected under \
	$(TEST_RESULTS)):"; cat "$(TEST_RESULTS).added"; exit 1; fi; echo "test records: $(TEST_RESULTS)"
	@scripts/timed-step.sh --summary "$(STEPS)"

clean:
	rm -rf $(VENV) results build *.egg-info
