"""`python -m console.sim FLAG...`: the SGLang stand-in.

Takes `sglang.launch_server` flags of the emulated version plus its own `--sim-*` options, refuses what
that SGLang version would refuse (with SGLang's own text), then starts like SGLang and serves its HTTP
API. The `--sim-*` options:

  --sim-sglang-version V   SGLang version to emulate (default: the newest supported)
  --sim-profile NAME       model/hardware profile (console.sim.profiles)
  --sim-time-scale X       startup durations × X (1.0 = a real large-model start, minutes)
  --sim-speedup X          decode/prefill steps X times faster than the profile (overhead benchmarks)
  --sim-gpus N             number of simulated GPUs (default: the profile's)
  --sim-state-dir DIR      where the GPU state file goes (default: $OPSCONSOLE_SIM_STATE_DIR,
                           /run/opsconsole-sim, or <tmp>/opsconsole-sim)
  --sim-seed N             seed of the acceptance draws and generated text
  --sim-dcgm-port N        also serve dcgm-exporter's /metrics for the simulated GPUs on this port (as the
                           exporter runs beside SGLang on a real host; its default is 9400)
  --sim-peer-loss-exit-s S a node of a multi-node deployment dies this long after a peer died (default 2:
                           its next collective; console.sim.multinode)
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from console.sglang.adaptive import AdaptiveConfigError, parse_config
from console.sglang.argv import parse_argv
from console.sglang.flags import NEWEST_VERSION, UnsupportedVersionError, flag_table, resolve_version
from console.sglang.rules import check_launch
from console.sim import sglang_log as L
from console.sim import shapes
from console.sim.profiles import DEFAULT_PROFILE, PROFILES, get_profile

EXIT_FAILED = 1
EXIT_USAGE = 2


def sim_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="python -m console.sim",
        description="SGLang stand-in: takes sglang.launch_server flags plus these --sim-* options.",
        epilog=f"profiles: {', '.join(sorted(PROFILES))}",
        allow_abbrev=False,
    )
    p.add_argument("--sim-sglang-version", default=NEWEST_VERSION, metavar="V")
    p.add_argument("--sim-profile", default=DEFAULT_PROFILE, metavar="NAME")
    p.add_argument("--sim-time-scale", type=float, default=1.0, metavar="X")
    p.add_argument("--sim-speedup", type=float, default=1.0, metavar="X")
    p.add_argument("--sim-gpus", type=int, default=None, metavar="N")
    p.add_argument("--sim-state-dir", default=None, metavar="DIR")
    p.add_argument("--sim-seed", type=int, default=0, metavar="N")
    p.add_argument("--sim-dcgm-port", type=int, default=None, metavar="N")
    p.add_argument("--sim-peer-loss-exit-s", type=float, default=2.0, metavar="S")
    return p


def split_argv(argv: Sequence[str]) -> tuple[list[str], list[str]]:
    """(--sim-* options with their values, SGLang flags)."""
    sim: list[str] = []
    rest: list[str] = []
    i = 0
    while i < len(argv):
        token = argv[i]
        if token.startswith("--sim-"):
            sim.append(token)
            if "=" not in token and i + 1 < len(argv) and not argv[i + 1].startswith("--"):
                sim.append(argv[i + 1])
                i += 1
        else:
            rest.append(token)
        i += 1
    return sim, rest


def _usage_error(prog: str, message: str) -> int:
    sys.stderr.write(f"usage: {prog} [-h] --model-path MODEL_PATH [options]\n{prog}: error: {message}\n")
    return EXIT_USAGE


def _fail_like_sglang(lines: Sequence[str], final: str) -> int:
    """SGLang dies at startup with a traceback whose last line is the exception."""
    for line in lines:
        print(L.line(line), flush=True)
    sys.stderr.write("Traceback (most recent call last):\n")
    sys.stderr.write('  File "/usr/local/lib/python3.12/site-packages/sglang/launch_server.py", line 29, in <module>\n')
    sys.stderr.write("    server_args = prepare_server_args(sys.argv[1:])\n")
    sys.stderr.write(final.rstrip("\n") + "\n")
    return EXIT_FAILED


def _is_local_path(path: str) -> bool:
    return path.startswith(("/", "."))


def _missing_model_error(path: str, version: str) -> str:
    """What transformers raises when a path that is not a folder is taken as a Hub repo id. 0.5.17 reads the
    config through transformers' cached_files, which re-raises it as OSError (measured with a missing draft)."""
    text = (
        f"Repo id must be in the form 'repo_name' or 'namespace/repo_name': '{path}'. "
        "Use `repo_type` argument if needed."
    )
    first = f"huggingface_hub.errors.HFValidationError: {text}"
    if not shapes.detailed(version):
        return first
    return (
        f"{first}\n\nThe above exception was the direct cause of the following exception:\n\n"
        "Traceback (most recent call last):\n"
        '  File "/usr/local/lib/python3.12/site-packages/transformers/utils/hub.py", line 488, in cached_files\n'
        '    raise OSError(f"{e}") from e\n'
        f"OSError: {text}"
    )


