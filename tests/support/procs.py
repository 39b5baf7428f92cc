"""This machine's processes as /proc shows them, for tests that check what a command left running."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path


def _state_and_parent(pid: int) -> tuple[str, int] | None:
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:  # ended while we looked
        return None
    fields = stat.rsplit(")", 1)[1].split()  # after the command name, which may hold spaces and parentheses
    return fields[0], int(fields[1])


def _pids() -> Iterator[int]:
    return (int(entry.name) for entry in Path("/proc").iterdir() if entry.name.isdigit())


def alive(pid: int) -> bool:
    """Running and not a zombie (a killed process reparented to an init may be reaped late)."""
    found = _state_and_parent(pid)
    return found is not None and found[0] != "Z"


def children_of(pid: int) -> list[int]:
    return [child for child in _pids() if (found := _state_and_parent(child)) is not None and found[1] == pid]


def processes_with(marker: str) -> list[int]:
    """Live processes whose argv holds `marker`."""
    found = []
    for pid in _pids():
        try:
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
        except OSError:
            continue
        if marker.encode() in cmdline and alive(pid):
            found.append(pid)
    return found
