"""The README's screenshots, made from the demo host: the dashboard under load, the overview of three hosts, the
editor with an edit and the verified restart.

    .venv/bin/python scripts/screenshots.py [--out docs/screenshots]

Starts `opsconsole demo --no-ui` (the Kimi profile: 8 simulated GPUs), puts a benchmark load on it, opens the
console headless at 120x40 (the real HostWatcher, as `opsconsole connect` does) and saves SVGs once the figures
are live. The overview shows the same demo host under three names. Run it again after a change to the screens.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import os
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

OPSCONSOLE = str(Path(sys.executable).with_name("opsconsole"))
PROFILE = "kimi-k2.5-int4-8x-rtxpro6000-pcie"


@contextlib.contextmanager
def demo(workspace: Path) -> Iterator[None]:
    proc = subprocess.Popen(
        [OPSCONSOLE, "--workspace", str(workspace), "demo", "--no-ui", "--profile", PROFILE, "--time-scale", "0.002"],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        start_new_session=True,
    )
    try:
        assert proc.stdout is not None
        for line in proc.stdout:
            if "Ctrl-C stops the demo host." in line:
                break
        yield
    finally:
        os.killpg(proc.pid, 2)
        proc.wait(timeout=60)


async def shoot(workspace: Path, out: Path) -> None:
    from console.cli.connect import build_app

    def app_for(targets: list[str]):  # type: ignore[no-untyped-def]
        args = argparse.Namespace(
            workspace=str(workspace), ssh_config=None, refresh=1.0, read_only=False, targets=targets
        )
        return build_app(args, targets)

    def text(app) -> str:  # type: ignore[no-untyped-def]
        return "\n".join(strip.text for strip in app.screen._compositor.render_strips())

    async def until(pilot, condition, what: str) -> None:  # type: ignore[no-untyped-def]
        for _ in range(240):  # two minutes
            if condition():
                return
            await pilot.pause(0.5)
        raise SystemExit(f"the console never showed {what}:\n{text(pilot.app)}")

    app = app_for(["demo"])
    async with app.run_test(size=(120, 40)) as pilot:
        # live figures: a running benchmark, latency percentiles over a window, a minute of history
        await until(pilot, lambda: "requests" in text(app) and " 0 tok/s" not in text(app), "the load")
        await pilot.pause(20)
        app.save_screenshot(str(out / "dashboard.svg"))
    app = app_for(["demo", "gpu-b", "gpu-c"])
    async with app.run_test(size=(120, 24)) as pilot:
        await until(pilot, lambda: len(app.views) == 3, "three hosts")
        await pilot.press("o")
        await until(pilot, lambda: text(app).count(" healthy ") >= 3, "three healthy hosts")
        await pilot.pause(2)
        app.save_screenshot(str(out / "overview.svg"))
    app = app_for(["demo"])
    async with app.run_test(size=(120, 40)) as pilot:
        await until(pilot, lambda: "active/running" in text(app), "the service")
        await pilot.press("e")
        await until(pilot, lambda: "What the server will really run" in text(app), "the editor")
        await pilot.press("plus")  # steps + 1 (the steps field has focus when the editor opens)
        await until(pilot, lambda: "ctrl+s: apply" in text(app), "an edit ready to apply")
        app.screen.set_focus(None)  # no blinking cursor in the picture
        await pilot.pause(0.5)
        app.save_screenshot(str(out / "editor.svg"))
        await pilot.press("ctrl+s")
        await until(pilot, lambda: "and restart" in text(app), "the confirmation")
        await pilot.press("y")
        await until(pilot, lambda: "verified" in text(app), "the verified restart")
        await pilot.pause(1)
        app.save_screenshot(str(out / "apply.svg"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "docs" / "screenshots"))
    opts = parser.parse_args()
    from console.sim.plugin import register

    register()  # a composition root: the demo host's transport and the stand-in's units (console/sim/plugin.py)
    out = Path(opts.out)
    out.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="screenshots-") as tmp:
        workspace = Path(tmp)
        with demo(workspace):
            profile = (workspace / "profiles" / "demo.toml").read_text()
            for name in ("gpu-b", "gpu-c"):
                (workspace / "profiles" / f"{name}.toml").write_text(profile)
            load = subprocess.Popen(
                [OPSCONSOLE, "--workspace", str(workspace), "bench", "demo", "--concurrency", "24",
                 "--duration", "120", "--input-len", "512", "--output-len", "256", "--label", "screenshot"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )  # fmt: skip
            try:
                asyncio.run(shoot(workspace, out))
            finally:
                load.terminate()
                load.wait(timeout=60)
    print(f"wrote dashboard.svg, overview.svg, editor.svg and apply.svg in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
