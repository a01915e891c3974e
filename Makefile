# Ballast: make up (set up and start web + worker on SQLite), make test (whole suite on
# SQLite and PostgreSQL), make bench.
PYTHON ?= python3
VENV ?= .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed
PG_URL ?= postgres://root@127.0.0.1:5432/postgres
SQLITE_URL ?= sqlite:///var/ballast.sqlite3
# The channel layer of the live-update browser tests' PostgreSQL pass (test-postgres).
LIVE_REDIS_URL ?= redis://127.0.0.1:6379/0
PYTEST_ARGS ?=
# Python writes its bytecode caches here even where the environment says not to: without
# them every xdist worker and every process a test starts (qcluster, manage.py, daphne)
# compiles Django, DRF and the project from source again, about 10 s of CPU each on 2 cores.
unexport PYTHONDONTWRITEBYTECODE

.PHONY: install runtime prepare up test test-db test-sqlite test-postgres test-frontend test-chaos frontend static browser crash chaos lint lint-frontend api-types migrate

RUNTIME_STAMP := $(VENV)/.runtime
# Python packages through uv, about ten times faster than pip on a fresh machine: the one on
# PATH, else one installed beside the venv from PyPI. make up installs the runtime alone;
# the test, lint and bench targets add their extras.
UV ?= $(or $(shell command -v uv 2>/dev/null),$(VENV)/.tools/bin/uv)

$(VENV)/bin/python:
	$(PYTHON) -m venv --without-pip $(VENV)

$(VENV)/.tools/bin/uv: | $(VENV)/bin/python
	$(PYTHON) -m pip install --quiet --disable-pip-version-check --target $(VENV)/.tools uv

$(RUNTIME_STAMP): pyproject.toml | $(VENV)/bin/python $(UV)
	$(UV) pip install --quiet --python $(BIN)/python -e .
	touch $(RUNTIME_STAMP)

$(STAMP): pyproject.toml | $(VENV)/bin/python $(UV)
	$(UV) pip install --quiet --python $(BIN)/python -e '.[test]'
	touch $(STAMP) $(RUNTIME_STAMP)

install: $(STAMP)
runtime: $(RUNTIME_STAMP)

# The browser app: npm ci when the lock file changes, vite build when any source changes
# (nothing runs when neither did). Needs Node 20 (>= 20.19) and npm.
FRONTEND_SRC := $(shell find frontend/src -type f 2>/dev/null) frontend/package.json frontend/vite.config.ts frontend/tsconfig.json
frontend/node_modules/.installed: frontend/package-lock.json
	@command -v npm >/dev/null || { echo "make: the browser app needs Node.js 20 and npm (see README, Quick start)" >&2; exit 1; }
	cd frontend && npm ci --no-audit --no-fund --loglevel=error
	touch $@

# vite alone: the type check (tsc, about a minute on a loaded machine) runs in test-frontend.
frontend/dist/manifest.json: frontend/node_modules/.installed $(FRONTEND_SRC)
	cd frontend && npx vite build --logLevel warn

frontend: frontend/dist/manifest.json

# collectstatic into var/staticfiles (served by whitenoise when BALLAST_DEBUG=false) when the
# build or the Python packages changed.
var/.static-collected: frontend/dist/manifest.json $(RUNTIME_STAMP)
	DATABASE_URL=$(SQLITE_URL) $(BIN)/python manage.py collectstatic --noinput -v0
	@mkdir -p var && touch $@

static: var/.static-collected

test-frontend: frontend/node_modules/.installed
	cd frontend && npm run typecheck --silent && npm test --silent

# Debian's Chromium for the browser tests (Playwright's own download cannot reach its host here).
browser:
	@command -v chromium >/dev/null || (apt-get update -qq && apt-get install -y -qq chromium)

migrate: runtime
	DATABASE_URL=$(SQLITE_URL) $(BIN)/python manage.py migrate --noinput

# The browser app and the Python side build side by side (make -j2); collectstatic only when
# BALLAST_DEBUG is off (with DEBUG on, whitenoise serves frontend/dist through the finders).
# prepare = migrate + load_examples + create_login in one Django start.
UP_STATIC := $(if $(filter false False FALSE 0 no off,$(BALLAST_DEBUG)),static,)
prepare: runtime
	@mkdir -p frontend/dist
	DATABASE_URL=$(SQLITE_URL) $(BIN)/python manage.py prepare

