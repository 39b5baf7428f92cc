"""`opsconsole tune TARGET ...`: the core's plan / execute (console.core.tune), rendered.

Shows the space (candidates, what the version's rules prune with SGLang's reason, what they merge), asks before
touching the host (unless --yes), then prints each trial's progress, and at the end the recommendations per
level with margins and noise, the crossovers, the optimistic vs realistic workloads and where the unit is.
Ctrl-C rolls back the start in progress, stops the benchmark and puts the original unit back (a second Ctrl-C
leaves at once; on a host with the restore guard the host then puts the original back by itself).

`--json` prints exactly one object (keys in docs/tune.md: trials, pruned, recommendations, final_unit,
host_healthy, plus merged, crossovers, summary, workloads and what the run was).
Exit codes: 0 done and the host healthy on the unit it should have, 1 failed/refused/locked, 2 usage, 130 Ctrl-C.
"""

from __future__ import annotations

import argparse
import sys
import tomllib
from pathlib import Path
from typing import Any, TextIO

from console import hints
from console.bench.datasets import describe_line
from console.bench.workloads import DatasetSample
from console.cli.common import Answer, HostVerb, HumanProgress, ignore, interruptibly, workspace_of
from console.cli.traffic import DEFAULT_OUTPUT_LEN, read_dataset, read_slo
from console.core.bench import parse_int_list
from console.core.change import ApplyState
from console.core.events import Notice, Reconnecting, StepChanged
from console.core.session import Session, open_session
from console.core.tune import (
    LevelProgress,
    PendingTune,
    Restoring,
    SetupsPredicted,
    SpaceRequest,
    StageStarted,
    TrialApplied,
    TrialApplyEvent,
    TrialBenchmarked,
    TrialFailed,
    TrialSkipped,
    TrialStarted,
    TuneEvent,
    TuneFinished,
    TuneRequest,
    TuneResult,
    TuneStarted,
    afterwards,
    best_at_problem,
    estimate,
    plan_tune,
    space_from_axes,
    space_from_file,
    unit_speculation,
)
from console.errors import ExitCode, UsageError
from console.sglang.setup import AXES


