"""Turn issue 20's GPU session (tune_session.py's OUTDIR) into docs/real-sglang.md's tables, calibration data
and fixtures.

    python3 scripts/real_sglang/tune_report.py RESULTS [--calibration FILE] [--profile tiny-test]
                                               [--fixtures tests/sim/fixtures/real-0.5.17/tune]
                                               [--search-from tests/sim/fixtures/real-0.5.17/tune]

RESULTS is what run.sh's last call left in $OUT (summary.json, drafts.json, journal.jsonl.gz, tune.tgz, bench.tgz: it
is unpacked into --into, default /tmp/issue20-results, since the device's files arrive read-only), or a session
folder as tune_session.py writes it (OUTDIR of a --sim dry run). Prints Markdown:
  - the drafts: recipe, offline agreement and accept length per steps (build_drafts.py), and the accept length the
    server reported for them (the tunes' levels, random workload);
  - the grid: every setup's accept length and output tok/s per workload and level, its round time
    (median TPOT x accept length: one draft + verify round per request), and the winner per level;
  - search vs grid: the winner per level in each, whether they agree (or the search's pick is within the grid's
    noise), the times, restarts and the search's share of the grid's time; with --search-from, the search of
    another session (a folder with its tune-search.json and summary.json, e.g. the first session's fixtures)
    against this session's grid, and the setups both sessions' grids measured side by side (cross-session noise);
  - the tune's estimate shown before confirmation vs its wall time (with the prior restart length, and with the
    restart length the tune then measured), the failing setup (SGLang's reason, rolled back) and the end state;
--calibration writes, per setup and cell, what the stand-in's speculative model must reproduce (accept length,
tok/s, TPOT, round time) next to what console.sim.perf predicts for the same resolved setup with `--profile`
and the *measured* accept length (so the gap is the step-time model's, not the acceptance's).
--fixtures copies the files the replay tests read (tune JSONs, summary, drafts, check-args, status, the journal
and the bench records, gzipped) into that folder.
"""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
import statistics
import sys
import tarfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))

LEVELS = (1, 8, 32)


def load(path: Path) -> Any:
    return json.loads(path.read_text()) if path.exists() else None


def setup_of(config: dict[str, Any]) -> str:
    return (
        f"{config.get('speculative_algorithm')} {config.get('speculative_num_steps')}/"
        f"{config.get('speculative_eagle_topk')}/{config.get('speculative_num_draft_tokens')}"
    )


def fmt(value: Any, digits: int = 0) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:,.{digits}f}"
    return str(value)


def level(trial: dict[str, Any], workload: str, concurrency: int) -> dict[str, Any] | None:
    return next((lv for lv in trial["levels"] if lv["workload"] == workload and lv["concurrency"] == concurrency), None)


def round_ms(lv: dict[str, Any] | None) -> float | None:
    """One draft + verify round per request: the time per output token times the tokens a round emits."""
    if not lv or lv.get("median_tpot_ms") is None or lv.get("accept_length") is None:
        return None
    return float(lv["median_tpot_ms"]) * float(lv["accept_length"])


