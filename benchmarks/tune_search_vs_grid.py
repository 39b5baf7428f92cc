"""`opsconsole tune`'s searches against the full grid, on the simulator with the seeds' profiles.

For each profile a demo host (tests/support/demo.py: the unit supervisor and the SGLang stand-in, real
processes) is set up as the seeds' host (tests/tune/simhost.py), then the same space is tuned three times through
console.core.tune: `--strategy grid` (every setup × every level, full runs with repeats), the default search
(`halving`: screening, then full runs with repeats only for setups that can still win a level, stopping once each
level's winner is outside the noise) and `predict` (the running setup measured, then a restart only for the setup
the prediction gives the best chance to win, refitted after each, until none can). Each tune starts from the
seeds' unit. Printed: setups, levels, wall time of each, the ratios, restarts, and whether the winners agree with
the grid's (at a level where the grid's own winner is within its noise, any setup tied with it counts).

Time is uniform: the stand-in runs --sim-speedup S times faster than the profile and starts in 1/S of a real
start (--sim-time-scale 1/S), so wall-clock ratios are the real hardware's ratios (the one thing not scaled is
the stand-in's own process start, ~1-2 s of wall time, which makes restarts look longer than they would be).
--duration is per level of a full run in *real* seconds (default 600: bench_serving's default 1000 prompts at
these concurrencies take 10-20 min per level); screening runs an eighth of it.

Run: .venv/bin/python benchmarks/tune_search_vs_grid.py [--speedup 40] [--duration 600] [--profiles qwen,kimi]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from console.core.session import open_session  # noqa: E402
from console.core.tune import (  # noqa: E402  # noqa: E402
    Cell,
    SpaceRequest,
    TuneRequest,
    TuneResult,
    plan_tune,
    ranges_overlap,
)
from console.workspace import Workspace  # noqa: E402
from tests.support.demo import running_demo  # noqa: E402
from tests.tune.simhost import KIMI, QWEN, install, seed_unit  # noqa: E402

PROFILES = {
    "qwen": (
        QWEN,
        [("--speculative-algorithm", "NEXTN"), ("--speculative-num-steps", "1"), ("--speculative-eagle-topk", "1"),
         ("--speculative-num-draft-tokens", "2")],
        False,
        SpaceRequest(algorithms=("NEXTN",), steps=(1, 2, 3), topks=(1, 2), spec_v2=(True, False)),
        (1, 8, 32, 64),
    ),
    "kimi": (
        KIMI,
        [],
        None,
        SpaceRequest(algorithms=(None, "EAGLE3"), steps=(1, 2, 3), topks=(1, 4), spec_v2=(True, False),
                     draft_model_path="sim/kimi-k2.5-eagle3"),
        (1, 8, 48, 64),
    ),
}  # fmt: skip


async def tune_once(workspace: Path, request: TuneRequest) -> tuple[TuneResult, float]:
    async with (
        open_session("demo", Workspace.resolve(workspace)) as session,
        await plan_tune(session, request) as pending,
    ):
        started = time.monotonic()
        result = await pending.execute()
        return result, time.monotonic() - started


def tied_with_winner(result: TuneResult, cell: Cell) -> set[str]:
    """The grid's winner at a cell and every setup whose range over the repeats overlaps it."""
    standings = result.search.standings(cell)
    if not standings:
        return set()
    return {s.candidate for s in standings if ranges_overlap(s, standings[0])}


def compare(name: str, grid: TuneResult, grid_s: float, search: TuneResult, search_s: float) -> bool:
    names = {c.key: c.name for c in grid.space.candidates}
    print(f"\n{name} ({search.strategy}): {len(grid.space.candidates)} setups ({len(grid.space.pruned)} pruned, "
          f"{len(grid.space.merged)} merged) x {len(grid.cells)} levels")  # fmt: skip
    same = True
    for cell in grid.cells:
        g, s = grid.search.decision(cell), search.search.decision(cell)
        ties = tied_with_winner(grid, cell)
        ok = bool(g.winner and s.winner and (s.winner.candidate == g.winner.candidate or
                                              (g.within_noise and s.winner.candidate in ties)))  # fmt: skip
        same = same and ok
        gw = names[g.winner.candidate] if g.winner else "-"
        sw = names[s.winner.candidate] if s.winner else "-"
        noise = " (grid: within noise)" if g.within_noise else ""
        print(f"  {cell.label:<14} grid {gw:<28} {search.strategy} {sw:<28} {'same' if ok else 'DIFFERENT'}{noise}")
    print(f"  grid:   {grid_s:7.1f} s wall, {grid.restarts} restarts")
    print(f"  {search.strategy}: {search_s:7.1f} s wall, {search.restarts} restarts")
    print(f"  {search.strategy} / grid time: {search_s / grid_s:.2f}   winners: {'same' if same else 'DIFFERENT'}")
    return same


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--speedup", type=float, default=40.0)
    parser.add_argument("--duration", type=float, default=600.0, help="real seconds per level of a full run")
    parser.add_argument("--profiles", default="qwen,kimi")
    args = parser.parse_args()
    from console.sim.plugin import register

    register()  # a composition root: the demo host's transport and the stand-in's units (console/sim/plugin.py)
    speedup = args.speedup
    all_same = True
    for key in args.profiles.split(","):
        profile, speculative, spec_v2, space, levels = PROFILES[key]
        with tempfile.TemporaryDirectory() as tmp, running_demo(Path(tmp) / "ws") as demo:
            asyncio.run(install(demo, lambda text, p=profile, s=speculative, v=spec_v2: seed_unit(  # type: ignore[misc]
                text, profile=p, version="0.5.9", speculative=s, spec_v2=v, speedup=speedup,
                time_scale=1 / speedup)))  # fmt: skip
            results = {}
            for strategy in ("grid", "halving", "predict"):
                request = TuneRequest(
                    space=space,
                    concurrencies=levels,
                    duration_s=args.duration / speedup,
                    repeats=2,
                    input_len=1024,
                    output_len=1024,
                    warmup=1,
                    strategy=strategy,  # type: ignore[arg-type]
                    timeout_s=120,
                )
                results[strategy] = asyncio.run(tune_once(demo.workspace, request))
            (grid, grid_s), (search, search_s) = results["grid"], results["halving"]
            all_same = compare(key, grid, grid_s, search, search_s) and all_same
            predicted, predicted_s = results["predict"]
            all_same = compare(key, grid, grid_s, predicted, predicted_s) and all_same
            print(f"  predict / halving: time {predicted_s / search_s:.2f}, restarts {predicted.restarts} / "
                  f"{search.restarts}")  # fmt: skip
    print(f"\nspeedup {speedup:g} (time scale 1/{speedup:g}), full run {args.duration:g} real s per level, 2 repeats")
    return 0 if all_same else 1


if __name__ == "__main__":
    sys.exit(main())
