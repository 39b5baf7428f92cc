"""The PromQL the fleet overview asks, and Prometheus's answers parsed (pure: no I/O).

One query a refresh for the whole fleet: every figure is aggregated `by (<label>)` (the label that names a host)
and tagged with a `figure` label (label_replace), and the figures are joined with `or`, so one answer holds every
host's figures. The histogram quantiles keep `le` in their `by`, as histogram_quantile needs. A figure a host
does not have (no speculative decoding, no dcgm-exporter) is simply absent from the answer. smg's view of each
worker (console.fleet.router) rides in the same query, aggregated by its own `worker` label (the worker's URL);
a fleet without smg has none of its series."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from console.fleet.router import ROUTER_FIGURES, RouterSample
from console.fleet.settings import FleetSettings

FIGURE_LABEL = "opsconsole_figure"
JOB_FIGURES = ("up", "scraped_at")  # per host and job: the scrape's outcome and the time of its newest sample


class PromAnswerError(Exception):
    """Prometheus answered, but not with what was asked (an error status, a malformed document)."""


def _sum(metric: str) -> str:
    return f"sum by ({{label}}) ({metric})"


# figure -> PromQL with {label} and {window}; SGLang's series first, then dcgm-exporter's.
FIGURES: Mapping[str, str] = {
    "throughput": _sum("sglang:gen_throughput"),
    "running": _sum("sglang:num_running_reqs"),
    "queued": _sum("sglang:num_queue_reqs"),
    "accept_length": "avg by ({label}) (sglang:spec_accept_length)",
    "token_usage": "max by ({label}) (sglang:token_usage)",
    **{
        f"{name}_p{q}": f"histogram_quantile(0.{q}, sum by ({{label}}, le) (rate(sglang:{series}_bucket[{{window}}])))"
        for name, series in (("ttft", "time_to_first_token_seconds"), ("itl", "inter_token_latency_seconds"))
        for q in ("50", "99")
    },
    "gpus": "count by ({label}) (DCGM_FI_DEV_GPU_UTIL)",
    "gpu_util": "avg by ({label}) (DCGM_FI_DEV_GPU_UTIL)",
    "fb_used_mib": _sum("DCGM_FI_DEV_FB_USED"),
    "fb_total_mib": "sum by ({label}) (DCGM_FI_DEV_FB_USED + DCGM_FI_DEV_FB_FREE)",
    "power_w": _sum("DCGM_FI_DEV_POWER_USAGE"),
    "temp_c": "max by ({label}) (DCGM_FI_DEV_GPU_TEMP)",
}


def figure_expr(figure: str, settings: FleetSettings) -> str:
    """One figure's PromQL by itself (what a person would type to check the overview)."""
    if figure == "up":
        return f"max by ({settings.label}, job) ({_up(settings)})"
    if figure == "scraped_at":
        return f"max by ({settings.label}, job) (timestamp({_up(settings)}))"
    return FIGURES[figure].format(label=settings.label, window=settings.window)


def _up(settings: FleetSettings) -> str:
    return f'up{{job=~"{_quote(settings.sglang_job)}|{_quote(settings.dcgm_job)}"}}'


def _quote(job: str) -> str:
    """A job name inside a regex matcher: its regex characters escaped (the settings refuse quotes)."""
    return "".join(f"\\\\{c}" if c in ".^$*+?()[]{}|" else c for c in job)


def fleet_query(settings: FleetSettings) -> str:
    """Every figure of every host, and smg's view of every worker, in one expression."""
    exprs = {**{f: figure_expr(f, settings) for f in (*FIGURES, *JOB_FIGURES)}, **ROUTER_FIGURES}
    return " or ".join(f'label_replace({expr}, "{FIGURE_LABEL}", "{f}", "", "")' for f, expr in exprs.items())


@dataclass(frozen=True)
class Sample:
    labels: Mapping[str, str]
    value: float
    at: float  # the evaluation time Prometheus answered for (unix seconds)


def parse_vector(document: Any) -> list[Sample]:
    """The `result` of an instant query's JSON answer (`resultType` vector). Values are strings in the answer
    and may be NaN (a quantile without observations) or ±Inf; they are kept as floats."""
    if not isinstance(document, dict):
        raise PromAnswerError("the answer is not a JSON object")
    if document.get("status") != "success":
        kind, error = document.get("errorType", "error"), document.get("error", "no reason given")
        raise PromAnswerError(f"{kind}: {error}")
    data = document.get("data")
    if not isinstance(data, dict) or data.get("resultType") != "vector" or not isinstance(data.get("result"), list):
        raise PromAnswerError("expected an instant vector in data.result")
    samples = []
    for item in data["result"]:
        try:
            labels, (at, text) = item["metric"], item["value"]
            samples.append(Sample({str(k): str(v) for k, v in labels.items()}, float(text), float(at)))
        except (KeyError, TypeError, ValueError, AttributeError):
            raise PromAnswerError(f"a malformed sample in the answer: {item!r}"[:200]) from None
    return samples


@dataclass(frozen=True)
class HostSeries:
    """One label value's figures as Prometheus answered them (finite values only)."""

    figures: Mapping[str, float]
    up: Mapping[str, float]  # job -> 1 (scrape ok) or 0
    scraped_at: Mapping[str, float]  # job -> unix time of its newest scrape


def split_by_host(samples: list[Sample], label: str) -> dict[str, HostSeries]:
    """The combined answer sorted out per value of `label` (samples without it are not the fleet's)."""
    figures: dict[str, dict[str, float]] = {}
    up: dict[str, dict[str, float]] = {}
    scraped: dict[str, dict[str, float]] = {}
    for sample in samples:
        host, figure = sample.labels.get(label), sample.labels.get(FIGURE_LABEL)
        if host is None or figure is None or figure in ROUTER_FIGURES:
            continue
        figures.setdefault(host, {})
        if figure in JOB_FIGURES:
            job = sample.labels.get("job", "")
            (up if figure == "up" else scraped).setdefault(host, {})[job] = sample.value
        elif math.isfinite(sample.value):
            figures[host][figure] = sample.value
    return {h: HostSeries(figures[h], up.get(h, {}), scraped.get(h, {})) for h in figures}


def router_samples(samples: list[Sample]) -> list[RouterSample]:
    """The samples of smg's figures (console.fleet.router), with their own labels."""
    out = []
    for sample in samples:
        figure = sample.labels.get(FIGURE_LABEL, "")
        if figure in ROUTER_FIGURES and math.isfinite(sample.value):
            labels = {k: v for k, v in sample.labels.items() if k != FIGURE_LABEL}
            out.append(RouterSample(figure, labels, sample.value))
    return out