def drafts_table(drafts: dict[str, Any] | None, tunes: dict[str, Any], out: list[str]) -> None:
    if not drafts:
        out.append("(no drafts.json)\n")
        return
    server: dict[str, dict[str, float]] = {}
    for tune in (tunes.get("grid"), tunes.get("search")):  # the tunes' own draft (sa-p90) at steps 3 topk 1
        for t in (tune or {}).get("trials", []):
            c = t["config"]
            if (c["speculative_algorithm"], c["speculative_num_steps"], c["speculative_eagle_topk"]) != (
                "STANDALONE", 3, 1,
            ):  # fmt: skip
                continue
            for lv in t["levels"]:
                if lv["workload"] == "random" and lv["concurrency"] in (1, 32) and lv["measured_by"] == "full":
                    server.setdefault("sa-p90", {}).setdefault(f"steps 3, C={lv['concurrency']}", lv["accept_length"])
    dtune = tunes.get("drafts")
    if dtune:
        names = ("sa-copy", "sa-p70", "sa-p40", "eagle-repeat")  # tune_session.TuneSession.DRAFTS, in order
        for name, trial in zip(names, dtune["trials"], strict=False):
            for lv in trial["levels"]:
                server.setdefault(name, {})[f"steps 3, C={lv['concurrency']}"] = lv.get("accept_length")
    out.append("| draft | recipe | sigma | agreement | accept (offline) steps 1 / 2 / 3 | accept (server) |")
    out.append("|---|---|---|---|---|---|")
    for name, d in drafts.get("drafts", {}).items():
        acc = d.get("accept_length") or {}
        offline = " / ".join(fmt(acc.get(s), 2) for s in ("1", "2", "3")) if acc else d.get("expected", "-")
        measured = ", ".join(f"{k}: {fmt(v, 2)}" for k, v in server.get(name, {}).items()) or "-"
        recipe = d.get("recipe", "")
        sigma = "-" if d.get("sigma") is None else f"{d['sigma']:.4g}"
        agreement = fmt(d.get("agreement"), 3)
        out.append(f"| {name} | {recipe} | {sigma} | {agreement} | {offline} | {measured} |")
    chat = drafts.get("chat_t07")
    if chat:
        probs = ", ".join(f"{k} {v['accept_prob_per_token']:.5f}" for k, v in chat.items() if isinstance(v, dict))
        top = chat.get("target_max_prob_mean")
        out.append(
            f"\nchat prompts at temperature 0.7: the target's own top token has p = {top} on average; "
            f"the probability the target gives a draft's token: {probs}\n"
        )


def grid_table(grid: dict[str, Any], out: list[str]) -> None:
    workloads = list(dict.fromkeys(lv["workload"] for t in grid["trials"] for lv in t["levels"]))
    head = ["setup (alg steps/topk/draft)", "state"]
    for w in workloads:
        head += [f"{w} accept", *(f"{w} C={c} tok/s" for c in LEVELS), f"{w} round ms C=1 / 32"]
    out.append("| " + " | ".join(head) + " |")
    out.append("|" + "---|" * len(head))
    winners = {(r["workload"], r["concurrency"]): setup_of(r["config"]) for r in grid.get("recommendations", [])}
    for t in grid["trials"]:
        row = [setup_of(t["config"]), t["state"]]
        for w in workloads:
            accepts = [lv.get("accept_length") for c in LEVELS if (lv := level(t, w, c)) and lv.get("accept_length")]
            row.append(fmt(statistics.median(accepts), 2) if accepts else "-")
            for c in LEVELS:
                lv = level(t, w, c)
                star = " ★" if winners.get((w, c)) == setup_of(t["config"]) else ""
                row.append(fmt(lv["output_throughput"]) + star if lv else "-")
            row.append(f"{fmt(round_ms(level(t, w, 1)), 2)} / {fmt(round_ms(level(t, w, 32)), 2)}")
        out.append("| " + " | ".join(row) + " |")


def times_table(summary: dict[str, Any], out: list[str]) -> None:
    """The estimate shown before confirmation (benchmark seconds + starts x the restart length it was given) beside
    the wall time, and the same split measured (the journal's starts and stops, and the rest)."""
    out.append("| tune | wall s | estimate s (error) | estimate: bench s + starts x restart s | "
               "with the measured restart (error) | measured: starts, their s, the rest s | restarts |")  # fmt: skip
    out.append("|---|---|---|---|---|---|---|")
    for name in ("search", "grid", "drafts"):
        step = summary["steps"].get(name)
        if not step or "estimate" not in step:
            continue
        est, parts = step["estimate"], step.get("measured_parts", {})
        result = step.get("result", {})
        out.append(
            f"| {name} | {fmt(step.get('wall_s'))} | {fmt(est.get('estimate_s'))} "
            f"({fmt(step.get('estimate_error_pct'), 1)} %) | {fmt(est.get('bench_s'))} + {fmt(est.get('starts'))} x "
            f"{fmt(est.get('restart_s'))} | {fmt(step.get('estimate_with_measured_restart_s'))} "
            f"({fmt(step.get('estimate_with_measured_restart_error_pct'), 1)} %) | {fmt(parts.get('starts'))}, "
            f"{fmt(parts.get('starts_s'))}, {fmt(parts.get('rest_s'))} | {fmt(result.get('restarts'))} |"
        )


