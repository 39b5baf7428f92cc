"""What the ssh_config makes of a target's host: the HostName ssh would connect to, read with asyncssh's own parser
from the files the SSH transport reads (the target's --ssh-config, else ~/.ssh/config).

For naming a host the way others know it: Prometheus labels a scrape with the address it scraped
(instance="10.0.0.5:30000"), while a profile says `ssh = "gpu-a"` and leaves the address to the ssh_config. Nothing
is connected here; the connection reads the config again itself (console.host.ssh)."""

from __future__ import annotations

import getpass
import os
from pathlib import Path

from asyncssh.config import SSHClientConfig

from console.host.targets import Target


def ssh_config_files(target: Target) -> list[str]:
    """The ssh_config files that apply to the target: its own (like ssh -F), else ~/.ssh/config where readable."""
    if target.ssh_config:
        return list(target.ssh_config)
    default = Path("~/.ssh/config").expanduser()
    return [str(default)] if os.access(default, os.R_OK) else []


def configured_host_name(target: Target) -> str | None:
    """The HostName the ssh_config gives the target's host (the host itself where no HostName applies); None for a
    target without an SSH host, or an ssh_config that cannot be read (the connection then says why)."""
    if target.transport != "ssh" or not target.ssh_host:
        return None
    files = ssh_config_files(target)
    if not files:
        return target.ssh_host
    try:
        local_user = getpass.getuser()
    except (KeyError, OSError):
        local_user = ""
    try:
        config = SSHClientConfig.load(
            None, files, False, False, False, local_user, target.ssh_user or (), target.ssh_host, target.ssh_port or ()
        )
    except (OSError, ValueError):  # asyncssh's ConfigParseError is a ValueError
        return None
    name = config.get("Hostname", target.ssh_host)
    return name if isinstance(name, str) and name else target.ssh_host
