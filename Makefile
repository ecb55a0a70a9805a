# The two commands a new user types: `make serve` and `make test`. Both work from a fresh clone.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin

.PHONY: serve test docs lint clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

# Two installs, each reinstalled only when pyproject.toml changes (a stamp records the last one). Serving needs
# only the runtime dependencies; the test suite adds the dev extra (pytest, schemathesis, Playwright, ruff, and the
# LangChain baseline `mentor bench` measures against), about 200 MB more. Installing the dev extra also installs
# everything the runtime needs, so it renews the runtime stamp too.
# The runtime install is not --quiet: the first one fetches ~2 GB (torch, ONNX Runtime, Chroma) for minutes, and
# pip's own lines and download bars show it moving.
$(VENV)/.installed-runtime: pyproject.toml | $(BIN)/python
	@echo "installing mentor's runtime dependencies into $(VENV) (the first time ~2 GB: a few minutes)"
	$(BIN)/pip install -e .
	touch $@

$(VENV)/.installed-dev: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@ $(VENV)/.installed-runtime

serve: $(VENV)/.installed-runtime  ## install the runtime, ingest the corpus (first start) and run the service on :8000
	$(BIN)/mentor serve

# pytest exits 5 when it collected nothing: that is a failure here, not a pass.
test: $(VENV)/.installed-dev  ## install with the dev extra and run the whole test suite
	$(BIN)/pytest -q; status=$$?; if [ $$status -eq 5 ]; then echo "no tests ran" >&2; exit 1; fi; exit $$status

# The documentation site (MkDocs + Material, from the dev extra) on :8001, mentor's own :8000 left free; it rebuilds
# on every edit under docs/. `make test` builds it with --strict (tests/test_docs_site.py): a broken link fails.
docs: $(VENV)/.installed-dev  ## serve the documentation site on http://127.0.0.1:8001
	NO_MKDOCS_2_WARNING=1 $(BIN)/mkdocs serve -a 127.0.0.1:8001

lint: $(VENV)/.installed-dev
	$(BIN)/ruff check mentor tests

clean:
	rm -rf $(VENV) .mentor .pytest_cache