def cross_session(grid_file: Path, other: Path, out: list[str]) -> None:
    """This session's grid against another session's search (tune_session.compare: winners, within the grid's
    noise, times) and against the setups that session's grid measured (the same setup on two machines)."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from tune_session import compare

    grid = load(grid_file)
    summary = load(other / "summary.json") or {}
    comparison = compare(other / "tune-search.json", grid_file, summary)
    if "cells" in comparison:
        out.append(f"\n### Search ({other}) vs this grid\n")
        comparison_table(comparison, out)
    earlier = load(other / "tune-grid.json")
    if not earlier:
        return
    out.append(f"\n### The same setups in both grids ({other} / this session)\n")
    out.append("| setup | cell | earlier tok/s [low-high] | this tok/s [low-high] | this / earlier |")
    out.append("|---|---|---|---|---|")
    for t in earlier["trials"]:
        mine = next((m for m in grid["trials"] if m["config"] == t["config"]), None)
        for lv in t["levels"]:
            now = level(mine, lv["workload"], lv["concurrency"]) if mine else None
            if not now:
                continue
            ratio = now["output_throughput"] / lv["output_throughput"]
            out.append(
                f"| {setup_of(t['config'])} | {lv['workload']} C={lv['concurrency']} | "
                f"{fmt(lv['output_throughput'])} [{fmt(lv['low'])}-{fmt(lv['high'])}] | "
                f"{fmt(now['output_throughput'])} [{fmt(now['low'])}-{fmt(now['high'])}] | {ratio:.2f} |"
            )


def comparison_table(comparison: dict[str, Any], out: list[str]) -> None:
    out.append("| cell | search | grid | same | within grid noise | gap |")
    out.append("|---|---|---|---|---|---|")
    for c in comparison["cells"]:
        noise, gap = fmt(c.get("within_grid_noise")), fmt(c.get("gap_pct"), 1)
        out.append(f"| {c['cell']} | {c['search']} | {c['grid']} | {c['same']} | {noise} | {gap} |")
    share = fmt(comparison.get("search_share_of_grid"), 3)
    without = fmt(comparison.get("search_share_without_failed_trial"), 3)
    out.append(
        f"\nsearch {fmt(comparison.get('search_s'))} s vs grid {fmt(comparison.get('grid_s'))} s: share {share} "
        f"({without} without the failing setup's {fmt(comparison.get('failed_trial_s'))} s); "
        f"restarts {comparison.get('restarts')}"
    )


def calibration(grid: dict[str, Any], profile_name: str) -> dict[str, Any]:
    from console.sim.perf import PerfModel
    from console.sim.profiles import PROFILES

    profile = PROFILES[profile_name]
    rows = []
    for t in grid["trials"]:
        resolved = dict(t["config"], mem_fraction_static=0.3)
        model = PerfModel(profile, resolved)
        for lv in t["levels"]:
            c, accept = lv["concurrency"], lv.get("accept_length")
            step_s = model.decode_step_s(c)
            predicted = c * accept / step_s if accept and step_s else None
            rows.append(
                {
                    "setup": setup_of(t["config"]),
                    "config": t["config"],
                    "workload": lv["workload"],
                    "concurrency": c,
                    "accept_length": accept,
                    "output_throughput": lv["output_throughput"],
                    "low": lv.get("low"),
                    "high": lv.get("high"),
                    "median_tpot_ms": lv.get("median_tpot_ms"),
                    "median_ttft_ms": lv.get("median_ttft_ms"),
                    "round_ms": round_ms(lv),
                    "standin_round_ms": round(step_s * 1000, 3),
                    "standin_tok_s_at_measured_accept": round(predicted, 1) if predicted else None,
                    "ratio_standin_to_measured": round(predicted / lv["output_throughput"], 3)
                    if predicted and lv["output_throughput"]
                    else None,
                }
            )
    return {"profile": profile_name, "note": "stand-in: decode only, closed loop, measured accept", "rows": rows}


def copy_fixtures(results: Path, dest: Path) -> list[str]:
    dest.mkdir(parents=True, exist_ok=True)
    copied = []
    for name in ("summary.json", "drafts.json", "tune-search.json", "tune-grid.json", "tune-drafts.json",
                 "check-args-base.json", "status-final.json", "status-stopped.json"):  # fmt: skip
        if (results / name).exists():
            shutil.copyfile(results / name, dest / name)  # not copy2: the device's files are read-only
            copied.append(name)
    gz = [(results / "journal.jsonl", "journal.jsonl.gz")]
    gz += [(p, f"{p.name}.gz") for p in sorted((results / "work" / "ws" / "logs").glob("bench-*.jsonl"))]
    for src, name in gz:
        if src.exists():
            with src.open("rb") as f, gzip.open(dest / name, "wb", compresslevel=9) as g:
                shutil.copyfileobj(f, g)
            copied.append(name)
    return copied


def unpack(results: Path, into: Path) -> Path:
    """$OUT's files as one session folder (tune_session.py's layout)."""
    if not (results / "tune.tgz").exists():
        return results
    shutil.rmtree(into, ignore_errors=True)
    into.mkdir(parents=True)
    with tarfile.open(results / "tune.tgz") as tar:
        tar.extractall(into, filter="data")
    if (results / "bench.tgz").exists():
        (into / "work" / "ws").mkdir(parents=True, exist_ok=True)
        with tarfile.open(results / "bench.tgz") as tar:
            tar.extractall(into / "work" / "ws", filter="data")
    if (results / "journal.jsonl.gz").exists():
        with gzip.open(results / "journal.jsonl.gz", "rb") as f, (into / "journal.jsonl").open("wb") as g:
            shutil.copyfileobj(f, g)
    for name in ("summary.json", "drafts.json", "build_drafts.log", "importtime.txt.gz"):
        if (results / name).exists():
            shutil.copy2(results / name, into / name)
    return into


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("results", type=Path)
    p.add_argument("--calibration", type=Path, help="write the calibration rows (JSON) here")
    p.add_argument("--profile", default="tiny-test", help="the stand-in profile to predict with")
    p.add_argument("--fixtures", type=Path, help="copy the replay tests' files into this folder")
    p.add_argument("--into", type=Path, default=Path("/tmp/issue20-results"), help="where $OUT's archives go")
    p.add_argument("--search-from", type=Path, help="another session's folder (tune-search.json, summary.json)")
    args = p.parse_args()
    r = unpack(args.results, args.into)
    summary = load(r / "summary.json") or {"steps": {}}
    tunes = {n: load(r / f"tune-{n}.json") for n in ("search", "grid", "drafts")}
    out: list[str] = []
    start = summary["steps"].get("start", {})
    out.append(f"base: {start.get('algorithm')} with {start.get('draft')}, healthy {start.get('healthy_after_s')} s "
               "after the supervisor started it\n")  # fmt: skip
    out.append("### Drafts\n")
    drafts_table(load(r / "drafts.json"), tunes, out)
    grid = tunes.get("grid")
    if grid:
        out.append("\n### Grid (every setup, every level, full runs)\n")
        grid_table(grid, out)
    search = tunes.get("search")
    if search:
        out.append("\n### Search (halving) trials\n")
        for t in search["trials"]:
            note = f": {t['error']}" if t.get("error") else ""
            out.append(f"- {t['name']} ({setup_of(t['config'])}): {t['state']}{note}")
            for line in t.get("journal", [])[-6:]:
                out.append(f"    {line}")
        out.append("")
        for w, text in (search.get("summary") or {}).items():
            out.append(f"- {w}: {text}")
        for side in search.get("workloads", []):
            if side.get("warning"):
                out.append(f"- warning (C={side.get('concurrency')}): {side['warning']}")
    comparison = summary["steps"].get("grid", {}).get("comparison")
    if comparison and "cells" in comparison:
        out.append("\n### Search vs grid\n")
        comparison_table(comparison, out)
    if args.search_from and grid:
        cross_session(r / "tune-grid.json", args.search_from, out)
    out.append("\n### Times\n")
    times_table(summary, out)
    final = summary["steps"].get("final")
    if final:
        out.append(
            f"\nend: unit byte for byte {final.get('unit_byte_for_byte')}, healthy after "
            f"{final.get('healthy_after_s')} s, server as at the start {final.get('server_as_at_start')}"
        )
    print("\n".join(out))
    if args.calibration and grid:
        args.calibration.write_text(json.dumps(calibration(grid, args.profile), indent=1))
        print(f"\ncalibration rows: {args.calibration}")
    if args.fixtures:
        print(f"fixtures: {', '.join(copy_fixtures(r, args.fixtures))} -> {args.fixtures}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
