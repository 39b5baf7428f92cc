"""systemd over a Transport: `SystemdService` implements console.host.base.ServiceManager.

Reads state with `systemctl show` (parsed by the pure `parse_show`), writes the unit atomically
(temp file in the unit's directory + rename, one remote command, with a timestamped backup next to it),
and follows the journal through console.host.journal. `lock` holds /run/lock/opsconsole-<unit>.lock
with flock(1) for as long as one streaming command lives, so two applies never interleave on one unit.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
import secrets
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime

from console.host.base import HostError, JournalEntry, ServiceState, Transport, UnitBackup, UnitLocked
from console.host.journal import follow_journal
from console.host.profile import check_unit_name
from console.host.unit_switch import MARKER, SWITCH_SCRIPT, UnitSwitch, parse_switch

SHOW_PROPERTIES = (
    "Id",
    "ActiveState",
    "SubState",
    "MainPID",
    "ExecMainStartTimestamp",
    "NRestarts",
    "Result",
    "UnitFileState",
    "NeedDaemonReload",
    "FragmentPath",
    "LoadState",
    # How the last main process ended and when the unit left/entered states (console.core.exits): SGLang 0.5.17
    # SIGKILLs itself on stop, which leaves the unit failed with Result=signal; these tell that from a crash.
    "ExecMainCode",
    "ExecMainStatus",
    "ExecMainExitTimestampMonotonic",
    "ActiveExitTimestampMonotonic",
    "InactiveEnterTimestampMonotonic",
)
_BACKUP_SUFFIX = ".bak-"

# Written as one `sh -c` so that backup, write and rename happen in one command: a dropped connection leaves
# either the old unit or the new one, never a half-written file. The unit file is found by the script itself
# (FragmentPath), so that a write costs one round trip; it prints the backup's path.
_WRITE_SCRIPT = (
    'set -e; p=$(systemctl --no-pager show "$1" -p FragmentPath --value); '
    '[ -n "$p" ] || { echo "systemd reports no unit file (FragmentPath) for $1" >&2; exit 4; }; '
    'b="$p$2"; t="$p.opsconsole-tmp"; '
    'cp -p -- "$p" "$b"; cat > "$t"; chmod --reference="$p" -- "$t"; mv -f -- "$t" "$p"; printf "%s\\n" "$b"'
)
# The unit file's path, then its backups beside it, one per line.
_BACKUPS_SCRIPT = (
    'p=$(systemctl --no-pager show "$1" -p FragmentPath --value); [ -n "$p" ] || exit 4; printf "%s\\n" "$p"; '
    'for f in "$p$2"*; do [ -f "$f" ] && printf "%s\\n" "$f"; done; true'
)

# Reading the unit in one command: what systemd says about it (LoadState, FragmentPath), a separator, the file.
UNIT_SEPARATOR = "@@opsconsole-unit-file@@"
_READ_SCRIPT = (
    'systemctl --no-pager show "$1" -p LoadState -p FragmentPath || exit 3; '
    f"echo {UNIT_SEPARATOR}; "
    'p=$(systemctl --no-pager show "$1" -p FragmentPath --value); [ -z "$p" ] || exec cat -- "$p"'
)
# `systemctl show` of the unit with its exit status after a marker, for a poll that reads other things too
# (console.host.connect: the unit and the GPUs in one command). Takes the unit and the properties as $1 and $2
# and shifts them off for what follows.
SHOW_MARKER = "@@opsconsole-show@@"
SHOW_SCRIPT = f'env TZ=UTC systemctl --no-pager show "$1" -p "$2" 2>&1; echo "{SHOW_MARKER} $?"; shift 2; '
_RESTORE_SCRIPT = 'set -e; cp -p -- "$1" "$2"; mv -f -- "$2" "$3"'
# Takes the unit's lock on fd 9 (never waiting), records the owner in the file for whoever is refused, then
# holds it while writing a heartbeat line five times a second: once the console closes the stream, dies or loses
# the connection, the next write fails (SIGPIPE; with sudo's use_pty, sudo relays it) and the lock goes with
# the shell. flock is util-linux, on every Debian/Ubuntu host; sh is already in the documented sudoers rule.
# Right after `locked` it prints the unit as read_unit reads it (base64, one line: `unit ...`), so that the plan
# that follows the lock does not wait another round trip for it.
_LOCK_SCRIPT = r"""exec 9>>"$1"
if ! flock -n 9; then printf 'busy %s\n' "$(cat -- "$1")"; exit 75; fi
printf '%s\n' "$2" > "$1"
echo locked
printf 'unit '; sh -c "$4" sh "$3" 9>&- | base64 -w0 9>&-; echo
while echo held; do sleep 0.2 9>&-; done"""
LOCK_TIMEOUT_S = 60.0  # to open the lock's channel and hear back; the lock itself never waits
LOCK_RETAKE_S = 0.5  # between attempts to take the lock back after a dropped connection

# The restore-on-exit guard (SystemdService.guard): the unit's lock, plus a copy of the unit as it was when the
# guard was taken, held by a detached watcher on the host. The watcher gives the original back (backup, atomic
# write, daemon-reload, restart) when the console's heartbeat has been silent for the grace period: the console
# died, or its connection stayed down. It stands down at once when the console disarms it (removes the copy)
# or claims it again from a new connection (writes the .alive file: a reconnected console takes over).
# Files: PREFIX.orig (the copy; its presence = armed), PREFIX.alive, PREFIX.restored, PREFIX.w.PID (the
# watcher lives), PREFIX.hb.PID (the heartbeat); PREFIX = /run/lock/opsconsole-<unit>.tune-<token>.
# The unit file is found by the script itself (FragmentPath), as _WRITE_SCRIPT does: no round trip before it.
# Without one it answers `nofile LOADSTATE` and touches nothing.
_GUARD_SCRIPT = r"""lock=$1 owner=$2 unit=$3 p=$4 ticks=$5 mode=$6 watch=$7
unit_file=$(systemctl --no-pager show "$unit" -p FragmentPath --value)
if [ -z "$unit_file" ]; then
  printf 'nofile %s\n' "$(systemctl --no-pager show "$unit" -p LoadState --value)"; exit 79
