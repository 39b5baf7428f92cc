"""Startup phases from SGLang's log lines (pure)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from console.core.phases import PhaseState, PhaseTracker, exception_line, expected_phases, is_failure_line

T0 = datetime(2026, 11, 30, 4, 0, tzinfo=UTC)

# An EAGLE start as SGLang 0.5.x logs it (TP0 prefixes as in the journal, one rank shown).
EAGLE_START = [
    "[2026-11-30 04:00:00 TP0] Load weight begin. avail mem=93.12 GB",
    "Loading safetensors checkpoint shards:  50% Completed | 20/40 [00:10<00:10, 2.0it/s]",
    "Loading safetensors checkpoint shards: 100% Completed | 40/40 [00:20<00:00, 2.0it/s]",
    "[2026-11-30 04:00:30 TP0] Load weight end. type=Qwen3MoeForCausalLM, dtype=torch.bfloat16, avail mem=61.0 GB, "
    "mem usage=32.1 GB.",
    "[2026-11-30 04:00:31 TP0] KV Cache is allocated. #tokens: 1021344, K size: 11.69 GB, V size: 11.69 GB",
    "[2026-11-30 04:00:32 TP0] Capture cuda graph begin. This can take up to several minutes. avail mem=35.2 GB",
    "Capturing batches (bs=48 avail_mem=35.10 GB):  50%|#####     | 18/36 [00:05<00:05]",
    "[2026-11-30 04:01:30 TP0] Capture cuda graph end. Time elapsed: 58.1 s. mem usage=1.2 GB. avail mem=34.0 GB.",
    "[2026-11-30 04:01:31 TP0] Capture draft cuda graph begin. This can take up to several minutes. avail mem=33 GB",
    "[2026-11-30 04:01:50 TP0] Capture draft cuda graph end. Time elapsed: 19.0 s. mem usage=0.4 GB.",
    "[2026-11-30 04:01:51 TP0] Capture draft extend cuda graph begin. This can take up to several minutes.",
    "[2026-11-30 04:02:00 TP0] Capture draft extend cuda graph end. Time elapsed: 9.0 s. mem usage=0.3 GB.",
    "INFO:     Started server process [4242]",
    "INFO:     Waiting for application startup.",
    "INFO:     Application startup complete.",
    "INFO:     Uvicorn running on http://127.0.0.1:30000 (Press CTRL+C to quit)",
    '[2026-11-30 04:02:05] INFO:     127.0.0.1:50000 - "GET /get_model_info HTTP/1.1" 200 OK',
    "[2026-11-30 04:02:06 TP0] Prefill batch. #new-seq: 1, #new-token: 6, #cached-token: 0, token usage: 0.00",
    "[2026-11-30 04:02:08] The server is fired up and ready to roll!",
]


def feed_all(tracker: PhaseTracker, lines: list[str]) -> list[str]:
    kinds = []
    for i, line in enumerate(lines):
        kinds += [f"{e.kind}:{e.phase}" for e in tracker.feed(line, T0 + timedelta(seconds=i))]
    return kinds


def test_eagle_start_goes_through_every_phase_in_order() -> None:
    tracker = PhaseTracker.for_start(speculative=True)
    events = feed_all(tracker, EAGLE_START)
    assert [e for e in events if e.startswith("started")] == [
        "started:load_weights",
        "started:kv_cache",
        "started:cuda_graph",
        "started:draft_cuda_graph",
        "started:draft_extend_cuda_graph",
        "started:warmup",
    ]
    assert events[-1] == "ready:None"
    assert tracker.ready and not tracker.failed
    assert all(p.state is PhaseState.DONE for p in tracker.phases)
    assert tracker.progress == 1.0
    load = tracker.phases[0]
    assert load.duration_s == 3.0  # lines 0 -> 3, one second apart


def test_progress_grows_monotonically_and_reads_percentages() -> None:
    tracker = PhaseTracker.for_start(speculative=True)
    seen = []
    for i, line in enumerate(EAGLE_START):
        tracker.feed(line, T0 + timedelta(seconds=i))
        seen.append(tracker.progress)
        if i == 1:
            assert tracker.current is not None and tracker.current.name == "load_weights"
            assert tracker.current.progress == 0.5
    assert seen == sorted(seen)
    assert seen[0] == 0.0 < seen[1] < seen[5] < 1.0


def test_without_speculation_no_draft_phases_are_expected() -> None:
    assert [p.name for p in expected_phases(speculative=False)] == ["load_weights", "kv_cache", "cuda_graph", "warmup"]
    assert [p.name for p in expected_phases(speculative=True, cuda_graph=False)] == [
        "load_weights",
        "kv_cache",
        "warmup",
    ]


def test_phases_that_never_happen_are_skipped_when_ready() -> None:
    tracker = PhaseTracker.for_start(speculative=True)
    lines = [ln for ln in EAGLE_START if "cuda graph" not in ln and "Capturing" not in ln]
    feed_all(tracker, lines)
    states = {p.name: p.state for p in tracker.phases}
    assert states["cuda_graph"] is PhaseState.SKIPPED
    assert states["draft_cuda_graph"] is PhaseState.SKIPPED
    assert states["warmup"] is PhaseState.DONE


def test_a_later_phase_starting_skips_earlier_pending_ones() -> None:
    tracker = PhaseTracker.for_start(speculative=False)
    tracker.feed("INFO:     Uvicorn running on http://127.0.0.1:30000", T0)
    assert [p.state for p in tracker.phases] == [
        PhaseState.SKIPPED,
        PhaseState.SKIPPED,
        PhaseState.SKIPPED,
        PhaseState.RUNNING,
    ]


def test_draft_weights_reopen_the_load_phase() -> None:
    tracker = PhaseTracker.for_start(speculative=True)
    feed_all(tracker, EAGLE_START[:5])
    assert tracker.phases[0].state is PhaseState.DONE
    events = tracker.feed("Load weight begin. avail mem=30 GB", T0 + timedelta(seconds=10))
    assert [e.kind for e in events] == ["started"]
    assert tracker.phases[0].state is PhaseState.RUNNING
    assert tracker.phases[0].started_at == T0  # the phase keeps its first start
    tracker.feed("Load weight end. type=Eagle3, avail mem=29 GB", T0 + timedelta(seconds=12))
    assert tracker.phases[0].state is PhaseState.DONE
    assert tracker.phases[0].ended_at == T0 + timedelta(seconds=12)


def test_failure_lines_explain_a_dead_start() -> None:
    tracker = PhaseTracker.for_start(speculative=True)
    lines = [
        *EAGLE_START[:1],
        "Traceback (most recent call last):",
        '  File "/opt/sglang/python/sglang/srt/server_args.py", line 2380, in __post_init__',
        "    raise ValueError(",
        "ValueError: Spec v2 currently only supports topk = 1 for speculative decoding.",
        "sglang.service: Main process exited, code=exited, status=1/FAILURE",
        "sglang.service: Failed with result 'exit-code'.",
    ]
    feed_all(tracker, lines)
    assert tracker.failed and not tracker.ready
    explanation = tracker.explanation()
    assert "Traceback (most recent call last):" in explanation
    assert "ValueError: Spec v2 currently only supports topk = 1 for speculative decoding." in explanation
    assert exception_line(tracker.failure_lines) == (
        "ValueError: Spec v2 currently only supports topk = 1 for speculative decoding."
    )
    assert tracker.current is not None and tracker.current.name == "load_weights"


def test_explanation_keeps_the_exception_line_when_trimmed() -> None:
    tracker = PhaseTracker.for_start(speculative=False)
    tracker.feed("OSError: /models/draft-missing does not exist", T0)
    for i in range(20):
        tracker.feed(f"sglang.service: Scheduled restart job, restart counter is at {i}.", T0)
    explanation = tracker.explanation(limit=5)
    assert len(explanation) == 5
    assert explanation[-1] == "OSError: /models/draft-missing does not exist"


def test_explanation_falls_back_to_the_tail() -> None:
    tracker = PhaseTracker.for_start(speculative=False)
    for i in range(30):
        tracker.feed(f"line {i}", T0)
    assert tracker.explanation(limit=3) == ["line 27", "line 28", "line 29"]


def test_failure_signatures() -> None:
    failing = [
        "Traceback (most recent call last):",
        "ValueError: trtllm_mha backend only supports topk = 1 for speculative decoding.",
        "[2026-11-30 04:00:00 TP0] Scheduler hit an exception: RuntimeError: CUDA error",
        "AssertionError",
        "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 2.00 GiB",
        "launch_server.py: error: unrecognized arguments: --speculative-foo 3",
        "Received sigquit from a child process. It usually means the child failed.",
        "sglang.service: Main process exited, code=killed, status=9/KILL",
        "sglang.service: Failed with result 'exit-code'.",
        "Failed to start sglang.service - SGLang server.",
        "huggingface_hub.errors.HFValidationError: Repo id must be in the form 'repo_name': '/models/missing-draft'.",
        "sglang.service: Start request repeated too quickly.",
    ]
    benign = [
        "Load weight begin. avail mem=93.12 GB",
        'INFO:     127.0.0.1:50000 - "GET /health HTTP/1.1" 503 Service Unavailable',
        "Max running requests is reset to 48 for speculative decoding.",
        "sglang.service: Main process exited, code=exited, status=0/SUCCESS",
        "sglang.service: Deactivated successfully.",
        "Decode batch, #running-req: 1, #token: 90, token usage: 0.00, accept len: 2.31, gen throughput (token/s): 180",
        "The server is fired up and ready to roll!",
    ]
    assert [ln for ln in failing if not is_failure_line(ln)] == []
    assert [ln for ln in benign if is_failure_line(ln)] == []


def test_mark_ready_from_health() -> None:
    tracker = PhaseTracker.for_start(speculative=False)
    feed_all(tracker, EAGLE_START[:5])
    tracker.mark_ready(T0 + timedelta(seconds=60))
    assert tracker.ready and tracker.progress == 1.0
    assert tracker.phases[1].state is PhaseState.DONE  # kv_cache was done already
    assert tracker.phases[2].state is PhaseState.SKIPPED  # capture never seen
    tracker.mark_ready(T0 + timedelta(seconds=90))
    assert tracker.ready_at == T0 + timedelta(seconds=60)


def test_phase_json_shape() -> None:
    tracker = PhaseTracker.for_start(speculative=False)
    feed_all(tracker, EAGLE_START[:4])
    doc = tracker.phases[0].to_json()
    assert doc == {
        "name": "load_weights",
        "label": "loading weights",
        "state": "done",
        "started_at": T0.isoformat(),
        "ended_at": (T0 + timedelta(seconds=3)).isoformat(),
        "duration_s": 3.0,
        "progress": 1.0,
    }
