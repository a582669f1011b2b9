# Set-up is part of every target: a fresh clone needs only `make chat`, `make run` or `make test`.
VENV ?= .venv
PYTHON ?= python3
CHARACTER ?= detective_bilbao
CHAT_USER ?= admin

$(VENV)/.installed: pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(VENV)/bin/pip install --quiet --upgrade pip
	$(VENV)/bin/pip install --quiet -e ".[dev]"
	touch $@

.PHONY: install chat run test test-postgres lint bench mutants
install: $(VENV)/.installed

chat: install
	$(VENV)/bin/companion chat --character $(CHARACTER) --user $(CHAT_USER)

run: install
	$(VENV)/bin/companion run

lint: install
	$(VENV)/bin/ruff check .

# Tests run side by side in TEST_WORKERS processes (pytest-xdist): most of them wait on
# sockets and subprocesses, so more workers than cores pays; TEST_WORKERS=0 runs them in one.
TEST_WORKERS ?= 4
PYTEST = $(VENV)/bin/pytest -q -n $(TEST_WORKERS) --dist worksteal

test: install
	$(VENV)/bin/ruff check .
	$(PYTEST)

# The tests that can reach the store (tests/store_rule.py; the others run the same code on
# either backend) on one throwaway PostgreSQL 15 server (started and stopped by
# tests/pg_server.py, its URL in COMPANION_TEST_DATABASE_URL), shared by the workers: each test
# gets a database of its own (tests/pg_fixtures.py).
# A machine without the server binaries gets them from Debian's packages when run as root.
PG_BIN ?= /usr/lib/postgresql/15/bin
test-postgres: install
	@test -x $(PG_BIN)/initdb || [ "$$(id -u)" != 0 ] || \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql-15)
	$(VENV)/bin/python -m tests.pg_server -- $(PYTEST)

# Curated breaks of the privacy and integrity rules (tests/mutants/*.toml): each must fail a test.
mutants: install
	$(VENV)/bin/python tests/mutants/run.py

LOCOMO ?= ../shared/data/locomo_dev.json

bench: install
	$(VENV)/bin/python -m bench context_growth $(LOCOMO)
	$(VENV)/bin/python -m bench scene
	$(VENV)/bin/python -m bench profile $(LOCOMO)
	$(VENV)/bin/python -m bench locomo_retrieval $(LOCOMO)
	$(VENV)/bin/python -m bench throughput --sweep 1,2,4,6
	$(VENV)/bin/python -m bench throughput_floor
	$(VENV)/bin/python -m bench overhead
	$(VENV)/bin/python -m bench memory_bound
	$(VENV)/bin/python -m bench poison
	$(VENV)/bin/python -m bench scaleout
	$(VENV)/bin/python -m bench purge_traffic --turns 1e5 --runs 5
