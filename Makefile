# The two commands a new user types: `make serve` and `make test`. Both work from a fresh clone.
PYTHON ?= $(shell command -v python3.11 || command -v python3)
VENV := .venv
BIN := $(VENV)/bin

.PHONY: serve test lint eval clean

$(BIN)/python:
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install --quiet --upgrade pip

# Reinstall only when pyproject.toml changes; the stamp records the last install.
$(VENV)/.installed: pyproject.toml | $(BIN)/python
	$(BIN)/pip install --quiet -e '.[dev]'
	touch $@

serve: $(VENV)/.installed  ## install, ingest the corpus (first start) and run the service on :8000
	$(BIN)/mentor serve

# pytest exits 5 when it collected nothing: that is a failure here, not a pass.
test: $(VENV)/.installed  ## install and run the whole test suite
	$(BIN)/pytest -q; status=$$?; if [ $$status -eq 5 ]; then echo "no tests ran" >&2; exit 1; fi; exit $$status

lint: $(VENV)/.installed
	$(BIN)/ruff check mentor tests

clean:
	rm -rf $(VENV) .mentor .pytest_cache