up:
	$(MAKE) -j2 --output-sync=target frontend prepare
	$(if $(UP_STATIC),$(MAKE) static)
	DATABASE_URL=$(SQLITE_URL) $(BIN)/python manage.py serve

# The suite in tiers by cost (README "Tests"): each tier runs where it proves something and
# no more. lint and the front end's tests run side by side; the database, crash and browser
# tiers run on two pytest-xdist workers (XDIST), each with its own test database
# (pytest-django suffixes the name per worker: test_ballast_gw0, ...-test.sqlite3_gw0).
# The browser tier gets its own pytest run: Playwright keeps an event loop in its worker's
# thread, which the database tier's async_to_sync calls must not share.
# Two lanes side by side (make -j2): lint and the SQLite passes (database and crash, then
# the browser suite) in one; vitest, the PostgreSQL pass and its live subset, and the chaos
# short run in the other. Much of each pass waits on processes (qclusters, daphne, Chromium,
# PostgreSQL), so the two cores are not full with one lane. Four lanes (the browser pass and
# the chaos run on lanes of their own, the PostgreSQL pass on four xdist workers) took 21:17
# against 24:16 on a clean clone, but at load 12-13 two load-sensitive tests failed in two
# runs: kept at two until the suite's CPU work is smaller. What both lanes need is installed
# first, once (two installs into one venv at once would race).
test: install frontend browser frontend/node_modules/.installed
	$(MAKE) --no-print-directory -j2 --output-sync=target test-lane-sqlite test-lane-postgres

.PHONY: test-lane-sqlite test-lane-postgres test-sqlite-db test-sqlite-browser
test-lane-sqlite:
	$(MAKE) --no-print-directory lint test-sqlite-db test-sqlite-browser
test-lane-postgres:
	$(MAKE) --no-print-directory test-frontend test-postgres test-chaos

XDIST ?= -n 2 --dist loadfile
# The PostgreSQL pass alone: 17:50 on two workers (each used a fifth of a core while its tests
# waited) and 11:21 on four; `make test XDIST_PG="-n 4 --dist loadfile"` on a quiet machine.
XDIST_PG ?= -n 2 --dist loadfile
# pyproject's addopts keep test databases between runs (--reuse-db, the quick local loop);
# make's passes always build them afresh from the migrations, and each names its 15 slowest
# tests (where a pass's time goes, in every CI log).
PYTEST := $(BIN)/pytest --create-db --durations=15 --durations-min=5
# The database tier: no browser, no real processes (marker process: manage.py, qcluster,
# daphne, redis-server, fresh interpreters), no crash or chaos tests.
TIER_DB := not browser and not process
test-db: install
	DATABASE_URL=sqlite:///var/test-run.sqlite3 $(PYTEST) -m "$(TIER_DB)" $(XDIST) $(PYTEST_ARGS)
	BALLAST_TEST_DB_ONLY=1 DATABASE_URL=$(PG_URL) $(PYTEST) -m "$(TIER_DB)" $(XDIST) $(PYTEST_ARGS)

# SQLite, the embedded default: the database tier and the crash tier (a real qcluster
# SIGKILLed on the default database), and the whole browser suite (the embedded poller as
# the live path), each on test databases of its own (var/test-run*, var/test-browser*), so
# the two passes may run at once. The rest of the process tier runs once, on PostgreSQL.
test-sqlite: test-sqlite-db test-sqlite-browser
test-sqlite-db: install
	DATABASE_URL=sqlite:///var/test-run.sqlite3 $(PYTEST) -m "not browser and (not process or crash)" $(XDIST) $(PYTEST_ARGS)
test-sqlite-browser: install frontend browser
	DATABASE_URL=sqlite:///var/test-browser.sqlite3 $(PYTEST) -m browser $(XDIST) $(PYTEST_ARGS)

# PostgreSQL: everything but the browser suite (database, process and crash tiers), then only
# the live-update browser tests (marker live) again with Redis as the channel layer (the push
# path production uses; one worker, since both would push to the same Redis groups).
# BALLAST_TEST_DB_ONLY=1: tests that use neither a database nor a real process ran in the
# SQLite pass and are left out here (tests/conftest.py; marker every_db keeps one that
# depends on the database anyway).
test-postgres: install frontend browser
	BALLAST_TEST_DB_ONLY=1 DATABASE_URL=$(PG_URL) $(PYTEST) -m "not browser" $(XDIST_PG) $(PYTEST_ARGS)
	DATABASE_URL=$(PG_URL) BALLAST_CHANNELS_REDIS_URL=$(LIVE_REDIS_URL) $(PYTEST) -m live tests/e2e $(PYTEST_ARGS)

