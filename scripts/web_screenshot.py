"""The README's picture of the console in a browser: `opsconsole demo --web` (the Kimi profile: 8 simulated GPUs)
under a benchmark load, opened in headless Chromium (tests/support/browser.py) at about 120x40 cells, saved as a PNG.

    .venv/bin/python scripts/web_screenshot.py [--out docs/screenshots/browser.png]

Look at the PNG before you commit it. Run it again after a change to the page or the dashboard.
"""

from __future__ import annotations

import argparse
import asyncio
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.support.browser import chromium  # noqa: E402
from tests.web.support import OPSCONSOLE, serving  # noqa: E402

PROFILE = "kimi-k2.5-int4-8x-rtxpro6000-pcie"
WINDOW = (1090, 850)  # Roboto Mono at 16 px: about 9 x 21 px a cell, so 120 x 40 cells


async def shoot(url: str, workspace: Path, out: Path) -> None:
    async with chromium(width=WINDOW[0], height=WINDOW[1]) as browser:
        tab = await browser.new_page()
        status = await tab.open(url)
        if status != 200:
            raise SystemExit(f"{url} answered {status}")
        await tab.wait_for_screen(lambda s: "healthy" in s, 120, "a healthy server")
        load = subprocess.Popen(
            [*OPSCONSOLE, "--workspace", str(workspace), "bench", "demo", "--concurrency", "24", "--duration", "120",
             "--input-len", "512", "--output-len", "256", "--label", "screenshot"],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        try:
            await tab.wait_for_screen(lambda s: re.search(r"generation\s+[1-9]", s) is not None, 120, "the load")
            started = time.monotonic()
            while time.monotonic() - started < 20:  # a picture, not a test: let the histories fill for 20 s
                await asyncio.sleep(1)
            size = await tab.evaluate("[window.__terminals[0].cols, window.__terminals[0].rows]")
            await tab.screenshot(out)
            print(f"wrote {out} ({size[0]}x{size[1]} cells)")
        finally:
            load.terminate()
            load.wait(timeout=60)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=str(ROOT / "docs" / "screenshots" / "browser.png"))
    opts = parser.parse_args()
    out = Path(opts.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="web-screenshot-") as tmp:
        argv = [*OPSCONSOLE, "--workspace", tmp, "demo", "--web", "--profile", PROFILE, "--time-scale", "0.002"]
        with serving(argv) as run:
            asyncio.run(shoot(run.url, Path(tmp), out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
