"""opsconsole against a real SGLang server on the GPU machine, every verb through its real CLI.

    python3 scripts/real_sglang/gpu_session.py OUTDIR [--models DIR] [--sim] [--budget-s S]

Opt-in: the test suite never runs it; its output is committed as fixtures (tests/sim/fixtures/real-0.5.17/console/)
and replayed by tests. It needs the bundle staged by run.sh (PYTHONPATH with SGLang 0.5.17) and the tiny models
from build_tiny.py. `--sim` runs the same session against the project's stand-in emulating 0.5.17 instead, on any
machine, to check the script itself before spending GPU time.

The session, in order (each step recorded in OUTDIR/summary.json with its wall time and outcome):
 1. a unit whose ExecStart is `python -m sglang.launch_server` (tiny Llama + EAGLE, steps 2 / topk 1 / draft 3,
    CUDA graphs, metrics) runs under the demo host's supervisor (supervise.py: UnitSupervisor + control socket,
    as `opsconsole demo` runs it); the workspace has a profile `gpu` (transport demo, real nvidia-smi);
 2. `opsconsole status local --json` (local transport: NVML, the server on loopback) and `status gpu --json`;
 3. `opsconsole bench --url` and SGLang's own `python -m sglang.bench_serving`, alternated on the same server
    with the same workload (random ids, 128 in / 128 out, 256 requests, concurrency 16);
 4. `opsconsole apply gpu` steps 2 -> 3 (draft tokens 4), verified against the real /server_info;
 5. `opsconsole apply gpu` with a change the rules refuse (topk unset while steps are set: SGLang dies with a
    TypeError): nothing may be written or restarted;
 6. `opsconsole apply gpu` with a draft path that does not exist: the start fails and is rolled back;
 7. the unit stopped through the supervisor: SGLang 0.5.17 drains and SIGKILLs itself (exit 137), the unit is
    `failed` with Result=signal as under systemd, and `status gpu` must say it was stopped;
 8. the supervisor's whole journal (journal.jsonl: the real startup logs for the phase tracker).
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO))
PORT = 30000
URL = f"http://127.0.0.1:{PORT}"
PY = sys.executable
LAUNCH_FLAGS = [
    ("--host", "127.0.0.1"),
    ("--port", str(PORT)),
    ("--enable-metrics", None),
    ("--mem-fraction-static", "0.3"),
    ("--attention-backend", "triton"),
    ("--speculative-algorithm", "EAGLE"),
    ("--speculative-num-steps", "2"),
    ("--speculative-eagle-topk", "1"),
    ("--speculative-num-draft-tokens", "3"),
]
BENCH = {"concurrency": 16, "requests": 256, "input_len": 128, "output_len": 128}
APPLY_TIMEOUT_S = 300
STEPS = {
    "start": "start",
    "status": "status",
    "bench": "bench",
    "apply_steps3": "apply_steps",
    "apply_refused": "apply_refused",
    "apply_bad_draft": "apply_failing",
    "stop": "stop",
    "journal": "journal",
}


def now() -> float:
    return time.monotonic()


class Session:
    def __init__(self, out: Path, models: Path, sim: bool, budget_s: float, bench_rounds: int = 5) -> None:
        self.bench_rounds = bench_rounds
        self.out = out
        self.models = models
        self.sim = sim
        self.deadline = now() + budget_s
        self.work = out / "work"
        self.ws = self.work / "ws"
        self.unit_path = self.work / "units" / "sglang.service"
        self.control = self.work / "control.sock"
        self.summary: dict[str, Any] = {"sim": sim, "steps": {}, "started": time.time()}
        self.env = {**os.environ, "PYTHONUNBUFFERED": "1"}
        self.env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH", "")) if p)
        self.supervisor: subprocess.Popen[bytes] | None = None

    # --- helpers -------------------------------------------------------------------------------------

    def left(self) -> float:
        return self.deadline - now()

    def run(self, name: str, argv: list[str], timeout: float, save: str | None = None) -> dict[str, Any]:
        """Run a command, keep its stdout in OUTDIR/save (or the record), stderr's tail in the record."""
        started = now()
        try:
            done = subprocess.run(
                argv, capture_output=True, text=True, timeout=max(5.0, min(timeout, self.left())), env=self.env
            )
            rc, stdout, stderr = done.returncode, done.stdout, done.stderr
        except subprocess.TimeoutExpired as exc:
            rc, stdout, stderr = 124, _text(exc.stdout), _text(exc.stderr) + "\n[timed out]"
        record: dict[str, Any] = {"argv": argv[2:] if argv[:2] == [PY, "-m"] else argv, "rc": rc}
        record["wall_s"] = round(now() - started, 2)
        record["stderr_tail"] = stderr[-3000:]
        if save:
            (self.out / save).write_text(stdout)
            record["stdout_file"] = save
        else:
            record["stdout_tail"] = stdout[-3000:]
        print(f"[{time.strftime('%H:%M:%S')}] {name}: rc={rc} in {record['wall_s']} s", flush=True)
        return record

    def console(self, name: str, *args: str, timeout: float = 120, save: str | None = None) -> dict[str, Any]:
        return self.run(name, [PY, "-m", "console", "--workspace", str(self.ws), *args], timeout, save)

    def step(self, name: str, fn: Any) -> None:
        if self.left() < 20:
            self.summary["steps"][name] = {"skipped": "out of time"}
            print(f"{name}: skipped, out of time", flush=True)
            return
        started = now()
        try:
            result = fn()
        except Exception as exc:  # one step failing must not lose the others' results
            result = {"error": f"{type(exc).__name__}: {exc}"}
        result["step_wall_s"] = round(now() - started, 2)
        self.summary["steps"][name] = result
        self.write_summary()

    def write_summary(self) -> None:
        (self.out / "summary.json").write_text(json.dumps(self.summary, indent=1, default=str))

    def get_json(self, path: str) -> Any:
        with urllib.request.urlopen(URL + path, timeout=10) as r:
            return json.loads(r.read())

    def wait_healthy(self, timeout: float) -> float | None:
        started = now()
        while now() - started < min(timeout, self.left()):
            try:
                with urllib.request.urlopen(URL + "/health", timeout=5) as r:
                    if r.status == 200:
                        return round(now() - started, 1)
            except (urllib.error.URLError, ConnectionError, TimeoutError, OSError):
                pass
            time.sleep(0.5)
        return None

    def service(self) -> Any:
        from console.sim.supervisor import DemoServiceManager

        return DemoServiceManager(self.control, "sglang.service")

    def service_state(self) -> dict[str, Any]:
        state = asyncio.run(self.service().state())
        return {
            "active_state": state.active_state,
            "sub_state": state.sub_state,
            "main_pid": state.main_pid,
            "result": state.result,
            "n_restarts": state.n_restarts,
            "started_at": state.started_at.isoformat() if state.started_at else None,
            "properties": state.properties,
        }

    # --- the steps -------------------------------------------------------------------------------------

    def unit_text(self) -> str:
        if self.sim:
            launcher = f"{PY} -m console.sim"
            extra = [("--sim-sglang-version", "0.5.17"), ("--sim-profile", "tiny-test"), ("--sim-time-scale", "0.05")]
            extra.append(("--sim-state-dir", str(self.work / "sim-state")))
            pythonpath = str(REPO)
        else:
            launcher = f"{PY} -m sglang.launch_server"
            extra = []
            pythonpath = os.environ.get("PYTHONPATH", "")
        flags = [("--model-path", str(self.models / "tiny-llama")), *LAUNCH_FLAGS]
        flags.insert(7, ("--speculative-draft-model-path", str(self.models / "tiny-eagle")))
        lines = [launcher] + [f if v is None else f"{f} {v}" for f, v in [*flags, *extra]]
        exec_start = " \\\n    ".join(lines)
        return (
            "[Unit]\nDescription=SGLang 0.5.17 (tiny Llama + EAGLE) on the GPU machine\n\n[Service]\nType=simple\n"
            f'Environment="PYTHONPATH={pythonpath}" "HF_HUB_OFFLINE=1" "TRANSFORMERS_OFFLINE=1" '
            '"HF_DATASETS_OFFLINE=1"\n'
            f"ExecStart={exec_start}\nTimeoutStopSec=60\nRestart=no\n\n[Install]\nWantedBy=multi-user.target\n"
        )

    def start(self) -> dict[str, Any]:
        shutil.rmtree(self.work, ignore_errors=True)
        (self.ws / "profiles").mkdir(parents=True)
        self.unit_path.parent.mkdir(parents=True)
        if self.sim:
            for name in ("tiny-llama", "tiny-eagle"):
                (self.models / name).mkdir(parents=True, exist_ok=True)
        self.unit_path.write_text(self.unit_text())
        (self.ws / "profiles" / "gpu.toml").write_text(
            f'[host]\ntransport = "demo"\ncontrol = "{self.control}"\nunit = "sglang.service"\n'
            'gpu_command = ["nvidia-smi"]\n\n[sglang]\nport = 30000\n'
        )
        log = (self.out / "supervisor.log").open("wb")
        self.supervisor = subprocess.Popen(
            [PY, str(REPO / "scripts/real_sglang/supervise.py"), str(self.unit_path), str(self.control),
             str(self.work / "backups")],
            stdout=log, stderr=subprocess.STDOUT, env=self.env, start_new_session=True,
        )  # fmt: skip
        healthy = self.wait_healthy(300)
        return {"healthy_after_s": healthy, "unit": self.unit_text(), "state": self.service_state()}

    def status(self) -> dict[str, Any]:
        return {
            "local": self.console("status local", "status", "local", "--json", save="status-local.json"),
            "demo": self.console("status gpu", "status", "gpu", "--json", save="status-demo.json"),
        }

    def bench(self) -> dict[str, Any]:
        """Ours and bench_serving alternated on the server (bench_pair.py); on the stand-in, ours alone."""
        out: dict[str, Any] = {"workload": BENCH}
        if self.sim:
            out["ours"] = self.console(
                "bench ours", "bench", "--url", URL, "--concurrency", str(BENCH["concurrency"]),
                "--requests", str(BENCH["requests"]), "--input-len", str(BENCH["input_len"]),
                "--output-len", str(BENCH["output_len"]), "--warmup", "2", "--json", save="bench-ours.json",
            )  # fmt: skip
            return out
        sharegpt = self.work / "sharegpt.json"
        tokenizer = self.models / "tiny-llama"
        self.run("sharegpt", [PY, str(REPO / "scripts/real_sglang/gen_sharegpt.py"), str(tokenizer), str(sharegpt)],
                 120)  # fmt: skip
        out["pairs"] = self.run(
            "bench pairs",
            [PY, str(REPO / "scripts/real_sglang/bench_pair.py"), URL, str(tokenizer),
             str(self.out / "bench-pairs.json"),
             "--workspace", str(self.ws), "--rounds", str(self.bench_rounds), "--requests", str(BENCH["requests"]),
             "--concurrency", str(BENCH["concurrency"]), "--input-len", str(BENCH["input_len"]),
             "--output-len", str(BENCH["output_len"]), "--dataset-path", str(sharegpt)],
            400, save="bench-pairs.log",
        )  # fmt: skip
        return out

    def apply_steps(self) -> dict[str, Any]:
        before = self.service_state()
        done = self.console(
            "apply steps 3", "apply", "gpu", "--set", "speculative-num-steps=3", "--set",
            "speculative-num-draft-tokens=4", "--yes", "--json", "--timeout", str(APPLY_TIMEOUT_S),
            timeout=APPLY_TIMEOUT_S + 120, save="apply-steps3.json",
        )  # fmt: skip
        info = self.get_json("/server_info")
        (self.out / "server_info-steps3.json").write_text(json.dumps(info))
        resolved = {k: info.get(k) for k in ("speculative_num_steps", "speculative_eagle_topk",
                                               "speculative_num_draft_tokens", "version")}  # fmt: skip
        return {"cli": done, "before": before, "after": self.service_state(), "server_info": resolved}

    def apply_refused(self) -> dict[str, Any]:
        before, sha = self.service_state(), _sha(self.unit_path)
        backups = sorted(p.name for p in (self.work / "backups").glob("*"))
        done = self.console(
            "apply refused", "apply", "gpu", "--unset", "speculative-eagle-topk", "--yes", "--json",
            timeout=120, save="apply-refused.json",
        )  # fmt: skip
        after = self.service_state()
        return {
            "cli": done,
            "unit_unchanged": _sha(self.unit_path) == sha,
            "same_process": (before["main_pid"], before["started_at"]) == (after["main_pid"], after["started_at"]),
            "no_new_backup": sorted(p.name for p in (self.work / "backups").glob("*")) == backups,
        }

    def apply_failing(self) -> dict[str, Any]:
        before, text = self.service_state(), self.unit_path.read_text()
        done = self.console(
            "apply bad draft", "apply", "gpu", "--set",
            f"speculative-draft-model-path={self.models / 'no-such-draft'}", "--yes", "--json",
            "--timeout", str(APPLY_TIMEOUT_S), timeout=3 * APPLY_TIMEOUT_S, save="apply-bad-draft.json",
        )  # fmt: skip
        info = self.get_json("/server_info")
        return {
            "cli": done,
            "before": before,
            "after": self.service_state(),
            "unit_restored": self.unit_path.read_text() == text,
            "server_info_steps": info.get("speculative_num_steps"),
            "draft_path": info.get("speculative_draft_model_path"),
        }

    def stop(self) -> dict[str, Any]:
        started = now()
        asyncio.run(self.service().stop())
        stop_s = round(now() - started, 2)
        state = self.service_state()
        status = self.console("status stopped", "status", "gpu", "--json", save="status-stopped.json")
        apps = None
        if shutil.which("nvidia-smi"):  # nothing of SGLang may be left on the GPU
            apps = self.run("gpu apps", ["nvidia-smi", "--query-compute-apps=pid,process_name,used_memory",
                                         "--format=csv,noheader"], 30)  # fmt: skip
        return {"stop_s": stop_s, "state": state, "status": status, "gpu_apps_after": apps}

    def journal(self) -> dict[str, Any]:
        async def read() -> list[dict[str, Any]]:
            rows = []
            async for entry in self.service().journal(lines=100000):
                rows.append({"ts": entry.timestamp.timestamp(), "pid": entry.pid, "message": entry.message})
            return rows

        rows = asyncio.run(read())
        with (self.out / "journal.jsonl").open("w") as f:
            for row in rows:
                f.write(json.dumps(row) + "\n")
        return {"entries": len(rows)}

    def finish(self) -> None:
        if self.supervisor is not None and self.supervisor.poll() is None:
            self.supervisor.send_signal(signal.SIGTERM)
            try:
                self.supervisor.wait(90)
            except subprocess.TimeoutExpired:
                os.killpg(self.supervisor.pid, signal.SIGKILL)
        self.summary["wall_s"] = round(time.time() - self.summary["started"], 1)
        self.write_summary()


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _text(data: Any) -> str:
    return data.decode(errors="replace") if isinstance(data, bytes) else (data or "")


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("out", type=Path)
    p.add_argument("--models", type=Path, default=Path("/opt/sgm"))
    p.add_argument("--sim", action="store_true", help="against the stand-in emulating 0.5.17 (checks the script)")
    p.add_argument("--budget-s", type=float, default=560.0)
    p.add_argument("--bench-rounds", type=int, default=5)
    p.add_argument("--steps", default=",".join(STEPS), help=f"comma-separated subset of {','.join(STEPS)}")
    args = p.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    session = Session(args.out.resolve(), args.models.resolve(), args.sim, args.budget_s, args.bench_rounds)
    wanted = args.steps.split(",")
    try:
        for name in STEPS:  # start, stop and journal always run: the unit must end stopped, the journal kept
            if name in wanted or name in ("start", "stop", "journal"):
                session.step(name, getattr(session, STEPS[name]))
    finally:
        session.finish()
    return 0


if __name__ == "__main__":
    sys.exit(main())
