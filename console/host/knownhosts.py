"""known_hosts: which key a host is trusted with, fingerprints, and recording a key after confirmation.

Used by the SSH transport to explain a refused host key and by `opsconsole trust`. Nothing here ever
turns verification off: when an ssh_config says `UserKnownHostsFile none`, we refuse instead.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from enum import Enum
from pathlib import Path

import asyncssh

from console import hints
from console.host.base import AccessRefused, HostError

DEFAULT_KNOWN_HOSTS = "~/.ssh/known_hosts"


class HostKeyStatus(Enum):
    TRUSTED = "trusted"
    UNKNOWN = "unknown"
    CHANGED = "changed"


class HostKeyRefused(AccessRefused):
    """The host's key is unknown or changed; the message shows its fingerprint and what to run."""


@dataclass(frozen=True)
class HostIdentity:
    """How known_hosts names a host: `host` for port 22, `[host]:port` otherwise (or the HostKeyAlias)."""

    host: str
    port: int
    alias: str | None = None

    @property
    def name(self) -> str:
        base = self.alias or self.host
        return base if self.port == 22 else f"[{base}]:{self.port}"

    @property
    def lookup_port(self) -> int | None:
        return None if self.port == 22 else self.port


def fingerprint(key: asyncssh.SSHKey) -> str:
    return str(key.get_fingerprint("sha256"))


def known_hosts_files(configured: list[str] | None) -> list[Path]:
    """The files asyncssh will check, as ssh would: UserKnownHostsFile from the config, else the default."""
    if configured is None:
        raise HostError(
            "the ssh_config sets UserKnownHostsFile none, which would disable host key verification; "
            "opsconsole always verifies host keys: point UserKnownHostsFile at a file instead"
        )
    paths = configured or [DEFAULT_KNOWN_HOSTS]
    return [Path(os.path.expanduser(p)) for p in paths]


def key_status(files: list[Path], identity: HostIdentity, key: asyncssh.SSHKey) -> tuple[HostKeyStatus, list[str]]:
    """Is `key` trusted for this host? Returns the status and the fingerprints currently recorded."""
    recorded: list[asyncssh.SSHKey] = []
    for path in files:
        if not path.is_file():
            continue
        try:
            known = asyncssh.read_known_hosts(str(path))
        except (ValueError, OSError) as exc:
            raise HostError(f"cannot read known_hosts file {path}: {exc}") from None
        trusted, *_rest = known.match(identity.alias or identity.host, "", identity.lookup_port)
        recorded.extend(trusted)
    prints = [fingerprint(k) for k in recorded]
    if not recorded:
        return HostKeyStatus.UNKNOWN, prints
    if any(k.public_data == key.public_data for k in recorded):
        return HostKeyStatus.TRUSTED, prints
    return HostKeyStatus.CHANGED, prints


def refusal(label: str, identity: HostIdentity, key: asyncssh.SSHKey, status: HostKeyStatus) -> HostKeyRefused:
    new = f"{key.get_algorithm()} {fingerprint(key)}"
    if status is HostKeyStatus.CHANGED:
        return HostKeyRefused(
            f"the host key of {identity.name} has CHANGED (now {new}). This can mean someone is intercepting "
            f"the connection, or the host was reinstalled. Check the fingerprint with the host's administrator, "
            f"then run `{hints.TRUST.line(HOST=label)}` to replace the recorded key."
        )
    return HostKeyRefused(
        f"the host key of {identity.name} is not in known_hosts ({new}). Check the fingerprint, then run "
        f"`{hints.TRUST.line(HOST=label)}` to record it."
    )


def record_key(path: Path, identity: HostIdentity, key: asyncssh.SSHKey, *, replace: bool) -> None:
    """Append `name key` to known_hosts; with replace, drop this host's old plain entries first."""
    path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
    lines = path.read_text().splitlines() if path.is_file() else []
    if replace:
        lines = [line for line in lines if not _names_host(line, identity.name)]
    public = key.export_public_key("openssh").decode().strip()
    lines.append(f"{identity.name} {public}")
    tmp = path.with_name(path.name + ".tmp")
    tmp.write_text("\n".join(lines) + "\n")
    os.chmod(tmp, 0o600)
    os.replace(tmp, path)


def _names_host(line: str, name: str) -> bool:
    fields = line.split()
    if not fields or fields[0].startswith("#"):
        return False
    patterns = fields[1] if fields[0].startswith("@") and len(fields) > 1 else fields[0]
    return name in patterns.split(",")
