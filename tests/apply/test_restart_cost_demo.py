"""What a restart costs, end to end on the demo host as SGLang 0.5.23 (Kimi K2.5, its 8-minute start scaled down):
restarts are kept per host with the server's own startup_time, in the profile's proportions; after two of them
apply's confirmation and predict name this host's cost; the options that shorten a start shorten the stand-in's.

Real processes throughout: `opsconsole demo --no-ui` (supervisor and stand-in) and the CLI as subprocesses."""

from __future__ import annotations

import contextlib
import json
import re
import signal
import statistics
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from console.core.apply.restarts import read_restarts
from console.sglang.rules import check_launch
from console.sglang.unit import UnitFile
from console.sim.__main__ import split_argv
from console.sim.engine import Engine
from console.sim.profiles import get_profile
from tests.support.demo import Demo, running_demo

pytestmark = [pytest.mark.system, pytest.mark.long(90)]

KIMI = "kimi-k2.5-int4-8x-rtxpro6000-pcie"
SCALE = 0.01  # a start of about 8 minutes takes about 5 s


@pytest.fixture
def kimi(tmp_path: Path) -> Iterator[Demo]:
    with running_demo(tmp_path / "ws", profile=KIMI, time_scale=str(SCALE), sglang_version="0.5.23") as running:
        yield running


def _restart(demo: Demo) -> dict[str, Any]:
    done = demo.run("restart", "demo", "--yes", "--json", "--timeout", "60")
    result = json.loads(done.stdout)
    assert done.returncode == 0, (result.get("error"), done.stderr[-2000:])
    return result


def _apply(demo: Demo, *args: str) -> dict[str, Any]:
    done, result = demo.apply(*args, "--yes")
    assert done.returncode == 0, (result.get("error"), result.get("journal_excerpt"))
    return result


def _phases(record: dict[str, Any]) -> dict[str, float]:
    return {p["name"]: p["seconds"] for p in record["phases"]}


def _profiles_phases(demo: Demo) -> dict[str, float]:
    """The profile's real seconds for the unit the demo runs (console.sim.perf's startup_phases), as a check of the
    stand-in that does not go through it."""
    profile = get_profile(KIMI)
    _sim, flags = split_argv(UnitFile.parse(demo.host().unit(), "0.5.23").flags())
    resolved = check_launch(flags, {}, "0.5.23", architecture=profile.architecture).resolved
    return dict(Engine(profile, resolved).startup_phases())


def test_restarts_are_kept_in_the_profiles_proportions_and_confirmations_name_their_cost(kimi: Demo) -> None:
    first, second = _restart(kimi), _restart(kimi)
    # The first restart had none before it: the running server's own startup_time said what its start took.
    assert first["restart_cost"]["source"] == "server" and first["restart_cost"]["count"] == 0
    assert second["restart_cost"]["count"] == 1
    kept = read_restarts(kimi.workspace / "logs")
    assert [r.to_json() for r in kept] == [first["restart"], second["restart"]]
    expected = _profiles_phases(kimi)
    for record in (first["restart"], second["restart"]):
        assert record["phases_from"] == "server" and record["sglang_version"] == "0.5.23"
        assert record["setup"] == "EAGLE3 steps 2 topk 1 + spec v2" and record["start"] == "restart"
        phases = _phases(record)
        # loading weights: the target's, and the EAGLE3 draft's after it (a tenth of it, as the stand-in models it)
        assert phases["load_weights"] == pytest.approx(expected["load_weights"] * SCALE * 1.1, rel=0.1)
        graphs = phases["cuda_graph"] + phases["draft_cuda_graph"] + phases["draft_extend_cuda_graph"]
        captured = expected["capture_cuda_graph"] + expected["capture_draft_cuda_graph"]
        # eight captures of tens of ms each: each sleep may overrun a little on a busy machine
        assert graphs == pytest.approx((captured + expected["capture_draft_extend_cuda_graph"]) * SCALE, rel=0.3)
        # the wall time holds the phases and what they leave out: the old process's stop, the new one's start-up
        assert sum(phases.values()) == pytest.approx(record["total_s"], abs=0.01)  # each rounded to ms
        assert record["total_s"] > sum(expected.values()) * SCALE * 0.95
        assert max(phases, key=lambda name: phases[name]) == "load_weights"
    median = statistics.median([first["restart"]["total_s"], second["restart"]["total_s"]])
    share = statistics.median(_phases(r)["load_weights"] for r in (first["restart"], second["restart"])) / median
    said = re.escape(f"(median of 2; loading weights {share:.0%}".replace("%", " %")) + r"\)"
    cost = r"a restart of demo takes ~\d+\.\d s " + said

    # apply's confirmation: the cost before the question (no terminal here, so it is not asked: nothing changes)
    unit_before = kimi.host().unit()
    asked = kimi.run("apply", "demo", "--set", "speculative-num-steps=3", "--set", "speculative-num-draft-tokens=4")
    assert asked.returncode == 1 and "cannot ask for confirmation" in asked.stdout + asked.stderr
    assert re.search(cost, asked.stdout), asked.stdout
    assert kimi.host().unit() == unit_before

    # predict: the cost with the verdicts that weigh a restart, and in its JSON
    predicted = kimi.run("predict", "demo", "--steps", "3", "--concurrency", "1", "--duration", "1", "--yes")
    assert predicted.returncode == 0, predicted.stderr[-2000:]
    assert re.search("restart: " + cost, predicted.stdout), predicted.stdout
    # the setup asked for, named by what tells it apart (the steps of the space: one value, so its algorithm)
    assert re.search(r"\nEAGLE3: .*restart.* \(a restart: ~\d+\.\d s\)\n", predicted.stdout), predicted.stdout
    as_json = kimi.run("predict", "demo", "--steps", "3", "--concurrency", "1", "--json")
    assert json.loads(as_json.stdout)["restart_cost"]["count"] == 2


