"""`opsconsole bench` and `opsconsole compare` as a user runs them: real processes, real server, real files."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.bench.conftest import REPO_ROOT, ScheduleServer


def opsconsole(workspace: Path, *args: str) -> subprocess.CompletedProcess[str]:
    cmd = [sys.executable, "-m", "console.cli", "--workspace", str(workspace), *args]
    return subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, text=True, timeout=120)


def test_bench_appends_records_and_compare_reads_them(
    schedule_server: Callable[..., ScheduleServer], tmp_path: Path
) -> None:
    server = schedule_server(ttft_ms=2, interval_ms=2, tokens_per_chunk=2, spec=True)
    common = ["--url", server.url, "--concurrency", "1,4", "--requests", "8", "--input-len", "16", "--output-len", "16"]
    first = opsconsole(tmp_path, "bench", *common, "--label", "baseline", "--repeat", "2", "--json")
    assert first.returncode == 0, first.stderr
    records = json.loads(first.stdout)
    assert [(r["max_concurrency"], r["repeat_index"]) for r in records] == [(1, 0), (1, 1), (4, 0), (4, 1)]
    r = records[0]
    assert r["label"] == "baseline" and r["completed"] == 8 and r["failed"] == 0
    assert r["workload"]["name"] == "random" and r["workload"]["ignore_eos"] and r["workload"]["seed"] == 1
    assert r["sglang_version"] == "0.5.9" and r["server_args"]["speculative_algorithm"] == "EAGLE"
    assert r["accept_length"] == 2.0 and r["accept_length_source"] == "requests"
    for key in ("output_throughput", "mean_ttft_ms", "median_tpot_ms", "p99_itl_ms", "concurrency"):
        assert r[key] > 0
    logs = list((tmp_path / "logs").glob("bench-*.jsonl"))
    assert len(logs) == 1 and len(logs[0].read_text().splitlines()) == 4

    second = opsconsole(tmp_path, "bench", *common, "--label", "chat-api", "--api", "chat", "--repeat", "2", "--json")
    assert second.returncode == 0, second.stderr

    compared = opsconsole(tmp_path, "compare", "baseline", "chat-api", "--json")
    assert compared.returncode == 0, compared.stderr
    table = json.loads(compared.stdout)
    assert table["baseline"] == "baseline" and table["runs"] == ["baseline", "chat-api"]
    assert [lv["level"] for lv in table["levels"]] == ["C=1", "C=4"]
    cell = table["levels"][0]["runs"][1]["metrics"]["output_throughput"]
    assert cell["repeats"] == 2 and cell["delta_pct"] is not None and cell["within_noise"] in (True, False)

    text = opsconsole(tmp_path, "compare", "baseline", str(logs[0]))
    assert text.returncode == 0 and "output tok/s" in text.stdout and "A = baseline" in text.stdout


@pytest.mark.system
def test_usage_errors_and_unknown_runs_say_what_to_do(tmp_path: Path) -> None:
    bad = opsconsole(tmp_path, "bench", "--url", "http://127.0.0.1:1", "--concurrency", "1,x")
    assert bad.returncode == 2 and "--concurrency" in bad.stderr
    both = opsconsole(tmp_path, "bench", "--url", "http://127.0.0.1:1", "--requests", "3", "--duration", "2")
    assert both.returncode == 2 and "either --requests or --duration" in both.stderr
    no_url = opsconsole(tmp_path, "bench")
    assert no_url.returncode == 2 and "--url" in no_url.stderr
    missing = opsconsole(tmp_path, "compare", "nothing-here")
    assert missing.returncode == 1 and "no run labelled 'nothing-here'" in missing.stderr


@pytest.mark.system
def test_unreachable_server_exits_1_with_the_reason(tmp_path: Path) -> None:
    result = opsconsole(tmp_path, "bench", "--url", "http://127.0.0.1:9", "--concurrency", "1", "--requests", "1")
    assert result.returncode == 1
    assert "every warm-up request failed" in result.stderr


@pytest.mark.system
def test_the_traffic_options_refuse_bad_input_before_anything_is_sent(tmp_path: Path) -> None:
    url = ("--url", "http://127.0.0.1:9")  # nothing listens: a check that got as far as the server would say so

    def said(*args: str) -> str:
        """Exit 2 and the message on one line (a wide terminal: the error names long paths)."""
        cmd = [sys.executable, "-m", "console.cli", "--workspace", str(tmp_path), "bench", *url, *args]
        env = {**os.environ, "COLUMNS": "1000"}
        done = subprocess.run(cmd, cwd=REPO_ROOT, capture_output=True, text=True, timeout=120, env=env)
        assert done.returncode == 2, done.stderr
        return done.stderr

    missing = said("--dataset", str(tmp_path / "none.jsonl"))
    assert f"{tmp_path / 'none.jsonl'}: cannot be read" in missing and "nothing was sent" in missing
    mixed = tmp_path / "mixed.jsonl"
    mixed.write_text('{"prompt": "one two"}\n{"messages": [{"role": "user", "content": "hi"}]}\n')
    assert "mixed.jsonl: line 2: this line is OpenAI chat JSONL" in said("--dataset", str(mixed))
    chat = tmp_path / "chat.jsonl"
    chat.write_text('{"messages": [{"role": "user", "content": "hi there"}]}\n')
    assert "holds chat messages: they go to the chat API" in said("--dataset", str(chat), "--api", "generate")
    assert "ttft_p95 = 'fast' is not a time" in said("--slo", "ttft_p95=fast")
    assert "--find-capacity needs an SLO" in said("--find-capacity")
    assert not list(tmp_path.glob("logs/bench-*.jsonl"))