fi
date +%s%N > "$p.alive"
exec 9>>"$lock"
if [ "$mode" = take ]; then flock -n 9; else flock -w 5 9; fi || { printf 'busy %s
' "$(cat -- "$lock")"; exit 75; }
if [ -e "$p.restored" ]; then printf 'restored %s
' "$(cat -- "$p.restored")"; exit 76; fi
if [ "$mode" = take ]; then cp -p -- "$unit_file" "$p.orig" || { echo nocopy; exit 77; }; fi
[ -e "$p.orig" ] || { echo disarmed; exit 78; }
printf '%s
' "$owner" > "$lock"
w="$p.w.$$" hb="$p.hb.$$"
: > "$w"
echo 0 > "$hb"
setsid sh -c "$watch" watcher "$unit_file" "$unit" "$p" "$ticks" "$w" "$hb" </dev/null >/dev/null 2>&1 &
exec 9>&-
echo locked
i=0
while [ -e "$w" ] && echo held; do i=$((i+1)); echo "$i" > "$hb"; sleep 0.2; done
rm -f -- "$hb"
"""
_GUARD_WATCHER = r"""trap '' HUP INT PIPE TERM
unit_file=$1 unit=$2 p=$3 ticks=$4 w=$5 hb=$6
trap 'rm -f -- "$w" "$hb"' EXIT
alive=$(cat -- "$p.alive" 2>/dev/null) seen=$(cat -- "$hb" 2>/dev/null) quiet=0
while [ -e "$p.orig" ]; do
  sleep 0.2 9>&-
  now=$(cat -- "$hb" 2>/dev/null)
  if [ "$now" != "$seen" ]; then seen=$now quiet=0; else quiet=$((quiet + 1)); fi
  [ "$(cat -- "$p.alive" 2>/dev/null)" = "$alive" ] || exit 0
  [ "$quiet" -lt "$ticks" ] && continue
  stamp=$(date -u +%Y%m%dT%H%M%SZ)
  cp -p -- "$unit_file" "$unit_file.bak-$stamp"
  cat -- "$p.orig" > "$unit_file.opsconsole-tmp" &&
    chmod --reference="$unit_file" -- "$unit_file.opsconsole-tmp" &&
    mv -f -- "$unit_file.opsconsole-tmp" "$unit_file"
  systemctl daemon-reload
  systemctl restart "$unit"
  echo "$stamp" > "$p.restored"
  rm -f -- "$p.orig" "$p.alive"
  exit 0
done"""
_DISARM_SCRIPT = 'rm -f -- "$1.orig" "$1.alive" "$1.restored"'
GUARD_RELEASE_S = 5.0  # after disarming, how long to wait for the host to let go of the lock


class UnitGuard:
    """A held restore-on-exit guard (SystemdService.guard). restored_at: when the host restored the original
    unit by itself (the console was away longer than the grace period), else None."""

    def __init__(self, service: SystemdService, prefix: str) -> None:
        self.service = service
        self.prefix = prefix
        self.disarmed = False
        self.restored_at: str | None = None
        self.holder: asyncio.Task[None] | None = None

    async def disarm(self) -> None:
        """The unit is where the caller wants it: the host must not restore anything. Waits (briefly) until the
        host's watcher has let go of the lock."""
        result = await self.service.transport.run(
            ["sh", "-c", _DISARM_SCRIPT, "sh", self.prefix], sudo=self.service.sudo, timeout=30
        )
        if not result.ok:
            raise HostError(
                f"{self.service.transport.label}: disarming the restore guard failed: {result.stderr.strip()}"
            )
        self.disarmed = True
        if self.holder is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(self.holder), GUARD_RELEASE_S)