def test_the_options_that_shorten_a_start_shorten_the_stand_ins(kimi: Demo, tmp_path: Path) -> None:
    base = _phases(_restart(kimi)["restart"])
    share = get_profile(KIMI).startup.requantize_share
    # presharded: the first start loads and dumps the shards (longer once), the next one loads them (no repacking)
    dumped = _apply(kimi, "--set", "load-format=presharded")["restart"]
    assert dumped["options"] == {"load_format": "presharded"}
    loaded = _phases(_restart(kimi)["restart"])
    draft = base["load_weights"] / 11  # the EAGLE3 draft's own load, a tenth of the target's: not presharded
    target = base["load_weights"] - draft
    assert _phases(dumped)["load_weights"] == pytest.approx(target * 1.25 + draft, rel=0.1)
    assert loaded["load_weights"] == pytest.approx(target * (1 - share) + draft, rel=0.1)
    # a compile cache that lasts: the start that fills it captures as before, the next one skips the JIT compiles
    cache = tmp_path / "sglang-cache"
    filled = _phases(_apply(kimi, "--env", f"SGLANG_CACHE_DIR={cache}")["restart"])
    warm = _phases(_restart(kimi)["restart"])
    graphs = ("cuda_graph", "draft_cuda_graph", "draft_extend_cuda_graph")
    jit = get_profile(KIMI).startup.capture_jit_share
    # (the captures are short at this scale, and a busy machine lengthens each a little: the margins say so)
    cold_s, filled_s, warm_s = (sum(phases[g] for g in graphs) for phases in (base, filled, warm))
    assert filled_s == pytest.approx(cold_s, rel=0.3)
    assert warm_s < filled_s * (1 - jit / 2) and warm_s == pytest.approx(cold_s * (1 - jit), rel=0.3)
    assert list((cache / "opsconsole-sim").iterdir())
    # the weight-cache client refuses speculative decoding, with SGLang's reason, before anything is written
    unit_before = kimi.host().unit()
    done, refused = kimi.apply("--set", "weight-cache-mode=client", "--yes")
    assert done.returncode == 1 and refused["state"] == "refused"
    assert "does not export the draft model's weights" in refused["error"]
    assert kimi.host().unit() == unit_before
    # and the host's cost follows its recent restarts: shorter now than the first one
    assert refused["restart_cost"]["median_s"] < _restart_total(kimi, 0)


def _restart_total(demo: Demo, index: int) -> float:
    return read_restarts(demo.workspace / "logs")[index].total_s


@pytest.fixture
def tiny(tmp_path: Path) -> Iterator[Demo]:
    """The tests' small Llama (TP 1), whose start takes about 4 s unscaled: where overlap and the weight cache apply."""
    with running_demo(tmp_path / "ws", profile="tiny-test", time_scale="1", sglang_version="0.5.23") as running:
        yield running


