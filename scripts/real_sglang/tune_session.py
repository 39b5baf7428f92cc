"""Issue 20: `opsconsole tune` against a real SGLang 0.5.17 server on the GPU machine, under the demo supervisor.

    python3 scripts/real_sglang/tune_session.py OUTDIR [--models DIR] [--sim] [--budget-s S] [--phases A,B]
                                                [--draft sa-p90] [--workloads random,chat] [--duration 2] ...

Opt-in: the test suite never runs it. run.sh (modes `tune` and `wait`) stages the bundle, builds the tiny target
and the drafts (build_drafts.py), starts this script detached and collects OUTDIR into $OUT. `--sim` runs the same
session against the project's stand-in emulating 0.5.17 (no GPU, no torch), to check the script before GPU time.

Every phase writes OUTDIR/summary.json (wall time, outcome) as it ends; a phase that fails does not stop the others;
`--phases` runs a subset (start, stop and journal always run: the unit must end stopped, the journal kept).
The phases, in order of priority:
 start   the base unit (STANDALONE, the --draft model, steps 2, topk 1, draft tokens 3, CUDA graphs, metrics, and
         the start options below) under supervise.py, with a workspace profile `gpu` (transport demo, nvidia-smi);
         records the unit's sha256 and the server's resolved speculative values: the host must end on them.
 search  `opsconsole tune gpu --space search.toml --strategy halving --yes --json`: STANDALONE steps 1-3 x topk 1,2
         with the --draft model (the version's rules prune and merge), plus one [[candidate]] that passes the rules
         and fails on the real server (EAGLE with eagle-wide, whose hidden size does not fit the target's: its
         draft CUDA-graph capture fails). Before it, the estimate the console shows before confirmation (plan_tune
         + PendingTune.estimate_s, as the Tune screen computes it), with the restart time known so far.
 grid    the same space without the failing candidate, `--strategy grid`: every setup at every level fully, on
         the same server, to compare winners and time with the search.
 drafts  (optional: only when its estimate fits in what is left of --budget-s) each draft's accept length on the
         server: STANDALONE steps 3 topk 1 with sa-copy, sa-p70, sa-p40, and EAGLE steps 3 topk 1 with
         eagle-repeat, random workload, C = 1 and 32, one run each (a grid tune of [[candidate]] tables).
 final   the host after the tunes: the unit byte for byte the original, /health 200, the resolved values the same
         process-wide as at the start, `status gpu --json`.
 stop    the unit stopped through the supervisor (SGLang 0.5.17 ends by its own SIGKILL).
 journal the supervisor's whole journal (journal.jsonl), from which every start's length is computed.

Start options that keep a start short. Measured in issue 20's session (its journal, tests/sim/test_real_0517_tune.py):
a start with them takes 49-71 s, median ~57 s (the session's first, cold start 120 s), a stop ~5.5 s (5.2-6.1);
the second session's host was slower: 66-93 s, median 73 s, the cold start 153 s (test_real_0517_tune_grid.py);
most of a start is Python imports of the main process and the scheduler process, which no flag changes:
 --disable-prefill-cuda-graph   no prefill (breakable) graphs for the target and the draft: ~3-4 s less per start,
                                and the cold start's triton JIT happens at the first requests instead of the capture.
                                Prefill runs eagerly: TTFT is a little higher; decode (the tok/s tune compares) is not.
 --cuda-graph-max-bs-decode 32  decode/verify/draft graphs for batch 1..32 instead of 1..48 (the levels stop at 32):
                                ~30 % fewer captures.
 --skip-server-warmup           no warm-up generate after the start (~1.5 s); each benchmark level warms up itself,
                                but the first run after a restart still pays for the rest of the warm-up: the
                                search's 0.19 s screening runs saw TTFTs up to 1.2 s at C = 8 and 32.
 --sampling-backend pytorch     torch sampling instead of flashinfer's, whose kernels are JIT-compiled with nvcc on
                                the first sampled request (~80 s on a fresh machine: the chat workload samples).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import signal
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
sys.path.insert(0, str(REPO))
sys.path.insert(0, str(HERE))

from gpu_session import PY, Session, now  # noqa: E402

START_OPTIONS = [
    ("--disable-prefill-cuda-graph", None),
    ("--cuda-graph-max-bs-decode", "32"),
    ("--skip-server-warmup", None),
    ("--sampling-backend", "pytorch"),
]
BASE_SPEC = [
    ("--speculative-num-steps", "2"),
    ("--speculative-eagle-topk", "1"),
    ("--speculative-num-draft-tokens", "3"),
]
RESTART_PRIOR_S = 60.0  # warm starts of the earlier 0.5.17 session: 54-78 s; issue 20's: 49-71 s + ~5.5 s stop
PHASES = ("start", "search", "grid", "drafts", "final", "stop", "journal")
SERVER_KEYS = (
    "speculative_algorithm",
    "speculative_draft_model_path",
    "speculative_num_steps",
    "speculative_eagle_topk",
    "speculative_num_draft_tokens",
    "disable_overlap_schedule",
    "version",
)


class TuneSession(Session):
    def __init__(self, args: argparse.Namespace) -> None:
        super().__init__(args.out, args.models, args.sim, args.budget_s)
        self.args = args
        self.algorithm = "STANDALONE"
        self.draft = args.models / args.draft
        self.failing = args.models / ("eagle-wide" if not args.sim else "eagle-wide-missing")
        self.summary["plan"] = {k: str(v) for k, v in vars(args).items()}
        self.original: dict[str, Any] = {}
        self.restart_s: list[float] = []  # measured starts (journal), for the next estimate

    # --- the unit ------------------------------------------------------------------------------------------

    def unit_text(self) -> str:
        if self.sim:
            launcher = f"{PY} -m console.sim"
            extra = [("--sim-sglang-version", "0.5.17"), ("--sim-profile", "tiny-test")]
            extra += [("--sim-time-scale", str(self.args.sim_time_scale))]
            extra.append(("--sim-state-dir", str(self.work / "sim-state")))
            pythonpath = str(REPO)
        else:
            launcher = f"{PY} -m sglang.launch_server"
            extra = []
            pythonpath = os.environ.get("PYTHONPATH", "")
        flags = [
            ("--model-path", str(self.models / "tiny-llama")),
            ("--host", "127.0.0.1"),
            ("--port", "30000"),
            ("--enable-metrics", None),
            ("--mem-fraction-static", "0.3"),
            ("--attention-backend", "triton"),
            *START_OPTIONS,
            ("--speculative-algorithm", self.algorithm),
            ("--speculative-draft-model-path", str(self.draft)),
            *BASE_SPEC,
        ]
        lines = [launcher] + [f if v is None else f"{f} {v}" for f, v in [*flags, *extra]]
        exec_start = " \\\n    ".join(lines)
        return (
            f"[Unit]\nDescription=SGLang 0.5.17 (tiny Llama + {self.algorithm} draft) on the GPU machine\n\n[Service]\n"
            f'Type=simple\nEnvironment="PYTHONPATH={pythonpath}" "HF_HUB_OFFLINE=1" "TRANSFORMERS_OFFLINE=1" '
            '"HF_DATASETS_OFFLINE=1"\n'
            f"ExecStart={exec_start}\nTimeoutStopSec=60\nRestart=no\n\n[Install]\nWantedBy=multi-user.target\n"
        )

    def start(self) -> dict[str, Any]:
        if self.sim:  # the stand-in checks only that local model paths exist
            for name in ("tiny-llama", "sa-copy", "sa-p90", "sa-p70", "sa-p40", "eagle-repeat"):
                (self.models / name).mkdir(parents=True, exist_ok=True)
        result = super().start()
        if result["healthy_after_s"] is None and (self.models / "eagle-repeat").exists():
            # STANDALONE never ran on this machine before: if it does not come up, the session goes on with the
            # EAGLE head that is known to load (EAGLE v1 ran here in the earlier session), so the tunes still run
            result["standalone_failed"] = {"journal_tail": [r["message"] for r in self.journal_rows()[-40:]]}
            self.finish_supervisor()
            self.algorithm, self.draft = "EAGLE", self.models / "eagle-repeat"
            print(
                f"[{time.strftime('%H:%M:%S')}] the STANDALONE base did not start: EAGLE with {self.draft}", flush=True
            )
            result["fallback"] = super().start()
            result["healthy_after_s"] = result["fallback"]["healthy_after_s"]
        result["algorithm"], result["draft"] = self.algorithm, str(self.draft)
        self.original = {"sha256": _sha(self.unit_path), "text": self.unit_path.read_text()}
        try:
            info = self.get_json("/server_info")
            self.original["server"] = {k: info.get(k) for k in SERVER_KEYS}
        except Exception as exc:  # recorded; the final check then says it could not compare
            self.original["server_error"] = f"{type(exc).__name__}: {exc}"
        result["original"] = {k: v for k, v in self.original.items() if k != "text"}
        result["check_args"] = self.console(
            "check-args", "check-args", "--sglang-version", "0.5.17", "--unit", str(self.unit_path),
            "--architecture", "LlamaForCausalLM", "--json", timeout=60, save="check-args-base.json",
        )  # fmt: skip
        return result

    # --- tunes -------------------------------------------------------------------------------------------------

    def wait_healthy(self, timeout: float) -> float | None:
        """/health 200, or None at once when the unit's process is gone (a start that failed), or at the timeout."""
        started = now()
        while now() - started < min(timeout, self.left()):
            healthy = super().wait_healthy(2.0)
            if healthy is not None:
                return round(now() - started, 1)
            try:
                if self.control.exists() and self.service_state()["active_state"] == "failed":
                    return None
            except Exception:
                pass  # the supervisor is still coming up: its socket answers shortly
        return None

    def finish_supervisor(self) -> None:
        if self.supervisor is not None and self.supervisor.poll() is None:
            self.supervisor.send_signal(signal.SIGTERM)
            try:
                self.supervisor.wait(90)
            except subprocess.TimeoutExpired:
                os.killpg(self.supervisor.pid, signal.SIGKILL)

    def step(self, name: str, fn: Any) -> None:
        print(f"[{time.strftime('%H:%M:%S')}] phase {name} begins ({self.left():.0f} s of the budget left)", flush=True)
        started = now()
        super().step(name, fn)
        outcome = self.summary["steps"].get(name, {})
        note = outcome.get("skipped") or outcome.get("error") or "done"
        print(f"[{time.strftime('%H:%M:%S')}] phase {name}: {note} in {now() - started:.0f} s", flush=True)

    def space_file(self, name: str, with_failing: bool) -> Path:
        lines = [
            f'algorithm = ["{self.algorithm}"]',
            f"steps = [{self.args.steps}]",
            f"topk = [{self.args.topk}]",
            f'draft_model_path = "{self.draft}"',
        ]
        if with_failing:
            lines += [
                "",
                "# passes the rules (an EAGLE draft path they cannot look into); its shapes do not fit the target",
                "[[candidate]]",
                'algorithm = "EAGLE"',
                "steps = 2",
                "topk = 1",
                f'draft_model_path = "{self.failing}"',
            ]
        path = self.work / f"{name}.toml"
        path.write_text("\n".join(lines) + "\n")
        return path

    DRAFTS = (("sa-copy", "STANDALONE"), ("sa-p70", "STANDALONE"), ("sa-p40", "STANDALONE"), ("eagle-repeat", "EAGLE"))

    def drafts_space_file(self) -> Path:
        lines = []
        for name, algorithm in self.DRAFTS:
            lines += ["[[candidate]]", f'algorithm = "{algorithm}"', "steps = 3", "topk = 1"]
            lines += [f'draft_model_path = "{self.models / name}"', ""]
        path = self.work / "drafts.toml"
        path.write_text("\n".join(lines))
        return path

    def tune_argv(self, space: Path, strategy: str, label: str, *, workloads: str, concurrency: str,
                  repeat: int) -> list[str]:  # fmt: skip
        a = self.args
        return [
            "tune", "gpu", "--space", str(space), "--strategy", strategy, "--concurrency", concurrency,
            "--workload", workloads, "--duration", str(a.duration), "--repeat", str(repeat),
            "--input-len", str(a.input_len), "--output-len", str(a.output_len), "--warmup", str(a.warmup),
            "--timeout", str(a.start_timeout), "--label", label, "--yes",
        ]  # fmt: skip

    def estimate(self, argv: list[str]) -> dict[str, Any]:
        """What the console shows before confirmation: plan the tune (holds and frees the unit's lock, changes
        nothing) and ask PendingTune.estimate_s, as the Tune screen does (console/core/tune_form.estimate)."""
        return asyncio.run(_estimate(self.ws, argv, self.restart_prior()))

    def restart_prior(self) -> float:
        """The restart length the estimate is given: the median of the starts measured so far, else the prior."""
        return statistics.median(self.restart_s) if self.restart_s else self.args.restart_prior_s

    def run_tune(self, name: str, argv: list[str]) -> dict[str, Any]:
        est = self.estimate(argv)
        budget_min = max(1.0, (self.left() - self.args.reserve_s) / 60)
        began = time.time()
        started = now()
        cli = self.console(
            f"tune {name}", *argv, "--budget", f"{budget_min:.1f}", "--json",
            timeout=self.left(), save=f"tune-{name}.json",
        )  # fmt: skip
        wall = round(now() - started, 1)
        starts = start_times([r for r in self.journal_rows() if r["ts"] >= began])
        measured = [s["start_s"] + (s["stop_s"] or 0.0) for s in starts if s["healthy"] and s["stop_s"] is not None]
        self.restart_s.extend(measured)
        out: dict[str, Any] = {"cli": cli, "wall_s": wall, "estimate": est, "starts": starts}
        # where the wall time went: the starts and stops the journal shows (failed ones too), and the rest
        # (benchmarks, warm-ups, flushes, the console's own work), to set beside the estimate's two parts
        restarts_s = sum((s["start_s"] or 0.0) + (s["stop_s"] or 0.0) for s in starts)
        out["measured_parts"] = {"starts": len(starts), "starts_s": round(restarts_s, 1),
                                 "rest_s": round(wall - restarts_s, 1)}  # fmt: skip
        try:
            result = json.loads((self.out / f"tune-{name}.json").read_text())
        except (OSError, ValueError) as exc:
            out["error"] = f"no JSON from tune: {exc}"
            return out
        out["result"] = digest(result)
        if measured and est.get("bench_s") is not None:
            # the same estimate with this tune's own median restart (stop + start): what is left is the model's error
            again = est["bench_s"] + est["starts"] * statistics.median(measured)
            out["estimate_with_measured_restart_s"] = round(again, 1)
            out["estimate_with_measured_restart_error_pct"] = round((again / wall - 1.0) * 100.0, 1)
        shown = est.get("estimate_s")
        if shown:
            out["estimate_error_pct"] = round((shown / wall - 1.0) * 100.0, 1)
        return out

    def search(self) -> dict[str, Any]:
        a = self.args
        argv = self.tune_argv(self.space_file("search", with_failing=True), "halving", "tune-search",
                              workloads=a.workloads, concurrency=a.concurrency, repeat=a.repeat)  # fmt: skip
        return self.run_tune("search", argv)

    def grid(self) -> dict[str, Any]:
        a = self.args
        argv = self.tune_argv(self.space_file("grid", with_failing=False), "grid", "tune-grid",
                              workloads=a.workloads, concurrency=a.concurrency, repeat=a.repeat)  # fmt: skip
        out = self.run_tune("grid", argv)
        out["comparison"] = compare(self.out / "tune-search.json", self.out / "tune-grid.json", self.summary)
        return out

    def drafts(self) -> dict[str, Any]:
        argv = self.tune_argv(self.drafts_space_file(), "grid", "tune-drafts", workloads="random",
                              concurrency="1,32", repeat=1)  # fmt: skip
        est = self.estimate(argv)
        need = est.get("estimate_s") or 0.0
        if need + self.args.reserve_s > self.left():
            return {"skipped": f"needs about {need:.0f} s, {self.left():.0f} s left", "estimate": est}
        out = self.run_tune("drafts", argv)
        # the tune names setups by the axes that vary, and the draft path is none of them: the trials come in the
        # space file's order
        for trial, (name, _algorithm) in zip(out.get("result", {}).get("trials", []), self.DRAFTS, strict=False):
            trial["draft"] = name
        return out

    def final(self) -> dict[str, Any]:
        text = self.unit_path.read_text()
        out: dict[str, Any] = {
            "unit_byte_for_byte": text == self.original.get("text"),
            "unit_sha256": _sha(self.unit_path),
            "healthy_after_s": self.wait_healthy(60),
            "state": self.service_state(),
        }
        try:
            info = self.get_json("/server_info")
            server = {k: info.get(k) for k in SERVER_KEYS}
            out["server"] = server
            out["server_as_at_start"] = server == self.original.get("server")
        except Exception as exc:
            out["server_error"] = f"{type(exc).__name__}: {exc}"
        out["status"] = self.console("status final", "status", "gpu", "--json", save="status-final.json")
        return out

    # --- the journal ---------------------------------------------------------------------------------------------

    def journal_rows(self) -> list[dict[str, Any]]:
        async def read() -> list[dict[str, Any]]:
            rows = []
            async for entry in self.service().journal(lines=1_000_000):
                rows.append({"ts": entry.timestamp.timestamp(), "pid": entry.pid, "message": entry.message})
            return rows

        try:
            return asyncio.run(read())
        except Exception:
            return []


