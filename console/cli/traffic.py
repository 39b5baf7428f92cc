"""The options `bench` and `tune` share for the operator's own traffic, and how the verbs read them: --dataset FILE
(--dataset-sample N, --long-prompts), --slo SPEC. Defining them imports nothing heavy (build_parser runs for every
command); reading them imports the dataset reader and the SLO grammar (console.bench.datasets, console.bench.slo).
"""

from __future__ import annotations

import argparse
from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING

from console.errors import UsageError

if TYPE_CHECKING:
    from console.bench.engine import SweepConfig
    from console.bench.slo import Slo
    from console.bench.workloads import DatasetSample

DEFAULT_OUTPUT_LEN = 256  # --output-len for the random and chat workloads (with --dataset it only caps, when given)
DEFAULT_DATASET_SAMPLE = 1000  # bench_serving's --num-prompts default (console.bench.datasets.DEFAULT_SAMPLE)


def add_dataset_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--dataset",
        metavar="FILE",
        help='benchmark with your own prompts: ShareGPT JSON (bench_serving\'s file), JSONL {"prompt", "output_len"?} '
        'or JSONL OpenAI chat {"messages", "max_tokens"?}; output lengths are the dataset\'s own (forced, as '
        "bench_serving does), capped by --output-len when given, counted in the model's tokens; or a Mooncake "
        'trace (JSONL {"timestamp", "input_length", "output_length", "hash_ids"}), replayed on its own clock',
    )
    parser.add_argument(
        "--dataset-sample",
        type=int,
        metavar="N",
        help=f"requests drawn from --dataset with --seed, the same for every run (default {DEFAULT_DATASET_SAMPLE}; "
        "a trace: at most its first N, default all of its window)",
    )
    parser.add_argument(
        "--long-prompts",
        choices=["skip", "error"],
        default="skip",
        help="dataset prompts longer than the server's context length: left out and counted (skip, the default), "
        "or refused before anything is sent (error)",
    )


def add_trace_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--trace-speed",
        metavar="X,Y",
        help="a trace --dataset: replay it at these multiples of its own pace, one level each (default 1; 2: twice as "
        "fast)",
    )
    parser.add_argument(
        "--trace-window",
        metavar="WINDOW",
        help="a trace --dataset: replay this slice of it, e.g. 10m (its first 10 minutes) or 20m-30m (default all)",
    )
    parser.add_argument(
        "--trace-prompts",
        choices=["tokens", "bench-serving"],
        help="a trace's prompts: tokens (default: its input lengths, hash_ids as shared 512-token blocks, token ids "
        "on /generate) or bench-serving (the text bench_serving's mooncake mode builds, on the chat API)",
    )


DEFAULT_SHAPE_WINDOW = "10m"


def add_shape_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--shape-from-server",
        nargs="?",
        const=DEFAULT_SHAPE_WINDOW,
        metavar="WINDOW",
        help="benchmark the server's own traffic: watch its /metrics for WINDOW (default "
        f"{DEFAULT_SHAPE_WINDOW}; 90s, 1h, ...), then send requests drawn from the lengths and cache hit share seen "
        "there at the request rate seen (Poisson); refused, with nothing sent, where the server lacks those series",
    )
    parser.add_argument(
        "--rate-scale",
        default="1",
        metavar="X,Y",
        help="with --shape-from-server: the levels' rates as multiples of the rate seen, e.g. 1,1.5,2 (default 1)",
    )


def read_shape(args: argparse.Namespace) -> tuple[float, list[float]] | None:
    """--shape-from-server's window in seconds and the --rate-scale multiples (None without the option); UsageError
    for a window or scales that cannot be read, or options that ask for another workload."""
    window = getattr(args, "shape_from_server", None)
    if window is None:
        return None
    from console.core.bench import parse_float_list
    from console.sglang.traffic_shape import parse_window

    try:
        seconds = parse_window(window)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    scales = parse_float_list(args.rate_scale, "--rate-scale")
    clash = [
        option
        for option, given in (
            ("--dataset", getattr(args, "dataset", None)),
            ("--request-rate", getattr(args, "request_rate", None)),
            ("--workload chat", getattr(args, "workload", "random") == "chat"),
            ("--api chat", getattr(args, "api", None) == "chat"),
        )
        if given
    ]
    if clash:
        raise UsageError(
            f"--shape-from-server makes the workload and its rates from the server's traffic: drop {', '.join(clash)}"
        )
    return seconds, scales


def add_slo_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--slo",
        metavar="SPEC",
        help="latency SLO each level is held to, e.g. ttft_p95=800ms,tpot_p95=60ms (ttft|tpot|itl|e2e at "
        "p50|p90|p95|p99): goodput and ✔/✖ per level, capacity at the SLO (default: the profile's [slo])",
    )


def resolve_lengths(args: argparse.Namespace) -> int | None:
    """--output-len as typed (None: not given), and args.output_len set to what the synthetic workloads use."""
    given: int | None = args.output_len
    if given is None:
        args.output_len = DEFAULT_OUTPUT_LEN
    return given


