"""tests/sim: fixtures that more than one module of the stand-in's tests start."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from console.sim.profiles import get_profile
from tests.support.simproc import SimProcess, running_sim

KIMI = get_profile("kimi-k2.5-int4-8x-rtxpro6000-pcie")


@pytest.fixture(scope="module")
def kimi_eagle3() -> Iterator[SimProcess]:
    """A real stand-in process serving the operators' Kimi setup: EAGLE3 chain of 2 on spec v2."""
    args = [
        "--sim-profile", KIMI.name, "--model-path", "moonshotai/Kimi-K2.5", "--tp-size", "8",
        "--speculative-algorithm", "EAGLE3", "--speculative-num-steps", "2", "--speculative-eagle-topk", "1",
        "--speculative-num-draft-tokens", "3", "--speculative-draft-model-path", "sim/kimi-k2.5-eagle3",
        "--sim-speedup", "20", "--sim-time-scale", "0.001", "--stream-interval", "8",
    ]  # fmt: skip
    with running_sim(args) as sim:
        yield sim
