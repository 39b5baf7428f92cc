"""Issue 46's proof on a GPU-bound target, replayed: SGLang 0.5.17 on an NVIDIA H100 80GB (2026-12-07,
scripts/real_sglang/predict_gpu_session.py): a Llama of Llama-3-8B's shape with random weights whose target repeats
its token in runs at temperature 1, and an EAGLE head that proposes the last token again
(scripts/real_sglang/build_gpu_target.py). One benchmark of steps 1 (C = 1, 16, 64, two runs), `predict`, then
restarts into steps 3, 2 and a topk-2 tree, and steps 1, 3 and 2 launched again, each measured the same way (every
level warmed until its round settled). Fixture: tests/sim/fixtures/real-0.5.17/predict-gpu/ (the records, predict's
two JSONs from the GPU machine, the session's summary, the server's own decode lines).

The table (scripts/real_sglang/predict_gpu_report.py) is this code's prediction from the records the session had at
each step: from steps 1 alone, then from steps 1 and 3."""

from __future__ import annotations

import gzip
import json
import math
import statistics
import sys
from pathlib import Path
from typing import Any

import pytest

from console.core.predict import Evidence
from console.sim.perf import PerfModel
from console.sim.profiles import get_profile
from tests.support.virtual_bench import resolved_args

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "scripts" / "real_sglang"))

import predict_gpu_report as report  # noqa: E402

FIXTURE = Path(__file__).parent / "fixtures" / "real-0.5.17" / "predict-gpu"


@pytest.fixture(scope="module")
def doc() -> dict[str, Any]:
    return report.report(FIXTURE)


@pytest.fixture(scope="module")
def records() -> dict[str, list[Any]]:
    return report.load(FIXTURE)


def medians(records: dict[str, list[Any]], *labels: str) -> dict[int, float]:
    runs = [r for label in labels for r in records[label]]
    return {c: statistics.median(r.output_throughput for r in runs if r.max_concurrency == c) for c in report.LEVELS}


def test_the_target_was_gpu_bound(records: dict[str, list[Any]]) -> None:
    """A round costs the target's forward at every batch and each draft step adds to it: at C = 1 steps 1, 2, 3 and
    the tree took 7.87 / 8.48 / 9.07 / 9.50 ms with the GPU 97-100 % busy, and the round at C = 64 (42 decoding)
    is 2.2 times C = 1's."""
    rounds = report.rounds(records)
    c1 = [rounds[label][1][0] for label in ("s1", "s2", "s3", "tree")]
    assert c1 == sorted(c1) and 7.5 < c1[0] < 8.5 and 0.5 < (c1[2] - c1[0]) / 2 < 0.7  # ~0.6 ms a draft step
    for label, levels in rounds.items():
        assert levels[1][2] is not None and levels[1][2] >= 95, (label, levels)
        assert levels[64][2] is not None and levels[64][2] >= 99, (label, levels)
        assert 2.0 < levels[64][0] / levels[1][0] < 3.0 and levels[64][1] > 40
    with gzip.open(FIXTURE / "journal-excerpt.jsonl.gz", "rt") as f:
        decode = [json.loads(line)["message"] for line in f if "Decode batch" in line]
    assert len(decode) > 500 and all("cuda graph: True" in line for line in decode)


def test_after_each_restart_the_first_run_is_as_fast_as_the_second(records: dict[str, list[Any]]) -> None:
    """Each level's first run after a start warms until its round settles (the record says so: 2 to 5 waves, the first
    wave of the tree at C = 64 took 62 ms a round, the next 21); the first and second runs then agree: before issue 46
    the first C = 16 run was 5-17 % slower in 4 of 5 launches. Their rounds within 4 % (the largest gaps: 3.6 % and
    the machine's first, cold launch at C = 16, 3.2 %; the median 0.1 %); their tok/s at C = 16 and 64 within 5 %
    (at C = 1 a run is a few requests, whose accept lengths differ: the tree's two runs 2.19 and 2.42)."""
    rounds, rates = [], []
    for label, runs in records.items():
        for c in report.LEVELS:
            first, second = sorted((r for r in runs if r.max_concurrency == c), key=lambda r: r.repeat_index)
            assert first.warmup_mode == "settle" and first.warmup_settled, (label, c)
            assert 2 <= first.warmup_waves <= 5 and len(first.warmup_round_ms) == first.warmup_waves
            assert second.warmup_mode == "level" and second.warmup_waves == (2 if c == 1 else 1)
            rounds.append(first.round_time_ms / second.round_time_ms - 1)
            if c > 1:
                rates.append(first.output_throughput / second.output_throughput - 1)
    assert len(rounds) == 21 and all(abs(g) < 0.04 for g in rounds) and abs(statistics.median(rounds)) < 0.005
    assert all(abs(g) < 0.051 for g in rates)  # the largest: s1's cold C = 16, -5.0 %