def read_dataset(args: argparse.Namespace, output_len_cap: int | None) -> DatasetSample | None:
    """The --dataset sample (None without one); UsageError names the file, the line and what was expected. The API
    follows the file when --api was not given: a chat JSONL file goes to the chat API."""
    if not getattr(args, "dataset", None):
        if getattr(args, "api", "generate") is None:
            args.api = "generate"
        return None
    from console.bench.datasets import DatasetError, sample_dataset

    given = getattr(args, "dataset_sample", None)
    if given is not None and given < 1:
        raise UsageError("--dataset-sample must be at least 1")
    window = None
    if getattr(args, "trace_window", None):
        try:
            window = parse_trace_window(args.trace_window)
        except ValueError as exc:
            raise UsageError(str(exc)) from None
    try:
        sample = sample_dataset(
            dataset_path(args),
            size=given or DEFAULT_DATASET_SAMPLE,
            seed=args.seed,
            output_len_cap=output_len_cap,
            hash_large=False,  # a large file's sha256 is read beside the run (console.core.bench)
            trace_window=window,
            trace_limit=given,
        )
    except DatasetError as exc:
        raise UsageError(f"--dataset {exc}; nothing was sent") from None
    _check_trace_options(args, sample)
    if sample.is_trace:
        if args.api == "chat" and getattr(args, "trace_prompts", None) != "bench-serving":
            raise UsageError("a trace's token prompts go to the generate API: drop --api chat, or --trace-prompts "
                             "bench-serving")  # fmt: skip
        args.api = "chat" if getattr(args, "trace_prompts", None) == "bench-serving" else "generate"
        return sample
    if args.api is None:
        args.api = "chat" if sample.format == "chat-jsonl" else "generate"
    elif args.api == "generate" and sample.format == "chat-jsonl":
        raise UsageError(f"--dataset {args.dataset} holds chat messages: they go to the chat API (drop --api generate)")
    return sample


def parse_trace_window(text: str) -> tuple[float, float | None]:
    """`10m` -> (0, 600): the trace's first 10 minutes; `20m-30m` -> (1200, 1800); `90s`, `1h`, bare seconds.
    ValueError says what was expected."""
    from console.sglang.traffic_shape import parse_window as seconds

    start_text, dash, end_text = text.strip().partition("-")
    try:
        if not dash:
            return 0.0, seconds(start_text)
        start, end = seconds(start_text), seconds(end_text)
    except ValueError:
        raise ValueError(f"--trace-window takes LENGTH or START-END, e.g. 10m or 20m-30m (got {text!r})") from None
    if end <= start:
        raise ValueError(f"--trace-window {text}: the end must come after the start")
    return start, end


def _check_trace_options(args: argparse.Namespace, sample: DatasetSample) -> None:
    """The trace options need a trace, and a trace needs its own clock (no request rates, no capacity search)."""
    given = [o for o in ("trace_speed", "trace_window", "trace_prompts") if getattr(args, o, None)]
    if given and not sample.is_trace:
        names = ", ".join("--" + o.replace("_", "-") for o in given)
        raise UsageError(f'{names}: only for a trace --dataset; {sample.file} is not one (it has no "timestamp")')
    if sample.is_trace:
        clash = [o for o, on in (("--request-rate", getattr(args, "request_rate", None)),
                                 ("--find-capacity", getattr(args, "find_capacity", False))) if on]  # fmt: skip
        if clash:
            raise UsageError(f"a trace is replayed on its own clock (--trace-speed scales it): drop {', '.join(clash)}")


def dataset_path(args: argparse.Namespace) -> Path:
    """--dataset as given; a relative path that does not exist here is looked for in the workspace's datasets/."""
    path = Path(args.dataset).expanduser()
    if not path.is_absolute() and not path.exists():
        from console.workspace import Workspace

        inside = Workspace.resolve(getattr(args, "workspace", None)).datasets / path
        if inside.exists():
            return inside
    return path


def read_slo(args: argparse.Namespace) -> Slo | None:
    if not getattr(args, "slo", None):
        return None
    from console.bench.slo import parse_slo

    try:
        return parse_slo(args.slo)
    except ValueError as exc:
        raise UsageError(str(exc)) from None


def with_traffic(
    config: SweepConfig, args: argparse.Namespace, sample: DatasetSample | None, slo: Slo | None
) -> SweepConfig:
    """The sweep the other options made, with the dataset (its workload), the SLO and the capacity search."""
    workload = config.workload
    speeds: list[float] = []
    if sample is not None:
        workload = replace(workload, name="dataset", dataset=sample, api=args.api or workload.api)
        if sample.is_trace:
            from console.core.bench import parse_float_list

            workload = replace(workload, trace_prompts=getattr(args, "trace_prompts", None) or "tokens")
            speeds = parse_float_list(getattr(args, "trace_speed", None) or "1", "--trace-speed")
    return replace(
        config,
        workload=workload,
        trace_speeds=speeds,
        long_prompts=args.long_prompts,
        slo=slo.to_json() if slo is not None else None,
        find_capacity=bool(getattr(args, "find_capacity", False)),
    )
