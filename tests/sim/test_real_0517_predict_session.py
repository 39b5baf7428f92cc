"""Issue 37's proof on real data, replayed: SGLang 0.5.17 on the H200 (scripts/real_sglang/predict_session.py, two
sessions, 2026-12-04): the tiny Llama with the EAGLE draft that repeats the last token, one benchmark at steps 3
(C = 1 and 16, 128 random ids in, 64 forced out, temperature 0, two repeats), `opsconsole predict` from those records
alone, then restarts into steps 2, 1 and 3 again, each benchmarked the same way. Fixtures:
tests/sim/fixtures/real-0.5.17/predict/run{1,2}/ (the records as bench.jsonl.gz, predict's JSON, the session's
summary).

What held, and what did not (docs/predict.md):
- acceptance: six of the eight predicted accept lengths within 3 % of what the restarts measured, the other two
  (-4.2 % and -3.2 %, both at C = 1) closer to the measured mean than that measurement's own two runs were to each
  other (1.62 and 1.47; 1.40 and 1.32);
- throughput: not what one setup's records can give on this server. Its round is not monotone in the steps (steps 1's
  round took 40 % longer than steps 3's at C = 1 in both sessions, as in the issue's own session before), which a fit
  of steps 3 alone cannot see; the verdicts stay "not worth a restart", with the settle note."""

from __future__ import annotations

import gzip
import json
import statistics
from pathlib import Path
from typing import Any

import pytest

from console.bench.records import BenchRecord
from console.core.predict import Evidence, Measured, Predictor
from tests.sim.test_real_0517_predict_gpu import least_inside

FIXTURES = Path(__file__).parent / "fixtures" / "real-0.5.17" / "predict"


def session(run: str) -> tuple[dict[str, list[BenchRecord]], dict[str, Any]]:
    by_label: dict[str, list[BenchRecord]] = {}
    with gzip.open(FIXTURES / run / "bench.jsonl.gz", "rt") as f:
        for line in f:
            record = BenchRecord.model_validate(json.loads(line))
            by_label.setdefault(record.label, []).append(record)
    return by_label, json.loads((FIXTURES / run / "predict.json").read_text())


def accept(levels: list[Measured]) -> float:
    return 1 + sum((m.mean_accepted or 0) * m.rounds for m in levels) / sum(m.rounds for m in levels)


@pytest.mark.parametrize("run", ["run1", "run2"])
def test_one_benchmark_at_steps_3_predicts_the_accept_length_of_steps_2_and_1(run: str) -> None:
    records, _doc = session(run)
    base = Evidence.from_records(records["steps3-base"])
    assert all(m.histogram for m in base.levels)  # 0.5.17 sends spec_accept_histogram: the fit has its rounds
    predictor = Predictor(base, base.workloads()[0])
    for steps in (2, 1):
        measured = Evidence.from_records(records[f"steps{steps}"])
        forecast = predictor.forecast(measured.levels[0].setup, measured.levels[0].overlap, [1, 16])
        for level in forecast.levels:
            here = [m for m in measured.levels if m.concurrency == level.concurrency]
            runs = [accept([m]) for m in here]
            assert level.accept_length is not None
            predicted, truth = level.accept_length.value, accept(here)
            # the measurement is noisy too: its two runs differed by up to 9 %
            assert abs(predicted - truth) <= max(0.03 * truth, max(runs) - min(runs)), (steps, level, runs)


@pytest.mark.parametrize("run", ["run1", "run2"])
def test_what_the_console_said_then_is_what_it_says_now_and_the_verdicts(run: str) -> None:
    """The CLI's own JSON from the GPU machine, against this code's prediction from the same records (the model is
    the same, so the figures are), and the verdicts it gave."""
    records, doc = session(run)
    assert doc["records"] == 4 and doc["noise"] is not None
    assert [s["verdict"] for s in doc["setups"]] == ["running", "not-worth", "not-worth"]
    measured = {
        steps: statistics.median(r.output_throughput for r in records[f"steps{steps}"] if r.max_concurrency == 1)
        for steps in (1, 2, 3)
    }
    # the server's round was slower with fewer steps: steps 1 measured below steps 3 at C = 1, in both sessions
    assert measured[1] < measured[3]


def inside_bands(base_run: str, measured_run: str) -> tuple[int, int, int]:
    """(tok/s inside, accept lengths inside, runs): each run of steps 2, 1 and 3 of `measured_run` against the band
    predicted from `base_run`'s steps-3 benchmark alone."""
    tok = accept = total = 0
    base_records, _doc = session(base_run)
    records, _ = session(measured_run)
    base = Evidence.from_records(base_records["steps3-base"])
    predictor = Predictor(base, base.workloads()[0], incumbent=base.levels[0].setup)
    for label in ("steps2", "steps1", "steps3"):
        measured = Evidence.from_records(records[label])
        forecast = predictor.forecast(measured.levels[0].setup, measured.levels[0].overlap, [1, 16])
        for level in forecast.levels:
            assert level.accept_length is not None
            for m in (m for m in measured.levels if m.concurrency == level.concurrency):
                total += 1
                tok += level.output_tok_s.low <= m.output_tok_s <= level.output_tok_s.high
                accept += level.accept_length.low <= accept_of(m) <= level.accept_length.high
    return tok, accept, total


def test_every_run_measured_after_the_restarts_falls_inside_its_band() -> None:
    """Bands that mean what they say (issue 46): each run of steps 2, 1 and 3 again (other launches than the one the
    records came from) against the band predicted from steps 3's benchmark alone, throughput and accept length, in
    both sessions; and each session's runs against the other session's prediction (launches 18 minutes apart, the
    server's speed 28 % apart at the median). A band of 95 % holds at least 21 of 24 runs but for a chance of 3 %
    (test_real_0517_predict_gpu.least_inside). Now 24 of 24 each way, the bands ±64 % at the median (this host-bound
    server's runs spread 7-17 %, at t of 2 degrees of freedom and the launches' prior beside them); before the
    launches' spread, 23 of 24 in the same session (±46 %) and 19 of 24 across sessions; before issue 46, 16 and 0
    of 24 in the same session."""
    for pairs in ((("run1", "run1"), ("run2", "run2")), (("run1", "run2"), ("run2", "run1"))):
        counts = [inside_bands(base_run, measured_run) for base_run, measured_run in pairs]
        tok, accept, total = (sum(c[i] for c in counts) for i in range(3))
        assert total == 24 and tok >= least_inside(24) and accept >= least_inside(24), (pairs, tok, accept)


def accept_of(m: Measured) -> float:
    return 1.0 + (m.mean_accepted or 0.0)
