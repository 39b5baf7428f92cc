"""The prediction's acceptance (console.core.predict.acceptance): a two-state chain over the output, held to what a
real SGLang 0.5.17 measured on the H200 (../shared/research/wave4-facts.md): a shorter chain is not the longer one cut
short, and the chain fitted to the steps-3 histogram gives steps 2 and 1."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from console.core.predict import Histogram, Runs, fit_histograms, fit_means, mean_accepted
from console.core.predict.acceptance import round_distribution, tree_runs

# Tiny Llama, the EAGLE draft that repeats the last token, topk 1, 128 random ids in, 64 forced out, temperature 0:
# the steps-3 pooled histogram, and the accept lengths of three launches at steps 3 / 2 / 1.
H200 = {
    1: ((2302, 39, 20, 405), {3: 1.47, 2: 1.40, 1: 1.27}),
    16: ((3877, 70, 60, 992), {3: 1.63, 2: 1.52, 1: 1.35}),
}


def cut(histogram: tuple[int, ...], steps: int) -> float:
    """The accept length that cutting the histogram at `steps` predicts: what this model replaces."""
    return 1 + sum(min(i, steps) * n for i, n in enumerate(histogram)) / sum(histogram)


@pytest.mark.parametrize("concurrency", [1, 16])
def test_the_chain_fitted_to_steps_3_predicts_steps_2_and_1_as_measured(concurrency: int) -> None:
    histogram, measured = H200[concurrency]
    fit = fit_histograms([Histogram(3, histogram)])
    assert fit is not None and fit.source == "histograms"
    for steps in (3, 2, 1):
        central, low, high = fit.predict(steps)
        assert 1 + central == pytest.approx(measured[steps], rel=0.01)  # within 3 % asked; 1 % here
        assert low <= central <= high


@pytest.mark.parametrize("concurrency", [1, 16])
def test_cutting_the_histogram_short_is_5_to_10_percent_low_the_control(concurrency: int) -> None:
    histogram, measured = H200[concurrency]
    for steps in (2, 1):
        assert 0.04 < 1 - cut(histogram, steps) / measured[steps] < 0.10


def test_the_fit_finds_the_runs_the_h200_showed() -> None:
    fit = fit_histograms([Histogram(3, H200[1][0])])
    assert fit is not None
    assert fit.runs.after_hit == pytest.approx(0.934, abs=0.01)
    assert fit.runs.after_miss == pytest.approx(0.047, abs=0.01)


def test_histograms_of_two_depths_fit_together() -> None:
    truth = Runs(0.8, 0.3)
    histograms = [
        Histogram(depth, tuple(round(p * 20000) for p in round_distribution(truth, depth))) for depth in (1, 3)
    ]
    fit = fit_histograms(histograms)
    assert fit is not None
    assert fit.runs.after_hit == pytest.approx(0.8, abs=0.01) and fit.runs.after_miss == pytest.approx(0.3, abs=0.01)


def test_two_mean_accept_lengths_fix_the_chain_one_leaves_a_band() -> None:
    truth = Runs(0.9, 0.2)
    means = [(depth, mean_accepted(truth, depth), 5000) for depth in (1, 3)]
    two = fit_means(means)
    assert two is not None and two.source == "means"
    assert 1 + two.predict(2)[0] == pytest.approx(1 + mean_accepted(truth, 2), rel=0.01)
    one = fit_means(means[1:])
    assert one is not None
    central, low, high = one.predict(1)
    # From steps 3 alone the chain's runs are unknown: the band spans no runs (lower) to strong runs (higher).
    assert low < mean_accepted(truth, 1) <= high
    assert (high - low) / central > 0.05  # the H200's runs made a 5-10 % difference


def test_nothing_to_fit_is_none() -> None:
    assert fit_histograms([]) is None and fit_histograms([Histogram(3, (0, 0, 0, 0))]) is None
    assert fit_means([]) is None


def test_deeper_than_measured_gets_a_lower_edge() -> None:
    fit = fit_histograms([Histogram(2, (70000, 10000, 20000))])
    assert fit is not None
    central, low, _high = fit.predict(4)
    assert low < 0.97 * central  # a further position may fall
    assert fit.predict(2)[1] == pytest.approx(fit.predict(2)[0], rel=0.01)  # where it was measured: the data's own


chances = st.floats(min_value=0.0, max_value=1.0)


@given(chances, chances, st.integers(min_value=1, max_value=8))
def test_a_round_distribution_is_a_distribution_over_0_to_depth(hit: float, miss: float, depth: int) -> None:
    dist = round_distribution(Runs(hit, miss), depth)
    assert len(dist) == depth + 1 and sum(dist) == pytest.approx(1.0) and min(dist) >= -1e-12
    assert 0.0 <= mean_accepted(Runs(hit, miss), depth) <= depth + 1e-9


@given(chances, chances, st.integers(min_value=1, max_value=6))
def test_more_depth_never_accepts_fewer_without_a_fall(hit: float, miss: float, depth: int) -> None:
    runs = Runs(hit, miss)
    assert mean_accepted(runs, depth + 1) >= mean_accepted(runs, depth) - 1e-9


@given(chances, chances, st.floats(min_value=1.0, max_value=4.0))
def test_a_tree_catches_more_and_no_catch_is_the_chain(hit: float, miss: float, branches: float) -> None:
    runs = Runs(hit, miss)
    same = tree_runs(runs, branches, 0.0)
    assert same.after_hit == pytest.approx(hit) and same.after_miss == pytest.approx(miss)
    wider = tree_runs(runs, branches, 0.3)
    assert wider.after_hit >= runs.after_hit - 1e-12 and wider.after_miss >= runs.after_miss - 1e-12