class TuneProgress(HumanProgress[TuneEvent]):
    """The tune's events as lines a terminal (or a log) can follow."""

    objective = "throughput"  # what the trials' scores are (TuneStarted says)

    def show(self, event: TuneEvent) -> None:
        if isinstance(event, TuneStarted):
            guard = (
                "the host restores the original unit if this console goes away"
                if event.guarded
                else ("no restore guard: if this console dies, the units stay as the last trial left them")
            )
            self.objective = event.objective
            self.say(f"tuning {len(event.space.candidates)} setups on {len(event.cells)} levels ({guard})")
        elif isinstance(event, StageStarted):
            kind = "screening (short runs)" if event.kind == "screen" else "full runs with repeats"
            eta = f", about {event.estimate_s / 60:.0f} min" if event.estimate_s else ""
            levels = ", ".join(c.label for c in event.cells)
            self.say(f"stage {event.stage}: {kind}: {len(event.runs)} setups on {levels}{eta}")
        elif isinstance(event, TrialStarted):
            self.say(f"trial {event.trial.number}: {event.trial.name}")
        elif isinstance(event, TrialApplyEvent):
            inner = event.event
            if isinstance(inner, StepChanged) and inner.state in (
                ApplyState.RESTARTING,
                ApplyState.FAILED,
                ApplyState.ROLLING_BACK,
                ApplyState.HEALTHY_ON_OLD,
                ApplyState.ROLLBACK_FAILED,
            ):
                detail = f": {inner.detail}" if inner.detail else ""
                self.say(f"  {inner.state.value.replace('_', ' ')}{detail}")
            elif isinstance(inner, Reconnecting):
                self.say(f"  connection lost during {inner.operation}; reconnecting")
            else:
                self._deployment_step(inner)
        elif isinstance(event, TrialApplied):
            how = "restarted and verified" if event.restarted else "already running"
            self.say(f"  {how}; benchmarking {', '.join(c.label for c in event.trial.cells)}")
        elif isinstance(event, TrialBenchmarked):
            scores = dict(event.scores)
            figures = ", ".join(
                f"{cell.label} {value:,.0f} tok/s"
                + (f" ({self.objective} {scores[cell]:,.2f} req/s)" if self.objective != "throughput" else "")
                for cell, value in event.figures
            )
            self.say(f"  {figures or 'no clean level'}")
        elif isinstance(event, TrialFailed):
            back = "; rolled back" if event.rolled_back else ""
            self.say(f"  FAILED{back}, skipped: {event.reason}")
            for line in event.journal[-5:]:
                self.write(f"             {line}")
        elif isinstance(event, TrialSkipped):
            self.say(f"trial {event.trial.number}: {event.trial.name}: skipped ({event.reason})")
        elif isinstance(event, LevelProgress):
            if event.decided and event.leader:
                self.say(f"  {event.cell.label}: {event.leader} leads{_margin(event.margin_pct)} (decided)")
        elif isinstance(event, SetupsPredicted):
            if event.can_win:
                self.say(f"predicted: {', '.join(event.can_win)} can still win")
            if event.cannot_win:
                self.say(f"predicted: {', '.join(event.cannot_win)} cannot win: no restart")
            if event.unplaced:
                self.say(f"no measured base to predict {', '.join(event.unplaced)}: counted as able to win")
        elif isinstance(event, Restoring):
            self.say(f"putting back {event.name}")
        elif isinstance(event, TuneFinished):
            health = "healthy" if event.host_healthy else "NOT healthy"
            self.say(f"done: the host runs the {event.final_unit or 'unknown'} unit, {health}")
        elif isinstance(event, Notice | Reconnecting):
            text = event.message if isinstance(event, Notice) else f"connection lost during {event.operation}"
            self.say(text)

    def _deployment_step(self, event: object) -> None:
        """A deployment's trial: each step of its restart order as it ends (console.core.roll's StepEvent)."""
        from console.core.roll import StepEvent

        if isinstance(event, StepEvent) and event.state != "begun":
            back = "rollback: " if event.rollback else ""
            failed = "FAILED: " if event.state == "failed" else ""
            step = event.step.kind.replace("_", " ")
            self.say(f"  {back}{step} {', '.join(event.step.members)}: {failed}{event.detail}")
        elif isinstance(event, Notice):
            self.say(f"  {event.message}")


def _margin(pct: float | None) -> str:
    return "" if pct is None else f" by {pct:+.1f} %"


def render_space(pending: PendingTune, out: TextIO) -> None:
    space = pending.space
    print(f"SGLang {space.sglang_version}: {len(space.candidates)} setups to run", file=out)
    for candidate in space.candidates:
        config = " ".join(f"{k}={v}" for k, v in candidate.config.items())
        print(f"  {candidate.name:<34} {config}", file=out)
    if space.pruned:
        print(f"pruned ({len(space.pruned)}): SGLang {space.sglang_version} would refuse them", file=out)
        for pruned in space.pruned:
            print(f"  {pruned.setting.describe()}\n    {pruned.reason}", file=out)
    if space.merged:
        print(f"merged ({len(space.merged)}): SGLang runs them as another setup", file=out)
        for merged in space.merged:
            print(f"  {merged.setting.describe()} -> {merged.into_name}: {merged.reason}", file=out)


