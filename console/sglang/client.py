"""The SGLang HTTP API, as an operator console polls it (httpx).

Version first (`/server_info` `version`, falling back to the deprecated `/get_server_info`), then the
endpoints that version has: `/v1/loads` (0.5.9+) or `/get_load` (up to 0.5.14), `/model_info` or
`/get_model_info`. `/metrics` is parsed with prometheus_client's parser. The API key, when configured,
goes in `Authorization: Bearer`; it is never logged or included in an error message.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Awaitable, Callable, Collection
from dataclasses import dataclass, field, replace
from typing import Any

import httpx

from console import hints
from console.sglang.flags import UnsupportedVersionError, version_at_least
from console.sglang.histograms import ITL, LATENCY_HISTOGRAMS, TTFT, Histogram
from console.sglang.vocabulary import View, dests

HEALTH_POLL_INTERVAL_S = 0.1  # readiness noticed within 0.5 s of /health turning 200, even with a slow RTT


class SglangError(Exception):
    """The SGLang API could not be reached or answered something unusable."""


class NoSglangApi(SglangError):
    """The server answers, but serves neither /server_info nor /get_server_info: not SGLang's API. A rank >= 1 of a
    multi-node deployment is such a server: its dummy /health, /ping and /health_generate always answer 200, whatever
    its schedulers do (wave5-facts §4), so its /health says nothing and must not be read as healthy."""


@dataclass(frozen=True)
class Endpoints:
    """Which routes a given SGLang version serves."""

    server_info: str = "/server_info"
    model_info: str = "/model_info"
    load: str = "/v1/loads"

    @classmethod
    def for_version(cls, version: str | None) -> Endpoints:
        """An unknown or unreadable version gets the current routes."""
        try:
            old = version is not None and not version_at_least(version, "0.5.9")
        except UnsupportedVersionError:
            old = False
        return cls(load="/get_load") if old else cls()


def polled_paths(version: str | None) -> tuple[str, ...]:
    """The paths the console's refreshes ask a server of that version (each one a line in its access log)."""
    endpoints = Endpoints.for_version(version)
    return ("/health", "/metrics", endpoints.load, endpoints.server_info, endpoints.model_info)


# Per-rank ratios: the host's figure is their mean over DP ranks, not their sum.
RATIO_GAUGES = frozenset(
    {"sglang:token_usage", "sglang:spec_accept_length", "sglang:spec_accept_rate", "sglang:cache_hit_rate"}
)


def parse_metrics(text: str) -> dict[str, float]:
    """The values of parse_metrics_text (histogram buckets dropped)."""
    return parse_metrics_text(text)[0]


_LABEL = re.compile(r'([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)"')


class _Samples:
    """What parse_metrics_text gathers, one sample line at a time: values by name (TP rank 0 only, summed over DP
    ranks) and the bucket counts of the histograms (added up over every series)."""

    def __init__(self, histograms: set[str]) -> None:
        self.histograms = histograms  # the wanted ones that the text declares as histograms
        self.values: dict[str, float] = {}
        self.ranks: dict[str, int] = {}
        self.buckets: dict[str, dict[float, float]] = {}

    def add(self, name: str, tail: str) -> None:
        """One line: its sample name, and what follows the name (`{labels} value [timestamp]` or `value ...`)."""
        if tail.startswith("{"):
            close = tail.rfind("}")
            if close < 0:
                return
            labels = dict(_LABEL.findall(tail, 0, close))
            rest = tail[close + 1 :].split()
        else:
            labels, rest = {}, tail.split()
        if not rest:
            return
        try:
            value = float(rest[0])
        except ValueError:
            return
        if name.endswith("_bucket"):
            base = name[:-7]
            if base in self.histograms and "le" in labels:
                try:
                    le = float(labels["le"])
                except ValueError:
                    return
                per_le = self.buckets.setdefault(base, {})
                per_le[le] = per_le.get(le, 0.0) + value
            return
        if labels.get("tp_rank", "0") != "0":
            return
        self.values[name] = self.values.get(name, 0.0) + value
        self.ranks[name] = self.ranks.get(name, 0) + 1

    def result(self) -> tuple[dict[str, float], dict[str, Histogram]]:
        for name in RATIO_GAUGES & self.values.keys():
            self.values[name] /= self.ranks[name]
        return self.values, {name: Histogram(tuple(sorted(b.items()))) for name, b in self.buckets.items() if b}


