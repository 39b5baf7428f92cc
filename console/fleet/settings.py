"""`[fleet]` of the workspace's console.toml: where Prometheus is and how its labels name the hosts.

    [fleet]
    prometheus = "http://prometheus:9090"   # or `opsconsole connect --prometheus URL`
    label = "instance"          # the label that names a host: instance (default), or one of the operator's own
    sglang_job = "sglang"       # the job that scrapes SGLang's /metrics
    dcgm_job = "dcgm"           # the job that scrapes dcgm-exporter
    scrape_interval_s = 15      # Prometheus's; a series older than two of them is stale
    window = "1m"               # rate() window of the latency percentiles
    router_overload_waiting = 8       # smg's --worker-overload-waiting-requests, if yours says otherwise
    router_overload_token_usage = 0.8 # smg's --worker-overload-token-usage

A label's value names a host when it equals the profile's name, the host of its [host] ssh or the HostName the
ssh_config gives that host, a `:port` taken off (instance = "gpu-a:30000" names gpu-a for SGLang, "gpu-a:9400" for
its dcgm-exporter; "10.0.0.5:30000" names the profile whose `ssh = "gpu-a"` has HostName 10.0.0.5)."""

from __future__ import annotations

import re
from typing import Annotated
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, field_validator

_LABEL = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_DURATION = re.compile(r"^[0-9]+(ms|s|m|h)$")
_JOB = re.compile(r"^[^\"\\\n]+$")


def check_prometheus_url(value: str) -> str:
    parts = urlsplit(value)
    try:
        parts.port  # noqa: B018 - raises ValueError for a port that is not one
    except ValueError:
        parts = urlsplit("")
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.query or parts.fragment:
        raise ValueError(f'expected an http(s) URL such as "http://prometheus:9090", not {value!r}')
    return value.rstrip("/")


class FleetSettings(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    prometheus: str | None = None
    label: str = "instance"
    sglang_job: str = "sglang"
    dcgm_job: str = "dcgm"
    scrape_interval_s: Annotated[float, Field(gt=0, le=3600)] = 15.0
    window: str = "1m"
    # smg's overload thresholds (console.fleet.router): which of a model's workers smg counts overloaded
    router_overload_waiting: Annotated[int, Field(ge=1)] = 8
    router_overload_token_usage: Annotated[float, Field(gt=0, le=1)] = 0.8

    @field_validator("prometheus")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        return None if value is None else check_prometheus_url(value)

    @field_validator("label")
    @classmethod
    def _label(cls, value: str) -> str:
        if not _LABEL.match(value) or value.startswith("__"):
            raise ValueError(f"expected a Prometheus label name such as instance or host, not {value!r}")
        return value

    @field_validator("sglang_job", "dcgm_job")
    @classmethod
    def _job(cls, value: str) -> str:
        if not _JOB.match(value):
            raise ValueError(f"expected a job name without quotes, backslashes or newlines, not {value!r}")
        return value

    @field_validator("window")
    @classmethod
    def _window(cls, value: str) -> str:
        if not _DURATION.match(value):
            raise ValueError(f'expected a PromQL duration such as "1m" or "30s", not {value!r}')
        return value