def parse_show(text: str, unit: str) -> ServiceState:
    """`systemctl show` output (KEY=VALUE lines; values may contain '=') -> ServiceState. Pure."""
    props: dict[str, str] = {}
    for line in text.splitlines():
        key, sep, value = line.partition("=")
        if sep and key and " " not in key:
            props[key] = value
    if props.get("LoadState") == "not-found":
        raise HostError(f"unit {unit} does not exist on the host (systemctl show says LoadState=not-found)")
    main_pid = _int(props.get("MainPID"))
    return ServiceState(
        unit=unit,
        active_state=props.get("ActiveState", "unknown"),
        sub_state=props.get("SubState", "unknown"),
        main_pid=main_pid if main_pid else None,
        started_at=parse_systemd_timestamp(props.get("ExecMainStartTimestamp", "")),
        n_restarts=_int(props.get("NRestarts")) or 0,
        result=props.get("Result", ""),
        unit_file_state=props.get("UnitFileState", ""),
        need_daemon_reload=props.get("NeedDaemonReload", "no") == "yes",
        fragment_path=props.get("FragmentPath") or None,
        properties=props,
    )


def _int(text: str | None) -> int | None:
    try:
        return int(text) if text else None
    except ValueError:
        return None


_TIMESTAMP = re.compile(r"^\w{3} (\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2})(?:\.\d+)? (\S+)$")


def parse_systemd_timestamp(text: str) -> datetime | None:
    """'Mon 2026-11-30 04:25:00 UTC' -> aware datetime; '' or 'n/a' -> None.

    Callers run systemctl with TZ=UTC so the zone is UTC; other zone names are read as UTC offsets
    only when numeric, otherwise the value is dropped rather than guessed.
    """
    match = _TIMESTAMP.match(text.strip())
    if not match:
        return None
    stamp, zone = match.groups()
    naive = datetime.strptime(stamp, "%Y-%m-%d %H:%M:%S")
    if zone in {"UTC", "GMT", "Z"}:
        return naive.replace(tzinfo=UTC)
    offset = re.fullmatch(r"([+-])(\d{2}):?(\d{2})", zone)
    if offset:
        from datetime import timedelta, timezone

        sign = 1 if offset.group(1) == "+" else -1
        delta = timedelta(hours=int(offset.group(2)), minutes=int(offset.group(3)))
        return naive.replace(tzinfo=timezone(sign * delta))
    return None


def _checked(unit: str) -> str:
    """The unit name, refused before it reaches a remote shell unless it is a plain service name."""
    try:
        return check_unit_name(unit)
    except ValueError as exc:
        raise HostError(f"invalid unit name: {exc}") from None


def _decoded_read(line: str) -> str | None:
    """The lock's `unit BASE64` line -> _READ_SCRIPT's output; None when it is not one (no base64 on the host)."""
    import base64
    import binascii

    if not line.startswith("unit "):
        return None
    try:
        text = base64.b64decode(line[5:], validate=True).decode("utf-8", "replace")
    except (binascii.Error, ValueError):
        return None
    return text if UNIT_SEPARATOR in text else None


def lock_path(unit: str) -> str:
    return f"/run/lock/opsconsole-{_checked(unit)}.lock"


def backup_path(fragment_path: str, now: datetime) -> str:
    return f"{fragment_path}{_BACKUP_SUFFIX}{now.astimezone(UTC).strftime('%Y%m%dT%H%M%SZ')}"


