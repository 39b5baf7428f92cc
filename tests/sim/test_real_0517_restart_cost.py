"""What a restart costs on a real GPU server (issue 44), replayed from issue 46's session on an NVIDIA H100 80GB
(tests/sim/fixtures/real-0.5.17/predict-gpu/: SGLang 0.5.17, an 8B-shaped Llama with an EAGLE head, seven starts).

Each start is read as the applier reads it (console/core/apply/restarts.py): from the restart command (the journal's
"Stopping", where a server was running) to ready ("fired up"), with the server's own account of its start. 0.5.17
logs that account as "Engine startup timings (s): ..." and carries the same figures in /server_info `startup_time`
(its capture: fixtures/real-0.5.17/capture/server_info.json); the line is what the fixture kept, so it is parsed here.
"""

from __future__ import annotations

import gzip
import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from console.core.apply.restarts import ENGINE_SETUP, REST, RestartRecord, restart_cost, restart_record

FIXTURES = Path(__file__).parent / "fixtures" / "real-0.5.17"
TIMINGS = "Engine startup timings (s): "


def startup_time_of(line: str) -> dict[str, Any]:
    """0.5.17's "Engine startup timings" line as /server_info's startup_time object."""
    body = line.split(TIMINGS, 1)[1]
    graphs = re.search(r"cuda_graph=\{([^}]*)\}", body)
    assert graphs is not None, line
    out: dict[str, Any] = {k: float(v) for k, v in re.findall(r"(\w+)=([\d.]+)", body.replace(graphs.group(0), ""))}
    out["cuda_graph"] = {k: float(v) for k, v in re.findall(r"(\w+)=([\d.]+)", graphs.group(1))}
    return out


@pytest.fixture(scope="module")
def starts() -> list[RestartRecord]:
    records, stopping, began, startup = [], None, None, None
    with gzip.open(FIXTURES / "predict-gpu" / "journal-excerpt.jsonl.gz", "rt") as journal:
        for row in map(json.loads, journal):
            message, at = row["message"], datetime.fromtimestamp(row["ts"], UTC)
            if message.startswith("Stopping sglang.service"):
                stopping = at
            elif message.startswith("Started sglang.service"):
                began, stopping, startup = stopping or at, None, None
            elif TIMINGS in message:
                startup = startup_time_of(message)
            elif "The server is fired up" in message:
                assert began is not None and startup is not None
                record = restart_record(
                    host="h100", unit="sglang.service", began=began, ready=at, startup_time=startup,
                    journal_phases=(), sglang_version="0.5.17", setup="EAGLE", start="apply",
                )  # fmt: skip
                records.append(record)
    return records


def test_the_line_carries_what_server_info_does() -> None:
    with (FIXTURES / "capture" / "server_info.json").open() as f:
        server_info = json.load(f)["startup_time"]
    with gzip.open(FIXTURES / "predict-gpu" / "journal-excerpt.jsonl.gz", "rt") as journal:
        line = next(json.loads(row)["message"] for row in journal if TIMINGS in row)
    parsed = startup_time_of(line)
    assert parsed.keys() == server_info.keys() and parsed["cuda_graph"].keys() == server_info["cuda_graph"].keys()


def test_every_start_is_accounted_for_to_the_second(starts: list[RestartRecord]) -> None:
    assert len(starts) == 7 and all(r.phases_from == "server" for r in starts)
    for record in starts:
        assert sum(p.seconds for p in record.phases) == pytest.approx(record.total_s)
        assert all(p.seconds > 0 for p in record.phases)


def test_the_first_start_on_a_cold_machine_pays_its_graphs(starts: list[RestartRecord]) -> None:
    """The machine's first start captured its target graphs in 48 s (kernels compiled cold), every later one in about
    2 s: the start a persistent compile cache shortens."""
    graphs = [next(p.seconds for p in r.phases if p.name == "cuda_graph") for r in starts]
    assert graphs[0] > 40 and all(1.5 < g < 3 for g in graphs[1:])
    assert starts[0].total_s > 1.5 * starts[1].total_s


def test_what_the_console_says_before_the_next_restart(starts: list[RestartRecord]) -> None:
    """The median of the latest five: ~54 s, and the named phases (weights, KV cache, graphs) only ~7 s of it. Without
    the engine's own set-up (processes, model init: ~23 s) the rest would be 87 % and say nothing; with it, what lies
    outside the engine (the old server's stop, ~5.5 s, and the interpreter's imports) is 45 %."""
    cost = restart_cost(starts, "h100")
    assert cost is not None and cost.count == 5
    assert 52 < cost.median_s < 57
    phases = {p.name: p.seconds for p in cost.phases}
    assert 21 < phases[ENGINE_SETUP] < 25 and 22 < phases[REST] < 26
    named = sum(s for name, s in phases.items() if name not in (ENGINE_SETUP, REST))
    assert 5 < named < 9
    assert cost.dominant == REST and 0.40 < cost.dominant_share < 0.50
    assert cost.text() == "a restart of h100 takes ~54 s (median of 5; the rest (stop, start-up) 45 %)"