def prepare(argv: Sequence[str]) -> tuple[int, dict[str, Any] | None]:
    """Validate like SGLang would; (exit code, config kwargs) — kwargs None when it must stop."""
    sim_args, flags = split_argv(argv)
    if "-h" in flags or "--help" in flags:
        sim_parser().print_help()
        return 0, None
    try:
        opts = sim_parser().parse_args(sim_args)
    except SystemExit as e:
        return int(e.code or 0), None
    if opts.sim_speedup <= 0:
        return _usage_error(
            "python -m console.sim", "argument --sim-speedup: must be > 0 (1 = the profile's speed)"
        ), None
    if opts.sim_gpus is not None and opts.sim_gpus < 1:
        return _usage_error("python -m console.sim", "argument --sim-gpus: must be at least 1"), None
    if opts.sim_dcgm_port is not None and not 0 < opts.sim_dcgm_port < 65536:
        return _usage_error("python -m console.sim", "argument --sim-dcgm-port: a port from 1 to 65535"), None
    try:
        version = resolve_version(opts.sim_sglang_version)
    except UnsupportedVersionError as e:
        return _usage_error("python -m console.sim", f"argument --sim-sglang-version: {e}"), None
    try:
        profile = get_profile(opts.sim_profile)
    except (KeyError, ValueError) as e:
        return _usage_error("python -m console.sim", f"argument --sim-profile: {e}"), None
    table = flag_table(version)
    parsed = parse_argv(flags, table)
    if parsed.problems:
        return _usage_error(table.prog, parsed.problems[0].message), None
    adaptive_text, adaptive_config, failure = _adaptive_config(parsed.values.get("speculative_adaptive_config"))
    if failure is not None:
        return _fail_like_sglang([], failure), None
    report = check_launch(
        flags,
        dict(os.environ),
        opts.sim_sglang_version,
        architecture=profile.architecture,
        adaptive_config=adaptive_config,
    )
    logs = [a.sglang_log for a in report.adjustments if a.sglang_log]
    logs += [w.sglang_log for w in report.warnings if w.sglang_log]
    if not report.ok:
        first = report.errors[0]
        final = first.sglang_log or first.message
        if "Error" not in final.split(":", 1)[0]:
            final = f"ValueError: {final}"
        return _fail_like_sglang(logs, final), None
    resolved = dict(report.resolved)
    for path_key in ("model_path", "speculative_draft_model_path"):
        path = resolved.get(path_key)
        if isinstance(path, str) and _is_local_path(path) and not Path(path).exists():
            return _fail_like_sglang(logs, _missing_model_error(path, opts.sim_sglang_version)), None
    return 0, {
        "version": opts.sim_sglang_version,
        "profile": profile,
        "resolved": resolved,
        "argv": flags,
        "time_scale": opts.sim_time_scale,
        "speedup": opts.sim_speedup,
        "gpu_count": opts.sim_gpus,
        "state_dir": Path(opts.sim_state_dir) if opts.sim_state_dir else None,
        "seed": opts.sim_seed,
        "dcgm_port": opts.sim_dcgm_port,
        "adaptive_config": adaptive_text if resolved.get("speculative_adaptive") else None,
        "peer_loss_exit_s": opts.sim_peer_loss_exit_s,
        "startup_logs": logs,
    }


def _adaptive_config(path: Any) -> tuple[str | None, dict[str, Any] | None, str | None]:
    """--speculative-adaptive-config: (its text, its JSON, None), or the exception SGLang dies with reading it
    (`open` then `json.load`, adaptive_spec_params.py:106-110) as the third."""
    if not path:
        return None, None, None
    try:
        text = Path(str(path)).read_text()
    except OSError as e:
        return (
            None,
            None,
            f"FileNotFoundError: [Errno 2] No such file or directory: '{path}'"
            if isinstance(e, FileNotFoundError)
            else f"{type(e).__name__}: {e}",
        )
    try:
        config = parse_config(text)
    except AdaptiveConfigError as e:
        kind = "json.decoder.JSONDecodeError" if "not JSON" in str(e) else "ValueError"
        return None, None, f"{kind}: {e}"
    return text, config, None


def main(argv: Sequence[str] | None = None) -> int:
    code, kwargs = prepare(list(sys.argv[1:] if argv is None else argv))
    if kwargs is None:
        return code
    from console.sim.engine import Engine
    from console.sim.lifecycle import serve
    from console.sim.server import SimConfig

    startup_logs = kwargs.pop("startup_logs")
    config = SimConfig(**kwargs)
    for line in startup_logs:
        print(L.line(line), flush=True)
    engine = Engine(config.profile, config.resolved, seed=config.seed, adaptive_config=config.adaptive_config)
    try:
        return asyncio.run(serve(config, engine))
    except OSError as e:  # the port is taken, typically
        print(L.line(f"ERROR: {e}"), flush=True)
        return EXIT_FAILED


if __name__ == "__main__":
    sys.exit(main())