crash: install
	DATABASE_URL=$(PG_URL) $(PYTEST) -m crash $(PYTEST_ARGS)

# The chaos suite (tests/chaos, README "Chaos suite"; needs root, iproute2, faketime and
# redis-server, which .ci/run installs). test-chaos: its short run (under 3 minutes, part of
# make test; -rP prints the figures). chaos: the long run, CHAOS_RUNS runs (default 1,000;
# CHAOS_* variables in tests/chaos/suite.py tune it); figures in var/chaos/report-*.json.
CHAOS_RUNS ?= 1000
test-chaos: install
	BALLAST_CHAOS=1 DATABASE_URL=$(PG_URL) $(PYTEST) -m chaos -rP tests/chaos $(PYTEST_ARGS)

chaos: install
	CHAOS_RUNS=$(CHAOS_RUNS) $(BIN)/python -m tests.chaos

# The front end's API types (frontend/src/api/schema.d.ts), generated with openapi-typescript
# from the OpenAPI document drf-spectacular builds (the one /api/schema/ serves), offline: no
# server, no database. Plug-in node kinds (BALLAST_EXTRA_NODE_KINDS) would join the kind
# enums, so they are left out; a schema warning (an enum named twice...) is an error.
API_TYPES := frontend/src/api/schema.d.ts
define api_types_to
	@mkdir -p var
	env -u BALLAST_EXTRA_NODE_KINDS DATABASE_URL=$(SQLITE_URL) $(BIN)/python manage.py spectacular --skip-checks --fail-on-warn --file var/openapi.yml
	cd frontend && npx openapi-typescript ../var/openapi.yml --silent --output $(1)
endef

api-types: install frontend/node_modules/.installed
	$(call api_types_to,src/api/schema.d.ts)

# ESLint (typescript-eslint and React's hooks rules, frontend/eslint.config.js), no import
# circle in the browser app (madge), and the committed API types the same as a fresh
# generation: a serializer change without make api-types fails here.
lint-frontend: install frontend/node_modules/.installed
	cd frontend && npm run lint --silent
	$(call api_types_to,../var/schema.check.d.ts)
	@diff -u $(API_TYPES) var/schema.check.d.ts >/dev/null || { diff -u $(API_TYPES) var/schema.check.d.ts | head -40; \
		echo "make: $(API_TYPES) is stale (the API's schema changed): run make api-types and commit it" >&2; exit 1; }

# ruff, the layering contracts in pyproject.toml ([tool.importlinter]) and mypy over the
# product tree ([tool.mypy] files and exclude say what that is), then the front end's lint.
lint: install
	$(BIN)/ruff check .
	$(BIN)/lint-imports --no-logo
	$(BIN)/mypy
	$(MAKE) --no-print-directory lint-frontend

# Every benchmark on PostgreSQL (database ballast_bench on the local server, BENCH_PG_DB
# overrides) and SQLite (var/bench/), with LangGraph and DBOS side by side; installs the
# bench extra first. One JSON line per figure; all of them in bench/results/<timestamp>.jsonl;
# ends with issue 11's targets, met or not. Under 30 minutes on 2 cores.
.PHONY: bench bench-extra bench-headline bench-report
bench-extra: install
	$(BIN)/python -c "import langgraph.checkpoint.postgres, dbos, pyinstrument, websockets.sync.client, locust" 2>/dev/null || $(UV) pip install --quiet --python $(BIN)/python -e '.[bench]'

bench: bench-extra
	$(BIN)/python -m bench all

# The headline alone (Ballast, LangGraph, DBOS and the floor interleaved in one process,
# rotated rounds) on PostgreSQL: under 5 minutes.
bench-headline: bench-extra
	$(BIN)/python -m bench headline-all

# docs/performance.md's and the README's figure tables from one results file
# (RESULTS=bench/results/<timestamp>.jsonl; default the newest).
bench-report: install
	$(BIN)/python -m bench report $(RESULTS) --write
