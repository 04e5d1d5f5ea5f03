# replay-actor: `make help` lists the targets.
PYTHON ?= python3
VENV   := .venv
PY     := $(VENV)/bin/python
STAMP  := $(VENV)/.installed-dev
# make test installs every integration's extra: CI must run those tests, not skip them.
EXTRAS := dev,live,openai,anthropic,gemini,serve,inspect,pydantic-ai,pytest,ray,interop,evals,clock,mcp
BSTAMP := $(VENV)/.installed-bench
# CrewAI's and LlamaIndex's OpenAI LLM's latest releases need openai<3, so they get an
# environment of their own, inside .venv (tests/attribution/test_frameworks.py and
# tests/integrations/test_framework_misses.py run them under replay-actor run).
CREWAI := $(VENV)/crewai
CSTAMP := $(CREWAI)/.installed
# ragas's and AutoGen's latest releases would downgrade what the extras above install
# (ragas: openai, langchain-openai, rich, tenacity; autogen-ext: protobuf), so they share
# an environment of their own too (tests/docs/test_eval_tools.py runs them under run).
ETOOLS := $(VENV)/evaltools
ESTAMP := $(ETOOLS)/.installed

.DEFAULT_GOAL := help
.PHONY: help test test-tools lint typecheck pytest node-deps node-tools browser faketime wrk crewai evaltools demo demo-sdk bench soak clean

help: ## list the targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  make %-10s %s\n", $$1, $$2}'

