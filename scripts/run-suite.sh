#!/usr/bin/env bash
# `make test`'s pytest part: the whole suite in two runs side by side (tiers: tests/tiers.py).
#
#   bulk   every test not marked `alone`, in WORKERS parallel workers: CPU-bound, ~1,000 CPU-s on 2 cores.
#   timed  the `alone` tests, one at a time: they hold a measured time to a known truth within a few percent, and
#          mostly wait (~8 % of a core). The bulk runs in a cgroup marked idle (cpu.idle): the kernel gives it only
#          the CPU the timed tests leave, and a timed test that wakes takes a core from it at once. So their figures
#          carry none of the bulk's CPU, as when they ran after it, and their ~4 min of waiting no longer adds to
#          the run (docs/measured.md). The testbed hosts they boot are theirs, outside that cgroup.
#
# Without a cgroup to mark idle (not root, or a cgroup v2 tree without the cpu controller) the timed tests run after
# the bulk instead.
set -uo pipefail
BIN=${BIN:-.venv/bin}
WORKERS=${1:?usage: run-suite.sh WORKERS}

idle_cgroup() {
    local base cg
    for base in /sys/fs/cgroup/cpu /sys/fs/cgroup; do  # cgroup v1's cpu hierarchy, or a v2 tree
        [ -f "$base/cgroup.procs" ] && [ -w "$base" ] || continue
        cg="$base/opsconsole-bulk-$$"
        mkdir "$cg" 2>/dev/null || continue
        # v2 has cpu.idle only where the cpu controller is enabled for the children
        if [ -f "$cg/cpu.idle" ] && echo 1 >"$cg/cpu.idle" 2>/dev/null; then echo "$cg"; return; fi
        rmdir "$cg"
    done
}

remove_cgroup() {
    # What the bulk left running goes back to the parent, so the cgroup can go.
    local pid
    while read -r pid; do echo "$pid" >"$(dirname "$cg")/cgroup.procs" 2>/dev/null; done <"$cg/cgroup.procs"
    rmdir "$cg"
}

BULK=("$BIN/pytest" tests -m "not alone" -n "$WORKERS" --dist worksteal)

cg=$(idle_cgroup)
if [ -z "$cg" ]; then
    echo "run-suite: no cgroup to run the bulk at idle priority: the timed tests run after it" >&2
    "${BULK[@]}"; bulk_rc=$?
    "$BIN/pytest" tests -m alone; exit $((bulk_rc || $?))
fi
trap remove_cgroup EXIT

log=$(mktemp --suffix=-timed.log)
# Both in the background, so that this shell waits in `wait`, which a signal interrupts. A shell without job control
# starts background commands with SIGINT ignored, and pytest would keep that: Ctrl-C must reach them as it reaches a
# command in the foreground.
(echo "$BASHPID" >"$cg/cgroup.procs" && exec env --default-signal=INT "${BULK[@]}") &
bulk_pid=$!
# Its own cache off: two sessions would write .pytest_cache at once.
env --default-signal=INT "$BIN/pytest" tests -m alone -p no:cacheprovider >"$log" 2>&1 &
timed_pid=$!
# Ctrl-C reaches both pytests from the terminal; they stop, tear down what they started, and the script waits. The
# timed run gets it once more: where the Ctrl-C ends a test's child process (bench_serving) first, that test fails
# and pytest would go on to the next.
trap 'kill -INT "$timed_pid" 2>/dev/null; wait; cat "$log"; rm -f "$log"; exit 130' INT
trap 'kill -TERM "$bulk_pid" "$timed_pid"; wait; exit 143' TERM
wait "$timed_pid"; timed_rc=$?
wait "$bulk_pid"; bulk_rc=$?
echo; echo "---- the timed tests (marker alone), run beside the above ----"; cat "$log"; rm -f "$log"
exit $((bulk_rc || timed_rc))
