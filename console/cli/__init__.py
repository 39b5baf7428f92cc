"""Command-line entry point: argument parsing and dispatch to the verbs' renderers in console.cli.*.

The verbs' work is done by console.core (operations over an open host session, reporting typed events);
each console.cli.VERB module only turns arguments into a request and events into lines. Each verb's module
is imported only when that verb runs, so that `opsconsole --help` and `opsconsole check-args` never import
textual, asyncssh, httpx, pydantic or rich (benchmarks/cli_startup.py measures it).

Exit codes (console.errors): 0 ok, 1 the operation failed or was refused, 2 usage error, 130 Ctrl-C.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Callable, Sequence

from console import __version__, hints, library_warnings
from console.cli.rolling_options import add_rolling_options
from console.cli.traffic import add_dataset_options, add_shape_options, add_slo_option, add_trace_options
from console.errors import ExitCode, UsageError
from console.workspace import Workspace

# verb -> "module:function"; the function takes the parsed namespace and returns an exit code.
HANDLERS = {
    "connect": "console.cli.connect:run",
    "demo": "console.cli.demo:run",
    "status": "console.cli.status:run",
    "check-args": "console.cli.check_args:run",
    "apply": "console.cli.apply:run",
    "bench": "console.cli.bench:run",
    "compare": "console.cli.compare:run",
    "freeze": "console.cli.freeze:run",
    "snapshots": "console.cli.snapshots:run",
    "diff": "console.cli.diff:run",
    "restore": "console.cli.restore:run",
    "restart": "console.cli.restart:run",
    "logs": "console.cli.logs:run",
    "trust": "console.cli.trust:run",
    "tune": "console.cli.tune:run",
    "predict": "console.cli.predict:run",
}

TARGET_HELP = (
    "a profile name (profiles/NAME.toml), @GROUP (profiles/groups.toml), an ~/.ssh/config alias, or [user@]host[:port]"
)


def _add_target_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--ssh-config", metavar="FILE", help="read this ssh_config instead of ~/.ssh/config")


def _add_web_options(parser: argparse.ArgumentParser) -> None:
    """--web and its options (console.tui.web, imported only when --web is used)."""
    parser.add_argument(
        "--web",
        action="store_true",
        help="serve the console to a browser instead of this terminal (one console per browser tab); "
        "the address it prints holds a token made at each start",
    )
    parser.add_argument(
        "--bind",
        metavar="ADDR",
        help="with --web: the address to listen on (default 127.0.0.1; any other lets whoever reaches it "
        "with the token act on the hosts)",
    )
    parser.add_argument("--web-port", type=int, metavar="N", help="with --web: the port (default: a free one)")
    parser.add_argument(
        "--max-connections",
        type=int,
        metavar="N",
        help="with --web: browser tabs served at once, each a console process (default 4)",
    )


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="opsconsole",
        description="Console for SGLang servers run as systemd services: status, validated edits of "
        "speculative-decoding flags, restarts with rollback, inline benchmarks and production snapshots.",
    )
    parser.add_argument("--version", action="version", version=f"opsconsole {__version__}")
    parser.add_argument(
        "--workspace",
        metavar="DIR",
        help="folder holding profiles/ and logs/ (default: $OPSCONSOLE_WORKSPACE, else the current folder)",
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")

    p = sub.add_parser("connect", help="open the console on one or more hosts (several targets open as tabs)")
    p.add_argument("targets", nargs="+", metavar="TARGET", help=TARGET_HELP)
    p.add_argument("--read-only", action="store_true", help="disable every action that changes the host")
    p.add_argument("--refresh", type=float, metavar="S", help="seconds between refreshes (default 1, console.toml)")
    p.add_argument(
        "--prometheus",
        metavar="URL",
        help="read the overview's figures from this Prometheus (console.toml [fleet] prometheus); "
        "a host's tab still connects over SSH when opened",
    )
    _add_web_options(p)
    _add_target_options(p)

    p = sub.add_parser("demo", help="the console on the embedded simulated GPU host (no GPU, no SSH)")
    p.add_argument("--no-ui", action="store_true", help="only run the demo host and print how to reach it")
    p.add_argument("--read-only", action="store_true", help="the console without the actions that change the host")
    p.add_argument("--port", type=int, default=0, help="port for the simulated SGLang server (default: a free one)")
    p.add_argument(
        "--profile",
        default="qwen3.5-122b-fp8-4x-rtxpro6000",
        help="simulated model/hardware profile (see python -m console.sim --help)",
    )
    p.add_argument(
        "--time-scale",
        type=float,
        default=0.02,
        help="startup durations relative to a real large-model start (1.0 = real minutes)",
    )
    p.add_argument(
        "--sglang-version",
        metavar="V",
        help="the SGLang release the simulated server behaves as (default: the profile operators', 0.5.9; "
        "0.5.23 for today's: its meta_info names, adaptive tiers, /ready, startup_time)",
    )
    _add_web_options(p)

    p = sub.add_parser("status", help="connection, systemd state, SGLang health/config/acceptance, GPUs")
    p.add_argument("target", metavar="TARGET", help=TARGET_HELP)
    p.add_argument("--json", action="store_true", help="one JSON object on stdout (keys in docs/cli.md)")
    p.add_argument(
        "--prometheus",
        metavar="URL",
        help="@GROUP: read the members' figures from this Prometheus (console.toml [fleet] prometheus); "
        "SSH only for a member it does not know",
    )
    p.add_argument(
        "--ssh",
        action="store_true",
        help="@GROUP: read every member over SSH even with a Prometheus (the unit, the resolved setup, each GPU)",
    )
    _add_target_options(p)

    p = sub.add_parser(
        "check-args",
        help="validate SGLang launch flags the way a given SGLang version would",
        description="Validate SGLang launch flags the way that SGLang version would at startup: errors, "
        "warnings, silent adjustments and the resolved values. Exit 1 when the server would refuse them.",
    )
    p.add_argument("--sglang-version", metavar="V", help="SGLang version to check against (default: newest)")
    p.add_argument(
        "--env",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="environment variable the server would see (repeatable)",
    )
    p.add_argument("--unit", metavar="FILE", help="read flags and Environment= from a systemd unit file")
    p.add_argument(
        "--architecture",
        metavar="ARCH",
        help="the model's HF architecture (config.json architectures[0], e.g. LlamaForCausalLM); "
        "SGLang auto-chooses the speculative steps/topk/draft tokens from it",
    )
    p.add_argument("--json", action="store_true", help="one JSON object on stdout")
    p.add_argument("flags", nargs=argparse.REMAINDER, metavar="-- FLAG", help="launch flags, after --")

    p = sub.add_parser("apply", help="validate, rewrite the unit, restart, verify; roll back on failure")
    p.add_argument("target", metavar="TARGET", help=TARGET_HELP + ", or @GROUP with --rolling")
    p.add_argument("--set", action="append", default=[], metavar="FLAG=VALUE", help="set a launch flag")
    p.add_argument("--unset", action="append", default=[], metavar="FLAG", help="remove a launch flag")
    p.add_argument("--env", action="append", default=[], metavar="KEY=VALUE", help="set an Environment= variable")
    p.add_argument("--unset-env", action="append", default=[], metavar="KEY", help="remove an environment variable")
    p.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    p.add_argument("--timeout", type=float, default=900.0, metavar="S", help="seconds to wait for readiness")
    p.add_argument("--json", action="store_true", help="one JSON object on stdout")
    _add_target_options(p)
    add_rolling_options(p, gate=True)

    p = sub.add_parser("restart", help="restart the service as it is, watch its start, verify; --rolling over a group")
    p.add_argument("target", metavar="TARGET", help=TARGET_HELP + ", or @GROUP with --rolling")
    p.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    p.add_argument("--timeout", type=float, default=900.0, metavar="S", help="seconds to wait for readiness")
    p.add_argument("--json", action="store_true", help="one JSON object on stdout")
    _add_target_options(p)
    add_rolling_options(p)

    p = sub.add_parser("bench", help="inline benchmark sweep over concurrency levels")
    p.add_argument("target", nargs="?", metavar="TARGET", help=TARGET_HELP + " (or use --url)")
    p.add_argument("--url", help="benchmark this SGLang base URL directly (no SSH)")
    p.add_argument("--concurrency", default="1,8,32", help="comma-separated concurrency levels")
    p.add_argument("--request-rate", help="comma-separated Poisson request rates (open loop) instead")
    p.add_argument(
        "--requests",
        type=int,
        help="requests per level (default: a --dataset sample whole, else 4 x the concurrency, at least 16)",
    )
    p.add_argument("--duration", type=float, help="seconds per level (instead of --requests)")
    p.add_argument(
        "--warmup", type=int, default=2, help="warm-up requests per level (waves of its concurrency), not measured"
    )
    p.add_argument(
        "--warmup-settle",
        action="store_true",
        help="warm each level until its round time settles (right after a restart); the record says how it was warmed",
    )
    p.add_argument("--input-len", type=int, default=1024)
    p.add_argument("--output-len", type=int, help="default 256; with --dataset it caps the dataset's own")
    p.add_argument("--workload", choices=["random", "chat"], default="random")
    p.add_argument("--temperature", type=float)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--api", choices=["generate", "chat"], help="native (default) or OpenAI endpoint")
    add_dataset_options(p)
    add_trace_options(p)
    add_shape_options(p)
    add_slo_option(p)
    p.add_argument(
        "--find-capacity",
        action="store_true",
        help="instead of the levels, search the request rate the server carries within the SLO (from --request-rate, "
        "default 1/s: doubling, then halving the bracket until it is within 10 %%)",
    )
    p.add_argument("--repeat", type=int, default=1, help="repeat each level N times to measure the noise")
    p.add_argument("--request-timeout", type=float, default=600.0)
    p.add_argument("--max-error-rate", type=float, default=0.5)
    p.add_argument("--time-cap", type=float, default=3600.0, help="hard cap on the whole sweep, seconds")
    p.add_argument("--label", help="name for this run (used by compare)")
    p.add_argument(
        "--client",
        choices=["auto", "console", "host"],
        default="auto",
        help="where the load is generated: here through the SSH forward (console), on the GPU host with a Python "
        "it has (host), or on the host when the round trip is over 5 ms (auto, the default)",
    )
    p.add_argument("--json", action="store_true", help="print the result records as JSON")
    _add_target_options(p)

    p = sub.add_parser("compare", help="side-by-side comparison of benchmark runs")
    p.add_argument("runs", nargs="+", metavar="RUN", help="run label or JSONL file; the first is the baseline")
    p.add_argument("--json", action="store_true")

    p = sub.add_parser(
        "freeze",
        help="production snapshot: document on the host, unit = the running setup, enabled on boot, kept locally",
        description="Freeze what runs as the host's production snapshot: write the production document on the "
        "host, make sure the unit is exactly the running setup and enable it, keep profiles/snapshots/NAME.toml. "
        "Refused (exit 1, nothing written) when the server is not healthy or does not run the unit on disk.",
    )
    p.add_argument(
        "target",
        metavar="TARGET",
        help=TARGET_HELP + ", or @GROUP: one snapshot set, NAME.HOST per host, indexed in profiles/snapshot-sets/",
    )
    p.add_argument("--name", required=True, help="the snapshot's name (e.g. v2): profiles/snapshots/NAME.toml")
    p.add_argument("--note", default="", help="why this setup (goes into the document and the snapshot)")
    p.add_argument(
        "--doc",
        metavar="PATH",
        help="the document's path on the host, absolute or ~/...; {name} is replaced "
        "(default: the profile's [freeze] document, else ~/production_{name}.md)",
    )
    p.add_argument("--force", metavar="REASON", help="freeze although it is refused; the reason is recorded")
    p.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    p.add_argument("--json", action="store_true", help="one JSON object on stdout (keys in docs/snapshots.md)")
    _add_target_options(p)
    add_rolling_options(p)

    p = sub.add_parser("snapshots", help="the production snapshots in profiles/snapshots/ (* = production)")
    p.add_argument("target", nargs="?", metavar="TARGET", help="only this host's snapshots (as the freeze named it)")
    p.add_argument("--json", action="store_true", help="one JSON object on stdout")

    p = sub.add_parser("diff", help="how two snapshots differ: flags, environment, resolved values, benchmarks")
    p.add_argument("a", metavar="A", help="snapshot name (the baseline)")
    p.add_argument("b", metavar="B", help="snapshot name")
    p.add_argument("--json", action="store_true", help="one JSON object on stdout")

    p = sub.add_parser("restore", help="bring a snapshot's flags and environment back (validated apply with rollback)")
    p.add_argument("target", metavar="TARGET", help=TARGET_HELP + ", or @GROUP with --rolling")
    p.add_argument("snapshot", metavar="SNAPSHOT", help=f"snapshot name ({hints.SNAPSHOTS.line()} lists them)")
    p.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    p.add_argument("--timeout", type=float, default=900.0, metavar="S", help="seconds to wait for readiness")
    p.add_argument("--json", action="store_true", help="one JSON object on stdout (apply's keys + snapshot, notes)")
    _add_target_options(p)
    add_rolling_options(p, gate=True)

    p = sub.add_parser("logs", help="the service journal")
    p.add_argument("target", metavar="TARGET", help=TARGET_HELP)
    p.add_argument("-f", "--follow", action="store_true")
    p.add_argument("-n", "--lines", type=int, default=100)
    _add_target_options(p)

    _add_tune_parser(sub)
    _add_predict_parser(sub)

    p = sub.add_parser("trust", help="show a host's key fingerprint and record it after you type yes")
    p.add_argument("target", metavar="TARGET", help=TARGET_HELP)
    _add_target_options(p)
    return parser


def _add_tune_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "tune",
        help="search speculative setups: restart, benchmark, recommend per level; the original unit goes back",
        description="Try speculative-decoding setups on a host: the version's rules prune what SGLang would "
        "refuse, each remaining setup is applied (rolled back if it fails to start) and benchmarked at your "
        "concurrency levels (short runs for all, longer repeated runs for those that can still win), then the "
        "best setup per level is recommended and the original unit is put back (or the best with --apply-best).",
    )
    p.add_argument("target", metavar="TARGET", help=TARGET_HELP)
    _add_space_options(p)
    p.add_argument("--concurrency", default="1,8,32,64", help="comma-separated concurrency levels (default 1,8,32,64)")
    p.add_argument(
        "--workload", help="random and/or chat, comma-separated (default random, or only the --dataset when given)"
    )
    p.add_argument("--budget", type=float, metavar="MINUTES", help="stop searching when this much time is spent")
    p.add_argument("--apply-best", action="store_true", help="leave the recommended setup on the host")
    p.add_argument("--best-at", type=int, metavar="C", help="with --apply-best: the winner at this level")
    p.add_argument("--duration", type=float, default=60.0, metavar="S", help="seconds per level of a full run")
    p.add_argument("--repeat", type=int, default=2, help="repeats of a full run (2+ measure the noise)")
    p.add_argument("--warmup", type=int, default=2, help="warm-up requests per level, excluded from metrics")
    _add_request_options(p)
    p.add_argument(
        "--objective",
        choices=["throughput", "goodput", "capacity"],
        default="throughput",
        help="what the best setup per level maximises: output tok/s (default), goodput (req/s within the SLO), or "
        "capacity (req/s carried by the highest level that meets the SLO); goodput and capacity need an SLO",
    )
    p.add_argument(
        "--strategy",
        choices=["halving", "grid", "predict"],
        default="halving",
        help="grid: every setup fully; predict: the running setup measured, then a restart only for setups the "
        "prediction says can win (as the predict verb predicts), until none can",
    )
    p.add_argument("--timeout", type=float, default=900.0, metavar="S", help="seconds each start may take")
    p.add_argument(
        "--request-timeout",
        type=float,
        default=600.0,
        metavar="S",
        help="seconds a benchmark request may take before it counts as failed (default 600)",
    )
    p.add_argument(
        "--restore-after",
        type=float,
        default=30.0,
        metavar="S",
        help="seconds the host waits for a console that went away before it restores the original unit",
    )
    p.add_argument("--label", help="prefix of the benchmark records' labels (default tune-DATE-TIME)")
    p.add_argument("--yes", action="store_true", help="do not ask for confirmation")
    p.add_argument("--json", action="store_true", help="one JSON object on stdout (keys in docs/tune.md)")
    _add_target_options(p)


def _add_request_options(p: argparse.ArgumentParser) -> None:
    """The requests a tune's and a prediction's benchmarks send: lengths, API, seed, a dataset, an SLO."""
    p.add_argument("--input-len", type=int, default=1024)
    p.add_argument("--output-len", type=int, help="default 256; with --dataset it caps the dataset's own")
    p.add_argument("--api", choices=["generate", "chat"], help="native (default) or OpenAI endpoint")
    p.add_argument("--seed", type=int, default=1)
    add_dataset_options(p)
    add_slo_option(p)


def _add_space_options(p: argparse.ArgumentParser) -> None:
    """The speculative setups to try (tune) or to predict (predict): a --space file and/or the axes."""
    p.add_argument("--space", metavar="FILE", help="TOML: the axes below as lists, and/or [[candidate]] tables")
    p.add_argument("--algorithm", metavar="A,B", help="EAGLE, EAGLE3, NEXTN, STANDALONE, none (default: the unit's)")
    p.add_argument("--steps", metavar="1,2,3", help="speculative steps to try (default 1,2,3)")
    p.add_argument("--topk", metavar="1,2,4", help="EAGLE topk values to try (default 1)")
    p.add_argument("--draft-tokens", metavar="auto,N", help="draft tokens: numbers or auto (default auto)")
    p.add_argument("--spec-v2", metavar="on,off", help="the overlap (spec v2) path on and/or off (default: the unit's)")
    p.add_argument("--draft-model-path", metavar="PATH", help="draft model for EAGLE3/STANDALONE setups")


def _add_predict_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    p = sub.add_parser(
        "predict",
        help="predict what untried speculative setups would do on this host's traffic, without a restart",
        description="Predict each setup of a space (the axes as for tune) from this host's own benchmark records: "
        "acceptance from the drafts' accept histograms, the round's cost from the measured levels; per setup and "
        "level the output tok/s, TPOT and accept length with a band, and whether it is worth a restart. Changes "
        "nothing; where the running setup has no benchmark on that traffic yet, offers to run one (no restart).",
    )
    p.add_argument("target", metavar="TARGET", help=TARGET_HELP)
    _add_space_options(p)
    p.add_argument("--concurrency", help="levels to predict (default: those the running setup was measured at)")
    p.add_argument("--from-run", metavar="RUN", help="predict for the traffic of this run (a label or a .jsonl)")
    p.add_argument(
        "--adaptive",
        action="store_true",
        help="also predict the running draft under --speculative-adaptive (SGLang 0.5.23's default tiers): each tier, "
        "and the one its table settles on at each level (always shown when the server runs adaptive)",
    )
    p.add_argument("--workload", choices=["random", "chat"], help="the traffic (default: the running setup's last)")
    p.add_argument("--temperature", type=float, default=0.0)
    _add_request_options(p)
    p.add_argument("--max-age", type=float, default=14.0, metavar="DAYS", help="records older than this are not used")
    p.add_argument(
        "--duration", type=float, default=20.0, metavar="S", help="seconds per level of the running setup's benchmark"
    )
    p.add_argument("--yes", action="store_true", help="benchmark the running setup without asking, where needed")
    p.add_argument("--json", action="store_true", help="one JSON object on stdout (keys in docs/predict.md)")
    _add_target_options(p)


def _load_handler(command: str) -> Callable[[argparse.Namespace], int]:
    module_name, func_name = HANDLERS[command].split(":")
    handler: Callable[[argparse.Namespace], int] = getattr(importlib.import_module(module_name), func_name)
    return handler


def _register_plugins() -> None:
    """The composition root: the SGLang stand-in as a launcher and the demo host as a transport are the
    simulator's own (console/sim/plugin.py), registered here so that no other package names it. Standard library
    only: check-args' fast path pays for it too."""
    from console.sim.plugin import register

    register()


def main(argv: Sequence[str] | None = None) -> int:
    library_warnings.route()  # before any library is imported: the verbs import theirs lazily
    parser = build_parser()
    args = parser.parse_args(argv)
    library_warnings.log_to(Workspace.resolve(args.workspace).logs)
    if args.command is None:
        parser.print_help()
        return ExitCode.USAGE
    handler = _load_handler(args.command)
    _register_plugins()
    try:
        return int(handler(args))
    except UsageError as exc:  # a verb that does not say its own (diff's snapshot names): exit 2, not a traceback
        from console.cli.common import said

        print(f"opsconsole {args.command}: {said(exc)}", file=sys.stderr)
        return ExitCode.USAGE
    except KeyboardInterrupt:
        return ExitCode.INTERRUPTED


if __name__ == "__main__":
    sys.exit(main())
