# The two commands a new user types: `make serve` and `make test`. Both work from a fresh clone.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin

.PHONY: serve test lint clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

# Two installs, each reinstalled only when pyproject.toml changes (a stamp records the last one). Serving needs
# only the runtime dependencies; the test suite adds the dev extra (pytest, schemathesis, Playwright, ruff, and the
# LangChain baseline `mentor bench` measures against), about 200 MB more. Installing the dev extra also installs
# everything the runtime needs, so it renews the runtime stamp too.
$(VENV)/.installed-runtime: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e .
	touch $@

$(VENV)/.installed-dev: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@ $(VENV)/.installed-runtime

serve: $(VENV)/.installed-runtime  ## install the runtime, ingest the corpus (first start) and run the service on :8000
	$(BIN)/mentor serve

# pytest exits 5 when it collected nothing: that is a failure here, not a pass.
test: $(VENV)/.installed-dev  ## install with the dev extra and run the whole test suite
	$(BIN)/pytest -q; status=$$?; if [ $$status -eq 5 ]; then echo "no tests ran" >&2; exit 1; fi; exit $$status

lint: $(VENV)/.installed-dev
	$(BIN)/ruff check mentor tests

clean:
	rm -rf $(VENV) .mentor .pytest_cache
