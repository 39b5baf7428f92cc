"""dcgm-exporter's /metrics for the simulated GPUs: its default counters, names, types and labels (pure).

Labels as dcgm-exporter writes them: gpu, UUID, pci_bus_id, device, modelName, Hostname, DCGM_FI_DRIVER_VERSION
(etc/default-counters.csv; internal/pkg/rendermetrics)."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from aiohttp import web

from console.sim.gpus import DRIVER_VERSION, GpuState

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

# name, type, help, value of a GPU
_COUNTERS = (
    ("DCGM_FI_DEV_SM_CLOCK", "gauge", "SM clock frequency (in MHz).", lambda g: g.sm_clock_mhz),
    ("DCGM_FI_DEV_MEM_CLOCK", "gauge", "Memory clock frequency (in MHz).", lambda g: g.mem_clock_mhz),
    ("DCGM_FI_DEV_MEMORY_TEMP", "gauge", "Memory temperature (in C).", lambda g: g.memory_temperature_c),
    ("DCGM_FI_DEV_GPU_TEMP", "gauge", "GPU temperature (in C).", lambda g: g.temperature_c),
    ("DCGM_FI_DEV_POWER_USAGE", "gauge", "Power draw (in W).", lambda g: g.power_draw_w),
    ("DCGM_FI_DEV_GPU_UTIL", "gauge", "GPU utilization (in %).", lambda g: g.util_gpu),
    ("DCGM_FI_DEV_MEM_COPY_UTIL", "gauge", "Memory utilization (in %).", lambda g: g.util_mem),
    ("DCGM_FI_DEV_FB_FREE", "gauge", "Frame buffer memory free (in MiB).", lambda g: g.memory_free_mib),
    ("DCGM_FI_DEV_FB_USED", "gauge", "Frame buffer memory used (in MiB).", lambda g: g.memory_used_mib),
)


def render_dcgm(gpus: Sequence[GpuState], hostname: str) -> str:
    lines: list[str] = []
    for name, kind, doc, value in _COUNTERS:
        lines += [f"# HELP {name} {doc}", f"# TYPE {name} {kind}"]
        for gpu in gpus:
            labels = (
                f'gpu="{gpu.index}",UUID="{gpu.uuid}",pci_bus_id="{gpu.bus_id}",device="nvidia{gpu.index}",'
                f'modelName="{gpu.name}",Hostname="{hostname}",DCGM_FI_DRIVER_VERSION="{DRIVER_VERSION}"'
            )
            lines.append(f"{name}{{{labels}}} {value(gpu)}")
    return "\n".join(lines) + "\n"


def dcgm_app(gpus: Callable[[], Sequence[GpuState]], hostname: str) -> web.Application:
    """dcgm-exporter's HTTP side: GET /metrics, the GPUs as they are now."""

    async def metrics(_request: web.Request) -> web.Response:
        return web.Response(body=render_dcgm(gpus(), hostname).encode(), headers={"Content-Type": CONTENT_TYPE})

    app = web.Application()
    app.router.add_get("/metrics", metrics)
    return app