def test_one_setup_predicts_every_run_inside_its_band_and_names_the_restart_that_splits_the_round(
    doc: dict[str, Any],
) -> None:
    part = doc["one_setup"]
    rows = part["rows"]
    inside = sum(r["inside"][0] for r in rows), sum(r["inside"][1] for r in rows)
    accepts = sum(r["accept_inside"][0] for r in rows), sum(r["accept_inside"][1] for r in rows)
    assert inside == (30, 30)
    assert accepts[0] >= 0.85 * accepts[1], accepts  # 26 of 30
    # no verdict "worth a restart" from one setup: the bands cannot call what the records cannot tell
    assert all(r["verdict"] in ("within", "slower") for r in rows if r["concurrency"] in (1, 16))
    for r in rows:  # the accept length from steps 1 alone: one draft a round does not tell the runs, its band does
        if r["setup"] in ("s2", "s3"):
            measured = statistics.median(v for vs in r["accepts"].values() for v in vs)
            assert abs(r["accept"][0] / measured - 1) < 0.04, r
    assert part["split"] is not None and "steps 2 topk 1" in part["split"]


def least_inside(runs: int, level: float = 0.95, risk: float = 0.10) -> int:
    """How many of `runs` a band that holds `level` of all runs holds at least, but for a chance of at most `risk`:
    the binomial's lower quantile (18 runs: 16, since such a band holds 15 or fewer with probability 5.8 %; 24: 21;
    30: 27). Runs of one cell or one launch are not independent, which makes a short count likelier than this says:
    the bound is on the strict side."""
    below = 0.0
    for inside in range(runs + 1):
        below += math.comb(runs, inside) * level**inside * (1 - level) ** (runs - inside)
        if below > risk:
            return inside
    return runs


def test_the_bands_hold_what_they_say_on_the_gpu_capture(doc: dict[str, Any]) -> None:
    """Each run of every setup measured after the records, against its band (stated 95 %), launch to launch: steps 2
    and 3 were each measured in two launches, the tree in one, and the measured setups' own next launches (steps 1
    from steps 1; steps 1 and 3 from both) are held to the same predictions. Before the launches' spread: from one
    setup 26 of 30 accept lengths, from two 15 of 18 tok/s and 12 of 18 accept lengths (8 of 12 of the measured
    setups' next launches). Now from one setup 30 and 27 of 30 (36 and 33 of 36 with steps 1's next launch); from two
    18 of 18 tok/s and 14 of 18 accept lengths, 30 and 26 of 30 with the next launches: the accept length from two
    setups falls short of what 95 % means (16 of 18): every miss is at C = 1, where steps 2's launches measured 1.99
    and 2.13 and the tree's runs 2.19 and 2.42, where steps 1's and 3's, the records' own, spread 0.5-1.5 %
    (docs/real-sglang.md)."""
    one, two = doc["one_setup"]["coverage"], doc["two_setups"]["coverage"]
    for part in (one, two):
        for key in ("tok", "tok_with_next_launches"):
            assert part[key][0] >= least_inside(part[key][1]), (key, part)
    assert one["accept"][0] >= least_inside(one["accept"][1]) and one["accept"] == (27, 30)
    assert one["accept_with_next_launches"][0] >= least_inside(36)
    assert two["tok"] == (18, 18) and two["accept"] == (14, 18) and two["accept_with_next_launches"] == (26, 30)
    missed = [r for r in doc["two_setups"]["rows"] if r["accept_inside"][0] < r["accept_inside"][1]]
    assert {r["concurrency"] for r in missed} == {1}


def test_with_two_setups_measured_a_real_10_percent_gain_is_worth_a_restart(
    doc: dict[str, Any], records: dict[str, list[Any]]
) -> None:
    """Steps 1 runs; steps 1 and 3 measured; steps 2 is 12-16 % faster than steps 1 (both launches of each): called
    worth a restart at every level. Before, within the bands at C = 16, where steps 1's two runs differed by 5 %: the
    verdict held a run's band against a run's; it asks whether the restart pays, which is a new launch's mean against
    the running launch's measured mean."""
    gain = {c: medians(records, "s2", "s2b")[c] / medians(records, "s1", "s1b")[c] - 1 for c in report.LEVELS}
    assert all(0.10 < g < 0.17 for g in gain.values()), gain
    rows = {r["concurrency"]: r for r in doc["two_setups"]["rows"] if r["setup"] == "s2"}
    for row in rows.values():
        assert abs(row["error"]) < 0.03, row  # predicted within 3 % of the median of four runs in two launches
    assert [rows[c]["verdict"] for c in report.LEVELS] == ["better", "better", "better"]  # worth a restart
    assert all(r["band"] < 0.10 for r in rows.values())  # a run's band, launches included: ±6-10 %