def parse_metrics_text(
    text: str, names: Collection[str] | None = None, histograms: Collection[str] = LATENCY_HISTOGRAMS
) -> tuple[dict[str, float], dict[str, Histogram]]:
    """Prometheus text -> ({sample name: value} for the whole host across its DP ranks, the latency histograms
    merged across ranks (console.sglang.histograms)). `names`: only these samples (None: every one);
    `histograms`: only these.

    Scheduler gauges carry tp_rank/dp_rank labels. Only TP rank 0 counts: with
    --enable-metrics-for-all-schedulers every TP rank repeats its DP group's figures. Counts
    (sglang:num_running_reqs, ...) are summed over DP ranks, RATIO_GAUGES averaged. Histogram and
    summary detail (_sum/_count) is kept by name too, which is enough for a status line. The histograms add up
    the bucket counts of every series. A lean reader of the text format (what prometheus_client's parser gives for
    these, held to it by tests/host/test_sglang_client.py): the console reads /metrics of every host each second,
    and the general parser cost a quarter of its CPU with 16 hosts. With `names`, only the lines of those samples
    are looked at, found by a search of the text: SGLang 0.5.17 serves ~640 lines, of which the dashboard reads
    ~70, and going over every line in Python cost ten times what finding those does.
    """
    if names is not None:
        return _named_samples(text, names, histograms)
    samples = _Samples(set())
    for line in text.splitlines():
        if not line or line[0] == "#":
            if line.startswith("# TYPE "):
                parts = line.split()
                if len(parts) >= 4 and parts[3] == "histogram" and parts[2] in histograms:
                    samples.histograms.add(parts[2])
            continue
        brace = line.find("{")
        if brace >= 0:
            samples.add(line[:brace], line[brace:])
            continue
        words = line.split(maxsplit=1)
        if words:
            samples.add(words[0], words[1] if len(words) > 1 else "")
    return samples.result()


def _named_samples(
    text: str, names: Collection[str], histograms: Collection[str]
) -> tuple[dict[str, float], dict[str, Histogram]]:
    """parse_metrics_text for the lines of `names` and of the `histograms`' buckets alone, found with str.find."""
    text = "\n" + text  # every line, the first too, starts after a newline
    declared = {h for h in histograms if _declared_histogram(text, h)}
    samples = _Samples(declared)
    for name in (*names, *(f"{h}_bucket" for h in declared)):
        key = "\n" + name
        at = text.find(key)
        while at >= 0:
            start = at + len(key)
            end = text.find("\n", start)
            end = len(text) if end < 0 else end
            if text[start : start + 1] in ("{", " ", "\t"):  # the name itself, not a longer one
                samples.add(name, text[start:end])
            at = text.find(key, end)
    return samples.result()


def _declared_histogram(text: str, name: str) -> bool:
    """`# TYPE name histogram` is a line of the text (which starts with a newline)."""
    key = f"\n# TYPE {name} histogram"
    at = text.find(key)
    while at >= 0:
        after = text[at + len(key) : at + len(key) + 1]
        if after in ("", "\n", "\r", " ", "\t"):
            return True
        at = text.find(key, at + 1)
    return False


def _first_state(server_info: dict[str, Any]) -> dict[str, Any]:
    states = server_info.get("internal_states")
    if isinstance(states, list) and states and isinstance(states[0], dict):
        return states[0]
    return {}


SPECULATIVE_KEYS = dests(View.SPECULATIVE)
ADAPTIVE_KEYS = ("speculative_num_steps", "speculative_num_draft_tokens")  # what an adaptive tier moves


