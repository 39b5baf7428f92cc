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
