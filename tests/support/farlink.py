"""A testbed host reached over a long link: an ssh_config alias whose ProxyCommand delays every byte
(tests/support/delayproxy.py), and a profile of that name, next to the host's own.

    alias = add_far_alias(host, delay_ms=150)     # "gpu1-far": 300 ms round trip, same host, same key
    opsconsole(host, "status", alias, "--json")
"""

from __future__ import annotations

import sys
from pathlib import Path

from tests.testbed.host import GpuHost

DELAY_PROXY = Path(__file__).resolve().with_name("delayproxy.py")


def add_far_alias(host: GpuHost, delay_ms: float = 150.0) -> str:
    """Add `<alias>-far` (once) to the host's client ssh_config and workspace profiles; returns the alias."""
    alias = f"{host.alias}-far"
    config = host.ssh_config.read_text()
    if f"Host {alias}\n" not in config:
        host.ssh_config.write_text(
            config + f"Host {alias}\n"
            f"    HostName {host.address}\n"
            f"    Port {host.ssh_port}\n"
            f"    User {host.user}\n"
            f"    IdentityFile {host.client_key}\n"
            f"    IdentitiesOnly yes\n"
            f"    UserKnownHostsFile {host.known_hosts}\n"
            f"    StrictHostKeyChecking yes\n"
            f"    ProxyCommand {sys.executable} {DELAY_PROXY} --delay-ms {delay_ms:g} %h %p\n"
        )
        profile = (host.workspace / "profiles" / f"{host.alias}.toml").read_text()
        (host.workspace / "profiles" / f"{alias}.toml").write_text(
            profile.replace(f'ssh = "{host.alias}"', f'ssh = "{alias}"')
        )
    return alias
