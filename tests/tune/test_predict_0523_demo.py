"""End to end on today's SGLang: the demo host's stand-in as 0.5.23 (the supervisor and the stand-in as real processes,
the CLI as a subprocess), a benchmark whose records keep the accept histograms (0.5.23 names them
spec_correct_drafts_histogram; a client that read only spec_accept_histogram kept null), and `predict` from them:
its acceptance rests on the histograms, not on mean accept lengths."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from console.sglang.unit import UnitFile
from tests.support.demo import Demo, running_demo
from tests.tune.simhost import QWEN, install, seed_unit

WORKLOAD = ("--input-len", "256", "--output-len", "128")


@pytest.fixture
def demo(tmp_path: Path) -> Iterator[Demo]:
    with running_demo(tmp_path / "ws") as running:
        yield running


def qwen_0523(steps: int) -> Any:
    speculative = [("--speculative-algorithm", "NEXTN"), ("--speculative-num-steps", str(steps)),
                   ("--speculative-eagle-topk", "1"), ("--speculative-num-draft-tokens", str(steps + 1))]  # fmt: skip
    return lambda text: seed_unit(text, profile=QWEN, version="0.5.23", speculative=speculative)


@pytest.mark.long(40)
async def test_a_0523_benchmark_keeps_its_histograms_and_predict_rests_on_them(demo: Demo) -> None:
    await install(demo, qwen_0523(3))
    done = demo.run("bench", "demo", "--concurrency", "1,8", "--duration", "3", "--repeat", "2", *WORKLOAD,
                    "--label", "steps 3 on 0.5.23", "--json")  # fmt: skip
    assert done.returncode == 0, done.stderr
    records: list[dict[str, Any]] = json.loads(done.stdout)
    assert len(records) == 4 and {r["sglang_version"] for r in records} == {"0.5.23"}
    for record in records:
        histogram = record["spec_accept_histogram"]
        assert isinstance(histogram, list) and len(histogram) == 4  # 0..3 drafts accepted a round
        assert sum(histogram) == record["spec_verify_ct"] > 0
        assert record["spec_histogram_key"] == "spec_correct_drafts_histogram"
        assert record["spec_spelling"] == "0.5.23" and "spec_accept_histogram" not in record["spec_meta_keys"]
    kept = [json.loads(line) for f in (demo.workspace / "logs").glob("bench-*.jsonl") for line in f.open()]
    assert all(r["spec_accept_histogram"] for r in kept) and len(kept) == 4  # the records on disk keep them too
    predicted = demo.run("predict", "demo", "--steps", "1,2,3", "--concurrency", "1,8", *WORKLOAD, "--json")
    assert predicted.returncode == 0, predicted.stderr
    doc = json.loads(predicted.stdout)
    assert doc["sglang_version"] == "0.5.23" and doc["records"] == 4
    by_key = {s["key"]: s for s in doc["setups"]}
    for steps in (1, 2):
        setup = by_key[f"eagle-s{steps}-k1-n{steps + 1}-v2"]
        assert any("(histograms)" in line for line in setup["rests_on"]), setup["rests_on"]
        assert [lv["concurrency"] for lv in setup["levels"]] == [1, 8]
        assert all(lv["output_throughput"] > 0 and lv["accept_length"] > 1 for lv in setup["levels"])


def qwen_0523_adaptive(text: str) -> str:
    unit = UnitFile.parse(seed_unit(text, profile=QWEN, version="0.5.23", speculative=[
        ("--speculative-algorithm", "NEXTN")]), "0.5.23")  # fmt: skip
    unit.set_flag("--speculative-adaptive", True)
    return unit.render()


@pytest.mark.long(40)
async def test_an_adaptive_setup_on_status_and_in_predict(demo: Demo) -> None:
    """Qwen's MTP under SGLang's default adaptive tiers: status shows the tier running now beside the launch steps;
    predict forecasts each tier and says which one the table settles on at each level (its slot's candidates)."""
    text = await install(demo, qwen_0523_adaptive)
    assert "--speculative-adaptive" in text
    done = demo.run("bench", "demo", "--concurrency", "1,8", "--duration", "3", "--repeat", "2", *WORKLOAD, "--json")
    assert done.returncode == 0, done.stderr
    status = json.loads(demo.run("status", "demo", "--json").stdout)["sglang"]
    assert status["speculative_adaptive"] is True and status["speculative_num_steps"] == 3  # the launch config
    assert status["adaptive_num_steps"] in (0, 1, 3, 5, 7)
    predicted = demo.run("predict", "demo", "--steps", "3", "--concurrency", "1,8", *WORKLOAD, "--json")
    assert predicted.returncode == 0, predicted.stderr
    adaptive = json.loads(predicted.stdout)["adaptive"]
    assert adaptive["launch_steps"] == 3 and set(adaptive["tiers"]) >= {"1", "3", "5", "7"}
    by_level = {lv["concurrency"]: lv for lv in adaptive["levels"]}
    assert by_level[1]["slot"] == 1 and by_level[1]["candidates"] == [1, 3, 5, 7]
    assert by_level[8]["slot"] == 8 and by_level[8]["candidates"] == [0, 1, 3]
    # Qwen's MTP accepts nearly every draft at temperature 0: the batch-1 slot climbs to its deepest tier
    assert by_level[1]["tier"] == 7 and by_level[1]["path"][0] == 3 and by_level[1]["output_throughput"] > 0
    text_out = demo.run("predict", "demo", "--steps", "3", "--concurrency", "1,8", *WORKLOAD).stdout
    assert "adaptive (launch steps 3): the tier SGLang's table settles on at each level" in text_out