def render_result(result: TuneResult, out: TextIO) -> None:
    for workload in dict.fromkeys(c.workload for c in result.cells):
        recs = [r for r in result.recommendations if r.cell.workload == workload]
        if not recs:
            continue
        by = "" if result.objective == "throughput" else f" by {result.objective}"
        print(f"\n{workload}: best setup per level{by}", file=out)
        score = f"{result.objective[:8]} req/s" if result.objective != "throughput" else ""
        print(f"  {'level':<8} {'best':<34} {'tok/s':>9} {score:>15} {'margin':>8}  noise     runner-up", file=out)
        for r in recs:
            margin = "-" if r.margin_pct is None else f"{r.margin_pct:+.1f}%"
            noise = "within" if r.within_noise else "outside"
            shown = f"{r.score:,.2f}" if score and r.score is not None else ""
            print(
                f"  C={r.cell.concurrency:<6} {r.name:<34} {r.output_throughput:>9,.1f} {shown:>15} {margin:>8}  "
                f"{noise:<8}  {r.runner_up or '-'}",
                file=out,
            )
        for r in recs:
            if r.evidence_note:
                print(f"  {r.evidence_note}", file=out)
        print(f"  {result.summary(workload)}", file=out)
        for name, cap in result.capacities.get(workload, {}).items():
            print(f"  capacity at the SLO, {name}: {cap.text()}", file=out)
    if result.slo is not None:
        print(f"\nSLO: {result.slo.text()}", file=out)
    for verdict in result.verdicts:
        print(f"{verdict}", file=out)
    if result.workload_sides:
        print("\noptimistic (random, forced lengths, temperature 0) vs realistic (chat)", file=out)
        for side in result.workload_sides:
            opt, real = side.optimistic, side.realistic
            left = f"{opt.name} {opt.output_throughput:,.0f}" if opt else "-"
            right = f"{real.name} {real.output_throughput:,.0f}" if real else "-"
            print(f"  C={side.concurrency:<6} {left:<40} {right}", file=out)
        for side in result.workload_sides:
            if side.warning:
                print(f"  warning: {side.warning}", file=out)
    print("\ntrials", file=out)
    for trial in result.trials:
        levels = [m for m in (result.level_metrics(trial.candidate.key, c) for c in result.cells) if m]
        figures = "  ".join(f"C={m['concurrency']} {m['output_throughput']:,.0f}" for m in levels)
        note = f"  ({trial.error})" if trial.error and trial.state != "benchmarked" else ""
        print(f"  {trial.candidate.name:<34} {trial.state:<11} {figures}{note}", file=out)
    if result.stopped:
        print(f"\nstopped early: {result.stopped}", file=out)
    if result.error:
        print(f"error: {result.error}", file=out)
    where = {"original": "the original unit", "best": "the recommended unit"}.get(result.final_unit or "", "?")
    health = "healthy" if result.host_healthy else "NOT healthy"
    print(
        f"\n{result.target}: {where}, {health}; {result.restarts} restarts in {result.elapsed_s / 60:.1f} min", file=out
    )
    print(
        f"records in logs/ labelled {result.label}/<setup>/<workload>/s<stage> ({hints.COMPARE.line()} compares two)",
        file=out,
    )


# --- arguments ------------------------------------------------------------------------------------------------


def check_args(args: argparse.Namespace) -> None:
    """Syntax of the options (usage errors before any connection)."""
    concurrencies = parse_int_list(args.concurrency, "--concurrency")
    for workload in _workloads(args):
        if workload not in ("random", "chat", "dataset"):
            raise UsageError(f"--workload takes random and/or chat (got {workload!r}); your own prompts: --dataset")
    read_slo(args)
    for value, what in (
        (args.duration, "--duration"),
        (args.timeout, "--timeout"),
        (args.request_timeout, "--request-timeout"),
        (args.restore_after, "--restore-after"),
    ):
        if not value > 0:
            raise UsageError(f"{what} must be a positive number of seconds")
    if args.budget is not None and not args.budget > 0:
        raise UsageError("--budget is a positive number of minutes")
    if args.repeat < 1:
        raise UsageError("--repeat must be at least 1 (2 or more measure the noise)")
    if args.input_len < 1 or (args.output_len is not None and args.output_len < 1):
        raise UsageError("--input-len and --output-len must be at least 1")
    names = {"apply_best": "--apply-best", "concurrency": "the levels of --concurrency"}
    problem = best_at_problem(args.best_at, apply_best=args.apply_best, concurrencies=concurrencies, names=names)
    if problem is not None:  # the Tune form refuses the same (console.core.tune.form)
        raise UsageError(f"--best-at {problem}")
    space_from_args(args, None)


