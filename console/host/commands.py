"""Turning argv lists into remote shell command lines, and keeping secrets out of what gets logged.

Every value that reaches a remote shell goes through `shell_command`: each argument is checked and
quoted with shlex.join, so a unit name or flag value can never be interpreted by the remote shell.
"""

from __future__ import annotations

import shlex
from collections.abc import Sequence

from console.host.base import HostError, SudoPasswordRequired
from console.secrets import redact_command

SUDO_PREFIX = ("sudo", "-n", "--")


def shell_command(argv: Sequence[str], *, sudo: bool = False) -> str:
    """One command line for a POSIX shell; `sudo -n` (never a password prompt) when root is needed."""
    if not argv:
        raise HostError("empty command")
    for arg in argv:
        if not isinstance(arg, str):
            raise HostError(f"command argument {arg!r} is not a string")
        if "\x00" in arg:
            raise HostError("command argument contains a NUL byte")
    return shlex.join([*SUDO_PREFIX, *argv] if sudo else list(argv))


def sudo_wants_password(stderr: str) -> bool:
    text = stderr.lower()
    return "sudo:" in text and ("password is required" in text or "a terminal is required" in text)


def sudo_error(host: str, user: str | None, argv: Sequence[str]) -> SudoPasswordRequired:
    who = user or "YOUR_USER"
    return SudoPasswordRequired(
        f"sudo on {host} asked for a password to run `{redact_command(shlex.join(argv))}`. opsconsole only uses "
        f"sudo non-interactively (sudo -n). Add a rule on the host with `visudo -f /etc/sudoers.d/opsconsole`:\n"
        f"  {who} ALL=(root) NOPASSWD: /usr/bin/systemctl, /usr/bin/journalctl, /usr/bin/sh, /usr/bin/cat\n"
        f"(sh writes the unit file atomically with its backup; cat reads a unit that is not world-readable), "
        f"or set sudo = false in the profile if {who} can do this without root."
    )
