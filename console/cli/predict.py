"""`opsconsole predict TARGET ...`: the core's prediction (console.core.tune.predict), rendered.

Prints, per setup of the space (the running one first), its verdict against the running setup and per level the
predicted output tok/s with its band, beside the running setup's own figure: `C=1: 86.8 -> 81.2 tok/s ± 9 %`; then
what the figures rest on and the assumptions. Where the running setup has no benchmark on that traffic yet, it asks
to run one (no restart; --yes runs it without asking).

`--json` prints exactly one object (keys in docs/predict.md). Exit codes: 0 predicted, 1 failed or not confirmed,
2 usage.
"""

from __future__ import annotations

import argparse
import sys
from typing import Any, TextIO

from console.bench.events import BenchEvent, LevelDone
from console.bench.workloads import WorkloadSpec
from console.cli.common import Answer, HostVerb, HumanProgress, ignore, workspace_of
from console.cli.traffic import DEFAULT_OUTPUT_LEN, read_dataset, read_slo
from console.cli.tune import space_from_args, unit_now
from console.core.apply import RestartCost, cost_text, duration_text, known_restart_cost
from console.core.bench import parse_int_list
from console.core.session import open_session
from console.core.tune import PredictRequest, PredictResult, bench_running, plan_predict, predict
from console.errors import ExitCode, UsageError


class BaseBenchProgress(HumanProgress[BenchEvent]):
    """The running setup's benchmark, a line a level."""

    def show(self, event: BenchEvent) -> None:
        if isinstance(event, LevelDone):
            repeat = f" #{event.repeat_index + 1}" if event.repeat_index else ""
            self.say(f"  {event.level.label}{repeat}: {event.metrics['output_throughput']:,.1f} tok/s")


def render(result: PredictResult, out: TextIO, restart_cost: RestartCost | None = None) -> None:
    """The prediction for a person; `restart_cost`: what a restart of the host costs, said with the verdicts that
    weigh one (console/core/apply/restarts.py)."""
    plan = result.plan
    running = result.forecasts[0][1]
    print(f"{plan.target}: SGLang {plan.sglang_version}, {plan.model or '?'}; traffic {plan.workload}", file=out)
    noise = "not measured (no repeats)" if result.noise is None else f"±{result.noise:.0%} (repeats)"
    print(
        f"from {len(plan.records)} records; run-to-run spread {noise}, the model's own miss "
        f"{result.model_error:.0%}; {result.elapsed_ms:,.0f} ms",
        file=out,
    )
    if result.slo is not None:
        print(f"SLO: {result.slo.text()}", file=out)
    print(f"restart: {cost_text(restart_cost, plan.target)}", file=out)
    shared = _shared_assumptions(result)
    for name, forecast in result.forecasts:
        weighs = forecast is not running and forecast.verdict.kind in ("worth", "not-worth", "unknown")
        cost = f" (a restart: ~{duration_text(restart_cost.median_s)})" if weighs and restart_cost is not None else ""
        print(f"\n{name}: {forecast.verdict.text}{cost}", file=out)
        for level in forecast.levels:
            now = running.level(level.concurrency)
            base = (now.measured or now.output_tok_s) if now else None
            figure = level.measured or level.output_tok_s
            arrow = f"{base.value:,.1f} -> " if base is not None and forecast is not running else ""
            kind = "measured" if level.measured else "predicted"
            accept = f", accept {level.accept_length.value:.2f}" if level.accept_length else ""
            slo = "" if level.slo_met is None else ("  SLO met" if level.slo_met else "  SLO missed")
            print(
                f"  C={level.concurrency}: {arrow}{figure.value:,.1f} tok/s {figure.band_text()} ({kind}), "
                f"TPOT {level.tpot_ms.value:.1f} ms{accept}{slo}",
                file=out,
            )
        if forecast.verdict.settle:
            print(f"  {forecast.verdict.settle}", file=out)
        if forecast is not running:
            for line in forecast.assumptions:
                if line not in shared:
                    print(f"  assumes: {line}", file=out)
    if result.forecasts:
        print("\nrests on: " + "; ".join(result.forecasts[0][1].rests_on), file=out)
    if result.split is not None:
        print(result.split.text, file=out)
    for line in shared:
        print(f"every prediction assumes: {line}", file=out)
    if result.adaptive is not None:
        print("", file=out)
        for line in result.adaptive.lines():
            print(line, file=out)
    for setup, reason in result.pruned:
        print(f"pruned: {setup}: {reason}", file=out)
    if result.per_side:
        from console.core.deployment import sides_lines

        print("\nmeasured per side (the running setup's newest records):", file=out)
        for concurrency, sides in result.per_side.items():
            for line in sides_lines(sides):
                print(f"  C={concurrency}: {line}", file=out)
    for line in plan.scope:
        print(f"PD: {line}", file=out)


def _shared_assumptions(result: PredictResult) -> list[str]:
    """What every predicted setup assumes alike (said once, at the end)."""
    predicted = [f.assumptions for _name, f in result.forecasts[1:] if f.levels]
    if not predicted:
        return []
    return [line for line in predicted[0] if all(line in other for other in predicted[1:])]


