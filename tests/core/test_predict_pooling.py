"""What a prediction reads beside the running setup's own records (issue 46): the host's earlier records of other
setups (within --max-age, named), and the records of the other hosts of its group that ran the same model, draft and
GPU (pooled, and said so); where it rests on one setup, the one restart that would split the round. Records of the
stand-in's tiny-test profile on its virtual clock (tests/support/virtual_bench.py), written to a logs/ folder."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from console.bench.records import BenchRecord, append_records
from console.core.predict import Evidence, Predictor
from console.core.tune.predict import records_for
from console.sglang.setup import SpecSetup
from console.sim.profiles import EAGLE_REPEAT_DRAFT, get_profile
from tests.support.virtual_bench import resolved_args, virtual_records

TINY = get_profile("tiny-test")
H100 = {"name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-1"}
H200 = {"name": "NVIDIA H200", "uuid": "GPU-2"}


def records(steps: int, host: str, *, gpu: dict[str, Any] = H100, draft: str = EAGLE_REPEAT_DRAFT, days_ago: float = 1,
            seed: int = 0) -> list[BenchRecord]:  # fmt: skip
    args = resolved_args("EAGLE", steps, 1, draft_model_path=draft)
    out = virtual_records(
        TINY, args, [1, 16], repeat=2, seed=seed, input_len=128, output_len=64, label=f"{host} s{steps}"
    )
    at = datetime.now(UTC) - timedelta(days=days_ago)
    return [
        r.model_copy(update={"target": host, "gpus": [gpu], "started_at": at + timedelta(minutes=i), "ended_at": at})
        for i, r in enumerate(out)
    ]


def setup_of(record: BenchRecord) -> SpecSetup:
    return SpecSetup.from_server_args(record.server_args, record.spec_mode)


def test_the_group_s_hosts_of_the_same_model_draft_and_gpu_are_pooled_and_said_so(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    own = records(3, "gpu-a")
    peer = records(1, "gpu-b", seed=1)  # the same model, draft and GPU, another setup: pooled
    other_gpu = records(1, "gpu-c", gpu=H200, seed=2)  # an H200: not pooled
    other_draft = records(1, "gpu-b", draft="/m/another-draft", seed=3)  # another draft: not pooled
    stranger = records(1, "gpu-d", seed=4)  # not of the group
    old = records(2, "gpu-a", days_ago=30, seed=5)  # the host's own, past --max-age
    append_records(logs, own + peer + other_gpu + other_draft + stranger + old)
    running = setup_of(own[0])
    got = records_for(logs, "gpu-a", "0.5.17", 14.0, running=running, model=TINY.served_model,
                      peers={"gpu-b", "gpu-c"})  # fmt: skip
    assert sorted((r.target, setup_of(r).steps) for r in got) == sorted(
        [("gpu-a", 3)] * len(own) + [("gpu-b", 1)] * len(peer)
    )
    assert not any(r.server_args.get("speculative_draft_model_path") == "/m/another-draft" for r in got)
    predictor = Predictor(Evidence.from_records(got), Evidence.from_records(got).workloads()[0], incumbent=running,
                          host="gpu-a")  # fmt: skip
    forecast = predictor.forecast(setup_of(peer[0]), True, [1, 16])
    assert any(line.startswith(f"pooled: {len(peer)} levels of gpu-b") for line in forecast.rests_on)
    assert "2 setups" in forecast.rests_on[1] and "EAGLE steps 3 topk 1 + spec v2 (running;" in forecast.rests_on[1]
    # without the group (no peers), the host's own only, and a prediction that rests on one setup
    alone = records_for(logs, "gpu-a", "0.5.17", 14.0, running=running, model=TINY.served_model)
    assert {r.target for r in alone} == {"gpu-a"} and len(alone) == len(own)


def test_the_host_s_own_earlier_setups_count_and_are_named(tmp_path: Path) -> None:
    logs = tmp_path / "logs"
    append_records(logs, records(3, "gpu-a") + records(1, "gpu-a", days_ago=5, seed=7))
    running = setup_of(records(3, "gpu-a")[0])
    got = records_for(logs, "gpu-a", "0.5.17", 14.0, running=running)
    evidence = Evidence.from_records(got)
    predictor = Predictor(evidence, evidence.workloads()[0], incumbent=running, host="gpu-a")
    text = predictor.measured_setups_text()
    day = (datetime.now(UTC) - timedelta(days=5)).strftime("%Y-%m-%d")
    assert text.startswith("8 levels of 2 setups: EAGLE steps 3 topk 1 + spec v2 (running;")
    assert f"EAGLE steps 1 topk 1 + spec v2 ({day})" in text
    assert not predictor.rests_on_one_setup()
    assert predictor.split([(running, True)], [1, 16]) is None


def test_one_setup_names_the_restart_that_would_split_the_round(tmp_path: Path) -> None:
    own = records(3, "gpu-a")
    evidence = Evidence.from_records(own)
    running = setup_of(own[0])
    predictor = Predictor(evidence, evidence.workloads()[0], incumbent=running, host="gpu-a")
    space = [(SpecSetup("EAGLE", s, 1, s + 1, True, EAGLE_REPEAT_DRAFT), True) for s in (1, 2, 3)]
    space.append((SpecSetup("EAGLE", 3, 2, 6, True, EAGLE_REPEAT_DRAFT), True))
    split = predictor.split(space, [1, 16])
    assert split is not None and split.setup.topk == 1 and split.setup.steps in (1, 2)
    assert all(split.bands_after[c] < split.bands_now[c] for c in (1, 16))
    assert split.text.startswith(f"one benchmark of {split.setup.name()} (a restart) would split the round")
