"""GPU telemetry during a level: a pluggable sampler and the aggregation of what it returned.

The sampler is any `async () -> list[sample]`, one sample per GPU per call (the host layer's nvidia-smi or
NVML reader, or the simulator's). Samples are read by duck typing, as objects or dicts, so that this module
does not depend on the host layer's classes: the field names below and a few common aliases are accepted.
Aggregation is pure: mean and max per quantity over the level (summed over GPUs for power), and
tokens per joule = output tokens / (mean total power × duration).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any

GpuSampler = Callable[[], Awaitable[Sequence[Any]]]

# quantity -> names a sample may use for it (first found wins)
_ALIASES: dict[str, tuple[str, ...]] = {
    "power_w": ("power_w", "power_draw_w", "power_draw", "power"),
    "util_pct": ("util_pct", "utilization_gpu", "gpu_util", "utilization", "util"),
    "sm_clock_mhz": ("sm_clock_mhz", "clocks_sm_mhz", "clocks_sm", "sm_clock"),
    "memory_used_mib": ("memory_used_mib", "memory_used", "mem_used_mib", "memory_used_mb"),
    "memory_total_mib": ("memory_total_mib", "memory_total", "mem_total_mib", "memory_total_mb"),
}
_IDENTITY = {"index": ("index", "gpu_index", "id"), "name": ("name", "model"), "driver": ("driver_version", "driver")}


def _field(sample: Any, names: Sequence[str]) -> Any:
    for name in names:
        value = sample.get(name) if isinstance(sample, dict) else getattr(sample, name, None)
        if value is not None:
            return value
    return None


def _number(sample: Any, quantity: str) -> float | None:
    value = _field(sample, _ALIASES[quantity])
    try:
        return float(value) if value is not None else None
    except (TypeError, ValueError):
        return None  # "[N/A]" and the like


def describe_gpus(samples: Sequence[Any]) -> tuple[list[dict[str, Any]], str | None]:
    """GPU identities (index, name, memory) and the driver version, for a record's provenance."""
    gpus: list[dict[str, Any]] = []
    driver = None
    for s in samples:
        gpus.append(
            {
                "index": _field(s, _IDENTITY["index"]),
                "name": _field(s, _IDENTITY["name"]),
                "memory_total_mib": _number(s, "memory_total_mib"),
            }
        )
        driver = driver or _field(s, _IDENTITY["driver"])
    return gpus, (str(driver) if driver is not None else None)


def aggregate(polls: Sequence[Sequence[Any]], output_tokens: int, duration: float) -> dict[str, Any]:
    """Mean/max over the level's polls. Power and memory are summed over GPUs (the server uses all of them),
    util and clocks are averaged over GPUs. Empty dict when nothing was sampled."""
    if not polls:
        return {}
    per_poll: dict[str, list[float]] = {k: [] for k in ("power_w", "util_pct", "sm_clock_mhz", "memory_used_mib")}
    for poll in polls:
        for quantity, combine in (("power_w", sum), ("memory_used_mib", sum)):
            values = [v for s in poll if (v := _number(s, quantity)) is not None]
            if values:
                per_poll[quantity].append(combine(values))
        for quantity in ("util_pct", "sm_clock_mhz"):
            values = [v for s in poll if (v := _number(s, quantity)) is not None]
            if values:
                per_poll[quantity].append(sum(values) / len(values))
    out: dict[str, Any] = {"gpu_samples": len(polls)}
    for quantity, values in per_poll.items():
        if values:
            out[f"mean_{quantity}"] = sum(values) / len(values)
            out[f"max_{quantity}"] = max(values)
    mean_power = out.get("mean_power_w")
    if mean_power and duration > 0:
        out["energy_j"] = mean_power * duration
        out["tokens_per_joule"] = output_tokens / out["energy_j"]
    return out


# -- nvidia-smi, run by the load generator itself ---------------------------------------------------------
# On a GPU host the engine (console.bench.agent) samples the GPUs with the host's own nvidia-smi; this is a
# minimal reader of what it needs (the host layer's full one needs pydantic, which a GPU host may not have).
SMI_FIELDS = ("index", "name", "power.draw", "utilization.gpu", "clocks.sm", "memory.used", "memory.total")
_SMI_KEYS = ("index", "name", "power_draw_w", "utilization_gpu", "clocks_sm_mhz", "memory_used_mib", "memory_total_mib")


def parse_smi_csv(text: str, driver_version: str | None = None) -> list[dict[str, Any]]:
    """`--query-gpu=SMI_FIELDS --format=csv,noheader,nounits` -> one sample per GPU (unreadable values: None;
    lines that are not a GPU, such as driver errors, are skipped). Pure."""
    samples: list[dict[str, Any]] = []
    for line in text.splitlines():
        cells = [cell.strip() for cell in line.split(",")]
        if len(cells) != len(SMI_FIELDS) or not cells[0].isdigit():
            continue
        sample: dict[str, Any] = {"index": int(cells[0]), "name": cells[1] or None}
        for key, cell in zip(_SMI_KEYS[2:], cells[2:], strict=True):
            try:
                sample[key] = float(cell)
            except ValueError:
                sample[key] = None  # [N/A], [Not Supported]
        if driver_version:
            sample["driver_version"] = driver_version
        samples.append(sample)
    return samples


def nvidia_smi_sampler(command: Sequence[str]) -> GpuSampler:
    """A sampler that runs `command` (nvidia-smi or a stand-in) on this machine; the driver version is read once."""
    import asyncio
    import contextlib

    driver: list[str | None] = []

    async def query(*args: str) -> str:
        process = await asyncio.create_subprocess_exec(
            *command,
            *args,
            stdin=asyncio.subprocess.DEVNULL,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.DEVNULL,
        )
        try:
            out, _ = await process.communicate()
        except asyncio.CancelledError:
            # The level ended with the poll in flight: end it and reap it now, so that neither it nor its pipe
            # outlives the event loop (a transport collected after the loop closed fails in its __del__).
            with contextlib.suppress(ProcessLookupError):
                process.kill()
            await process.wait()
            raise
        return out.decode("utf-8", "replace") if process.returncode == 0 else ""

    async def sample() -> list[dict[str, Any]]:
        if not driver:
            lines = (await query("--query-gpu=driver_version", "--format=csv,noheader")).split()
            driver.append(lines[0] if lines else None)
        text = await query(f"--query-gpu={','.join(SMI_FIELDS)}", "--format=csv,noheader,nounits")
        return parse_smi_csv(text, driver[0])

    return sample
