"""`tune` on the operator's own traffic, judged against an SLO, on the Kimi demo (console.core.tune in-process, the
demo host's supervisor and stand-in as real processes): on open chat no speculation is best at every level and the
report says speculation loses there; on code EAGLE3 (topk 1 + spec v2) accepts more draft tokens (×1.12, within the
published code ÷ chat range of 1.0-1.31: console.sim.content) and wins back most of what it loses on chat: level
with no speculation there (+3.5 % and +0.9 % measured, within the noise), where it trails by 17-21 % on chat.

The two datasets are generated (console.sim.datasets, scripts/make_datasets.py). The stand-in runs 10× faster than
the profile (tests/tune/simhost.py), so the SLO is in its wall-clock time: at 10× a TPOT of 20 ms is loose; every
request meets it and goodput is the requests/s each setup completes.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path

import pytest

from console.bench.datasets import sample_dataset
from console.core.session import open_session
from console.core.tune import SpaceRequest, TuneRequest, TuneResult, plan_tune
from console.sim.datasets import write_datasets
from console.workspace import Workspace
from tests.support.demo import Demo, running_demo
from tests.tune.simhost import KIMI, install, seed_unit

pytestmark = pytest.mark.system  # the demo host's processes (tests/tiers.py)

EAGLE3_V2 = [("--speculative-algorithm", "EAGLE3"), ("--speculative-num-steps", "2"),
             ("--speculative-eagle-topk", "1"), ("--speculative-num-draft-tokens", "3"),
             ("--speculative-draft-model-path", "sim/kimi-k2.5-eagle3")]  # fmt: skip
SLO = {"ttft_p95": 1000.0, "tpot_p95": 20.0}


@pytest.fixture
def kimi(tmp_path: Path) -> Iterator[Demo]:
    with running_demo(tmp_path / "ws", profile=KIMI) as demo:
        asyncio.run(install(demo, lambda text: seed_unit(text, profile=KIMI, version="0.5.9", spec_v2=True,
                                                           speculative=EAGLE3_V2)))  # fmt: skip
        yield demo


async def tune_on(demo: Demo, dataset: Path) -> tuple[TuneResult, str]:
    request = TuneRequest(
        space=SpaceRequest(
            algorithms=(None, "EAGLE3"),
            steps=(2,),
            topks=(1,),
            spec_v2=(True,),
            draft_model_path="sim/kimi-k2.5-eagle3",
        ),
        concurrencies=(1, 8),
        workloads=("dataset",),
        dataset=sample_dataset(dataset, size=40, seed=1),
        objective="goodput",
        slo=SLO,
        duration_s=4.0,
        repeats=1,
        strategy="grid",
        warmup=1,
    )
    async with open_session("demo", Workspace.resolve(demo.workspace)) as session:
        async with await plan_tune(session, request) as pending:
            result = await pending.execute()
        return result, await session.service.read_unit()


def best(result: TuneResult) -> dict[int, str]:
    return {r.cell.concurrency: r.name for r in result.recommendations}


def score(result: TuneResult, name: str, concurrency: int) -> float:
    """The level's goodput (the objective's figure) of one setup."""
    key = next(c.key for c in result.space.candidates if c.name == name)
    cell = next(c for c in result.cells if c.concurrency == concurrency)
    metrics = result.level_metrics(key, cell)
    assert metrics is not None and metrics["score"] is not None
    return float(metrics["score"])


def accept_length(result: TuneResult, name: str, concurrency: int) -> float:
    key = next(c.key for c in result.space.candidates if c.name == name)
    cell = next(c for c in result.cells if c.concurrency == concurrency)
    metrics = result.level_metrics(key, cell)
    assert metrics is not None and metrics["accept_length"] is not None
    return float(metrics["accept_length"])


@pytest.mark.long(43)  # its measured seconds: started first (tests/tiers.py)
async def test_tune_with_an_slo_on_chat_and_on_code(kimi: Demo) -> None:
    original = await asyncio.to_thread(kimi.host().unit)
    chat, code = write_datasets(kimi.workspace / "datasets", count=60, seed=1)
    on_chat, unit_after_chat = await tune_on(kimi, chat)
    on_code, unit_after_code = await tune_on(kimi, code)
    eagle3 = "EAGLE3"  # the only axis that varies: the algorithm (topk 1, steps 2, spec v2 for both)
    names = [c.name for c in on_chat.space.candidates]
    assert names == ["no speculation", eagle3], names

    assert best(on_chat) == {1: "no speculation", 8: "no speculation"}
    assert (
        on_chat.verdicts[0]
        == "on dataset speculation loses at every level: no speculation is best by goodput at C=1, 8"
    )
    for concurrency in (1, 8):
        # EAGLE3 ÷ no speculation: 0.85 / 0.83 on chat, 1.04 / 1.01 on code (virtual clock: 0.92 / 0.77, 1.04 / 0.90).
        # With the machine's cores busy the stand-in's steps stretch alike and the gaps shrink (0.96 / 1.02 at C = 1
        # in a loaded run): the direction holds, the sizes are the virtual clock's business (tests/sim).
        on_chat_ratio = score(on_chat, eagle3, concurrency) / score(on_chat, "no speculation", concurrency)
        on_code_ratio = score(on_code, eagle3, concurrency) / score(on_code, "no speculation", concurrency)
        assert on_chat_ratio < 1.0 and on_code_ratio > on_chat_ratio, (concurrency, on_chat_ratio, on_code_ratio)
    # why: EAGLE3 accepts more draft tokens on code than on open chat, as published (code ÷ chat 1.0-1.31)
    assert 1.06 < accept_length(on_code, eagle3, 1) / accept_length(on_chat, eagle3, 1) <= 1.31

    for result in (on_chat, on_code):
        assert result.objective == "goodput" and result.slo is not None and result.slo.to_json() == SLO
        assert all(r.objective == "goodput" and r.score for r in result.recommendations)
        assert set(result.capacities["dataset"]) == {"no speculation", eagle3}
        assert all(cap.level == "C=8" for cap in result.capacities["dataset"].values())  # a loose SLO: both carry C=8
        doc = result.to_json()
        assert doc["objective"] == "goodput" and doc["slo"] == SLO and doc["capacity"]["dataset"]
        assert result.final_unit == "original" and result.host_healthy
    assert unit_after_chat == unit_after_code == original