def summarize(
    server_info: dict[str, Any] | None,
    model_info: dict[str, Any] | None = None,
    load: Any = None,
    metrics: dict[str, float] | None = None,
) -> dict[str, Any]:
    """The fields `status` shows, under SGLang's own names, from whatever endpoints answered. Pure."""
    info = dict(server_info or {})
    if isinstance(info.get("decode"), list) and info["decode"]:  # PD router wraps per role
        info = dict(info["decode"][0])
    state = _first_state(info)
    out: dict[str, Any] = {"version": info.get("version")}
    model = model_info or {}
    out["model_path"] = model.get("model_path") or info.get("model_path")
    out["served_model_name"] = model.get("served_model_name") or info.get("served_model_name")
    # --speculative-adaptive (0.5.23): the scheduler's copy carries the active tier, the top level the launch config
    adaptive = bool(info.get("speculative_adaptive") or state.get("speculative_adaptive"))
    for key in SPECULATIVE_KEYS:
        if adaptive and key in ADAPTIVE_KEYS:
            out[key] = info.get(key, state.get(key))
        else:
            out[key] = state.get(key, info.get(key))
    out["speculative_adaptive"] = True if adaptive else None
    out["adaptive_num_steps"] = state.get("speculative_num_steps") if adaptive else None
    out["adaptive_num_draft_tokens"] = state.get("speculative_num_draft_tokens") if adaptive else None
    out["max_running_requests"] = info.get("max_running_requests")
    out["effective_max_running_requests_per_dp"] = state.get("effective_max_running_requests_per_dp")
    out["max_total_num_tokens"] = info.get("max_total_num_tokens")
    out["avg_spec_accept_length"] = state.get("avg_spec_accept_length")
    out["last_gen_throughput"] = state.get("last_gen_throughput")
    running, queued, throughput = _load_figures(load)
    m = metrics or {}
    out["num_running_reqs"] = running if running is not None else m.get("sglang:num_running_reqs")
    out["num_queue_reqs"] = queued if queued is not None else m.get("sglang:num_queue_reqs")
    out["gen_throughput"] = throughput if throughput is not None else m.get("sglang:gen_throughput")
    for field_name in METRIC_FIELDS:
        out[field_name] = m.get(f"sglang:{field_name}")
    return out


# What summarize takes from the load endpoint, as /metrics names it
LOAD_GAUGES = frozenset({"sglang:num_running_reqs", "sglang:num_queue_reqs", "sglang:gen_throughput"})
# What it takes from /metrics alone, under the same name without `sglang:`
METRIC_FIELDS = ("spec_accept_length", "spec_accept_rate", "token_usage", "cache_hit_rate")
# Every /metrics sample summarize reads: the client parses these and passes over the rest.
SUMMARY_METRICS = LOAD_GAUGES | {f"sglang:{name}" for name in METRIC_FIELDS}


def _load_figures(load: Any) -> tuple[int | None, int | None, float | None]:
    """Running, queued, gen throughput summed over DP ranks, from /v1/loads or /get_load."""
    ranks: list[dict[str, Any]] = []
    if isinstance(load, dict) and isinstance(load.get("loads"), list):
        ranks = [r for r in load["loads"] if isinstance(r, dict)]
    elif isinstance(load, list):
        ranks = [r for r in load if isinstance(r, dict)]
    if not ranks:
        return None, None, None

    def total(*keys: str) -> float | None:
        found = [float(r[k]) for r in ranks for k in keys[:1] if isinstance(r.get(k), int | float)]
        if not found:
            found = [float(r[k]) for r in ranks for k in keys[1:] if isinstance(r.get(k), int | float)]
        return sum(found) if found else None

    running = total("num_running_reqs", "num_reqs")
    queued = total("num_waiting_reqs")
    throughput = total("gen_throughput")
    return (
        int(running) if running is not None else None,
        int(queued) if queued is not None else None,
        throughput,
    )


# A PD server's queues in /v1/loads' "disaggregation" section (0.5.23 load_snapshot.DisaggregationMetrics): requests
# the server holds besides its running and waiting ones (a prefill's waiting for their decode to bootstrap or for
# their KV to go; a decode's waiting for memory, for their KV, or retracted).
PD_QUEUE_FIELDS = (
    "prefill_bootstrap_queue_reqs",
    "prefill_inflight_queue_reqs",
    "decode_prealloc_queue_reqs",
    "decode_transfer_queue_reqs",
    "decode_retracted_queue_reqs",
)


