"""The continuous-batching Engine: scheduling, finishing, counters, determinism and speed."""

from __future__ import annotations

from typing import Any

import pytest

from console.sim.engine import Engine, Step
from console.sim.profiles import get_profile

TINY = get_profile("tiny-test")
QWEN = get_profile("qwen3.5-122b-fp8-4x-rtxpro6000")
SPEC: dict[str, Any] = {
    "speculative_algorithm": "EAGLE",
    "speculative_num_steps": 3,
    "speculative_eagle_topk": 1,
    "speculative_num_draft_tokens": 4,
}


def drain(engine: Engine, limit: int = 1_000_000) -> list[Step]:
    steps = []
    for _ in range(limit):
        step = engine.next_step()
        if step is None:
            return steps
        steps.append(step)
    raise AssertionError("the engine never went idle")


def test_idle_engine_has_no_step() -> None:
    engine = Engine(TINY, {})
    assert engine.next_step() is None and engine.idle


def test_a_request_is_prefilled_then_decoded_to_its_length() -> None:
    engine = Engine(TINY, SPEC)
    engine.add("a", prompt_tokens=100, max_new_tokens=50, ignore_eos=True)
    steps = drain(engine)
    assert steps[0].kind == "prefill" and steps[0].emitted == {"a": 1}
    assert all(s.kind == "decode" for s in steps[1:])
    assert sum(s.emitted["a"] for s in steps) == 50
    assert all(1 <= s.emitted["a"] <= 4 for s in steps[1:])  # at most num_steps + 1 per round
    last = steps[-1]
    assert last.finished == {"a"} and last.finish_reasons == {"a": "length"}
    assert last.verify_ct == {"a": len(steps) - 1}  # one verify per decode round
    assert all(s.duration_s > 0 for s in steps)
    assert engine.num_tokens == 0 and engine.idle


def test_without_speculation_one_token_per_step_and_no_accept_length() -> None:
    engine = Engine(TINY, {})
    engine.add("a", 10, 20, ignore_eos=True)
    steps = drain(engine)
    assert len(steps) == 20 and all(s.emitted == {"a": 1} for s in steps)
    assert engine.avg_spec_accept_length is None


def test_requests_past_the_running_limit_queue_and_all_finish() -> None:
    engine = Engine(TINY, SPEC | {"max_running_requests": 4})
    for i in range(10):
        engine.add(f"r{i}", 64, 30, ignore_eos=True)
    step = engine.next_step()
    assert step is not None and step.kind == "prefill" and step.batch_size == 4
    assert engine.num_running == 4 and engine.num_queued == 6
    finished: set[str] = set()
    peak = 0
    while (step := engine.next_step()) is not None:
        peak = max(peak, engine.num_running)
        finished |= step.finished
    assert peak == 4 and finished == {f"r{i}" for i in range(10)}


def test_admission_waits_for_kv_cache_room() -> None:
    engine = Engine(TINY, {})
    prompt = engine.max_total_num_tokens // 3 - 5000  # three fit with their output estimate, a fourth does not
    for i in range(4):
        engine.add(f"r{i}", prompt, 20, ignore_eos=True)
    for _ in range(3):
        step = engine.next_step()
        assert step is not None and step.kind == "prefill"
    step = engine.next_step()
    assert step is not None and step.kind == "decode"
    assert engine.num_running == 3 and engine.num_queued == 1
    assert 0.9 < engine.token_usage <= 1.0
    finished = {rid for s in drain(engine) for rid in s.finished}
    assert finished == {"r0", "r1", "r2", "r3"}


def test_prefill_respects_the_chunked_prefill_budget() -> None:
    engine = Engine(TINY, {"chunked_prefill_size": 1000})
    for i in range(5):
        engine.add(f"r{i}", 400, 10, ignore_eos=True)
    first = engine.next_step()
    assert first is not None and first.kind == "prefill" and first.batch_size == 2
    second = engine.next_step()
    assert second is not None and second.kind == "prefill"  # new requests go first, as in SGLang


def test_abort_removes_waiting_and_running_requests() -> None:
    engine = Engine(TINY, {"max_running_requests": 1})
    engine.add("run", 10, 100, ignore_eos=True)
    engine.add("wait", 10, 100, ignore_eos=True)
    engine.next_step()
    assert engine.abort("wait") and engine.num_queued == 0
    assert engine.abort("run") and engine.num_running == 0 and engine.num_tokens == 0
    assert not engine.abort("run")
    assert engine.next_step() is None


