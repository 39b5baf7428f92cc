"""The spread a band carries beside the model's own (console/core/predict/spread.py, evidence.launches and
Evidence.launch_ratio): which start of the server each record ran in, how much more launches differ than runs, and
the half-widths a run, a launch's mean and a measured mean get. Pure; the launch figures are the real captures'
(tests/sim/fixtures/real-0.5.17/), the arithmetic is checked on figures made for it."""

from __future__ import annotations

import gzip
import math
from dataclasses import replace
from pathlib import Path

import pytest

from console.bench.records import BenchRecord
from console.core.predict import Evidence
from console.core.predict.evidence import Measured
from console.core.predict.forecast import _band, _widen
from console.core.predict.spread import LAUNCH_PRIOR, LAUNCH_PRIOR_DOF, Spread, launch_ratio, t975

FIXTURES = Path(__file__).parents[1] / "sim" / "fixtures" / "real-0.5.17"


def capture(path: Path) -> list[BenchRecord]:
    with gzip.open(path, "rt") as f:
        return [BenchRecord.model_validate_json(line) for line in f if line.strip()]


@pytest.fixture(scope="module")
def h100() -> Evidence:
    """The H100 session: steps 1, 3, 2, the tree, then steps 1, 3 and 2 launched again (seven starts)."""
    return Evidence.from_records(capture(FIXTURES / "predict-gpu" / "bench.jsonl.gz"))


def test_a_change_of_setup_is_a_new_launch(h100: Evidence) -> None:
    by_label: dict[str, set[str]] = {}
    for m in h100.levels:
        by_label.setdefault(m.label, set()).add(m.launch)
    assert all(len(launches) == 1 for launches in by_label.values())  # one benchmark, one launch
    assert len({launch for launches in by_label.values() for launch in launches}) == 7
    assert by_label["s1"] != by_label["s1b"] and by_label["s3"] != by_label["s3b"]


def test_a_subset_keeps_the_launches_the_whole_record_showed(h100: Evidence) -> None:
    """Leaving steps 3 out (a leave-one-setup-out fit) must not join steps 1's two launches into one."""
    without_s3 = Evidence([m for m in h100.levels if m.setup.steps != 3 and m.setup.topk == 1])
    assert len({m.launch for m in without_s3.levels if m.setup.steps == 1}) == 2


def test_one_setup_one_host_stretch_is_one_launch_and_hosts_are_apart(h100: Evidence) -> None:
    s1 = [replace(m, launch="") for m in h100.levels if m.label in ("s1", "s1b")]
    assert len({m.launch for m in Evidence(s1).levels}) == 1  # no other setup between them: no restart seen
    other = [replace(m, launch="", host="gpu-b") for m in h100.levels if m.label == "s1b"]
    mixed = Evidence([replace(m, launch="") for m in h100.levels if m.label == "s1"] + other)
    assert len({m.launch for m in mixed.levels}) == 2


def test_the_captures_launch_ratios_are_what_the_prior_is_justified_by(h100: Evidence) -> None:
    """spread.py's docstring: the H100's launches differ by 0.42 (tok/s) and 0.67 (accept length) times its runs'
    variance, over 9 launch degrees of freedom (steps 1, 2 and 3 at three levels, two launches each); each H200 session
    (steps 3 launched twice, at two levels) 0.26 and 0 (tok/s), 0 (accept length). The prior (1) is above them all."""
    tok, accept = h100.launch_ratio(), h100.launch_ratio(accept=True)
    assert tok is not None and accept is not None
    assert tok[0] == pytest.approx(0.42, abs=0.005) and tok[1] == 9
    assert accept[0] == pytest.approx(0.67, abs=0.005) and accept[1] == 9
    sessions = [
        Evidence.from_records(capture(FIXTURES / "predict" / run / "bench.jsonl.gz")) for run in ("run1", "run2")
    ]
    ratios = [(e.launch_ratio(), e.launch_ratio(accept=True)) for e in sessions]
    assert [r[0] for pair in ratios for r in pair if r] == pytest.approx([0.26, 0.0, 0.0, 0.0], abs=0.005)
    assert all(r[0] < LAUNCH_PRIOR for r in (tok, accept))


def figures(values: dict[str, list[float]], base: Measured) -> Evidence:
    """One cell (one setup and level), its runs in the launches named."""
    return Evidence([replace(base, output_tok_s=v, launch=launch) for launch, vs in values.items() for v in vs])


def test_the_launch_ratio_is_the_analysis_of_variance_by_moments(h100: Evidence) -> None:
    base = h100.levels[0]
    # runs 99/101 in one launch, 109/111 in the next: within variance 2 (relative to the mean 105, squared), the
    # launches' means 100 and 110: between mean square 2 * 2 * 5^2 = 100 -> (100 - 2) / 2 = 49 = 24.5 x within
    ratio = figures({"a": [99.0, 101.0], "b": [109.0, 111.0]}, base).launch_ratio()
    assert ratio is not None and ratio[0] == pytest.approx(24.5) and ratio[1] == 1
    same = figures({"a": [99.0, 101.0], "b": [99.0, 101.0]}, base).launch_ratio()
    assert same is not None and same[0] == 0.0  # launches no further apart than runs: none (never negative)
    assert figures({"a": [99.0, 101.0]}, base).launch_ratio() is None  # one launch: nothing to tell


def test_the_records_ratio_is_drawn_towards_the_prior_by_its_weight() -> None:
    assert launch_ratio(None) == LAUNCH_PRIOR
    assert launch_ratio((0.0, LAUNCH_PRIOR_DOF)) == pytest.approx(LAUNCH_PRIOR / 2)
    assert launch_ratio((0.42, 6)) == pytest.approx((LAUNCH_PRIOR * LAUNCH_PRIOR_DOF + 0.42 * 6) / (6 + 2))


def test_a_run_a_launch_and_a_mean_each_get_their_half_width() -> None:
    spread = Spread(0.02, 6, 1.0)
    assert spread.t == t975(6) == 2.45
    assert spread.run == pytest.approx(2.45 * 0.02 * math.sqrt(2))  # a run of a new launch: both
    assert spread.launch == pytest.approx(2.45 * 0.02)  # a new launch's mean: its runs average out
    assert spread.mean(4) == pytest.approx(2.45 * 0.02 / 2)  # four runs of the running launch
    assert Spread(None, 0, 1.0).run == 0.0


def test_an_assumed_edge_is_held_whole_and_the_spread_lies_beyond_it() -> None:
    """A tree catching 0-40 % of its chain's misses: 2.30-2.80 accept length around 2.43, the fit's own range 1 %
    beyond each edge, the runs' spread 3 %: the band runs from 2.30 less 3.2 % (the spread beyond the floor) to 2.80
    plus 3.2 %; quadrature around the centre would have put the floor 2.43 x (1 - 6.3 %) = 2.28, hardly below the
    assumption's own edge."""
    low, high = _band(2.30 * 0.99, 2.80 * 1.01, 2.30, 2.80, 0.03)
    assert low == pytest.approx(2.30 * (1 - math.hypot(0.01, 0.03)))
    assert high == pytest.approx(2.80 * (1 + math.hypot(0.01, 0.03)))
    assert _band(95.0, 104.0, 100.0, 100.0, 0.03) == pytest.approx(_widen(100.0, 95.0, 104.0, 0.03))
