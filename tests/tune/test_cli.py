"""`opsconsole tune` as the operator runs it: the real CLI (a subprocess) against the demo host."""

from __future__ import annotations

import asyncio
import json
import os
import pty
from collections.abc import Iterator
from pathlib import Path

import pytest

from console.cli import build_parser
from console.cli.tune import request_from_args, space_from_args
from tests.support.cli_run import finish_cli, start_cli
from tests.support.demo import OPSCONSOLE, Demo, running_demo
from tests.tune.simhost import QWEN, install, seed_unit

QWEN_MTP_1 = [("--speculative-algorithm", "NEXTN"), ("--speculative-num-steps", "1"),
              ("--speculative-eagle-topk", "1"), ("--speculative-num-draft-tokens", "2")]  # fmt: skip
SHORT = ("--concurrency", "1", "--duration", "2", "--input-len", "128", "--output-len", "256", "--warmup", "1")


@pytest.fixture
def demo(tmp_path: Path) -> Iterator[Demo]:
    with running_demo(tmp_path / "ws") as running:
        asyncio.run(install(running, lambda text: seed_unit(text, profile=QWEN, version="0.5.9", spec_v2=False,
                                                              speculative=QWEN_MTP_1)))  # fmt: skip
        yield running


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--workload", "random,soak"), "--workload takes random and/or chat"),
        (("--steps", "1,two"), "--steps takes comma-separated whole numbers"),
        (("--spec-v2", "maybe"), "--spec-v2 takes on and/or off"),
        (("--concurrency", "0"), "--concurrency must be whole numbers ≥ 1"),
        (("--budget", "-5"), "--budget is a positive number of minutes"),
        (("--space", "/nonexistent/space.toml"), "cannot read it"),
        (("--best-at", "8"), "--best-at works only with --apply-best"),  # as the Tune form's "best at level"
        (("--apply-best", "--best-at", "16"), "--best-at 16 is not one of the levels of --concurrency (1,8,32,64)"),
        (("--slo", "ttft_p96=800ms"), "--slo: 'ttft_p96' is not an SLO key"),
        (("--dataset", "/nonexistent/traffic.jsonl"), "--dataset /nonexistent/traffic.jsonl: cannot be read"),
        (("--objective", "latency"), "invalid choice: 'latency'"),
        (("--request-timeout", "0"), "--request-timeout must be a positive number of seconds"),
    ],
)
@pytest.mark.system
def test_bad_options_are_usage_errors_before_anything_is_touched(tmp_path: Path, args: tuple[str, ...],
                                                                  message: str) -> None:  # fmt: skip
    demo = Demo(tmp_path, None)  # type: ignore[arg-type]  # no host needed: nothing gets that far
    done = demo.run("tune", "nowhere", *args, "--yes")
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert message in done.stderr


def test_request_timeout_bounds_each_benchmark_request_of_the_tune() -> None:
    args = build_parser().parse_args(["tune", "gpu-a", "--steps", "1,3", "--request-timeout", "30"])
    assert request_from_args(args, space_from_args(args, None)).request_timeout_s == 30.0
    default = build_parser().parse_args(["tune", "gpu-a", "--steps", "1,3"])
    assert request_from_args(default, space_from_args(default, None)).request_timeout_s == 600.0  # as `bench`


def test_without_yes_and_without_a_terminal_it_refuses_and_changes_nothing(demo: Demo) -> None:
    unit, pid = demo.host().unit(), demo.host().main_pid()
    done = demo.run("tune", "demo", "--steps", "1,3", *SHORT)
    assert done.returncode == 2 and "re-run with --yes" in done.stderr
    assert "steps 3" in done.stdout  # the space was shown
    assert demo.host().unit() == unit and demo.host().main_pid() == pid


def test_the_recommended_setup_stays_with_apply_best_and_the_report_says_so(demo: Demo) -> None:
    done = demo.run("tune", "demo", "--steps", "1,3", *SHORT, "--apply-best", "--yes")
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "random: best setup per level" in out and "steps 3 best at every level" in out
    assert "demo: the recommended unit, healthy" in out
    info = demo.host().server_info()
    assert info["speculative_num_steps"] == 3
    assert "--speculative-num-steps 3" in demo.host().unit()


def test_a_budget_stops_the_search_and_what_was_measured_is_recommended(demo: Demo) -> None:
    """A budget that fits the screening of two setups but not their full runs."""
    original = demo.host().unit()
    done = demo.run("tune", "demo", "--steps", "1,3", "--concurrency", "1", "--duration", "30", "--input-len",
                    "128", "--output-len", "256", "--warmup", "1", "--budget", "0.4", "--yes", "--json")  # fmt: skip
    result = json.loads(done.stdout)
    assert result["stopped"] == "budget", result
    assert [r["name"] for r in result["recommendations"]] == ["steps 3"]
    assert result["recommendations"][0]["within_noise"] is True  # screening only: the noise is not measured
    assert all(lv["measured_by"] == "screen" for t in result["trials"] for lv in t["levels"])
    assert (result["final_unit"], result["host_healthy"]) == ("original", True)
    assert demo.host().unit() == original


def test_an_objective_that_needs_an_slo_without_one_is_a_usage_error_and_changes_nothing(demo: Demo) -> None:
    before = demo.host().unit()
    done = demo.run("tune", "demo", "--objective", "capacity", "--yes", *SHORT)
    assert done.returncode == 2, (done.stdout, done.stderr)
    assert "--objective capacity needs an SLO to count good requests against" in done.stderr
    assert demo.host().unit() == before


@pytest.mark.parametrize(
    ("extra", "said"),
    [((), "afterwards the original unit goes back"),
     (("--apply-best",), "afterwards the recommended setup stays")],
)  # fmt: skip
def test_on_a_terminal_the_question_says_what_runs_afterwards_and_no_changes_nothing(
    demo: Demo, extra: tuple[str, ...], said: str
) -> None:
    unit, pid = demo.host().unit(), demo.host().main_pid()
    primary, secondary = pty.openpty()
    try:
        proc = start_cli(
            [str(OPSCONSOLE), "--workspace", str(demo.workspace), "tune", "demo", "--steps", "1,3", *SHORT, *extra],
            env=dict(os.environ), stdin=secondary,
        )  # fmt: skip
        os.write(primary, b"n\n")
        _, stderr = finish_cli(proc, timeout=120)
    finally:
        os.close(primary)
        os.close(secondary)
    assert proc.returncode == 1, stderr
    assert said in " ".join(stderr.split()) and "nothing was changed" in stderr
    assert demo.host().unit() == unit and demo.host().main_pid() == pid