# The space's axes (console.sglang.setup.AXES) as the command line names them: --steps, --draft-tokens, ...
AXIS_OPTIONS = {axis: "--" + axis.replace("_", "-") for axis in AXES}


def _workloads(args: argparse.Namespace) -> tuple[str, ...]:
    """--workload's, and `dataset` with --dataset (alone when --workload is not given)."""
    typed = [w.strip() for w in (args.workload or "").split(",") if w.strip()]
    if getattr(args, "dataset", None):
        typed.append("dataset")
    return tuple(dict.fromkeys(typed or ["random"]))


def space_from_args(args: argparse.Namespace, unit: Any) -> SpaceRequest:
    """The space from --space FILE and the axis options (options win); missing axes from the unit as it is."""
    base = SpaceRequest()
    if args.space:
        path = Path(args.space)
        try:
            data = tomllib.loads(path.read_text())
        except OSError as exc:
            raise UsageError(f"--space {args.space}: cannot read it ({exc.strerror})") from None
        except tomllib.TOMLDecodeError as exc:
            raise UsageError(f"--space {args.space}: not TOML ({exc})") from None
        base = space_from_file(data, args.space)
    return space_from_axes(base, unit, {axis: getattr(args, axis) for axis in AXES}, names=AXIS_OPTIONS)


def request_from_args(
    args: argparse.Namespace, space: SpaceRequest, dataset: DatasetSample | None = None
) -> TuneRequest:
    """The tune the options ask for; `dataset`: the --dataset sample (read_dataset, before any connection)."""
    slo = read_slo(args)
    return TuneRequest(
        space=space,
        concurrencies=tuple(parse_int_list(args.concurrency, "--concurrency")),
        workloads=_workloads(args),
        duration_s=args.duration,
        repeats=args.repeat,
        input_len=args.input_len,
        output_len=args.output_len if args.output_len is not None else DEFAULT_OUTPUT_LEN,
        api=args.api or "generate",
        objective=args.objective,
        slo=slo.to_json() if slo is not None else None,
        dataset=dataset,
        long_prompts=args.long_prompts,
        warmup=args.warmup,
        seed=args.seed,
        budget_s=args.budget * 60 if args.budget is not None else None,
        apply_best=args.apply_best,
        best_at=args.best_at,
        strategy=args.strategy,
        timeout_s=args.timeout,
        request_timeout_s=args.request_timeout,
        label=args.label,
        restore_after_s=args.restore_after,
    )


async def unit_now(session: Session) -> Any:
    version, _source = await session.sglang_version()
    return unit_speculation(await session.service.read_unit(), version)


async def tune_main(verb: HostVerb) -> int:
    from console.core.deployment import is_deployment

    args = verb.args
    workspace = workspace_of(args).ensure()
    dataset = read_dataset(args, args.output_len)  # before connecting: a bad file changes nothing
    if dataset is not None and dataset.is_trace:
        raise UsageError(f"--dataset {dataset.file} is a trace: replay it with `bench --dataset` (tune sends a sample)")
    if dataset is not None:
        print(f"dataset {describe_line(dataset)}", file=verb.stderr)
    if is_deployment(args.target, workspace.profiles):
        return await _tune_deployment(verb, dataset)
    async with open_session(args.target, workspace, ssh_config=args.ssh_config) as session:
        space = space_from_args(args, await unit_now(session))
        request = request_from_args(args, space, dataset)
        async with await plan_tune(session, request) as pending:
            question = (
                f"Restart {session.service.unit} on {session.label} with each of these setups and benchmark "
                f"them (afterwards {afterwards(request)})?"
            )
            return await _confirm_and_run(verb, pending, request, question, session.label)


