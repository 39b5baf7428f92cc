"""TARGET resolution: a profile in profiles/NAME.toml, an ~/.ssh/config alias, or [user@]host[:port].

Pure apart from reading the profile file: no network, no SSH. The result says how to reach the host
(ssh / local / demo), which unit runs SGLang, and where its HTTP API listens on the host.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from console.host.profile import DEFAULT_SGLANG_PORT, DEFAULT_UNIT, Profile, ProfileError, load_profile

TransportKind = Literal["ssh", "local", "demo"]

_HOSTNAME = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?$")
_USER = re.compile(r"^[A-Za-z_][A-Za-z0-9._-]*$")
_PROFILE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
LOCAL_NAMES = frozenset({"local", "localhost"})

# A malformed TARGET is reported like a malformed profile.
TargetError = ProfileError


@dataclass(frozen=True)
class SglangEndpoint:
    """Where SGLang listens, as seen from the host itself (normally loopback, reached via a port forward)."""

    host: str = "127.0.0.1"
    port: int = DEFAULT_SGLANG_PORT
    api_key_env: str | None = None  # the key itself is read from the console's environment, never stored

    def api_key(self) -> str | None:
        if self.api_key_env is None:
            return None
        return os.environ.get(self.api_key_env) or None


@dataclass(frozen=True)
class Target:
    label: str  # what the operator typed (profile name, alias or user@host:port)
    transport: TransportKind
    ssh_host: str | None = None  # alias or host name, handed to asyncssh which applies ssh_config
    ssh_user: str | None = None
    ssh_port: int | None = None
    ssh_config: tuple[str, ...] = ()  # explicit ssh_config files (like ssh -F); empty = ~/.ssh/config
    unit: str = DEFAULT_UNIT
    sudo: bool = True
    gpu_command: tuple[str, ...] | None = None  # argv that replaces `nvidia-smi`
    sglang: SglangEndpoint = SglangEndpoint()
    control: str | None = None  # demo transport: the demo's control socket
    profile_path: Path | None = None
    sglang_version: str | None = None  # the profile's: what the rules use when the server does not answer
    production_doc: str | None = None  # the profile's [freeze] document: where freeze writes the document
    slo: tuple[tuple[str, float], ...] = ()  # the profile's [slo]: (key, limit in ms), console.bench.slo


def parse_destination(text: str) -> tuple[str | None, str, int | None]:
    """`[user@]host[:port]` (IPv6 as `[addr]:port`) -> (user, host, port). Raises TargetError."""
    user: str | None = None
    rest = text.strip()
    if "@" in rest:
        user, rest = rest.rsplit("@", 1)
        if not _USER.match(user):
            raise TargetError(f"invalid user name {user!r} in {text!r}; expected [user@]host[:port]")
    port: int | None = None
    if rest.startswith("["):
        host, sep, tail = rest[1:].partition("]")
        if not sep or not host:
            raise TargetError(f"unbalanced brackets in {text!r}; write IPv6 hosts as [addr]:port")
        if tail:
            if not tail.startswith(":"):
                raise TargetError(f"unexpected {tail!r} after ] in {text!r}")
            port = _parse_port(tail[1:], text)
        if not re.fullmatch(r"[0-9A-Fa-f:.]+", host):
            raise TargetError(f"invalid IPv6 address {host!r} in {text!r}")
        return user, host, port
    if rest.count(":") == 1:
        rest, port_text = rest.split(":")
        port = _parse_port(port_text, text)
    if not _HOSTNAME.match(rest):
        raise TargetError(
            f"invalid host {rest!r} in {text!r}: use a profile name, an ~/.ssh/config alias or [user@]host[:port]"
        )
    return user, rest, port


def _parse_port(text: str, whole: str) -> int:
    if not text.isdigit() or not 0 < int(text) < 65536:
        raise TargetError(f"invalid port {text!r} in {whole!r}; expected a number from 1 to 65535")
    return int(text)


def target_from_profile(name: str, profile: Profile, *, path: Path | None, ssh_config: tuple[str, ...]) -> Target:
    """Build a Target from a validated profile. Raises TargetError for a malformed ssh destination."""
    host, sglang = profile.host, profile.sglang
    ssh_host = ssh_user = ssh_port = None
    if host.transport == "ssh":
        assert host.ssh is not None  # the model requires it for ssh
        try:
            ssh_user, ssh_host, ssh_port = parse_destination(host.ssh)
        except TargetError as exc:
            raise TargetError(f"{path or f'profile {name}'}: [host] ssh: {exc}") from None
    return Target(
        label=name,
        transport=host.transport,
        ssh_host=ssh_host,
        ssh_user=ssh_user,
        ssh_port=ssh_port,
        ssh_config=ssh_config,
        unit=host.unit,
        sudo=host.sudo,
        gpu_command=tuple(host.gpu_command) if host.gpu_command else None,
        sglang=SglangEndpoint(host=sglang.host, port=sglang.port, api_key_env=sglang.api_key_env),
        control=host.control,
        profile_path=path,
        sglang_version=sglang.sglang_version,
        production_doc=profile.freeze.document,
        slo=profile.slo_limits(),
    )


def resolve_target(text: str, *, profiles_dir: Path, ssh_config: str | None = None) -> Target:
    """TARGET -> Target: a profile if profiles/TEXT.toml exists, `local`, else an SSH destination or alias."""
    if not text or not text.strip():
        raise TargetError("empty TARGET: give a profile name, an ~/.ssh/config alias or [user@]host[:port]")
    configs = (str(Path(ssh_config).expanduser()),) if ssh_config else ()
    if configs and not Path(configs[0]).is_file():
        raise TargetError(f"--ssh-config {ssh_config}: no such file")
    if _PROFILE_NAME.match(text):
        path = profiles_dir / f"{text}.toml"
        if path.is_file():
            return target_from_profile(text, load_profile(path), path=path, ssh_config=configs)
    if text in LOCAL_NAMES:
        return Target(label=text, transport="local")
    user, host, port = parse_destination(text)
    return Target(label=text, transport="ssh", ssh_host=host, ssh_user=user, ssh_port=port, ssh_config=configs)
