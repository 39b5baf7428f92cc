"""freeze's plan and steps as lines: for `opsconsole freeze` and for a group freeze's roll (console/cli/rolling.py),
which prefixes each host's lines."""

from __future__ import annotations

from typing import TextIO

from console.cli.common import HumanProgress


def render_plan(plan: object, out: TextIO) -> None:
    """What the freeze will write, for a person."""
    from console.core.snapshot import FreezePlan, setup_text

    assert isinstance(plan, FreezePlan)
    snap = plan.snapshot
    host = snap.host
    print(f"Freeze {host.label} ({host.unit}) as production snapshot {snap.name}", file=out)
    print(f"  SGLang {snap.server.version or '?'}, {snap.server.resolved.get('model_path', '?')}", file=out)
    print(f"  {setup_text(snap.server.resolved, snap.server.version)}", file=out)
    levels = sorted({str(e.get("max_concurrency") or e.get("request_rate")) for e in snap.benchmarks})
    bench = f"{len(snap.benchmarks)} records at {len(levels)} levels" if snap.benchmarks else "none in logs/"
    print(f"  benchmarks of this setup: {bench}", file=out)
    if snap.previous:
        print(f"  previous production: {snap.previous} ({len(snap.comparison)} compared figures)", file=out)
    lines = plan.document.count("\n") + 1
    print(f"  document: {host.hostname or host.label}:{plan.document_path} ({lines} lines)", file=out)
    if plan.unit_changed:
        print("  unit: adds [Install] WantedBy= so that it can be enabled:", file=out)
        print(plan.unit_diff, end="", file=out)
    else:
        print("  unit: unchanged (it is the running setup); it will be enabled", file=out)
    for warning in snap.warnings:
        print(f"  note: {warning}", file=out)
    if plan.refusals:
        title = f"FORCED ({plan.request.force}) despite:" if plan.forced else "REFUSED: nothing will be written:"
        print(title, file=out)
        for refusal in plan.refusals:
            print(f"  [{refusal.code}] {refusal.message}", file=out)


class FreezeProgress(HumanProgress[object]):
    """The freeze's steps as lines a terminal (or a log) can follow."""

    def show(self, event: object) -> None:
        from console.core.events import Notice

        line = step_line(event)
        if line is not None:
            self.say(line)
        elif isinstance(event, Notice):
            self.say(f"{event.level}: {event.message}")


def step_line(event: object) -> str | None:
    """A freeze's step as `document written: PATH` (None for any other event)."""
    from console.core.snapshot import FreezeStep

    if not isinstance(event, FreezeStep):
        return None
    return event.step.replace("_", " ") + (f": {event.detail}" if event.detail else "")