def pd_queued(load: Any) -> int | None:
    """The requests in a PD server's queues, summed over its DP ranks, from /v1/loads (what its scheduler publishes
    as they move, as smg's load poll reads it); None where the answer has no disaggregation section (an older
    version, or a server that is not a PD server: mode "null" counts as 0). Pure."""
    ranks = load.get("loads") if isinstance(load, dict) else None
    if not isinstance(ranks, list):
        return None
    sections = [r["disaggregation"] for r in ranks if isinstance(r, dict) and isinstance(r.get("disaggregation"), dict)]
    if not sections:
        return None
    total = 0
    for section in sections:
        total += sum(int(v) for k in PD_QUEUE_FIELDS if isinstance(v := section.get(k), int | float))
    return total


@dataclass
class SglangClient:
    """One SGLang server. `base_url` is usually http://127.0.0.1:LOCAL_PORT through the SSH forward."""

    base_url: str
    api_key: str | None = None
    timeout_s: float = 10.0
    version: str | None = None
    endpoints: Endpoints = field(default_factory=Endpoints)
    last_server_info: dict[str, Any] | None = None
    last_model_info: dict[str, Any] | None = None
    # Applied to every JSON answer as it arrives: the server echoes its args, keys and tokens among them
    # (SecretMask.data of the host session), so nothing downstream ever holds them.
    mask: Callable[[Any], Any] | None = None
    # The latency histograms of the last /metrics read (console.sglang.histograms), for window percentiles.
    last_histograms: dict[str, Histogram] = field(default_factory=dict)
    # The last /metrics read had the figures the load endpoint gives (running, queued, gen throughput).
    metrics_carry_load: bool = False
    # What /health last answered (None before the first ask).
    last_healthy: bool | None = None
    # Told (method, path with its query) of every request as it goes out: the server logs each one, and the
    # console folds its own lines in the journal it shows (console.core.console_requests).
    on_request: Callable[[str, str], None] | None = None
    # Asked when the server answers 401, with the key that was refused (None: none was sent): another key to
    # try (once), or None. The host session gives the unit's --api-key where no profile names a key.
    on_unauthorized: Callable[[str | None], Awaitable[str | None]] | None = None
    _http: httpx.AsyncClient | None = None

    def __post_init__(self) -> None:
        self._http = httpx.AsyncClient(
            base_url=self.base_url, timeout=self.timeout_s, event_hooks={"request": [self._sending]}
        )
        self.use_api_key(self.api_key)

    async def _sending(self, request: httpx.Request) -> None:
        if self.on_request is not None:
            self.on_request(request.method, request.url.raw_path.decode("ascii", "replace"))

    def use_api_key(self, key: str | None) -> None:
        """Send this key from now on (None: none)."""
        self.api_key = key
        if key:
            self.http.headers["Authorization"] = f"Bearer {key}"
        else:
            self.http.headers.pop("Authorization", None)

    @property
    def http(self) -> httpx.AsyncClient:
        assert self._http is not None
        return self._http

    async def close(self) -> None:
        await self.http.aclose()

    async def __aenter__(self) -> SglangClient:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    async def _request(self, method: str, path: str) -> httpx.Response:
        """One request; on a 401, once more with the key `on_unauthorized` gives (when it gives another)."""
        sent = self.api_key
        response = await self.http.request(method, path)
        if response.status_code == 401 and self.on_unauthorized is not None:
            key = await self.on_unauthorized(sent)
            if key and key != sent:
                if self.api_key == sent:  # not changed meanwhile by a request running beside this one
                    self.use_api_key(key)
                response = await self.http.request(method, path, headers={"Authorization": f"Bearer {key}"})
        return response

    async def _get_json(self, path: str) -> Any:
        try:
            response = await self._request("GET", path)
        except httpx.HTTPError as exc:
            raise SglangError(f"{self.base_url}{path}: {type(exc).__name__}: {exc}") from None
        if response.status_code == 401:
            raise SglangError(f"{path}: 401 Unauthorized; set the API key (api_key_env in the profile)")
        if response.status_code != 200:
            raise SglangError(f"{path}: HTTP {response.status_code}")
        try:
            data = response.json()
        except ValueError:
            raise SglangError(f"{path}: the answer is not JSON") from None
        return self.mask(data) if self.mask is not None else data

    async def detect_version(self) -> str | None:
        """Read the version and choose the endpoints that version has (the payload stays in last_server_info)."""
        try:
            info = await self._get_json("/server_info")
            path = "/server_info"
        except SglangError as first:
            try:
                info = await self._get_json("/get_server_info")
            except SglangError as second:
                if str(first).endswith("HTTP 404") and str(second).endswith("HTTP 404"):
                    raise NoSglangApi(
                        "no /server_info or /get_server_info (HTTP 404): this is not SGLang's API; a rank >= 1 of a "
                        "multi-node deployment answers only a dummy /health (always 200): judge it at rank 0 "
                        f"({hints.STATUS_DEPLOYMENT.line()})"
                    ) from None
                raise
            path = "/get_server_info"
        self.last_server_info = info if isinstance(info, dict) else None
        self.version = info.get("version") if isinstance(info, dict) else None
        self.endpoints = Endpoints.for_version(self.version)  # the load route goes by version: 0.5.15+ lacks /get_load
        if path == "/get_server_info":
            self.endpoints = replace(self.endpoints, server_info=path, model_info="/get_model_info")
        return self.version

    async def healthy(self) -> bool:
        """GET /health: 200 = ready; 503 (starting) or connection refused (still loading) = not yet."""
        try:
            response = await self.http.get("/health")
        except httpx.HTTPError:
            self.last_healthy = False
            return False
        self.last_healthy = response.status_code == 200
        return self.last_healthy

    async def ready(self) -> bool | None:
        """GET /ready (SGLang 0.5.23: 200 only when up, not paused and not exiting); None where the version has no
        /ready (404) or the server cannot be reached."""
        try:
            response = await self.http.get("/ready")
        except httpx.HTTPError:
            return None
        if response.status_code == 404:
            return None
        return response.status_code == 200

    async def server_info(self) -> dict[str, Any]:
        data = await self._get_json(self.endpoints.server_info)
        if not isinstance(data, dict):
            raise SglangError(f"{self.endpoints.server_info}: expected a JSON object")
        self.last_server_info = data
        return data

    async def model_info(self) -> dict[str, Any]:
        data = await self._get_json(self.endpoints.model_info)
        self.last_model_info = data if isinstance(data, dict) else {}
        return self.last_model_info

    async def load(self) -> Any:
        return await self._get_json(self.endpoints.load)

    async def metrics(self) -> dict[str, float] | None:
        """/metrics parsed (what summarize reads of it, and the TTFT and ITL histograms), or None when the server
        runs without --enable-metrics."""
        try:
            response = await self.http.get("/metrics")
        except httpx.HTTPError as exc:
            raise SglangError(f"/metrics: {type(exc).__name__}") from None
        if response.status_code == 404:
            return None
        if response.status_code != 200:
            raise SglangError(f"/metrics: HTTP {response.status_code}")
        try:
            values, self.last_histograms = parse_metrics_text(response.text, SUMMARY_METRICS, (TTFT, ITL))
        except ValueError as exc:
            raise SglangError(f"/metrics: not Prometheus text ({exc})") from None
        self.metrics_carry_load = values.keys() >= LOAD_GAUGES
        return values

    async def flush_cache(self) -> bool:
        """True when the cache was flushed (the server refuses while requests are running)."""
        try:
            response = await self._request("POST", "/flush_cache")
        except httpx.HTTPError as exc:
            raise SglangError(f"/flush_cache: {type(exc).__name__}") from None
        return response.status_code == 200

    async def wait_until_healthy(self, deadline_s: float, *, interval_s: float = HEALTH_POLL_INTERVAL_S) -> bool:
        """Poll /health until 200 or the deadline (seconds from now); True when healthy."""
        end = time.monotonic() + deadline_s
        while True:
            started = time.monotonic()
            if await self.healthy():
                return True
            if time.monotonic() >= end:
                return False
            await asyncio.sleep(max(0.0, min(interval_s - (time.monotonic() - started), end - time.monotonic())))
