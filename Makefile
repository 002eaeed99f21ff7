# Stream Join Lab. `make help` lists the targets; every target installs what it needs.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
LAB := $(VENV)/bin/joinlab
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)
PATTERN ?= tweet-views
PYTEST_ARGS ?=
ARGS ?=
SOLUTION ?=
HIDDEN ?=
SERVICE ?=
GENERATORS ?=
ROOM ?=
NATIVE_FLAGS = $(if $(filter-out 0 no false,$(GENERATORS)),--generators) $(if $(filter-out 0 no false,$(ROOM)),--room)

.DEFAULT_GOAL := help
.PHONY: help install check-java demo test check soak bench broker-start broker-stop broker-status verify \
	up up-native down ps logs reset clean interview interview-check compose-test docker-engine

help: ## List the targets
	@grep -hE '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN{FS=":.*?## "}{printf "  %-15s %s\n", $$1, $$2}'

# Also made again when the steps that change the installed PySpark or the venv change.
$(STAMP): pyproject.toml joinlab/jars.py
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 10) else "Python 3.10+ is required (found " + sys.version.split()[0] + ")")'
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[test,lab]'
	$(PY) -m joinlab.jars
	@rm -f $(VENV)/.installed-* && touch $@

install: $(STAMP) ## Create .venv, install the lab, fetch Kafka and Spark's connector with Maven, make Spark's class archive (runs by itself before every target)
	@$(PY) -m joinlab.jars --check >/dev/null 2>&1 || $(PY) -m joinlab.jars
	@$(PY) -m joinlab.class_archive --check >/dev/null 2>&1 || $(PY) -m joinlab.class_archive

check-java: ## Check that Java 17+ is on PATH (Spark needs it)
	@bash scripts/check-java.sh

demo: install check-java ## Run PATTERN (default tweet-views) end to end on the embedded broker and verify it
	$(LAB) demo $(PATTERN)

test: install check-java ## Run the whole test suite (unit + real broker + real Spark): what CI runs
	$(PY) -m pytest $(PYTEST_ARGS)

# The everyday loop: every pattern's pure tests (TwsTester, no Spark session), the pages' facts,
# and one live pattern (tweet views on Apache Kafka and Spark, against its reference).
CHECK_TESTS = $(wildcard tests/test_*_unit.py) tests/test_patterns.py tests/test_docs.py tests/test_generators.py \
	"tests/test_tweet_views.py::test_final_views_equal_the_batch_reference[shuffled-1]"
check: install check-java ## The pure tests and one live pattern, in under 3 minutes
	$(PY) -m pytest -q $(CHECK_TESTS) $(PYTEST_ARGS)

SOAK_MINUTES ?= 10
SOAK_RATE ?= 20
soak: install check-java ## Every pattern at SOAK_RATE events/s for SOAK_MINUTES (default 10): state, memory, lag, verified
	$(PY) -m perf.soak --minutes $(SOAK_MINUTES) --rate $(SOAK_RATE) $(ARGS)

bench: install check-java ## Per pattern: tiny batch, steady rate, ceiling; tweet views' latency, and in fresh processes beside its JVM peer (studies: perf/)
	$(PY) -m perf.bench $(ARGS)

interview: install ## Prepare a candidate workspace for PATTERN in workspace/PATTERN (no solution in it) and say what next
	$(LAB) interview pack $(PATTERN) $(ARGS)

interview-check: install check-java ## Grade PATTERN's SOLUTION (default: workspace/PATTERN's file, else the stub); HIDDEN=exercises/hidden adds the held-back scenarios; REPORT=FILE.md writes the interviewer's report
	$(LAB) interview check $(PATTERN) $(if $(SOLUTION),--solution $(SOLUTION)) $(if $(HIDDEN),--hidden $(HIDDEN)) $(if $(REPORT),--report $(REPORT)) $(ARGS)

broker-start: install ## Start the embedded Apache Kafka broker in the background (data in .lab/kafka)
	$(LAB) broker start

broker-stop: install ## Stop the embedded broker
	$(LAB) broker stop

broker-status: install ## Show whether the embedded broker runs, where, and its Kafka version
	$(LAB) broker status

verify: install ## Verify PATTERN's output topic against its batch reference
	$(LAB) verify $(PATTERN)

up: install ## Start the lab: Docker Compose if usable (Compose v2, base images here or pullable; ARGS="--scale spark-worker=2"), else up-native; ROOM=1: the native lab with JupyterHub in front, for a workshop (as root)
	@if [ -n "$(filter-out 0 no false,$(ROOM))" ]; then bash scripts/check-java.sh || exit 1; exec $(LAB) lab up $(NATIVE_FLAGS); fi; \
	bash scripts/compose-up.sh $(ARGS); status=$$?; \
	if [ $$status -eq 0 ]; then mkdir -p "$${LAB_HOME:-.lab}" && echo compose > "$${LAB_HOME:-.lab}/stack"; \
	elif [ $$status -eq 3 ]; then echo "make up: falling back to the same lab as local processes (make up-native)"; \
		bash scripts/check-java.sh && $(LAB) lab up $(NATIVE_FLAGS); \
	else exit $$status; fi

compose-test: ## Build the image, start the Compose stack, run 2 patterns through it, verify, remove it all
	@bash scripts/compose-test.sh

docker-engine: ## Linux without Docker Desktop: install + start Docker, Compose v2, a local base image (root)
	@bash scripts/docker-engine.sh

up-native: install check-java ## Start broker, topics, Spark master + worker, JupyterLab as local processes (GENERATORS=1 adds generators)
	$(LAB) lab up $(NATIVE_FLAGS)

down: install ## Stop whichever lab `make up` started (Compose or native) and wait until it is gone
	$(LAB) lab down

ps: install ## List the lab's services: state, pid, memory (RSS of each process tree), URL
	@$(LAB) lab ps

logs: install ## Follow the services' logs (SERVICE=spark-worker for one)
	@$(LAB) lab logs $(if $(SERVICE),--service $(SERVICE))

reset: install ## Stop the lab and delete its state: ./.lab (checkpoints, logs, Kafka's data; not the jars) and Compose volumes
	-$(LAB) lab down --volumes
	$(LAB) broker stop
	find .lab -mindepth 1 -maxdepth 1 ! -name jars -exec rm -rf {} +

clean: ## Remove the virtualenv and all local lab state (.lab/)
	-$(LAB) lab down 2>/dev/null
	rm -rf $(VENV) .lab