async def _tune_deployment(verb: HostVerb, dataset: DatasetSample | None) -> int:
    """Every trial the deployment's change (its restart order), benchmarked through its front door; every member's
    original unit back at the end (console.core.tune.plan_deployment_tune)."""
    import os

    from console.core.bench import API_KEY_ENV
    from console.core.deployment import load_deployment
    from console.core.status import open_members
    from console.core.tune import plan_deployment_tune, reference_member
    from console.host.base import HostError

    args = verb.args
    workspace = workspace_of(args)
    deployment = load_deployment(args.target, workspace.profiles, ssh_config=args.ssh_config)
    async with open_members(deployment, workspace, ssh_config=args.ssh_config) as opened:
        unreachable = [f"{deployment.member(n).describe()}: {e}" for n, e in opened.items() if isinstance(e, HostError)]
        if unreachable:
            raise HostError(f"{deployment.name}: {'; '.join(unreachable)}; nothing was changed on any member")
        sessions = {n: s for n, s in opened.items() if not isinstance(s, HostError)}
        reference = reference_member(deployment)
        space = space_from_args(args, await unit_now(sessions[reference.name]))
        request = request_from_args(args, space, dataset)
        api_key = os.environ.get(API_KEY_ENV) or None
        async with await plan_deployment_tune(deployment, sessions, request, api_key=api_key) as pending:
            if not verb.json:
                print(f"{deployment.name}: {deployment.kind}, {len(deployment.members)} members; the setups are "
                      f"{reference.name}'s unit with each edit, made on every member", file=verb.human)  # fmt: skip
            how = "every rank together" if deployment.kind == "multinode" else "one member at a time through smg"
            door = "rank 0" if deployment.kind == "multinode" else "smg"
            question = (
                f"Change {deployment.name} to each of these setups ({how}, in its restart order) and benchmark them "
                f"through {door} (afterwards {afterwards(request)})?"
            )
            return await _confirm_and_run(verb, pending, request, question, deployment.name)


async def _confirm_and_run(
    verb: HostVerb, pending: PendingTune, request: TuneRequest, question: str, label: str
) -> int:
    parts = estimate(pending.estimate_s, pending.restart_cost)
    said = parts.text(label, at_most=request.strategy == "predict")
    if not verb.json:
        render_space(pending, verb.human)
        print(said, file=verb.human)
    answer = verb.ask(f"{said}\n{question}" if verb.json else question)
    if answer is Answer.NO_TERMINAL:
        await pending.abort("no confirmation")
        raise UsageError(verb.cannot_ask)
    if answer is Answer.NO:
        await pending.abort("not confirmed")
        print("not confirmed; nothing was changed", file=verb.stderr)
        return ExitCode.FAILED
    progress = TuneProgress(verb.human) if verb.shows_progress else ignore
    result, interrupted = await interruptibly(
        pending.execute(on_event=progress), lambda: pending.request_abort("interrupted (Ctrl-C)")
    )
    verb.report(lambda: {**result.to_json(), "estimate": parts.to_json()}, lambda out: render_result(result, out))
    if interrupted and result.host_healthy:
        return ExitCode.INTERRUPTED
    return ExitCode.OK if result.ok else ExitCode.FAILED


def run(args: argparse.Namespace, *, stdin: TextIO | None = None, stdout: TextIO | None = None) -> int:
    """`opsconsole tune`: exit 0 tuned (host healthy on the unit it should run), 1 failed/refused, 2 usage."""
    nothing: dict[str, object] = {"trials": [], "pruned": [], "recommendations": []}
    nothing.update(final_unit=None, host_healthy=None)
    verb = HostVerb("tune", args, nothing, stdin=stdin or sys.stdin, stdout=stdout or sys.stdout)
    return verb.run(tune_main, check=lambda: check_args(args))