$(PY):
	$(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip

# Installs say what they install and show each package as it comes (pip's lines, npm's
# http log, apt's): a first `make test` takes minutes here and must not sit silent.
PIP := -m pip install --progress-bar off --disable-pip-version-check

$(STAMP): pyproject.toml | $(PY)
	@echo "make: installing replay-actor and its extras ($(EXTRAS)) into $(VENV) with pip (several minutes the first time)"
	$(PY) $(PIP) -e '.[$(EXTRAS)]'
	touch $@

$(CSTAMP): pyproject.toml | $(PY)
	@echo "make: installing CrewAI and LlamaIndex's OpenAI LLM into $(CREWAI), an environment of their own (a few minutes)"
	$(PYTHON) -m venv $(CREWAI)
	$(CREWAI)/bin/python $(PIP) --upgrade pip
	$(CREWAI)/bin/python $(PIP) -e '.[crewai,llamaindex]'
	touch $@

crewai: $(CSTAMP) ## install CrewAI and LlamaIndex's OpenAI LLM into .venv/crewai (their own environment)

$(ESTAMP): pyproject.toml | $(PY)
	@echo "make: installing ragas and AutoGen into $(ETOOLS), an environment of their own (a few minutes)"
	$(PYTHON) -m venv $(ETOOLS)
	$(ETOOLS)/bin/python $(PIP) --upgrade pip
	$(ETOOLS)/bin/python $(PIP) -e '.[serve,ragas,autogen]'
	touch $@

evaltools: $(ESTAMP) ## install ragas and AutoGen into .venv/evaltools (their own environment)

$(BSTAMP): pyproject.toml | $(PY)
	@echo "make: installing the benchmarks' extras into $(VENV) with pip"
	$(PY) $(PIP) -e '.[$(EXTRAS),bench]'
	touch $@

test: $(STAMP) $(CSTAMP) node-deps browser faketime ## install into .venv, then run ruff, mypy --strict and pytest
	$(VENV)/bin/ruff check .
	$(VENV)/bin/ruff format --check .
	$(VENV)/bin/mypy
	$(PY) -m pytest -m "not tools and not slow"

# Whole evaluation tools recording, replaying and comparing as docs/eval-tools.md pastes
# them (minutes each), and the other tests marked slow (a framework's whole run, the crash
# and journal soaks): a target of their own, so that `make test` stays within its 20
# minutes; .ci/run runs both.
test-tools: $(STAMP) $(CSTAMP) $(ESTAMP) node-tools ## run docs/eval-tools.md's commands with each real tool, and the slow tests (pytest -m "tools or slow")
	$(PY) -m pytest -m "tools or slow"

lint: $(STAMP) ## ruff only
	$(VENV)/bin/ruff check . && $(VENV)/bin/ruff format --check .

typecheck: $(STAMP) ## mypy --strict only
	$(VENV)/bin/mypy

pytest: $(STAMP) $(CSTAMP) node-deps browser faketime ## pytest only (make test-tools runs the tools' and the slow tests)
	$(PY) -m pytest -m "not tools and not slow"

# The front door's tests drive the npm openai, @anthropic-ai/sdk and Vercel AI SDK (ai,
# @ai-sdk/openai, @ai-sdk/google) packages from Node (tests/frontdoor/test_node.py), and promptfoo's eval
# (tests/frontdoor/test_incidental.py); where node is missing those tests skip.
NODE_PACKAGES := openai @anthropic-ai/sdk ai @ai-sdk/openai @ai-sdk/anthropic @ai-sdk/google promptfoo
node-deps: ## install the npm packages the Node tests use into .cache/node (if node exists)
	@if command -v node >/dev/null 2>&1; then \
		for p in $(NODE_PACKAGES); do test -d .cache/node/node_modules/$$p || missing=1; done; \
		test -z "$$missing" || { \
		echo "make: installing the npm packages $(NODE_PACKAGES) into .cache/node with npm (promptfoo is about 1.4 GB: a few minutes; each fetch is logged)"; \
		npm install --loglevel http --no-audit --no-fund --prefix .cache/node $(NODE_PACKAGES); }; \
	else echo "make: no node: the Node tests will skip"; fi

# The Node evaluation tools of docs/eval-tools.md (OpenAI Agents JS, Mastra), in a prefix
# of their own (.cache/node-tools): @openai/agents needs openai 7, the Node tests above
# drive openai 6. `@latest` because npm on a Node older than their engines (>= 22) would
# quietly pick an old release instead.
NODE_TOOLS := @openai/agents @mastra/core @ai-sdk/openai
node-tools: ## install the Node evaluation tools for make test-tools into .cache/node-tools (if node exists)
	@if command -v node >/dev/null 2>&1; then \
		for p in $(NODE_TOOLS); do test -d .cache/node-tools/node_modules/$$p || missing=1; done; \
		test -z "$$missing" || { \
		echo "make: installing the latest npm releases of $(NODE_TOOLS) into .cache/node-tools with npm (about 220 MB: a minute or so; each fetch is logged)"; \
		npm install --loglevel http --no-audit --no-fund --prefix .cache/node-tools $(addsuffix @latest,$(NODE_TOOLS)); }; \
	else echo "make: no node: the Node evaluation tools' tests will skip"; fi

demo: $(STAMP) ## run the example evaluation: baseline and candidate against a bundled fixture
	$(PY) examples/demo.py

demo-sdk: $(STAMP) ## run an unchanged openai-SDK app (two calls and a stream) under replay
	$(PY) examples/openai_app/app.py

bench: $(BSTAMP) wrk ## run benchmarks/, print the table, rewrite docs/benchmarks.md
	$(PY) -m benchmarks

# $(call apt_install,PACKAGE,WHY,WITHOUT IT): Debian's PACKAGE installed system-wide where
# apt-get runs as root (an update first only if the install fails); otherwise, or if it
# still fails, say what happens without it. Never fails the make.
apt_install = { if [ "$$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then \
	echo "make: installing Debian's $(1) system-wide with apt-get, as root ($(2))"; \
	DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $(1) \
	|| { apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends $(1); } \
	|| echo "$@: $(1) could not be installed; $(3)"; \
	else echo "$@: no $(1) (needs root and apt-get); $(3)"; fi; }

# P20a loads the front door with Debian's wrk (benchmarks/load.py); without it that row
# reports why and P20b is measured alone.
wrk: ## install Debian's wrk for the load benchmark, P20a (root with apt-get only)
	@command -v wrk >/dev/null 2>&1 || $(call apt_install,wrk,for P20a,P20a will say so)

soak: $(STAMP) ## random-kill soak: 1,000 cycles of killed owners, actors, zygotes, copies (minutes; not in make test)
	$(PY) -m tests.support.soak --cycles 1000

clean: ## remove the virtual environment and caches
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache .hypothesis

# The attribution example's HTML page is opened in headless Chromium
# (tests/examples/test_attribution.py); Debian's package is installed where apt-get runs as
# root, and the test skips where no Chromium can be had.
# Debian's libfaketime (0.9.10): tests/frontdoor/test_clock.py proves that run refuses it
# with its reason (its time.sleep bug); provider.clock itself uses the clock extra's own.
faketime: ## install Debian's libfaketime for the clock's refusal test (root with apt-get only)
	@ls /usr/lib/*/faketime/libfaketime*.so.1 >/dev/null 2>&1 || $(call apt_install,libfaketime,for the clock's refusal test,its refusal test will skip)

browser: ## install Debian's chromium for the HTML tests (root with apt-get only)
	@command -v chromium >/dev/null 2>&1 || command -v chromium-browser >/dev/null 2>&1 || $(call apt_install,chromium,for the HTML test; a few minutes,the HTML test will skip)
