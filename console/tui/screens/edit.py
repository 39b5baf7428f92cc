"""`e`: the speculative and serving flags of a host's unit, edited from the keyboard, checked by the rules of
the SGLang version the host runs at every keystroke, then applied: the unit diff and a confirmation naming
host and unit, then the restart watched phase by phase (screens/progress.py).

Beside the rules' verdict, the prediction of the form's setup on this host's traffic (console.core.tune.Foresight:
the workspace's benchmark records of the host fitted once as the editor opens, in a worker: 10 ms for a handful of
records, 230 ms for a month of them), at the levels the running setup was measured at: the running setup's figure,
the form's predicted one with its band, whether it is worth a restart, what would settle it. It is asked again, at
once, whenever the setup the rules resolve changes: a forecast takes 0.7 ms (benchmarks/editor_prediction.py; in a
thread the keys waited as long).

The model is console/core/apply/edit.py (fields from the version's flag table, the edit, the rules' verdict, the
silent changes); this screen only shows it and sends the intents."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from typing import Any, ClassVar

from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text
from textual import events, on, work
from textual.app import ComposeResult
from textual.binding import Binding, BindingType
from textual.containers import Horizontal, VerticalScroll
from textual.screen import Screen
from textual.widget import Widget
from textual.widgets import Checkbox, Input, Label, Select, Static, Switch

from console.core.apply import (
    NONE_CHOICE,
    ApplyResult,
    EditorForm,
    FieldSpec,
    Preview,
    RestartCost,
    applied_setups,
    duration_text,
    editor_form,
    known_restart_cost,
    plan_apply,
    record_applied,
    running_values,
    shorter_start_offers,
)
from console.core.change import ApplyState, EditRequest
from console.core.predict import SetupForecast
from console.core.session import Session
from console.core.snapshot import load_snapshots
from console.core.tune import Foresight, foresight
from console.host.base import HostError, UnitBackup, UnitLocked
from console.sglang.client import SglangError
from console.sglang.specmode import SpecMode
from console.tui.presenters.prediction import Line, editor_lines
from console.tui.screens import FORM_FOCUS_BINDINGS, unless_closing
from console.tui.screens.confirm import ConfirmScreen, cost_line, diff_text
from console.tui.screens.progress import apply_progress
from console.tui.widgets.footer import FittedFooter
from console.tui.widgets.inputs import OrderedInput

UNIT_PRESET = "unit"
RUNNING_PRESET = "running"
# How the prediction's lines look (console.tui.presenters.prediction.LineKind).
PREDICTION_STYLES = {
    "head": "bold",
    "figures": "",
    "worth": "bold green",
    "not-worth": "yellow",
    "unknown": "yellow",
    "note": "dim",
    "waiting": "dim",
}


class NumberInput(OrderedInput):
    """A number field: type it, or `+` / `-` to step it."""

    # Not priority bindings: an OrderedInput runs its own before it would type the character, and in turn with the
    # keys around them (a priority binding runs as the app reads the key, ahead of digits typed just before it).
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("plus", "step(1)", "+1", id="field-increment"),
        Binding("minus", "step(-1)", "-1", id="field-decrement"),
    ]

    def __init__(self, spec: FieldSpec, value: str, *, id: str, disabled: bool) -> None:
        super().__init__(value=value, id=id, disabled=disabled, placeholder=_placeholder(spec), compact=True)
        self.spec = spec

    def action_step(self, delta: int) -> None:
        try:
            self.value = self.spec.step(self.value, delta)
        except ValueError:
            self.app.bell()


def _placeholder(spec: FieldSpec) -> str:
    return "unset" if spec.default is None else f"unset (SGLang's default: {spec.default})"


def _field_id(dest: str) -> str:
    return "field-" + dest.replace(":", "-").replace("_", "-")


def _hint_id(dest: str) -> str:
    return "hint-" + _field_id(dest)


class EditScreen(Screen[None]):
    BINDINGS: ClassVar[list[BindingType]] = [
        Binding("ctrl+s", "apply", "Apply", id="editor-apply"),
        Binding("ctrl+z", "reset", "Reset to the unit", id="editor-reset"),
        Binding("escape", "close", "Close", id="editor-close"),
        *FORM_FOCUS_BINDINGS,
    ]

    def __init__(
        self,
        session: Session,
        *,
        label: str,
        read_only: str = "",
        resolved: dict[str, object] | None = None,
        on_applied: Callable[[], None] | None = None,
        apply_to_deployment: Callable[[EditRequest], Awaitable[object]] | None = None,
        extra_fields: tuple[str, ...] = (),
    ) -> None:
        super().__init__()
        # fields offered only here (console.core.apply.EXTRA_FIELDS: a rank's gate), each saying what it costs
        self.extra_fields = extra_fields
        self.session = session
        self.label = label
        # The host is a member of a deployment (`connect DEPLOYMENT`): the edit goes to the deployment, planned on
        # every member, checked across them and restarted in its order (the app's own flow, from this worker).
        self.apply_to_deployment = apply_to_deployment
        self.read_only = read_only  # why Apply is off, or "" when it is on
        self.resolved = resolved or {}
        self.on_applied = on_applied
        self.form: EditorForm | None = None
        self.preview: Preview | None = None
        self.error = ""
        self.busy = False
        self._backups: dict[str, UnitBackup] = {}
        self._applied: dict[str, dict[str, str]] = {}
        self._snapshots: dict[str, str] = {}  # preset key -> the snapshot's (masked) unit text
        self._preset_filled = UNIT_PRESET  # the preset the fields were last filled from (built from the unit)
        # The prediction: the host's, once read (None meanwhile); the form's setup's and the running one's forecasts.
        # Without a workspace there are no records to read, and nothing is said of a prediction.
        self.predicts = session.workspace is not None
        self.foresight: Foresight | None = None
        self.foresight_error = ""  # why the running server could not be read for it
        self.forecast: SetupForecast | None = None
        self.running_forecast: SetupForecast | None = None
        self._forecast_of: tuple[Mapping[str, Any], SpecMode | None] | None = None  # what `forecast` is asked of
        self.restart_cost: RestartCost | None = None  # what a restart of this host costs (read with the unit)

    def compose(self) -> ComposeResult:
        yield Static(Text(f"Edit {self.label}: reading the unit ...", style="bold"), id="editor-title")
        with Horizontal(id="editor-body"):
            yield VerticalScroll(id="editor-form")
            yield Static("", id="editor-report")
        yield FittedFooter(keep=("editor-close",))

    def on_mount(self) -> None:
        self._load()
        if self.predicts:
            self._load_foresight()

    # -- loading -------------------------------------------------------------------------------------------

    @work(exclusive=True, group="editor-load")
    async def _load(self) -> None:
        with unless_closing(self):
            await self._read_and_build()

    async def _read_and_build(self) -> None:
        try:
            version, source = await self.session.sglang_version()
            unit_text = await self.session.service.read_unit()
            form = editor_form(unit_text, version, unit_name=self.session.service.unit, extra=self.extra_fields)
            self.restart_cost = known_restart_cost(self.session)
        except (HostError, ValueError) as exc:  # ValueError: UnitError, the unit is not an SGLang unit
            self.query_one("#editor-title", Static).update(Text(f"Edit {self.label}: {exc}", style="bold red"))
            return
        self.form = form
        where = {"server": "the running server", "profile": "the profile", "newest": "the newest supported"}[source]
        title = Text(f"Edit {self.session.service.unit} on {self.label}", style="bold")
        title.append(f"   SGLang {version} rules (version from {where})", style="dim")
        if self.read_only:
            title.append(f"   {self.read_only}", style="yellow")
        self.query_one("#editor-title", Static).update(title)
        await self._build_fields(form)
        first = next((f for f in form.fields if f.kind in ("int", "float")), None)
        if first is not None and not self.read_only:
            # steps: the value operators change most; focused before the report shows, so that keys typed once
            # the editor looks ready land in it (now: Widget.focus() would only ask for it after this message)
            self.set_focus(self.query_one(f"#{_field_id(first.dest)}"))
        self._update_report()
        self._load_presets()

    async def _build_fields(self, form: EditorForm) -> None:
        container = self.query_one("#editor-form", VerticalScroll)
        rows: list[Widget] = [
            Horizontal(
                Label("preset", classes="field-label"),
                Select[str](
                    [("the unit as it is", UNIT_PRESET)],
                    value=UNIT_PRESET,
                    id="preset",
                    allow_blank=False,
                    compact=True,
                ),
                classes="field-row",
            )
        ]
        group = ""
        disabled = bool(self.read_only)
        for spec in form.fields:
            if spec.group != group:
                group = spec.group
                rows.append(Static(Text(group, style="bold underline"), classes="field-group"))
            widget = self._widget(spec, form, disabled)
            row_classes = "field-row -switch" if spec.kind == "switch" and spec.flag is None else "field-row"
            if spec.hint:
                row_classes += " -hinted"
            rows.append(Horizontal(Label(spec.label, classes="field-label"), widget, classes=row_classes))
            if spec.hint:  # why the field is offered, under it
                rows.append(Static(Text(spec.hint, style="dim"), classes="field-hint", id=_hint_id(spec.dest)))
        await container.mount_all(rows)

    def _widget(self, spec: FieldSpec, form: EditorForm, disabled: bool) -> Widget:
        value = form.values.get(spec.dest, "")
        ident = _field_id(spec.dest)
        if spec.kind in ("int", "float"):
            return NumberInput(spec, value, id=ident, disabled=disabled)
        if spec.kind == "choice":
            options = [(c, c) for c in spec.choices]
            if spec.dest == "speculative_algorithm":
                return Select[str](
                    options, value=value or NONE_CHOICE, id=ident, allow_blank=False, disabled=disabled, compact=True
                )
            if value:
                return Select[str](
                    options, value=value, id=ident, prompt=_placeholder(spec), disabled=disabled, compact=True
                )
            return Select[str](options, id=ident, prompt=_placeholder(spec), disabled=disabled, compact=True)
        if spec.kind == "switch":
            on = value == "true" if value else bool(spec.default)
            if spec.flag is not None:  # a boolean launch flag: one line, like the fields around it
                return Checkbox(spec.flag, value=on, id=ident, disabled=disabled, compact=True)
            return Switch(value=on, id=ident, disabled=disabled)
        return OrderedInput(value=value, id=ident, placeholder=_placeholder(spec), disabled=disabled, compact=True)

    @work(exclusive=True, group="editor-foresight")
    async def _load_foresight(self) -> None:
        """The host's prediction, fitted from the workspace's records."""
        try:
            found = await foresight(self.session)
        except (HostError, SglangError) as exc:  # a server down: what its records would say needs its setup
            self.foresight_error = f"the running server cannot be read ({exc})"
        else:
            self.foresight, self.running_forecast = found, found.running_forecast()
        with unless_closing(self):
            if self.preview is not None:
                self._ask_forecast(self.preview, again=True)
                self._show_report()

    def _ask_forecast(self, preview: Preview, *, again: bool = False) -> None:
        """The form's setup forecast again when what the rules resolve for it changed (see the module's docstring
        for why at once); none for a form the rules refuse."""
        if self.foresight is None or self.foresight.predictor is None:
            return
        plan = preview.plan
        if plan is None or not preview.ok:
            self._forecast_of, self.forecast = None, None
            return
        asked = (plan.report.resolved, plan.report.spec_mode)
        if asked != self._forecast_of or again:
            self._forecast_of, self.forecast = asked, self.foresight.of(*asked)

    @work(exclusive=True, group="editor-presets")
    async def _load_presets(self) -> None:
        with unless_closing(self):
            await self._read_presets()

    async def _read_presets(self) -> None:
        """The running setup, the unit's backups on the host (with their dates), the setups applied from here."""
        assert self.form is not None
        options: list[tuple[str, str]] = [("the unit as it is", UNIT_PRESET)]
        if self.resolved:
            options.append(("what the server runs now", RUNNING_PRESET))
        self._backups.clear()
        try:
            for backup in (await self.session.service.backups())[:8]:
                key = f"backup:{backup.path}"
                when = f"{backup.taken_at:%Y-%m-%d %H:%M:%S} UTC" if backup.taken_at else backup.path
                options.append((f"backup of {when}", key))
                self._backups[key] = backup
        except HostError as exc:
            self.notify(f"the unit's backups could not be listed: {exc}", severity="warning")
        self._applied.clear()
        logs = self.session.workspace.logs if self.session.workspace else None
        if logs is not None:
            for entry in applied_setups(logs, self.label, self.session.service.unit):
                key = f"applied:{entry.at.isoformat()}"
                options.append((f"applied from this console {entry.at:%Y-%m-%d %H:%M}", key))
                self._applied[key] = entry.values
        self._snapshots.clear()
        if self.session.workspace is not None:
            snapshots, _problems = load_snapshots(self.session.workspace)  # unreadable files: the Snapshots view says
            for snapshot in reversed(snapshots):  # newest first
                key = f"snapshot:{snapshot.name}"
                where = "" if snapshot.host.label == self.label else f" of {snapshot.host.label}"
                options.append((f"snapshot {snapshot.name}{where} {snapshot.frozen_at:%Y-%m-%d %H:%M}", key))
                self._snapshots[key] = snapshot.unit.text
        self.query_one("#preset", Select).set_options(options)
        self.query_one("#preset", Select).value = UNIT_PRESET

    @on(Select.Changed, "#preset")
    def _preset_chosen(self, event: Select.Changed) -> None:
        key = str(event.value)
        if self.form is None or event.value == Select.NULL or key == self._preset_filled:
            # The Select reports its first value as it mounts, and that report can reach this screen after the
            # operator has typed (on a busy machine): the fields hold that preset already, and what was typed stays.
            return
        self._preset_filled = key
        if key == UNIT_PRESET:
            self._fill(dict(self.form.values))
        elif key == RUNNING_PRESET:
            self._fill(running_values(self.form, self.resolved))
        elif key in self._applied:
            self._fill({**self.form.values, **self._applied[key]})
        elif key in self._backups:
            self._fill_from_backup(key)
        elif key in self._snapshots:
            self._fill_from_unit_text(self._snapshots[key], "that snapshot")

    def _fill_from_unit_text(self, text: str, what: str) -> None:
        assert self.form is not None
        try:
            values = editor_form(text, self.form.version, extra=self.extra_fields).values
        except ValueError as exc:
            self.notify(f"{what} cannot be read as an SGLang unit: {exc}", severity="error")
            return
        self._fill(dict(values))

    @work(exclusive=True, group="editor-presets")
    async def _fill_from_backup(self, key: str) -> None:
        assert self.form is not None
        try:
            text = await self.session.service.read_backup(self._backups[key])
        except HostError as exc:
            self.notify(f"that backup cannot be read: {exc}", severity="error")
            return
        with unless_closing(self):
            self._fill_from_unit_text(text, "that backup")

    def _fill(self, values: dict[str, str]) -> None:
        assert self.form is not None
        for spec in self.form.fields:
            widget = self.query_one(f"#{_field_id(spec.dest)}")
            value = values.get(spec.dest, "")
            if isinstance(widget, Input):
                widget.value = value
            elif isinstance(widget, Select):
                if spec.dest == "speculative_algorithm":
                    widget.value = value or NONE_CHOICE
                elif value:
                    widget.value = value
                else:
                    widget.clear()
            elif isinstance(widget, Switch | Checkbox):
                widget.value = value == "true" if value else bool(spec.default)
        self._update_report()

    # -- the live report -----------------------------------------------------------------------------------

    def values(self) -> dict[str, str]:
        """The form as the core reads it (field dest -> text; "" for unset)."""
        assert self.form is not None
        out: dict[str, str] = {}
        for spec in self.form.fields:
            widget = self.query_one(f"#{_field_id(spec.dest)}")
            if isinstance(widget, Input):
                out[spec.dest] = widget.value
            elif isinstance(widget, Select):
                out[spec.dest] = "" if widget.value == Select.NULL else str(widget.value)
            elif isinstance(widget, Switch | Checkbox):
                unit_value = self.form.values.get(spec.dest, "")
                effective = unit_value == "true" if unit_value else bool(spec.default)
                out[spec.dest] = unit_value if widget.value == effective else ("true" if widget.value else "false")
        return out

    @on(events.DescendantFocus)
    def _show_the_fields_reason(self, event: events.DescendantFocus) -> None:
        """A field scrolled into view brings the line under it that says why it is offered."""
        ident = event.widget.id or ""
        if ident.startswith("field-"):
            for hint in self.query(f"#hint-{ident}"):
                self.query_one("#editor-form", VerticalScroll).scroll_to_widget(hint, animate=False)

    @on(Input.Changed)
    @on(Select.Changed)
    @on(Switch.Changed)
    @on(Checkbox.Changed)
    def _changed(self, event: Input.Changed | Select.Changed | Switch.Changed | Checkbox.Changed) -> None:
        if event.control is not None and event.control.id == "preset":
            return
        self._update_report()

    def _update_report(self) -> None:
        if self.form is None:
            return
        self.preview = self.form.preview(self.values())
        self._ask_forecast(self.preview)
        self._show_report()
        values = self.values()
        for spec in self.form.fields:  # changed fields are marked beside their label
            row = self.query_one(f"#{_field_id(spec.dest)}").parent
            changed = values.get(spec.dest, "").strip() != self.form.values.get(spec.dest, "").strip()
            if isinstance(row, Widget) and row.has_class("-changed") != changed:
                row.set_class(changed, "-changed")

    def _show_report(self) -> None:
        if self.preview is not None:
            self.query_one("#editor-report", Static).update(self._report(self.preview), layout=False)

    def _report(self, preview: Preview) -> RenderableType:
        parts: list[RenderableType] = []
        for problem in preview.problems:
            parts.append(Text(f"✖ {problem}", style="bold red"))
        plan = preview.plan
        if plan is not None:
            for error in plan.report.errors:
                parts.append(Text(f"✖ {error.message}", style="bold red"))
            for warning in plan.report.warnings:
                parts.append(Text(f"! {warning.message}", style="yellow"))
            if preview.changes:
                parts.append(Text("What the server will really run:", style="bold"))
                parts.extend(Text(f"  {change}", style="cyan") for change in preview.changes)
        if self.error:
            parts.append(Text(self.error, style="bold red"))
        parts.append(Text(""))
        parts.append(self._verdict(preview))
        parts.extend(self._restart_lines())
        prediction = self._prediction(preview)  # under the verdict: on a small terminal ctrl+s stays in sight
        if prediction:
            parts.append(Text(""))
            parts.extend(prediction)
        return Group(*parts)

    def _prediction(self, preview: Preview) -> list[RenderableType]:
        if not self.predicts:
            return []
        forecast = self.forecast if preview.ok else None
        cost = f"a restart: ~{duration_text(self.restart_cost.median_s)}" if self.restart_cost is not None else ""
        lines = editor_lines(
            self.foresight, forecast, self.running_forecast, unreadable=self.foresight_error, restart_cost=cost
        )
        return _rendered(lines)

    def _restart_lines(self) -> list[RenderableType]:
        """What a restart of this host costs, and the fields that would shorten the phase that takes most of it (each
        one the rules accept on the form as it is: console.core.apply.shorter_start_offers)."""
        if self.form is None:
            return []
        lines: list[RenderableType] = [cost_line(self.restart_cost, self.label)]
        if self.restart_cost is None or self.read_only:
            return lines
        offers = shorter_start_offers(self.form, self.values(), self.restart_cost.dominant)
        if offers:
            said = ", ".join(f"{self.form.field(dest).label} {value}" for dest, value in offers)
            lines.append(Text(f"  shorter with {said} (under faster restarts)", style="cyan"))
        return lines

    def _verdict(self, preview: Preview) -> Text:
        if self.read_only:
            return Text(f"Apply is off: {self.read_only}", style="yellow")
        if preview.problems or (preview.plan is not None and not preview.plan.ok):
            return Text("Apply is blocked: fix what is marked ✖ above", style="bold red")
        if not preview.changed:
            return Text("Nothing to apply: the form is the unit as it is", style="dim")
        count = len(preview.edits.set_flags) + len(preview.edits.unset_flags) + len(preview.edits.set_env)
        count += len(preview.edits.unset_env)
        plural = "s" * (count != 1)
        return Text(f"ctrl+s: apply {count} change{plural} (the diff and a confirmation first)", style="green")

    # -- intents -------------------------------------------------------------------------------------------

    def check_action(self, action: str, parameters: tuple[object, ...]) -> bool | None:
        # Apply is off in the footer only for what lasts (read-only, an apply under way). Errors and an unchanged
        # form block it in action_apply, with the report saying why: toggling the footer at every keystroke
        # composes it again each time (~25 ms a key, most of the rule report's latency).
        if action == "apply" and (self.read_only or self.busy):
            return None
        return True

    def action_close(self) -> None:
        self.dismiss(None)

    def action_reset(self) -> None:
        if self.form is not None:
            self._fill(dict(self.form.values))

    def action_apply(self) -> None:
        preview = self.preview
        if self.check_action("apply", ()) is None or preview is None:
            return
        if not preview.ok:
            self.notify("Apply is blocked: fix what the report marks ✖ first.", severity="error")
        elif not preview.changed:
            self.notify("Nothing to apply: the form is the unit as it is.")
        else:
            self._plan(self.values())

    @work(exclusive=True, group="editor-apply")
    async def _plan(self, values: dict[str, str]) -> None:
        assert self.preview is not None
        if self.apply_to_deployment is not None:
            self.busy = True
            try:
                await self.apply_to_deployment(self.preview.edits)
            finally:
                self.busy = False
                self.refresh_bindings()
            if self.on_applied is not None:
                self.on_applied()
            self.dismiss(None)
            return
        self.busy = True
        self.error = ""
        try:
            pending = await plan_apply(self.session, self.preview.edits)
        except UnitLocked as exc:
            who = exc.holder or "another console"
            self.error = f"The unit is locked: {who}. Nothing was changed; wait for it to finish."
            self.notify(self.error, title="locked", severity="error", timeout=10)
            return
        except (HostError, ValueError) as exc:
            self.error = f"Cannot plan the apply: {exc}"
            return
        finally:
            self.busy = False
            if self.preview is not None:
                with unless_closing(self):
                    self.query_one("#editor-report", Static).update(self._report(self.preview), layout=False)
            self.refresh_bindings()
        if not pending.needs_confirmation:
            result = await pending.abort()
            self.notify(result.error or "nothing to change", severity="warning")
            return
        unit = self.session.service.unit
        warnings = (Text(f"! {w.message}", style="yellow") for w in pending.plan.report.warnings)
        body = Group(diff_text(pending.plan.diff), *warnings, Text(""), cost_line(pending.restart_cost, self.label))
        confirmed = await self.app.push_screen_wait(
            ConfirmScreen(f"Write this unit to {self.label} and restart {unit}?", body, danger=True)
        )
        if not confirmed:
            await pending.abort("not confirmed; nothing was changed")
            self.notify("not applied; nothing was changed", timeout=4)
            return

        def done(result: ApplyResult) -> None:
            logs = self.session.workspace.logs if self.session.workspace else None
            if result.state is ApplyState.VERIFIED and logs is not None:
                record_applied(logs, self.label, unit, values, set(self.session.secrets.values))
            if self.on_applied is not None:
                self.on_applied()

        await self.app.push_screen_wait(
            apply_progress(pending, title=f"Applying to {self.label} ({unit})", on_done=done)
        )
        self.dismiss(None)


def _rendered(lines: list[Line]) -> list[RenderableType]:
    """The prediction's lines, each level's figures in aligned columns (a narrow report wraps a band in its own
    column, not under the level)."""
    out: list[RenderableType] = []
    table: Table | None = None
    for line in lines:
        if line.kind != "figures":
            table = None
            out.append(Text(line.text, style=PREDICTION_STYLES[line.kind]))
            continue
        if table is None:
            table = Table(box=None, show_header=False, pad_edge=False, padding=(0, 0, 0, 1))
            table.add_column(no_wrap=True)  # C=48:
            table.add_column(justify="right", no_wrap=True)  # the running setup's figure →
            table.add_column(justify="right", no_wrap=True)  # the form's
            table.add_column()  # the band
            out.append(table)  # not indented: at 80 columns the band keeps the width of "-22% /"
        table.add_row(*line.cells)
    return out
