"""TARGET resolution: a profile in profiles/NAME.toml, an ~/.ssh/config alias, or [user@]host[:port].

Pure apart from reading the profile file: no network, no SSH. The result says how to reach the host
(ssh / local / demo), which unit runs SGLang, and where its HTTP API listens on the host.
"""

from __future__ import annotations

import os
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from console.host.base import HostError

TransportKind = Literal["ssh", "local", "demo"]

DEFAULT_UNIT = "sglang.service"
DEFAULT_SGLANG_PORT = 30000

_HOSTNAME = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?$")
_USER = re.compile(r"^[A-Za-z_][A-Za-z0-9._-]*$")
_UNIT = re.compile(r"^[A-Za-z0-9:_.@\\-]+\.service$")
_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_PROFILE_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
LOCAL_NAMES = frozenset({"local", "localhost"})


class TargetError(HostError):
    """The TARGET or its profile is malformed; the message says how to fix it."""


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


def validate_unit(unit: str) -> str:
    if not _UNIT.match(unit):
        raise TargetError(f"invalid unit name {unit!r}: expected a systemd service name such as sglang.service")
    return unit


def target_from_profile(name: str, data: dict[str, Any], *, path: Path | None, ssh_config: tuple[str, ...]) -> Target:
    """Build a Target from a parsed profile (the TOML's top-level tables). Pure; raises TargetError."""
    where = str(path) if path else f"profile {name}"
    host = data.get("host", {})
    sglang = data.get("sglang", {})
    if not isinstance(host, dict) or not isinstance(sglang, dict):
        raise TargetError(f"{where}: [host] and [sglang] must be tables")
    unit = validate_unit(str(host.get("unit", DEFAULT_UNIT)))
    sudo = host.get("sudo", True)
    if not isinstance(sudo, bool):
        raise TargetError(f"{where}: [host] sudo must be true or false")
    gpu_command = host.get("gpu_command")
    if gpu_command is not None and (
        not isinstance(gpu_command, list) or not gpu_command or not all(isinstance(a, str) for a in gpu_command)
    ):
        raise TargetError(f'{where}: [host] gpu_command must be a list of strings, e.g. ["nvidia-smi"]')
    endpoint = _endpoint_from(sglang, where)
    kind = host.get("transport", "ssh")
    common: dict[str, Any] = {
        "label": name,
        "unit": unit,
        "sudo": sudo,
        "gpu_command": tuple(gpu_command) if gpu_command else None,
        "sglang": endpoint,
        "profile_path": path,
        "ssh_config": ssh_config,
    }
    if kind == "local":
        return Target(transport="local", **common)
    if kind == "demo":
        control = host.get("control")
        if not isinstance(control, str) or not control:
            raise TargetError(f'{where}: transport = "demo" needs control = "PATH" (the demo\'s control socket)')
        return Target(transport="demo", control=control, **common)
    if kind != "ssh":
        raise TargetError(f'{where}: [host] transport must be "ssh", "local" or "demo", not {kind!r}')
    destination = host.get("ssh")
    if not isinstance(destination, str) or not destination:
        raise TargetError(f'{where}: [host] needs ssh = "user@host:port" or an ~/.ssh/config alias')
    user, hostname, port = parse_destination(destination)
    return Target(transport="ssh", ssh_host=hostname, ssh_user=user, ssh_port=port, **common)


def _endpoint_from(sglang: dict[str, Any], where: str) -> SglangEndpoint:
    host = sglang.get("host", "127.0.0.1")
    port = sglang.get("port", DEFAULT_SGLANG_PORT)
    key_env = sglang.get("api_key_env")
    if "api_key" in sglang:
        raise TargetError(
            f"{where}: [sglang] api_key must not be stored in a profile; "
            'put the key in an environment variable and write api_key_env = "NAME"'
        )
    if not isinstance(host, str) or not (_HOSTNAME.match(host) or re.fullmatch(r"[0-9A-Fa-f:.]+", host)):
        raise TargetError(f"{where}: [sglang] host {host!r} is not a host name or address")
    if not isinstance(port, int) or isinstance(port, bool) or not 0 < port < 65536:
        raise TargetError(f"{where}: [sglang] port must be a number from 1 to 65535")
    if key_env is not None and (not isinstance(key_env, str) or not _ENV_NAME.match(key_env)):
        raise TargetError(f"{where}: [sglang] api_key_env must be an environment variable name")
    return SglangEndpoint(host=host, port=port, api_key_env=key_env)


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
            try:
                data = tomllib.loads(path.read_text())
            except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
                raise TargetError(f"{path}: not valid TOML ({exc}); fix the file or remove it") from None
            return target_from_profile(text, data, path=path, ssh_config=configs)
    if text in LOCAL_NAMES:
        return Target(label=text, transport="local")
    user, host, port = parse_destination(text)
    return Target(label=text, transport="ssh", ssh_host=host, ssh_user=user, ssh_port=port, ssh_config=configs)