def _workload(args: argparse.Namespace) -> WorkloadSpec | None:
    """The traffic the options name (None: the running setup's last measured one)."""
    sample = read_dataset(args, args.output_len)
    if sample is not None:
        return WorkloadSpec(name="dataset", dataset=sample, api=args.api or "generate", seed=args.seed)
    if args.workload is None and args.output_len is None:
        return None
    return WorkloadSpec(
        name=args.workload or "random",
        api=args.api or "generate",
        input_len=args.input_len,
        output_len=args.output_len if args.output_len is not None else DEFAULT_OUTPUT_LEN,
        temperature=args.temperature,
        seed=args.seed,
    )


def check_args(args: argparse.Namespace) -> None:
    if args.concurrency:
        parse_int_list(args.concurrency, "--concurrency")
    read_slo(args)
    if not args.duration > 0:
        raise UsageError("--duration must be a positive number of seconds")
    if not args.max_age > 0:
        raise UsageError("--max-age must be a positive number of days")
    if args.from_run and (args.workload or args.dataset):
        raise UsageError("--from-run names the traffic already: leave out --workload and --dataset")
    space_from_args(args, None)


async def predict_main(verb: HostVerb) -> int:
    args = verb.args
    workspace = workspace_of(args).ensure()
    from console.cli.deployment import front_door_of
    from console.core.deployment import is_deployment, load_deployment

    if args.target and is_deployment(args.target, workspace.profiles):
        deployment = load_deployment(args.target, workspace.profiles, ssh_config=args.ssh_config)
        if deployment.kind == "pd":
            return await _predict_pd(verb, deployment)
    async with open_session(front_door_of(args), workspace, ssh_config=args.ssh_config) as session:
        return await _predict(verb, session)


async def _predict_pd(verb: HostVerb, deployment: Any) -> int:
    """A PD deployment: its records through smg, its running setup and space from its first decode server's (whose
    rounds the setup changes), the running setup benchmarked through smg where it must be; PD_SCOPE said with it."""
    import os

    from console.core.bench import API_KEY_ENV, bench_deployment
    from console.core.status import open_members
    from console.core.tune import PD_SCOPE, reference_member
    from console.host.base import HostError

    args = verb.args
    workspace = workspace_of(args)
    async with open_members(deployment, workspace, ssh_config=args.ssh_config) as opened:
        sessions = {n: s for n, s in opened.items() if not isinstance(s, HostError)}
        reference = reference_member(deployment)
        if reference.name not in sessions:
            raise opened[reference.name]  # type: ignore[misc]
        api_key = os.environ.get(API_KEY_ENV) or None

        async def through_smg(sweep: Any, label: str, on_event: Any) -> Any:
            records, _sides = await bench_deployment(deployment, sessions, sweep, label=label, workspace=workspace,
                                                     on_event=on_event, api_key=api_key)  # fmt: skip
            return records

        return await _predict(verb, sessions[reference.name], target=deployment.name, scope=PD_SCOPE,
                              bench=through_smg)  # fmt: skip


async def _predict(
    verb: HostVerb, session: Any, *, target: str | None = None, scope: tuple[str, ...] = (), bench: Any = None
) -> int:
    args = verb.args
    slo = read_slo(args)
    workload = _workload(args)
    request = PredictRequest(
        space=space_from_args(args, await unit_now(session)),
        concurrencies=tuple(parse_int_list(args.concurrency, "--concurrency")) if args.concurrency else (),
        workload=workload,
        from_run=args.from_run,
        slo=slo.to_json() if slo is not None else None,
        max_age_days=args.max_age,
        base_duration_s=args.duration,
        adaptive=bool(getattr(args, "adaptive", False)),
    )
    plan = await plan_predict(session, request, target=target, scope=scope)
    if plan.stale:
        levels = ",".join(str(c) for c in plan.levels)
        question = (
            f"{plan.stale}. Benchmark it now at C={levels} (2 repeats of {args.duration:g} s each, no restart) "
            "to predict from?"
        )
        answer = verb.ask(question)
        if answer is Answer.NO_TERMINAL:
            raise UsageError(verb.cannot_ask)
        if answer is Answer.NO:
            print("not confirmed; nothing was run", file=verb.stderr)
            return ExitCode.FAILED
        progress = ignore if verb.json else BaseBenchProgress(verb.human)
        if not verb.json:
            door = f" through {target}'s front door" if target else ""
            print(f"benchmarking {plan.running.name()} (running, no restart){door}", file=verb.human)
        plan = await bench_running(session, plan, request, on_event=progress, bench=bench)
    result = predict(plan, request)
    cost = known_restart_cost(session)
    verb.report(lambda: {**result.to_json(), "restart_cost": cost.to_json() if cost else None},
                lambda out: render(result, out, cost))  # fmt: skip
    return ExitCode.OK


def run(args: argparse.Namespace, *, stdin: TextIO | None = None, stdout: TextIO | None = None) -> int:
    """`opsconsole predict`: exit 0 predicted, 1 failed or not confirmed, 2 usage."""

    verb = HostVerb("predict", args, {"setups": []}, stdin=stdin or sys.stdin, stdout=stdout or sys.stdout)
    return verb.run(predict_main, check=lambda: check_args(args))
