"""`opsconsole predict`'s options: a bad one is a usage error (exit 2) that names it, before any host is contacted."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.demo import Demo


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--steps", "1,two"), "--steps takes comma-separated whole numbers"),
        (("--concurrency", "0"), "--concurrency must be whole numbers ≥ 1"),
        (("--duration", "0"), "--duration must be a positive number of seconds"),
        (("--max-age", "-1"), "--max-age must be a positive number of days"),
        (("--from-run", "nightly", "--workload", "chat"), "--from-run names the traffic already"),
        (("--slo", "ttft_p96=800ms"), "--slo: 'ttft_p96' is not an SLO key"),
        (("--space", "/nonexistent/space.toml"), "cannot read it"),
    ],
)
@pytest.mark.system
def test_bad_options_are_usage_errors_before_anything_is_touched(
    tmp_path: Path, args: tuple[str, ...], message: str
) -> None:
    demo = Demo(tmp_path, None)  # type: ignore[arg-type]  # no host needed: nothing gets that far
    done = demo.run("predict", "nowhere", *args, "--yes")
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert message in done.stderr
