# Stream Join Lab. `make help` lists the targets; every target installs what it needs.
SHELL := /bin/bash
PYTHON ?= python3
VENV ?= .venv
PY := $(VENV)/bin/python
LAB := $(VENV)/bin/joinlab
STAMP := $(VENV)/.installed-$(shell cat pyproject.toml | cksum | cut -d' ' -f1)
PATTERN ?= tweet-views
PYTEST_ARGS ?=

.DEFAULT_GOAL := help
.PHONY: help install check-java demo test bench broker-start broker-stop broker-status verify clean

help: ## List the targets
	@grep -hE '^[a-zA-Z_-]+:.*?## ' $(MAKEFILE_LIST) | awk 'BEGIN{FS=":.*?## "}{printf "  %-15s %s\n", $$1, $$2}'

$(STAMP): pyproject.toml
	@$(PYTHON) -c 'import sys; sys.exit(0 if sys.version_info >= (3, 10) else "Python 3.10+ is required (found " + sys.version.split()[0] + ")")'
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -e '.[test]'
	@rm -f $(VENV)/.installed-* && touch $@

install: $(STAMP) ## Create .venv and install the lab (runs by itself before every target)

check-java: ## Check that Java 17+ is on PATH (Spark needs it)
	@bash scripts/check-java.sh

demo: $(STAMP) check-java ## Run PATTERN (default tweet-views) end to end on the embedded broker and verify it
	$(LAB) demo $(PATTERN)

test: $(STAMP) check-java ## Run the whole test suite (unit + real broker + real Spark)
	$(PY) -m pytest $(PYTEST_ARGS)

bench: $(STAMP) check-java ## Print the benchmark table (client, Spark source, job, plain Python, latency)
	$(LAB) bench

broker-start: $(STAMP) ## Start the embedded Kafka-protocol broker in the background
	$(LAB) broker start

broker-stop: $(STAMP) ## Stop the embedded broker
	$(LAB) broker stop

broker-status: $(STAMP) ## Show whether the embedded broker runs, and where
	$(LAB) broker status

verify: $(STAMP) ## Verify PATTERN's output topic against its batch reference
	$(LAB) verify $(PATTERN)

clean: ## Remove the virtualenv and all local lab state (.lab/)
	-$(LAB) broker stop 2>/dev/null
	rm -rf $(VENV) .lab
