"""The switch to a new unit as one command on a systemd host (SystemdService.switch): one round trip instead of three.

An apply needs, in this order: the service's state and the journal's newest cursor as they are before anything
changes (to tell the new process from the old one, and its journal lines from older ones), the unit backed up and
written atomically, daemon-reload, restart. Sent as separate commands that is three round trips (the reads go beside
the write, then daemon-reload, then restart), a second each on a link with a 300 ms round trip. The script does the
same steps in the same order, each only after the one before it succeeded, and reports every step after a marker
line with its exit status, so that the caller knows exactly how far it got and why it stopped. Its stdin is the new
unit text (read by the write step only).

The apply's checks do not move: the plan was validated before, the write is the same backup + atomic rename
(console.host.systemd._WRITE_SCRIPT), and the start is watched, verified and rolled back by the caller as before.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from console.host.base import HostError, ServiceState, UnitBackup
from console.host.journal import parse_journal_line

MARKER = "@@opsconsole-switch@@"
STEPS = ("state", "cursor", "write", "daemon-reload", "restart")

# $1 the unit, $2 the properties for `systemctl show`, $3 the backup's suffix; runs as root (sudo -n sh -c, which the
# documented sudoers rule allows). A failed state read stops it before anything changes; the cursor is a nicety (the
# phases shown), so its failure does not. Only `cat` reads stdin.
SWITCH_SCRIPT = f"""u=$1 m={MARKER}
env TZ=UTC systemctl --no-pager show "$u" -p "$2" </dev/null 2>&1; r=$?; echo "$m state $r"; [ $r = 0 ] || exit 0
journalctl -u "$u" -o json --all --no-pager -n 1 </dev/null 2>&1; echo "$m cursor $?"
(set -e; p=$(systemctl --no-pager show "$u" -p FragmentPath --value </dev/null)
 [ -n "$p" ] || {{ echo "systemd reports no unit file (FragmentPath) for $u"; exit 4; }}
 b="$p$3"; t="$p.opsconsole-tmp"
 cp -p -- "$p" "$b"; cat > "$t"; chmod --reference="$p" -- "$t"; mv -f -- "$t" "$p"; printf '%s\\n' "$b") 2>&1
r=$?; echo "$m write $r"; [ $r = 0 ] || exit 0
systemctl --no-pager daemon-reload </dev/null 2>&1; r=$?; echo "$m daemon-reload $r"; [ $r = 0 ] || exit 0
systemctl --no-pager restart "$u" </dev/null 2>&1; echo "$m restart $?"
"""


@dataclass(frozen=True)
class UnitSwitch:
    """How far a switch got. `before` and `cursor`: the state and the journal's position before anything changed;
    `backup`: where the old unit was copied (written); `failed`: the first step that failed, with its output in
    `error` (None: every step ran, the service was restarted with the new unit)."""

    before: ServiceState | None
    cursor: str | None
    backup: UnitBackup | None
    failed: str | None = None
    error: str = ""

    @property
    def written(self) -> bool:
        return self.backup is not None

    @property
    def reloaded(self) -> bool:
        return self.written and self.failed != "daemon-reload"


def parse_switch(stdout: str, parse_state: Callable[[str], ServiceState]) -> UnitSwitch:
    """SWITCH_SCRIPT's output -> how far it got, `parse_state` reading `systemctl show`'s (parse_show). Pure. A step
    that never reported (the script stopped, or its output was cut) counts as failed with what it printed."""
    outputs: dict[str, tuple[int, str]] = {}
    pending: list[str] = []
    for line in stdout.splitlines():
        parts = line.split(" ")
        if len(parts) == 3 and parts[0] == MARKER and parts[1] in STEPS and parts[2].lstrip("-").isdigit():
            outputs[parts[1]] = (int(parts[2]), "\n".join(pending))
            pending = []
        else:
            pending.append(line)
    status, text = outputs.get("state", (None, "\n".join(pending)))
    if status != 0:
        return UnitSwitch(None, None, None, "state", text.strip() or "no answer")
    try:
        before: ServiceState | None = parse_state(text)
    except HostError as exc:
        before = None  # the unit cannot be read as systemd describes it: the write step says why it stopped
        state_error = str(exc)
    else:
        state_error = ""
    cursor = None
    status, text = outputs.get("cursor", (1, ""))
    if status == 0:
        entries = [parse_journal_line(line) for line in text.splitlines()]
        found = [e for e in entries if e is not None]
        cursor = found[-1].cursor if found else None
    for step in ("write", "daemon-reload", "restart"):
        if step not in outputs:
            left = "\n".join(pending).strip()
            return _stopped(before, cursor, outputs, step, left or state_error or f"the {step} step did not report")
        status, text = outputs[step]
        if status != 0:
            return _stopped(before, cursor, outputs, step, text.strip() or f"exit status {status}")
    return UnitSwitch(before, cursor, _backup(outputs))


def _backup(outputs: dict[str, tuple[int, str]]) -> UnitBackup | None:
    status, text = outputs.get("write", (1, ""))
    lines = text.strip().splitlines()
    return UnitBackup(path=lines[-1]) if status == 0 and lines else None


def _stopped(
    before: ServiceState | None, cursor: str | None, outputs: dict[str, tuple[int, str]], step: str, error: str
) -> UnitSwitch:
    return UnitSwitch(before, cursor, _backup(outputs), step, error)
