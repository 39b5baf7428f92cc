"""A demo host (`opsconsole demo --no-ui`, tests/support/demo.py) set up as one of the seeds' hosts for the tune.

The demo's unit is rewritten around the code under test (the supervisor's own write, daemon-reload, restart)
to serve a simulator profile at a given SGLang version, with the stand-in's clock sped up:
`--sim-speedup 10` with `--stream-interval 8`, and `--sim-time-scale 0.001` makes a start take a second or two.

Why 10 and not more: at C = 1 a step of the Kimi profile without speculation is 11 ms, 0.27 ms at 40×, and a
machine with its cores busy delays a process's wake-ups by about that much, so at 40× the measured C = 1 figures
fell by 4-6 % under load (no speculation more than EAGLE3, whose steps are longer: the seeds' 7 % gap between
them shrank to 3 %, and a busy run once inverted it). At 10× (and at 20×) the same runs held within 1 % of the
profile with two busy loops beside a loaded suite (no speculation 92.5 / 91.8 tok/s, EAGLE3 topk 1 + v2 86.1 /
86.5 at C = 1; 671 / 742 at C = 48). A level lasts no longer for it: a level is a duration, and its last requests
finish after it either way.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Sequence

from console.core.session import open_session
from console.sglang.unit import UnitFile
from console.workspace import Workspace
from tests.support.demo import Demo

QWEN = "qwen3.5-122b-fp8-4x-rtxpro6000"
KIMI = "kimi-k2.5-int4-8x-rtxpro6000-pcie"
SPEEDUP = 10
STREAM_INTERVAL = 8
SPEC_FLAGS = (
    "--speculative-algorithm",
    "--speculative-num-steps",
    "--speculative-eagle-topk",
    "--speculative-num-draft-tokens",
    "--speculative-draft-model-path",
)


def seed_unit(
    text: str,
    *,
    profile: str,
    version: str,
    speculative: Sequence[tuple[str, str]] = (),
    spec_v2: bool | None = None,
    speedup: float = SPEEDUP,
    time_scale: float = 0.001,
) -> str:
    """The demo unit as the seeds' host: model and tensor parallelism of the profile, its speculative flags."""
    unit = UnitFile.parse(text, version)
    model, tp = ("moonshotai/Kimi-K2.5", "8") if profile == KIMI else ("Qwen/Qwen3.5-122B-A10B-FP8", "4")
    unit.set_flag("--model-path", model)
    unit.set_flag("--tp-size", tp)
    unit.unset_flag("--served-model-name")
    for flag in SPEC_FLAGS:
        unit.unset_flag(flag)
    for flag, value in speculative:
        unit.set_flag(flag, value)
    unit.set_flag("--stream-interval", str(STREAM_INTERVAL))
    unit.set_flag("--sim-profile", profile)
    unit.set_flag("--sim-sglang-version", version)
    unit.set_flag("--sim-speedup", f"{speedup:g}")
    unit.set_flag("--sim-time-scale", f"{time_scale:g}")
    if spec_v2 is None:
        unit.unset_env("SGLANG_ENABLE_SPEC_V2")
    else:
        unit.set_env("SGLANG_ENABLE_SPEC_V2", "True" if spec_v2 else "False")
    return unit.render()


async def install(demo: Demo, make: Callable[[str], str]) -> str:
    """Rewrite the demo's unit with make(current_text) behind the console's back, restart it, wait for health.
    Returns the unit text now on the host."""
    async with open_session("demo", Workspace.resolve(demo.workspace)) as host:
        text = make(await host.service.read_unit())
        await host.service.write_unit(text)
        await host.service.daemon_reload()
        await host.service.restart()
        loop = asyncio.get_running_loop()
        deadline = loop.time() + 60
        client = await host.sglang()
        while not await _healthy(client):
            if loop.time() > deadline:
                raise AssertionError("the reconfigured demo server did not become healthy in 60 s")
            await asyncio.sleep(0.1)
        return text


async def _healthy(client: object) -> bool:
    try:
        return bool(await client.healthy())  # type: ignore[attr-defined]
    except Exception:
        return False
