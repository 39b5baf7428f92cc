"""The stand-in's /metrics: SGLang's `sglang:` metric names through prometheus_client.

Gauges follow SGLang's semantics: the scheduler gauges (including spec_accept_length/spec_accept_rate)
change once per decode-log window, counters and histograms per request.
"""

from __future__ import annotations

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, Counter, Gauge, Histogram, generate_latest

_LABELS = ("model_name", "engine_type", "tp_rank", "pp_rank")
_LATENCY_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 40.0, 80.0, 160.0)
_ITL_BUCKETS = (0.002, 0.005, 0.01, 0.015, 0.02, 0.025, 0.03, 0.04, 0.05, 0.075, 0.1, 0.15, 0.2, 0.3, 0.5, 1.0)


class SimMetrics:
    def __init__(self, model_name: str) -> None:
        self.registry = CollectorRegistry()
        labels = {"model_name": model_name, "engine_type": "unified", "tp_rank": "0", "pp_rank": "0"}

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
        self.is_cuda_graph.set(1)

    def on_request(self, prompt_tokens: int) -> None:
        self.prompt_tokens.inc(prompt_tokens)

    def on_step(self, generated_tokens: int) -> None:
        if generated_tokens:
            self.generation_tokens.inc(generated_tokens)

    def on_finish(self, completion_tokens: int, ttft_s: float, e2e_s: float) -> None:
        self.num_requests.inc()
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
