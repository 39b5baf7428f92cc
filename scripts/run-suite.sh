#!/usr/bin/env bash
# `make test`'s pytest part: first what the tests need built (tests/suite_setup.py), then the whole suite in two runs
# side by side (tiers: tests/tiers.py).
#
#   setup  the testbed's tree and site packages, bench_serving.py: before pytest's clock starts, with its own time on
#          one line. Built inside a test it counted against that test's timeout (a new machine's debootstrap took
#          214 s of a 300 s one). A failed setup stops here, with the reason.
#   bulk   every test not marked `alone`, in WORKERS parallel workers: CPU-bound, ~1,000 CPU-s on 2 cores.
#   timed  the `alone` tests, one at a time: they hold a measured time to a known truth within a few percent, and
#          mostly wait (~8 % of a core). They run in a cgroup of the top CPU weight (v1 cpu.shares 262144, v2
#          cpu.weight 10000): a timed test that wakes gets a core at once, so their figures carry none of the bulk's
#          CPU, as when they ran after it, and their ~4 min of waiting no longer adds to the run (docs/measured.md).
#          The testbed hosts they boot are in that cgroup too. The bulk stays where it was started, so that other
#          load on the machine shares the CPU with it as before (marked idle instead, it got only a core beside a
#          busy loop, and took half as long again).
#
# Without a cgroup to weigh (not root, or a cgroup v2 tree without the cpu controller) the timed tests run after the
# bulk instead.
set -uo pipefail
BIN=${BIN:-.venv/bin}
WORKERS=${1:?usage: run-suite.sh WORKERS [PYTEST ARGS...]}
shift
EXTRA=("$@")  # given to both pytests (make test-latest FULL=1 leaves out the check that the venv is the lock)

priority_cgroup() {
    # A child of the cgroup this runs in, in cgroup v1's cpu hierarchy or in a v2 tree.
    local v1 v2 cg
    v1=$(awk -F: '$2 ~ /(^|,)cpu(,|$)/ {print $3}' /proc/self/cgroup)
    v2=$(awk -F: '$1 == 0 {print $3}' /proc/self/cgroup)
    for cg in "/sys/fs/cgroup/cpu${v1%/}/opsconsole-timed-$$" "/sys/fs/cgroup${v2%/}/opsconsole-timed-$$"; do
        [ -f "$(dirname "$cg")/cgroup.procs" ] && mkdir "$cg" 2>/dev/null || continue
        # v2 has cpu.weight only where the cpu controller is enabled for the children
        if echo 262144 >"$cg/cpu.shares" 2>/dev/null || echo 10000 >"$cg/cpu.weight" 2>/dev/null; then
            echo "$cg"
            return
        fi
        rmdir "$cg"
    done
}

remove_cgroup() {
    # What the timed run left running goes back to the parent, so the cgroup can go.
    local pid
    while read -r pid; do echo "$pid" >"$(dirname "$cg")/cgroup.procs" 2>/dev/null; done <"$cg/cgroup.procs"
    rmdir "$cg"
}

"$BIN/python" -m tests.suite_setup || { echo "run-suite: the setup failed (above): no test was run" >&2; exit 1; }

BULK=("$BIN/pytest" tests -m "not alone" -n "$WORKERS" --dist worksteal "${EXTRA[@]}")

cg=$(priority_cgroup)
if [ -z "$cg" ]; then
    echo "run-suite: no cgroup to give the timed tests priority in: they run after the rest" >&2
    "${BULK[@]}"; bulk_rc=$?
    "$BIN/pytest" tests -m alone "${EXTRA[@]}"; exit $((bulk_rc || $?))
fi
trap remove_cgroup EXIT

log=$(mktemp --suffix=-timed.log)
# Both in the background, so that this shell waits in `wait`, which a signal interrupts. A shell without job control
# starts background commands with SIGINT ignored, and pytest would keep that: Ctrl-C must reach them as it reaches a
# command in the foreground.
env --default-signal=INT "${BULK[@]}" &
bulk_pid=$!
# Its own cache off: two sessions would write .pytest_cache at once.
(echo "$BASHPID" >"$cg/cgroup.procs" && exec env --default-signal=INT "$BIN/pytest" tests -m alone \
    -p no:cacheprovider "${EXTRA[@]}") >"$log" 2>&1 &
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