def test_bad_requests_are_refused() -> None:
    engine = Engine(TINY, {})
    engine.add("a", 10, 10)
    with pytest.raises(ValueError, match="already in flight"):
        engine.add("a", 10, 10)
    for prompt, new, temperature in [(0, 10, 0.0), (10, 0, 0.0), (10, 10, -1.0)]:
        with pytest.raises(ValueError):
            engine.add("b", prompt, new, temperature=temperature)


def test_natural_stops_are_deterministic_per_seed_and_vary_in_length() -> None:
    def lengths(seed: int) -> dict[str, tuple[int, str]]:
        engine = Engine(TINY, SPEC, seed=seed)
        for i in range(40):
            engine.add(f"r{i}", 32, 100, ignore_eos=False)
        produced: dict[str, int] = {}
        out = {}
        for step in drain(engine):
            for rid, n in step.emitted.items():
                produced[rid] = produced.get(rid, 0) + n
            for rid in step.finished:
                out[rid] = (produced[rid], step.finish_reasons[rid])
        return out

    first, again, other = lengths(1), lengths(1), lengths(2)
    assert first == again and first != other
    sizes = {n for n, _ in first.values()}
    assert len(sizes) > 10 and max(sizes) <= 100
    assert {"stop", "length"} == {reason for _, reason in first.values()}  # mean 64: some run to 100


def test_accept_length_counters_follow_the_model_and_flush_resets_them() -> None:
    engine = Engine(QWEN, SPEC, seed=5)
    for i in range(8):
        engine.add(f"r{i}", 256, 2000, temperature=0.0, ignore_eos=False)
    refused = engine.flush()
    drain(engine)
    assert not refused
    measured = engine.avg_spec_accept_length
    assert measured == pytest.approx(engine.perf.expected_accept_length(0.0, ignore_eos=False), rel=0.05)
    assert engine.flush() and engine.avg_spec_accept_length is None


def test_decode_window_reports_sglang_log_figures() -> None:
    engine = Engine(TINY, SPEC)
    for i in range(3):
        engine.add(f"r{i}", 100, 10_000, ignore_eos=True)
    engine.next_step()  # prefill
    engine.take_window()
    for _ in range(40):
        engine.next_step()
    assert engine.window_decode_steps == 40
    window = engine.take_window()
    assert window.decode_steps == 40 and engine.window_decode_steps == 0
    assert window.num_running == 3 and window.num_queue == 0
    assert window.accept_len is not None and 1.0 <= window.accept_len <= 4.0
    assert window.accept_rate == pytest.approx((window.accept_len - 1) / 3)
    assert window.accept_rate_with_bonus == pytest.approx(window.accept_len / 4)
    assert window.gen_throughput == pytest.approx(window.generated_tokens / window.elapsed_s)
    assert window.num_tokens == engine.num_tokens and 0 < window.token_usage < 1
    assert engine.last_gen_throughput == window.gen_throughput


def test_same_seed_same_schedule() -> None:
    def trace(seed: int) -> list[tuple[str, float, tuple[tuple[str, int], ...]]]:
        engine = Engine(QWEN, SPEC, seed=seed)
        for i in range(5):
            engine.add(f"r{i}", 128, 64, temperature=0.7)
        return [(s.kind, s.duration_s, tuple(sorted(s.emitted.items()))) for s in drain(engine)]

    assert trace(7) == trace(7)
    assert trace(7) != trace(8)


def test_gpu_load_follows_the_batch_and_startup_phases_come_from_the_model() -> None:
    engine = Engine(QWEN, SPEC)
    idle = engine.gpu_load()
    for i in range(16):
        engine.add(f"r{i}", 128, 1000, ignore_eos=True)
    engine.next_step()
    busy = engine.gpu_load()
    assert len(busy) == 4 and busy[0].power_draw_w > idle[0].power_draw_w
    assert engine.startup_phases() == engine.perf.startup_phases()


def test_next_step_runs_all_256_concurrent_streams_in_every_decode_step() -> None:
    """(How many such steps a second the engine takes is benchmarks/sim_throughput.py's figure, not a test's.)"""
    engine = Engine(TINY, SPEC | {"max_running_requests": 256})
    for i in range(256):
        engine.add(f"r{i}", 256, 1_000_000, ignore_eos=True)
    while engine.num_queued:
        engine.next_step()
    for _ in range(500):
        step = engine.next_step()
        assert step is not None and step.batch_size == 256 and len(step.emitted) == 256
