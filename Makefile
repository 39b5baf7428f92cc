# The README's two commands: `make demo` and `make test`. Both work on a fresh clone with only
# Python 3.11, git and make; everything else is installed here.
# The venv is made from Debian's own python3 where it is 3.11 or later and can make one (python3-venv): Debian
# builds it with profile-guided optimisation and LTO, which a default source build (pyenv's) has not, and the suite
# runs on it with about a sixth less CPU (docs/measured.md). Elsewhere, the python3 on PATH.
PYTHON ?= $(shell /usr/bin/python3 -c 'import ensurepip, sys; ensurepip.version(); sys.exit(sys.version_info < (3, 11))' \
	2>/dev/null && echo /usr/bin/python3 || echo python3)
VENV := .venv
BIN := $(VENV)/bin
STAMP := $(VENV)/.installed

.PHONY: demo test lint typecheck unit system-deps clean bench lock lock-upgrade test-latest

# Python keeps its compiled code (in __pycache__, ignored by git) even where the environment says not to write
# bytecode: every process the suite starts (the CLI, the stand-in, its nvidia-smi, each pytest worker's
# assertion-rewritten tests) would compile its modules again each time, a third of a CLI's start (docs/measured.md).
unexport PYTHONDONTWRITEBYTECODE

# Installs come from the lock (requirements.txt: exact versions with their hashes, the whole closure of the project
# and its dev tools), so that a fresh machine tomorrow gets what CI passed on today; pyproject.toml keeps the ranges a
# user installing the package as a library gets. The venv is made anew when the lock changes, so nothing stays from
# an older one. The editable install builds with the lock's setuptools (no build isolation, which would fetch the
# newest). The project's own modules, and the tests as pytest rewrites their asserts, are compiled once here: else
# each of the first test run's workers compiles all of them (8 CPU-s of `make unit`'s first run, docs/measured.md).
$(STAMP): pyproject.toml requirements.txt
	$(PYTHON) -m venv --clear $(VENV)
	$(BIN)/pip install -q --require-hashes --no-deps -r requirements.txt
	$(BIN)/pip install -q --no-deps --no-build-isolation -e .
	$(BIN)/python -m compileall -q -j 0 console tests benchmarks >/dev/null
	$(BIN)/pytest --collect-only -q -p no:cacheprovider >/dev/null
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

# The fast tier (tests/tiers.py): pure code and the console's screens on scripted hosts. Run it before each commit.
# Two workers a core: a screen test waits on the app's timers a third of its time, which another worker fills
# (on 2 cores: 90 s with 4 workers, 129 s with 2). Worksteal: a worker that runs out takes tests from the others
# instead of idling at the end of its share (55 s against 61 s with xdist's default; docs/measured.md).
UNIT_WORKERS ?= $(shell echo $$(( $$(nproc) * 2 )))
unit: $(STAMP)
	$(BIN)/pytest -m unit -n $(UNIT_WORKERS) --dist worksteal -q

# The whole suite. What it needs built (the testbed's Debian tree and packages, SGLang's bench_serving.py) is built
# first, before pytest's clock starts, with its own time in the output (tests/suite_setup.py).
# Most of it waits on real processes (containers booting, servers starting), so it runs in
# parallel workers that take waiting tests from each other. Beside them, the tests that measure time against a
# server run one at a time, at the top CPU weight so that none of the workers' CPU is in their figures (marker
# `alone`, tests/tiers.py; scripts/run-suite.sh).
# Two workers a core and one more: the tests marked `long` wait on real time, mostly idle, and each worker starts
# with its share of them while the others use the CPU (on 2 cores: 590 s with 3 workers, 455 s with 5;
# docs/measured.md).
TEST_WORKERS ?= $(shell echo $$(( $$(nproc) * 2 + 1 )))
test: $(STAMP) system-deps lint typecheck
	BIN=$(BIN) bash scripts/run-suite.sh $(TEST_WORKERS)

bench: $(STAMP)
	for f in benchmarks/*.py; do $(BIN)/python $$f || exit 1; done

# The lock (docs/dependencies.md). uv writes it in pip's requirements format with hashes and no index address, so
# that pip installs it from this machine's own configuration. `make lock` adds what pyproject.toml gained and keeps
# every other pin; `make lock-upgrade` moves every pin to the newest release within pyproject.toml's ranges: commit
# that refresh on its own, with `make test` run on it. requirements-runtime.txt is the project's runtime closure at
# the same versions: what the testbed's hosts install (tests/testbed/cache.py).
LOCK := $(BIN)/uv pip compile pyproject.toml --generate-hashes --universal --python-version 3.11 -q \
	--custom-compile-command 'make lock'
lock: $(STAMP)
	$(LOCK) --extra dev -o requirements.txt
	$(LOCK) -c requirements.txt -o requirements-runtime.txt

lock-upgrade: $(STAMP)
	$(LOCK) --extra dev --upgrade -o requirements.txt
	$(LOCK) -c requirements.txt -o requirements-runtime.txt

# What upstream ships next, before it reaches users: the newest release of every dependency in a venv of its own
# (.venv-latest), the packages that differ from the lock, the fast tier and the check that no verb writes anything
# but its own words to stderr. Not part of `make test`: CI must not change with the calendar (docs/dependencies.md).
# FULL=1: the whole suite on them instead, as `make test` runs it.
test-latest:
	PYTHON=$(PYTHON) FULL=$(FULL) bash scripts/test-latest.sh $(UNIT_WORKERS)

clean:
	rm -rf $(VENV) .venv-latest .mypy_cache .ruff_cache .pytest_cache
