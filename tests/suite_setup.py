"""What a test session needs, built before pytest's clock starts: `make test` runs this first (scripts/run-suite.sh).

    .venv/bin/python -m tests.suite_setup

- the testbed's Debian tree and site packages (tests/testbed/cache.py: debootstrap, pip install --target), and the
  removal of testbed hosts a crashed run left;
- SGLang's bench_serving.py, taken from the released wheel (tests/support/sglang_bench.py), and the simulator's
  tokenizer folder it reads;
- the source files the wire-format tests read from every supported release's wheel (tests/support/sglang_wheels.py:
  six wheels, 91 MB downloaded, 0.9 MB kept; about 6 s with pip's cache warm).

Each step is timed, and one line, printed as the steps go, says where the time went:

    setup: leftover hosts 0.0 s (0 removed), testbed tree 212.4 s (built), site 31.0 s (built), bench_serving 2.9 s
    (downloaded); 246.3 s in all

Why before: built inside a test, the build counted against that test's timeout (pytest-timeout counts fixture setup),
and `start_long_tests_first` puts exactly the long testbed tests first. On a new machine with other work beside it
tests/e2e/test_rolling.py's router test and tests/e2e/test_tune.py's link-drop test each waited 214 s in
`testbed_ready` and ran into their 300 s. The fixtures still build what is missing (one test run by hand works);
in `make test` they find it ready.

Exit 1 when a step fails (the mirror unreachable, pip refused): the suite stops there with the reason, instead of
every testbed test failing on it. Without root the testbed is not built (it needs root to build and to run), and the
line says so; the testbed tests then fail with what to do.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable

# (name, the work: returns what it did). Printed as they go, on one line, so that a build in progress shows which.
Work = tuple[str, Callable[[], str]]


def testbed_work() -> list[Work]:
    from tests.testbed import cache, resources

    if os.geteuid() != 0:
        return [("testbed", lambda: "not built: it needs root, as the testbed tests do")]
    return [
        ("leftover hosts", lambda: f"{len(resources.cleanup_leftovers())} removed"),
        ("testbed tree", lambda: "built" if cache.ensure_tree().built else "cached"),
        ("site", lambda: "built" if cache.ensure_site().built else "cached"),
    ]


def bench_serving() -> str:
    from tests.support import sglang_bench

    cached = (
        os.environ.get("SGLANG_BENCH_SERVING")
        or (sglang_bench.cache_root() / f"sglang-{sglang_bench.SGLANG_VERSION}" / "bench_serving.py").exists()
    )
    sglang_bench.bench_serving_script()
    sglang_bench.shim_dir()
    sglang_bench.tokenizer_dir()
    return "cached" if cached else "downloaded"


def sglang_wheels() -> str:
    from tests.support import sglang_wheels

    downloaded = sglang_wheels.fetch_all()
    return f"{len(downloaded)} downloaded" if downloaded else "cached"


def main() -> int:
    started = time.monotonic()
    print("setup:", end="", flush=True)
    for index, (name, work) in enumerate(
        [*testbed_work(), ("bench_serving", bench_serving), ("sglang wheels", sglang_wheels)]
    ):
        print(f"{',' if index else ''} {name}", end="", flush=True)
        step_started = time.monotonic()
        try:
            outcome = work()
        except Exception as exc:  # a build that failed: what it said, and no test run on half a setup
            print(f" FAILED after {time.monotonic() - step_started:.1f} s", flush=True)
            print(f"setup failed: {exc}", file=sys.stderr)
            return 1
        print(f" {time.monotonic() - step_started:.1f} s ({outcome})", end="", flush=True)
    print(f"; {time.monotonic() - started:.1f} s in all", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
