"""`--gate bench` carried out: the canary's short benchmark after its verified change, and its rollback when the
verdict (plan.py: gate_verdict) says it regressed. The pure half is gate_plan.py.

    gate = BenchGate("prod", baselines, GateSpec(concurrency=8, max_regression_pct=5))
    roll = await plan_roll(..., gate=gate)          # run.py calls judge() and roll_back()

The benchmark is console.core.bench's own sweep on the canary's session (its records kept in logs/ under the label
gate@GROUP:HOST, never a later gate's baseline), with the baseline's workload, level, requests and repeats, the load
generator where the baseline's ran. The rollback is a validated apply of the unit the canary had before the roll
(the raw text the roll's plan kept), verified like any apply; if the unit is no longer the one the roll wrote
(someone changed it meanwhile), it is left alone and the host reported failed.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

from console.core.apply import default_owner, plan_apply
from console.core.bench import bench_host
from console.core.change import EditRequest
from console.core.events import EventSink
from console.core.roll.gate_plan import GateBaseline, gate_label, gate_sweep
from console.core.roll.plan import GateSpec, GateVerdict, HostEnded, HostOutcome, gate_verdict
from console.core.roll.run import ApplyChange, GateStarted, HostProgress, RollEvent, RollHost
from console.errors import UsageError

# The rollback's start gets as long as an apply's (console.core.apply's default).
ROLLBACK_TIMEOUT_S = 900.0


class BenchGate:
    """The canaries' baselines (plan_gate) and the verdict's threshold; judge() benchmarks one canary."""

    def __init__(
        self,
        group: str,
        baselines: Mapping[str, GateBaseline],
        spec: GateSpec,
        *,
        rollback_timeout_s: float = ROLLBACK_TIMEOUT_S,
    ) -> None:
        self.group = group
        self.baselines = dict(baselines)
        self.spec = spec
        self.rollback_timeout_s = rollback_timeout_s

    def to_json(self) -> dict[str, Any]:
        return {**self.spec.to_json(), "baselines": {h: b.to_json() for h, b in self.baselines.items()}}

    async def judge(self, host: RollHost, emit: EventSink[RollEvent]) -> tuple[GateVerdict, dict[str, Any]]:
        baseline = self.baselines[host.label]
        emit(GateStarted(host.label, baseline, datetime.now(UTC)))
        client = {"host": "host", "console": "console"}.get(baseline.client_location, "auto")
        try:
            records = await bench_host(
                host.session,
                gate_sweep(baseline),
                label=gate_label(self.group, host.label),
                client=client,  # type: ignore[arg-type]  # one of bench_host's three choices
            )
        except UsageError as exc:  # the sweep refused before sending anything
            verdict = GateVerdict(False, f"the canary's benchmark was refused: {exc}", baseline.level)
            return verdict, {"baseline_run": baseline.to_json(), "values": [], "run_id": None}
        values = [r.output_throughput for r in records if r.level_key == baseline.level and not r.stopped]
        verdict = gate_verdict(
            baseline.values, values, level=baseline.level, max_regression_pct=self.spec.max_regression_pct
        )
        kept = {
            "baseline_run": baseline.to_json(),
            "values": values,
            "run_id": records[0].run_id if records else None,
        }
        return verdict, kept

    async def roll_back(self, host: RollHost, emit: EventSink[RollEvent]) -> HostEnded:
        change = host.change
        if not isinstance(change, ApplyChange) or change.pending.restart_only:
            return HostEnded(HostOutcome.FAILED, "nothing to roll back to: the change wrote no unit")
        written = change.pending.plan
        pending = await plan_apply(
            host.session,
            EditRequest(),
            unit_text=written.old_text,
            timeout_s=self.rollback_timeout_s,
            owner=default_owner(f"opsconsole rolling gate @{self.group}: rolling back the canary"),
        )
        async with pending:
            if pending.plan.old_text != written.new_text:
                await pending.abort("the unit changed since the roll wrote it; not rolled back")
                return HostEnded(
                    HostOutcome.FAILED, "its unit changed since the roll wrote it (someone else?): left as it is"
                )
            if not pending.plan.ok:
                reasons = "; ".join(e.message for e in pending.plan.report.errors)
                await pending.abort(f"the previous unit is refused by the rules: {reasons}")
                return HostEnded(
                    HostOutcome.FAILED, f"the previous unit is refused by the rules ({reasons}): left on the new one"
                )
            result = await pending.execute(on_event=lambda event: emit(HostProgress(host.label, event)))
        if result.state.value == "verified":
            return HostEnded(HostOutcome.ROLLED_BACK, "rolled back to its previous unit (verified)")
        return HostEnded(
            HostOutcome.FAILED, f"rolling it back ended {result.state.value.replace('_', ' ')}: {result.error}"
        )
