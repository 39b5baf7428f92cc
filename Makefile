# The README's two commands: `make demo` and `make test`. Both work on a fresh clone with only
# Python 3.11, git and make; everything else is installed here.
PYTHON ?= python3
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint typecheck unit system-deps clean bench

$(STAMP): pyproject.toml
	$(PYTHON) -m venv $(VENV)
	$(BIN)/pip install -q --upgrade pip
	$(BIN)/pip install -q -e '.[dev]'
	touch $(STAMP)

demo: $(STAMP)
	$(BIN)/opsconsole demo

# The testbed needs sshd, systemd-nspawn and debootstrap on the machine (installed with apt when missing).
system-deps:
	bash scripts/system-deps.sh

lint: $(STAMP)
	$(BIN)/ruff check console tests benchmarks
	$(BIN)/ruff format --check console tests benchmarks

typecheck: $(STAMP)
	$(BIN)/mypy

test: $(STAMP) system-deps lint typecheck
	$(BIN)/pytest tests

bench: $(STAMP)
	for f in benchmarks/*.py; do $(BIN)/python $$f || exit 1; done

clean:
	rm -rf $(VENV) .mypy_cache .ruff_cache .pytest_cache