@contextlib.contextmanager
def weight_cache_daemon(socket_path: Path, tp_size: int) -> Iterator[None]:
    """The stand-in's weight-cache daemon for the tiny model, stopped (by PID) afterwards."""
    argv = [sys.executable, "-m", "console.sim.weight_cache", "--model-path", "sim/tiny-test", "--tp-size",
            str(tp_size), "--socket", str(socket_path), "--sim-profile", "tiny-test"]  # fmt: skip
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    try:
        assert proc.stdout is not None and "ready" in proc.stdout.readline()
        yield
    finally:
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=10)
        if proc.stdout:
            proc.stdout.close()


def test_overlap_and_the_weight_cache_shorten_a_start_where_sglang_allows_them(tiny: Demo, tmp_path: Path) -> None:
    base = _phases(_apply(
        tiny, "--unset", "speculative-algorithm", "--unset", "speculative-num-steps", "--unset",
        "speculative-eagle-topk", "--unset", "speculative-num-draft-tokens",
    )["restart"])  # fmt: skip
    # overlap: the weights are staged while the graphs are captured: the start waits for the longer of the two
    overlapped = _phases(_apply(tiny, "--set", "startup-weight-load-mode=overlap")["restart"])
    # the server's own account: the weights' time the capture did not hide, then the commit (a tenth of the load)
    hidden = min(base["load_weights"], base["cuda_graph"] + base["kv_cache"])
    assert overlapped["load_weights"] == pytest.approx(base["load_weights"] * 1.1 - hidden, abs=0.25)
    assert overlapped["cuda_graph"] == pytest.approx(base["cuda_graph"], abs=0.25)
    started = ("load_weights", "kv_cache", "cuda_graph")
    assert sum(overlapped[p] for p in started) < sum(base[p] for p in started) - hidden / 2
    _apply(tiny, "--unset", "startup-weight-load-mode")
    # the weight cache's client without a daemon: said before the restart, and the start loads from disk
    socket_path = tmp_path / "weights.sock"
    alone = _apply(tiny, "--set", "weight-cache-mode=client", "--set", f"weight-cache-socket={socket_path}")
    assert [w["code"] for w in alone["report"]["warnings"]] == ["weight-cache-no-daemon"]
    assert _phases(alone["restart"])["load_weights"] == pytest.approx(base["load_weights"], rel=0.15)
    # with the daemon of this model: the weights are mapped from it
    with weight_cache_daemon(socket_path, tp_size=1):
        mapped = _phases(_restart(tiny)["restart"])
    assert mapped["load_weights"] < base["load_weights"] * 0.2
    # a daemon of another layout: SGLang stops the start (no silent disk load), and says why
    with weight_cache_daemon(socket_path, tp_size=2):
        done = tiny.run("restart", "demo", "--yes", "--json", "--timeout", "60")
    failed = json.loads(done.stdout)
    assert done.returncode == 1 and failed["state"] == "restart_failed"
    assert "CacheConfig mismatch" in failed["error"]


@pytest.fixture
def demo(tmp_path: Path) -> Iterator[Demo]:
    """The default demo: the Qwen profile as the operators' SGLang 0.5.9, whose /server_info has no startup_time."""
    with running_demo(tmp_path / "ws") as running:
        yield running


def test_before_0_5_23_the_journals_phase_lines_give_a_restarts_phases(demo: Demo) -> None:
    for _ in range(2):
        record = _restart(demo)["restart"]
        assert record["phases_from"] == "journal" and record["sglang_version"] == "0.5.9"
        phases = _phases(record)
        assert {"load_weights", "kv_cache", "cuda_graph", "draft_cuda_graph", "warmup", "rest"} <= set(phases)
        assert sum(phases.values()) == pytest.approx(record["total_s"], abs=0.01)
    # a start that fails is no restart's cost; the old unit's start after the rollback is one
    done, failed = demo.apply("--set", "speculative-draft-model-path=/models/gone", "--yes")
    assert done.returncode == 1 and failed["rolled_back"] is True
    assert failed["restart"] is None and failed["rollback_restart"]["start"] == "rollback"
    assert [r.start for r in read_restarts(demo.workspace / "logs")] == ["restart", "restart", "rollback"]
    said = demo.run("restart", "demo")  # no terminal: not asked, nothing restarted; the cost said first
    assert said.returncode == 1
    assert re.match(r"a restart of demo takes ~\d+\.\d s \(median of 3; .+ \d+ %\)\n", said.stdout), said.stdout
