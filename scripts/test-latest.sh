#!/usr/bin/env bash
# `make test-latest`: what upstream ships next, seen before it reaches users (docs/dependencies.md).
#
# Installs the newest release of every dependency that pyproject.toml's ranges admit (not the lock) into a venv of its
# own, .venv-latest, prints the packages that differ from the lock, then runs the fast tier and the check that no verb
# writes anything but its own words to stderr (tests/test_cli_stderr.py, with every DeprecationWarning an error).
# FULL=1: the whole suite instead, as `make test` runs it (root, the testbed, ~12 min).
# Not part of `make test`: CI installs the lock and must not change with the calendar.
set -uo pipefail
cd "$(dirname "$0")/.."
WORKERS=${1:-4}
PYTHON=${PYTHON:-python3}
VENV=.venv-latest

"$PYTHON" -m venv --clear "$VENV" || exit 1
"$VENV/bin/pip" install -q --upgrade pip || exit 1
"$VENV/bin/pip" install -q --upgrade --upgrade-strategy eager -e '.[dev]' || exit 1

diff=$("$VENV/bin/python" -m tests.support.lockfile diff) || exit 1
printf '%s\n\n' "$diff"

status=0
# The lock's own check is the one test that must differ here: this venv is not the lock by design.
NOT_THE_LOCK=(--deselect tests/test_lock.py::test_this_venv_is_the_lock)
if [ "${FULL:-0}" = 1 ]; then  # the whole suite, as `make test` runs it (its setup and the testbed included)
    BIN=$VENV/bin bash scripts/run-suite.sh "$(( $(nproc) * 2 + 1 ))" "${NOT_THE_LOCK[@]}" || status=1
else
    "$VENV/bin/pytest" -m unit -n "$WORKERS" --dist worksteal -q -p no:cacheprovider "${NOT_THE_LOCK[@]}" || status=1
    "$VENV/bin/pytest" tests/test_cli_stderr.py -n "$WORKERS" -q -p no:cacheprovider || status=1
fi

printf '\nthe newest releases against the lock:\n%s\n' "$diff"
if [ "$status" -eq 0 ]; then
    echo "test-latest: green on the newest releases; \`make lock-upgrade\` would move the lock to them"
else
    echo "test-latest: RED on the newest releases: fix what failed before the lock moves (docs/dependencies.md)"
fi
exit "$status"
