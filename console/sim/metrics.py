"""The stand-in's /metrics: SGLang's `sglang:` metric names through prometheus_client.

Gauges follow SGLang's semantics: the scheduler gauges (including spec_accept_length/spec_accept_rate)
change once per decode-log window, counters and histograms per request.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    disable_created_metrics,
    generate_latest,
)

_LABELS = ("model_name", "engine_type", "tp_rank", "pp_rank")
_LATENCY_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 40.0, 80.0, 160.0)
# prompt/generation token histograms, SGLang's default buckets before 0.5.23 (wave3-facts §3, 0.5.6's collector)
_TOKEN_BUCKETS = (
    *(100, 300, 500, 700, 1000, 1500, 2000, *range(3000, 10001, 1000)),
    *(12000, 15000, 20000, 22000, 25000, 30000, 35000, 40000, 66000, 99000, 132000, 300000, 600000, 900000, 1100000),
)
_ITL_BUCKETS = (0.002, 0.005, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 1.0)


class SimMetrics:
    """The 17 families of the stand-in before 0.5.17 (names from SGLang's source), and the prompt and generation
    token histograms where the version records them: 0.5.11 and later always, before only with
    --collect-tokens-histogram (`token_histograms`)."""

    def __init__(
        self, model_name: str, token_histograms: bool = False, engine_type: str = "unified", tp_rank: int = 0
    ) -> None:
        self.registry = CollectorRegistry()
        labels = {"model_name": model_name, "engine_type": engine_type, "tp_rank": str(tp_rank), "pp_rank": "0"}
        self.labels = labels  # every scheduler family's (PD's too: console.sim.pd)

        def gauge(name: str, doc: str) -> Gauge:
            return Gauge(f"sglang:{name}", doc, _LABELS, registry=self.registry, multiprocess_mode="mostrecent")

        def counter(name: str, doc: str) -> Counter:
            return Counter(f"sglang:{name}", doc, _LABELS, registry=self.registry)

        def histogram(name: str, doc: str, buckets: tuple[float, ...]) -> Histogram:
            return Histogram(f"sglang:{name}", doc, _LABELS, registry=self.registry, buckets=buckets)

        self.num_running_reqs = gauge("num_running_reqs", "The number of running requests.").labels(**labels)
        self.num_used_tokens = gauge("num_used_tokens", "The number of used tokens.").labels(**labels)
        self.token_usage = gauge("token_usage", "The token usage.").labels(**labels)
        self.gen_throughput = gauge("gen_throughput", "The generation throughput (token/s).").labels(**labels)
        self.num_queue_reqs = gauge("num_queue_reqs", "The number of requests in the waiting queue.").labels(**labels)
        self.cache_hit_rate = gauge("cache_hit_rate", "The prefix cache hit rate.").labels(**labels)
        self.max_total_num_tokens = gauge("max_total_num_tokens", "Maximum total number of tokens.").labels(**labels)
        self.spec_accept_length = gauge("spec_accept_length", "The average acceptance length.").labels(**labels)
        self.spec_accept_rate = gauge("spec_accept_rate", "The average acceptance rate.").labels(**labels)
        self.is_cuda_graph = gauge("is_cuda_graph", "Whether the batch is using CUDA graph.").labels(**labels)
        self.prompt_tokens = counter("prompt_tokens", "Number of prefill tokens processed.").labels(**labels)
        self.generation_tokens = counter("generation_tokens", "Number of generation tokens processed.").labels(**labels)
        self.cached_tokens = counter("cached_tokens", "Number of cached prompt tokens.").labels(**labels)
        self.num_requests = counter("num_requests", "Number of requests processed.").labels(**labels)
        self.ttft = histogram(
            "time_to_first_token_seconds", "Histogram of time to first token in seconds.", _LATENCY_BUCKETS
        ).labels(**labels)
        self.itl = histogram(
            "inter_token_latency_seconds", "Histogram of inter-token latency in seconds.", _ITL_BUCKETS
        ).labels(**labels)
        self.e2e = histogram(
            "e2e_request_latency_seconds", "Histogram of End-to-end request latency in seconds", _LATENCY_BUCKETS
        ).labels(**labels)
        self.prompt_histogram = self.generation_histogram = None
        if token_histograms:
            self.prompt_histogram = histogram(
                "prompt_tokens_histogram", "Histogram of prompt token length.", _TOKEN_BUCKETS
            ).labels(**labels)
            self.generation_histogram = histogram(
                "generation_tokens_histogram", "Histogram of generation token length.", _TOKEN_BUCKETS
            ).labels(**labels)
        self.is_cuda_graph.set(1)

    def on_request(self, prompt_tokens: int, streaming: bool = False, cached_tokens: int = 0) -> None:
        self.prompt_tokens.inc(prompt_tokens)
        self.cached_tokens.inc(cached_tokens)
        if self.prompt_histogram is not None:
            self.prompt_histogram.observe(prompt_tokens)

    def on_step(self, generated_tokens: int) -> None:
        if generated_tokens:
            self.generation_tokens.inc(generated_tokens)

    def on_finish(
        self, completion_tokens: int, ttft_s: float, e2e_s: float, streaming: bool = False, verify_ct: int = 0
    ) -> None:
        self.num_requests.inc()
        if self.generation_histogram is not None:
            self.generation_histogram.observe(completion_tokens)
        self.ttft.observe(ttft_s)
        self.e2e.observe(e2e_s)
        if completion_tokens > 1:
            self.itl.observe((e2e_s - ttft_s) / (completion_tokens - 1))

    def on_window(
        self,
        *,
        running: int,
        queued: int,
        used_tokens: int,
        token_usage: float,
        gen_throughput: float,
        accept_length: float | None,
        accept_rate: float | None,
        max_total_num_tokens: int,
    ) -> None:
        self.num_running_reqs.set(running)
        self.num_queue_reqs.set(queued)
        self.num_used_tokens.set(used_tokens)
        self.token_usage.set(token_usage)
        self.gen_throughput.set(gen_throughput)
        self.max_total_num_tokens.set(max_total_num_tokens)
        if accept_length is not None:
            self.spec_accept_length.set(accept_length)
            self.spec_accept_rate.set(accept_rate or 0.0)

    def render(self) -> tuple[bytes, str]:
        return generate_latest(self.registry), CONTENT_TYPE_LATEST

    def on_http(self, method: str, path: str, status: int) -> None:
        """Older versions' stand-in has no HTTP families."""

    def set_static(self, **gauges: float) -> None:
        """Nor the startup gauges."""

    def set_startup(self, phases: dict[str, float], graph_phases: dict[str, float], graph_gb: dict[str, float]) -> None:
        """Nor the startup timings."""


_SPECS = Path(__file__).resolve().parent / "metricdata"
# Families a real 0.5.17 server exposes only once requests went through (absent from its capture before them).
_AFTER_TRAFFIC = frozenset({"sglang:inter_token_latency_seconds", "sglang:cached_tokens"})


class RealMetrics(SimMetrics):
    """/metrics as a real SGLang 0.5.17 server exposes it: all 71 families of its capture, with its types, label
    names, histogram buckets and the children it has from its start (console/sim/metricdata/sglang-0.5.17.json,
    written by scripts/real_sglang/metrics_spec.py). Scheduler families carry engine_type, model_name,
    tp_rank, pp_rank and moe_ep_rank; the tokenizer's carry is_streaming; the HTTP ones endpoint and method.
    Families the stand-in has no figure for stay at 0, as on an idle server."""

    def __init__(
        self, model_name: str, spec_version: str = "0.5.17", engine_type: str = "unified", tp_rank: int = 0
    ) -> None:
        disable_created_metrics()  # SGLang's multiprocess collector exposes no *_created series
        self.registry = CollectorRegistry()
        self.own = {
            "engine_type": engine_type,
            "model_name": model_name,
            "tp_rank": str(tp_rank),
            "pp_rank": "0",
            "moe_ep_rank": "0",
            "pid": str(os.getpid()),
        }
        self.labels = {k: v for k, v in self.own.items() if k != "pid"}
        self.families: dict[str, Any] = {}
        self._lazy: dict[str, dict[str, str]] = {}
        spec = json.loads((_SPECS / f"sglang-{spec_version}.json").read_text())
        for fam in spec["families"]:
            name, kind, labels = fam["name"], fam["type"], fam["labels"]
            if kind == "counter":
                metric: Any = Counter(name, fam["help"], labels, registry=self.registry)
            elif kind == "histogram":
                metric = Histogram(name, fam["help"], labels, registry=self.registry, buckets=fam["buckets"])
            else:
                metric = Gauge(name, fam["help"], labels, registry=self.registry, multiprocess_mode="mostrecent")
            self.families[name] = metric
            for child in fam["static_children"]:
                self.child(name, **child)
            if not labels:
                continue
            if set(labels) <= set(self.own) and name not in _AFTER_TRAFFIC:
                self.child(name)  # a scheduler gauge or counter: there from the start, at 0
        self.child("sglang:is_cuda_graph").set(1)

    def child(self, name: str, **labels: str) -> Any:
        metric = self.families[name]
        names = metric._labelnames
        if not names:
            return metric
        return metric.labels(**{k: labels.get(k, self.own.get(k, "")) for k in names})

    def set_static(self, **gauges: float) -> None:
        """Figures fixed at startup: max_total_num_tokens, context_len, page_size, spec_num_steps, ..."""
        for key, value in gauges.items():
            self.child(f"sglang:{key}").set(value)

    def set_startup(self, phases: dict[str, float], graph_phases: dict[str, float], graph_gb: dict[str, float]) -> None:
        for phase, seconds in phases.items():
            self.child("sglang:startup_time_seconds", phase=phase).set(seconds)
        for phase, seconds in graph_phases.items():
            self.child("sglang:startup_cuda_graph_time_seconds", phase=phase).set(seconds)
        for phase, gb in graph_gb.items():
            self.child("sglang:graph_memory_usage_gb", phase=phase).set(gb)

    def render(self) -> tuple[bytes, str]:
        """Only families with samples, as SGLang's multiprocess collector writes them (a histogram nobody observed
        yet, e.g. inter_token_latency_seconds before the first streamed request, is not there at all)."""
        return generate_latest(_NonEmpty(self.registry)), CONTENT_TYPE_LATEST

    def on_http(self, method: str, path: str, status: int) -> None:
        self.child("sglang:http_requests", endpoint=path, method=method).inc()
        self.child("sglang:http_responses", endpoint=path, method=method, status_code=str(status)).inc()
        self.child("sglang:http_requests_active", endpoint=path, method=method).set(0)

    def on_request(self, prompt_tokens: int, streaming: bool = False, cached_tokens: int = 0) -> None:
        self.child("sglang:prompt_tokens", is_streaming=_flag(streaming)).inc(prompt_tokens)
        self.child("sglang:prompt_tokens_histogram").observe(prompt_tokens)
        self.child("sglang:uncached_prompt_tokens_histogram").observe(prompt_tokens - cached_tokens)
        if cached_tokens:  # the family appears with the first hit, as on a real 0.5.17 (absent before traffic)
            self.child("sglang:cached_tokens", cache_source="device").inc(cached_tokens)

    def on_step(self, generated_tokens: int) -> None:
        if generated_tokens:
            self.child("sglang:realtime_tokens", mode="decode").inc(generated_tokens)

    def on_finish(
        self, completion_tokens: int, ttft_s: float, e2e_s: float, streaming: bool = False, verify_ct: int = 0
    ) -> None:
        flag = _flag(streaming)
        self.child("sglang:num_requests", is_streaming=flag).inc()
        self.child("sglang:generation_tokens", is_streaming=flag).inc(completion_tokens)
        self.child("sglang:generation_tokens_histogram").observe(completion_tokens)
        self.child("sglang:time_to_first_token_seconds", is_streaming=flag).observe(ttft_s)
        self.child("sglang:e2e_request_latency_seconds", is_streaming=flag).observe(e2e_s)
        self.child("sglang:cached_tokens", cache_source="device").inc(0)
        if verify_ct:
            self.child("sglang:spec_verify_calls").inc(verify_ct)
        if completion_tokens > 1:
            self.child("sglang:inter_token_latency_seconds").observe((e2e_s - ttft_s) / (completion_tokens - 1))

    def on_window(
        self,
        *,
        running: int,
        queued: int,
        used_tokens: int,
        token_usage: float,
        gen_throughput: float,
        accept_length: float | None,
        accept_rate: float | None,
        max_total_num_tokens: int,
    ) -> None:
        for key, value in (
            ("num_running_reqs", running),
            ("num_queue_reqs", queued),
            ("num_used_tokens", used_tokens),
            ("kv_used_tokens", used_tokens),
            ("kv_available_tokens", max_total_num_tokens - used_tokens),
            ("token_usage", token_usage),
            ("full_token_usage", token_usage),
            ("gen_throughput", gen_throughput),
            ("max_total_num_tokens", max_total_num_tokens),
        ):
            self.child(f"sglang:{key}").set(value)
        if accept_length is not None:
            self.child("sglang:spec_accept_length").set(accept_length)
            self.child("sglang:spec_accept_rate").set(accept_rate or 0.0)


class _NonEmpty:
    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry

    def collect(self) -> Any:
        return (family for family in self.registry.collect() if family.samples)


def _flag(streaming: bool) -> str:
    return "true" if streaming else "false"


def metrics_for(
    version: str,
    model_name: str,
    collect_tokens_histogram: bool = False,
    engine_type: str = "unified",
    tp_rank: int = 0,
) -> SimMetrics:
    """The /metrics of the emulated version: the 71 families measured on 0.5.17 for 0.5.17 and 0.5.23 (which defines
    every 0.5.17 name too, by its source, but was not run), else the 17 known from the sources, with the token
    histograms where the version records them (0.5.11+, or --collect-tokens-histogram)."""
    from console.sim.shapes import at_least, detailed

    if detailed(version) or at_least(version, "0.5.23"):  # 0.5.23's source defines every 0.5.17 family
        return RealMetrics(model_name, engine_type=engine_type, tp_rank=tp_rank)
    histograms = collect_tokens_histogram or at_least(version, "0.5.11")
    return SimMetrics(model_name, token_histograms=histograms, engine_type=engine_type, tp_rank=tp_rank)