def parse_backups(listing: str, fragment_path: str) -> list[UnitBackup]:
    """`ls` of the unit's directory -> its backups (named by backup_path), newest first. Pure."""
    prefix = f"{fragment_path}{_BACKUP_SUFFIX}"
    found = []
    for line in listing.splitlines():
        path = line.strip()
        if not path.startswith(prefix):
            continue
        try:
            taken = datetime.strptime(path[len(prefix) :], "%Y%m%dT%H%M%SZ").replace(tzinfo=UTC)
        except ValueError:
            continue
        found.append(UnitBackup(path, taken))
    return sorted(found, key=lambda b: b.taken_at or datetime.min.replace(tzinfo=UTC), reverse=True)


class SystemdService:
    """The SGLang unit on a host, managed with systemctl/journalctl over a Transport."""

    def __init__(self, transport: Transport, unit: str, *, sudo: bool = True) -> None:
        self.transport = transport
        self.unit = _checked(unit)
        self.sudo = sudo
        self._locked_read: str | None = None  # the unit as the lock found it, for the next read_unit

    async def _systemctl(self, *args: str, root: bool = False) -> str:
        # Root commands run as plain `sudo -n -- systemctl ...` so that a sudoers rule naming
        # /usr/bin/systemctl matches; reads get TZ=UTC so that timestamps parse without guessing zones.
        argv = ["systemctl", "--no-pager", *args] if root else ["env", "TZ=UTC", "systemctl", "--no-pager", *args]
        result = await self.transport.run(argv, sudo=root and self.sudo, timeout=120)
        if not result.ok:
            detail = (result.stderr or result.stdout).strip()
            raise HostError(f"{self.transport.label}: `systemctl {' '.join(args)}` failed: {detail}")
        return result.stdout

    async def state(self) -> ServiceState:
        text = await self._systemctl("show", self.unit, "-p", ",".join(SHOW_PROPERTIES))
        return parse_show(text, self.unit)

    def show_script_args(self) -> list[str]:
        """$1 and $2 of SHOW_SCRIPT for this unit."""
        return [self.unit, ",".join(SHOW_PROPERTIES)]

    async def read_unit(self) -> str:
        if self._locked_read is not None:  # read by the lock a moment ago, under the lock: no other apply changed it
            path, text = self._unit_read(self._locked_read, 0)
            self._locked_read = None
            return text
        argv = ["sh", "-c", _READ_SCRIPT, "sh", self.unit]
        result = await self.transport.run(argv, timeout=30)
        path, text = self._unit_read(result.stdout, result.exit_status)
        if result.ok:
            return text
        if self.sudo:  # unit files are usually world-readable; some sites lock them down
            result = await self.transport.run(argv, sudo=True, timeout=30)
            path, text = self._unit_read(result.stdout, result.exit_status)
            if result.ok:
                return text
        raise HostError(f"{self.transport.label}: cannot read {path}: {result.stderr.strip()}")

    def _unit_read(self, stdout: str, exit_status: int) -> tuple[str, str]:
        """(unit file path, its text) from _READ_SCRIPT's output; HostError when there is no unit file."""
        props, found, text = stdout.partition(UNIT_SEPARATOR + "\n")
        if not found:
            raise HostError(f"{self.transport.label}: `systemctl show {self.unit}` failed (exit status {exit_status})")
        state = parse_show(props, self.unit)  # raises for LoadState=not-found
        if not state.fragment_path:
            raise HostError(f"{self.transport.label}: systemd reports no unit file (FragmentPath) for {self.unit}")
        return state.fragment_path, text

    async def write_unit(self, text: str) -> UnitBackup:
        suffix = backup_path("", datetime.now(UTC))
        result = await self.transport.run(
            ["sh", "-c", _WRITE_SCRIPT, "sh", self.unit, suffix], sudo=self.sudo, input=text, timeout=60
        )
        if not result.ok:
            raise HostError(
                f"{self.transport.label}: writing the unit file of {self.unit} failed: {result.stderr.strip()}"
            )
        return UnitBackup(path=result.stdout.strip())

    async def switch(self, text: str) -> UnitSwitch:
        """The state and the journal's cursor, then backup + atomic write of `text`, daemon-reload and restart, each
        step only after the one before it succeeded: one command (console.host.unit_switch). HostError when the
        command could not run (ConnectionDropped: how far it got is unknown)."""
        suffix = backup_path("", datetime.now(UTC))
        argv = ["sh", "-c", SWITCH_SCRIPT, "sh", self.unit, ",".join(SHOW_PROPERTIES), suffix]
        result = await self.transport.run(argv, sudo=self.sudo, input=text, timeout=180)  # a write, then a restart
        if MARKER not in result.stdout and not result.ok:  # not even the state was read: nothing ran
            detail = (result.stderr or result.stdout).strip()
            raise HostError(f"{self.transport.label}: switching {self.unit} to the new unit did not begin: {detail}")
        return parse_switch(result.stdout, lambda shown: parse_show(shown, self.unit))

    async def restore_unit(self, backup: UnitBackup) -> None:
        if _BACKUP_SUFFIX not in backup.path:
            raise HostError(f"{backup.path} is not an opsconsole unit backup")
        path = backup.path.split(_BACKUP_SUFFIX)[0]
        tmp = f"{path}.opsconsole-tmp"
        result = await self.transport.run(
            ["sh", "-c", _RESTORE_SCRIPT, "sh", backup.path, tmp, path], sudo=self.sudo, timeout=60
        )
        if not result.ok:
            raise HostError(f"{self.transport.label}: restoring {path} from {backup.path} failed: {result.stderr}")

    async def backups(self) -> list[UnitBackup]:
        # One command: the script finds the unit file itself (its path is the first line), then lists the
        # backups beside it; the glob expands on the host and nothing of ours is in it but that path.
        result = await self.transport.run(["sh", "-c", _BACKUPS_SCRIPT, "sh", self.unit, _BACKUP_SUFFIX], timeout=30)
        path, _, listing = result.stdout.partition("\n")
        if not result.ok or not path:
            raise HostError(f"{self.transport.label}: systemd reports no unit file (FragmentPath) for {self.unit}")
        return parse_backups(listing, path)

    async def read_backup(self, backup: UnitBackup) -> str:
        if _BACKUP_SUFFIX not in backup.path:
            raise HostError(f"{backup.path} is not an opsconsole unit backup")
        result = await self.transport.run(["cat", "--", backup.path], sudo=self.sudo, timeout=30)
        if not result.ok:
            raise HostError(f"{self.transport.label}: cannot read {backup.path}: {result.stderr.strip()}")
        return result.stdout

    async def daemon_reload(self) -> None:
        await self._systemctl("daemon-reload", root=True)

    async def restart(self) -> None:
        await self._systemctl("restart", self.unit, root=True)

    async def stop(self) -> None:
        await self._systemctl("stop", self.unit, root=True)

    async def enable(self) -> None:
        await self._systemctl("enable", self.unit, root=True)

    async def force_stop(self) -> None:
        """Stop the unit now, for a process that ignores SIGTERM (a multi-node SGLang rank >= 1 waits for rank 0's
        shutdown): the stop job is queued first, so that Restart= does not start it again, then its control group
        is killed."""
        await self._systemctl("stop", "--no-block", self.unit, root=True)
        await self._systemctl("kill", "--signal=SIGKILL", self.unit, root=True)

    def journal(
        self, *, lines: int = 100, follow: bool = False, after_cursor: str | None = None
    ) -> AsyncIterator[JournalEntry]:
        return follow_journal(
            self.transport, self.unit, sudo=self.sudo, lines=lines, follow=follow, after_cursor=after_cursor
        )

    async def _locked(self, first: asyncio.Future[str | None], path: str, *, needs: str, what: str = "") -> None:
        """Wait for the host's first answer to taking the lock: "locked", or UnitLocked naming the holder, or a
        HostError saying what the host lacks."""
        try:
            answer = await asyncio.wait_for(first, LOCK_TIMEOUT_S)
        except TimeoutError:
            raise HostError(
                f"{self.transport.label}: taking the lock {path} got no answer in {LOCK_TIMEOUT_S} s"
            ) from None
        if answer is not None and answer.startswith("busy"):
            raise UnitLocked(self.transport.label, self.unit, answer.removeprefix("busy").strip())
        if answer is not None and answer.startswith("nofile"):  # the guard's script found no unit file
            not_found = answer.removeprefix("nofile").strip() == "not-found"
            raise HostError(
                f"unit {self.unit} does not exist on the host (systemctl show says LoadState=not-found)"
                if not_found  # parse_show's words for it
                else f"{self.transport.label}: systemd reports no unit file (FragmentPath) for {self.unit}"
            )
        if answer != "locked":
            root = " (as root through sudo -n)" if self.sudo else ""
            raise HostError(
                f"{self.transport.label}: could not take the lock {path}{what}{root} (answer: {answer!r}); the "
                f"host needs {needs} and a writable /run/lock"
            )

    @contextlib.asynccontextmanager
    async def lock(self, owner: str) -> AsyncIterator[None]:
        path = lock_path(self.unit)
        owner = " ".join(owner.split())  # one line in the lock file
        argv = ["sh", "-c", _LOCK_SCRIPT, "sh", path, owner, self.unit, _READ_SCRIPT]
        first: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()
        holder = asyncio.create_task(self._hold(lambda _retake: argv, owner, first, reads_unit=True))
        try:
            await self._locked(first, path, needs="flock (util-linux)")
            yield
        finally:
            self._locked_read = None
            holder.cancel()  # closes the stream, which releases the lock on the host
            await asyncio.gather(holder, return_exceptions=True)

    @contextlib.asynccontextmanager
    async def guard(self, owner: str, *, grace_s: float = 30.0) -> AsyncIterator[UnitGuard]:
        """The unit's lock (as lock(): UnitLocked when another holds it), and a restore-on-exit guard: the host
        keeps a copy of the unit as it is now and writes it back (then restarts the service) if this console's
        heartbeat stays silent for grace_s — the console died, or its link stayed down — unless the guard was
        disarmed first (UnitGuard.disarm(): the caller put the unit where it wants it) or a new connection of
        this console claimed it. See _GUARD_SCRIPT. Needs flock and setsid (util-linux) and GNU date."""
        path = lock_path(self.unit)
        owner = " ".join(owner.split())
        handle = UnitGuard(self, f"/run/lock/opsconsole-{self.unit}.tune-{secrets.token_hex(6)}")
        ticks = str(max(1, round(grace_s * 5)))

        def argv(retake: bool) -> list[str]:
            mode = "retake" if retake else "take"
            return ["sh", "-c", _GUARD_SCRIPT, "sh", path, owner, self.unit, handle.prefix, ticks, mode, _GUARD_WATCHER]

        def stands_down(answer: str | None) -> bool:
            """The guard is over: disarmed here or on the host, or the host gave the original back while this
            console was away (nothing left to hold)."""
            if handle.disarmed or answer == "disarmed":
                return True
            if answer is not None and answer.startswith("restored"):
                handle.restored_at = answer.removeprefix("restored").strip() or "?"
                return True
            return False

        first: asyncio.Future[str | None] = asyncio.get_running_loop().create_future()
        handle.holder = asyncio.create_task(self._hold(argv, owner, first, stands_down=stands_down))
        try:
            await self._locked(first, path, needs="flock and setsid (util-linux)", what=" with a restore guard")
            yield handle
        finally:
            handle.holder.cancel()  # closes the stream; a disarmed watcher has let go already
            await asyncio.gather(handle.holder, return_exceptions=True)

    async def _hold(
        self,
        argv: Callable[[bool], list[str]],
        owner: str,
        first: asyncio.Future[str | None],
        *,
        reads_unit: bool = False,
        stands_down: Callable[[str | None], bool] = lambda _answer: False,
    ) -> None:
        """Take the lock (or the guard), hand the host's first answer to `first`, and keep it until cancelled.

        `argv(retake)` is the command; `reads_unit`: the lock's script prints the unit after `locked`, which the
        next read_unit takes. The heartbeat is read to the end: an unread channel would stall the writer on the
        host, and a stalled writer never notices that its reader went away. When a dropped connection ends the
        stream, it is taken again (retake: for the guard, a claim that makes the old watcher stand down) once the
        host lets go of the old holder (the same owner: this apply, on the dead channel); if another apply got it
        in between, or `stands_down(answer)` says the guard is over, there is nothing left to hold.
        """
        retake = False
        while True:
            answer: str | None = None
            try:
                async for line in self.transport.stream(argv(retake), sudo=self.sudo):
                    if answer is None:
                        answer = line
                        if (line != "locked" or not reads_unit) and not first.done():
                            first.set_result(line)
                    elif reads_unit and not first.done():  # the unit's read, after `locked`
                        self._locked_read = _decoded_read(line)
                        first.set_result(answer)
            except HostError as exc:
                if not first.done():
                    first.set_exception(exc)
            if not first.done():
                first.set_result(answer)
            if first.cancelled() or first.exception() is not None or first.result() != "locked":
                return  # never held: the caller reports why
            if stands_down(answer):
                return
            if answer is not None and answer.startswith("busy") and answer.removeprefix("busy").strip() != owner:
                return  # another apply took it while this one was cut off
            retake = True
            await asyncio.sleep(LOCK_RETAKE_S)