# --- pure helpers (also used on the fixtures afterwards) -------------------------------------------------------


def start_times(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every start in a journal slice: the stop before it (`Stopping` to `Stopped`), the start (the supervisor's
    `Started` to SGLang's `fired up`, or to the exit of a start that failed) and the last error line it logged."""
    out: list[dict[str, Any]] = []
    stop_began: float | None = None
    stop_s: float | None = None
    current: dict[str, Any] | None = None
    began = 0.0
    for row in rows:
        msg, ts = row["message"], row["ts"]
        if msg.startswith("Stopping sglang.service"):
            stop_began, stop_s = ts, None
        elif msg.startswith("Stopped sglang.service") and stop_began is not None:
            stop_s, stop_began = ts - stop_began, None
        elif msg.startswith("Started sglang.service"):
            began = ts
            current = {"stop_s": round(stop_s, 2) if stop_s is not None else None, "start_s": None,
                       "healthy": False, "error": None}  # fmt: skip
            out.append(current)
            stop_s = None
        elif current is not None and current["start_s"] is None:
            if "The server is fired up" in msg:
                current["start_s"], current["healthy"] = round(ts - began, 2), True
            elif "Main process exited" in msg:
                current["start_s"] = round(ts - began, 2)
            elif "Error" in msg.split(":", 1)[0] or "Error:" in msg:
                current["error"] = msg[-300:]
    return out


def digest(result: dict[str, Any]) -> dict[str, Any]:
    """The tune's result in short: per trial its state and figures, the recommendations, the end state."""
    trials = []
    for t in result.get("trials", []):
        levels = {
            f"{lv['workload']} C={lv['concurrency']}": {
                "tok_s": lv.get("output_throughput"),
                "accept": lv.get("accept_length"),
                "by": lv.get("measured_by"),
                "samples": lv.get("samples"),
            }
            for lv in t.get("levels", [])
        }
        trials.append({"name": t.get("name"), "state": t.get("state"), "error": t.get("error"), "levels": levels})
    recs = [
        {k: r.get(k) for k in ("workload", "concurrency", "name", "output_throughput", "margin_pct", "within_noise")}
        for r in result.get("recommendations", [])
    ]
    keys = ("final_unit", "host_healthy", "elapsed_s", "restarts", "stopped", "error", "summary")
    return {"trials": trials, "recommendations": recs, **{k: result.get(k) for k in keys}}


def failed_trial_seconds(starts: list[dict[str, Any]]) -> float:
    """What a failed start cost on top of the others: the stop before it, the start until the process exited, the
    rollback's start of the unit before, and that unit's stop before the next trial."""
    total = 0.0
    for i, s in enumerate(starts):
        if s["healthy"]:
            continue
        total += (s["stop_s"] or 0.0) + (s["start_s"] or 0.0)
        if i + 1 < len(starts):
            total += starts[i + 1]["start_s"] or 0.0
        if i + 2 < len(starts):
            total += starts[i + 2]["stop_s"] or 0.0
    return total


def _setup(config: dict[str, Any]) -> tuple[Any, ...]:
    """A setup by its resolved values (the two tunes name the same setup differently: the search's space has two
    algorithms, so its names say which)."""
    keys = ("speculative_algorithm", "speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens")
    return tuple(config.get(k) for k in keys)


def compare(search_file: Path, grid_file: Path, summary: dict[str, Any]) -> dict[str, Any]:
    """Search vs grid on the same server: the winner per cell (the same setup, or within the grid's noise of the
    grid's winner: the search's pick measured by the grid reaches the winner's range there) and the time."""
    try:
        search = json.loads(search_file.read_text())
        grid = json.loads(grid_file.read_text())
    except (OSError, ValueError) as exc:
        return {"error": f"cannot compare: {exc}"}
    grid_levels = {
        (_setup(t["config"]), lv["workload"], lv["concurrency"]): lv for t in grid["trials"] for lv in t["levels"]
    }
    cells = []
    for g in grid.get("recommendations", []):
        cell = (g["workload"], g["concurrency"])
        s = next((r for r in search.get("recommendations", []) if (r["workload"], r["concurrency"]) == cell), None)
        row: dict[str, Any] = {"cell": f"{cell[0]} C={cell[1]}", "grid": g["name"], "search": s["name"] if s else None}
        row["same"] = bool(s) and _setup(s["config"]) == _setup(g["config"])
        if s and not row["same"]:
            mine = grid_levels.get((_setup(s["config"]), *cell))
            top = grid_levels.get((_setup(g["config"]), *cell))
            if mine and top and mine.get("high") is not None and top.get("low") is not None:
                row["within_grid_noise"] = mine["high"] >= top["low"]
                row["gap_pct"] = round((mine["output_throughput"] / top["output_throughput"] - 1) * 100, 1)
        cells.append(row)
    failed_s = failed_trial_seconds(summary.get("steps", {}).get("search", {}).get("starts", []))
    out: dict[str, Any] = {"cells": cells, "search_s": search.get("elapsed_s"), "grid_s": grid.get("elapsed_s")}
    out["same_or_within_noise"] = all(r["same"] or r.get("within_grid_noise") for r in cells) if cells else None
    out["restarts"] = {"search": search.get("restarts"), "grid": grid.get("restarts")}
    if search.get("elapsed_s") and grid.get("elapsed_s"):
        out["search_share_of_grid"] = round(search["elapsed_s"] / grid["elapsed_s"], 3)
        # the search also ran the failing candidate (its start and the rollback's), which the grid did not
        out["failed_trial_s"] = round(failed_s, 1)
        out["search_share_without_failed_trial"] = round((search["elapsed_s"] - failed_s) / grid["elapsed_s"], 3)
    return out


async def _estimate(ws: Path, argv: list[str], restart_s: float) -> dict[str, Any]:
    from console.cli import build_parser
    from console.cli.common import workspace_of
    from console.cli.tune import request_from_args, space_from_args, unit_now
    from console.core.session import open_session
    from console.core.tune import estimate, plan_tune

    args = build_parser().parse_args(["--workspace", str(ws), *argv])
    try:
        workspace = workspace_of(args).ensure()
        async with open_session(args.target, workspace, ssh_config=args.ssh_config) as session:
            space = space_from_args(args, await unit_now(session))
            request = request_from_args(args, space)
            async with await plan_tune(session, request) as pending:
                parts = estimate(pending.estimate_s)
                out = {
                    "candidates": [c.name for c in pending.space.candidates],
                    "pruned": len(pending.space.pruned),
                    "merged": len(pending.space.merged),
                    "bench_s": round(parts.bench_s, 1),
                    "starts": parts.starts,
                    "restart_s": round(restart_s, 1),
                    "estimate_s": round(pending.estimate_s(restart_s), 1),
                }
                await pending.abort("estimate only")
                return out
    except Exception as exc:  # the tune itself says what is wrong; the estimate is a side record
        return {"error": f"{type(exc).__name__}: {exc}"}


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out", type=Path)
    p.add_argument("--models", type=Path, default=Path("/opt/sgm"))
    p.add_argument("--sim", action="store_true", help="against the stand-in emulating 0.5.17 (checks the script)")
    p.add_argument("--sim-time-scale", type=float, default=0.05)
    p.add_argument("--budget-s", type=float, default=1100.0, help="wall seconds for the whole session")
    p.add_argument("--reserve-s", type=float, default=90.0, help="kept for final, stop and journal")
    p.add_argument("--phases", default=",".join(PHASES), help=f"comma-separated subset of {','.join(PHASES)}")
    p.add_argument("--draft", default="sa-p90", help="the tune's STANDALONE draft (a folder under --models)")
    p.add_argument("--steps", default="1, 2, 3")
    p.add_argument("--topk", default="1, 2")
    p.add_argument("--workloads", default="random,chat")
    p.add_argument("--concurrency", default="1,8,32")
    p.add_argument("--duration", type=float, default=2.0, help="seconds per level of a full run (screening: 1/8)")
    p.add_argument("--repeat", type=int, default=2)
    p.add_argument("--input-len", type=int, default=128)
    p.add_argument("--output-len", type=int, default=64)
    p.add_argument("--warmup", type=int, default=2)
    p.add_argument(
        "--restart-prior-s",
        type=float,
        help=f"restart length for the first estimate (default {RESTART_PRIOR_S:g}, with --sim 2)",
    )
    p.add_argument("--start-timeout", type=float, default=150.0, help="tune --timeout: seconds each start may take")
    args = p.parse_args()
    from console.sim.plugin import register

    register()  # a composition root: the demo host's transport and the stand-in's units (console/sim/plugin.py)
    args.out = args.out.resolve()
    args.models = args.models.resolve()
    args.out.mkdir(parents=True, exist_ok=True)
    if args.restart_prior_s is None:
        args.restart_prior_s = 2.0 if args.sim else RESTART_PRIOR_S
    session = TuneSession(args)
    wanted = args.phases.split(",")
    try:
        for name in PHASES:
            if name in wanted or name in ("start", "stop", "journal"):
                session.step(name, getattr(session, name))
    finally:
        session.finish()
    return 0


if __name__ == "__main__":
    sys.exit(main())