def test_no_verdict_calls_a_gain_or_a_loss_the_restarts_did_not_measure(
    doc: dict[str, Any], records: dict[str, list[Any]]
) -> None:
    """Every "better" and "slower" from one setup and from two, against the medians each setup measured over its
    launches: a verdict on means must not call what the runs did not show (the tree from two setups at C = 1: 14 %
    ahead, called; at C = 16 9 % ahead and at C = 64 2 % behind, within)."""
    running = medians(records, "s1", "s1b")
    called = 0
    for part in ("one_setup", "two_setups"):
        for r in doc[part]["rows"]:
            measured = medians(records, *report.LAUNCHES[r["setup"]])[r["concurrency"]] / running[r["concurrency"]]
            if r["verdict"] == "better":
                called += 1
                assert measured > 1.05, r
            elif r["verdict"] == "slower":
                assert measured < 0.95, r
    assert called == 4  # steps 2 at C = 1, 16, 64 and the tree at C = 1, from two setups


def test_the_split_narrows_what_it_says(doc: dict[str, Any], records: dict[str, list[Any]]) -> None:
    """The one setup's split named steps 2's benchmark; measured, two setups narrowed every other band."""
    one = {(r["setup"], r["concurrency"]): r["band"] for r in doc["one_setup"]["rows"]}
    two = {(r["setup"], r["concurrency"]): r["band"] for r in doc["two_setups"]["rows"]}
    for key, band in two.items():
        assert band < one[key], key


def test_what_the_gpu_machine_said(records: dict[str, list[Any]]) -> None:
    """predict's JSON on the GPU machine (the code of that day): from steps 1 alone every setup 'not worth a
    restart' within wide bands, with the split line; with steps 3 running and measured, no split line."""
    first = json.loads((FIXTURE / "predict1.json").read_text())
    second = json.loads((FIXTURE / "predict2.json").read_text())
    assert first["running"]["key"] == "eagle-s1-k1-n2-v2" and second["running"]["key"] == "eagle-s3-k1-n4-v2"
    assert first["split"] is not None and "steps 2" in first["split"]["name"] and second["split"] is None
    assert {s["verdict"] for s in first["setups"][1:]} == {"not-worth"}
    assert "1 setups" in first["setups"][0]["rests_on"][1] and "2 setups" in second["setups"][0]["rests_on"][1]
    evidence = Evidence.from_records(records["s1"])
    assert all(m.histogram for m in evidence.levels)


@pytest.mark.parametrize(
    ("profile", "algorithm", "draft"),
    [
        ("qwen3.5-122b-fp8-4x-rtxpro6000", "EAGLE", None),
        ("kimi-k2.5-int4-8x-rtxpro6000-pcie", "EAGLE3", "sim/kimi-k2.5-eagle3"),
    ],
)
def test_the_stand_ins_gpu_bound_profiles_round_has_the_measured_shape(
    profile: str, algorithm: str, draft: str | None, records: dict[str, list[Any]]
) -> None:
    """The real GPU-bound round: each draft step adds a few percent of the forward (0.6 ms of 7.9 at C = 1), the round
    never shrinks with more steps, a tree costs more than its chain and more so at a larger batch (1.05x at C = 1,
    1.20x at 42 decoding), and it grows with the batch far less than in proportion. The stand-in's Qwen and Kimi
    profiles (GPU-bound, on their own hardware) hold the same shape."""
    rounds = report.rounds(records)
    real = {name: (rounds[name][1][0], rounds[name][64][0]) for name in ("s1", "s2", "s3", "tree")}
    real_step = (real["s3"][0] - real["s1"][0]) / 2 / real["s1"][0]
    assert 0.05 < real_step < 0.10
    assert real["tree"][1] / real["s3"][1] > real["tree"][0] / real["s3"][0] > 1.0

    def step_ms(steps: int, topk: int, draft_tokens: int, batch: int) -> float:
        args = resolved_args(algorithm, steps, topk, draft_model_path=draft, draft_tokens=draft_tokens)
        return PerfModel(get_profile(profile), args).decode_step_s(batch) * 1000.0

    small, large = 1, 14
    chain = {s: (step_ms(s, 1, s + 1, small), step_ms(s, 1, s + 1, large)) for s in (1, 2, 3)}
    tree = (step_ms(3, 2, 6, small), step_ms(3, 2, 6, large))
    step_share = (chain[3][0] - chain[1][0]) / 2 / chain[1][0]
    assert 0.02 < step_share < 0.15, step_share  # the real one 7.6 %
    assert chain[1][0] < chain[2][0] < chain[3][0] and chain[1][1] < chain[2][1] < chain[3][1]
    assert tree[1] / chain[3][1] > tree[0] / chain[3][0] > 1.0
    assert chain[1][1] / chain[1][0] < large / small / 3
