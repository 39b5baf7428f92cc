"""Host profiles (`profiles/NAME.toml`) as pydantic models: the one parser of that file.

    [host]
    ssh = "ops@gpu-01:22"        # or an ~/.ssh/config alias; transport = "ssh" (default) | "local" | "demo"
    unit = "sglang.service"
    sudo = true
    gpu_command = ["nvidia-smi"] # argv that replaces nvidia-smi
    control = "/run/..."         # transport = "demo": the demo host's control socket

    [sglang]
    host = "127.0.0.1"           # where SGLang listens, as seen from the host
    port = 30000
    api_key_env = "SGLANG_API_KEY"
    sglang_version = "0.5.9"     # the version the rules use when the server does not answer

    [freeze]
    document = "~/production_{name}.md"   # where `opsconsole freeze` writes the production document on the host

    [slo]                         # what bench and tune hold this host's levels to without --slo (console.bench.slo)
    ttft_p95 = "800ms"
    tpot_p95 = "60ms"

A malformed profile raises ProfileError naming the file, the key and what was expected. An API key never
lives in a profile: `api_key` is refused with the way to do it instead.
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from console.host.base import HostError
from console.names import is_env_name
from console.sglang.slo import parse_slo_items

DEFAULT_UNIT = "sglang.service"
DEFAULT_SGLANG_PORT = 30000

_UNIT = re.compile(r"^[A-Za-z0-9:_.@\\-]+\.service$")
_HOSTNAME = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9._-]*[A-Za-z0-9])?$")
_IP_ADDRESS = re.compile(r"^[0-9A-Fa-f:.]+$")


class ProfileError(HostError):
    """A profile (or TARGET) is malformed; the message names the file and key and says how to fix it."""


def check_unit_name(unit: str) -> str:
    if not _UNIT.match(unit):
        raise ValueError(f"expected a systemd service name such as sglang.service, not {unit!r}")
    return unit


def check_sglang_version(value: str | None) -> str | None:
    """A profile's `sglang_version`, as given, where the console supports it; ValueError (pydantic's) saying which
    releases it does where not."""
    if value is not None:
        from console.sglang.flags import UnsupportedVersionError, resolve_version

        try:
            resolve_version(value)
        except UnsupportedVersionError as exc:
            raise ValueError(str(exc)) from None
    return value


class _Section(BaseModel):
    # strict: `sudo = "yes"` or `port = "30000"` is an error, not a guess
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


class HostSection(_Section):
    transport: Literal["ssh", "local", "demo"] = "ssh"
    ssh: str | None = None
    unit: str = DEFAULT_UNIT
    sudo: bool = True
    gpu_command: list[str] | None = None
    control: str | None = None

    @field_validator("unit")
    @classmethod
    def _unit(cls, value: str) -> str:
        return check_unit_name(value)

    @field_validator("gpu_command")
    @classmethod
    def _argv(cls, value: list[str] | None) -> list[str] | None:
        if value is not None and (not value or not all(value)):
            raise ValueError('expected a non-empty list of words, e.g. ["nvidia-smi"]')
        return value

    @model_validator(mode="after")
    def _reachable(self) -> HostSection:
        if self.transport == "ssh" and not self.ssh:
            raise ValueError('transport "ssh" needs ssh = "user@host:port" or an ~/.ssh/config alias')
        if self.transport == "demo" and not self.control:
            raise ValueError('transport "demo" needs control = "PATH" (the demo\'s control socket)')
        return self


class SglangSection(_Section):
    host: str = "127.0.0.1"
    port: Annotated[int, Field(ge=1, le=65535)] = DEFAULT_SGLANG_PORT
    api_key_env: str | None = None
    sglang_version: str | None = None

    @model_validator(mode="before")
    @classmethod
    def _no_stored_key(cls, data: Any) -> Any:
        if isinstance(data, dict) and "api_key" in data:
            raise ValueError(
                "api_key must not be stored in a profile; "
                'put the key in an environment variable and write api_key_env = "NAME"'
            )
        return data

    @field_validator("host")
    @classmethod
    def _host(cls, value: str) -> str:
        if not (_HOSTNAME.match(value) or _IP_ADDRESS.match(value)):
            raise ValueError(f"expected a host name or address, not {value!r}")
        return value

    @field_validator("api_key_env")
    @classmethod
    def _env_name(cls, value: str | None) -> str | None:
        if value is not None and not is_env_name(value):
            raise ValueError(f"expected an environment variable name such as SGLANG_API_KEY, not {value!r}")
        return value

    @field_validator("sglang_version")
    @classmethod
    def _version(cls, value: str | None) -> str | None:
        return check_sglang_version(value)


class FreezeSection(_Section):
    # The production document's path on the host: absolute or in the SSH user's home (~/), {name} = the snapshot.
    document: str | None = None

    @field_validator("document")
    @classmethod
    def _document(cls, value: str | None) -> str | None:
        if value is None:
            return value
        if any(ord(c) < 0x20 or ord(c) == 0x7F for c in value):
            raise ValueError("expected a path without control characters or newlines")
        if not value.startswith(("/", "~/")) or value.endswith("/"):
            raise ValueError(
                f"expected a file path, absolute or under ~/ (e.g. ~/production_{{name}}.md), not {value!r}"
            )
        return value


class Profile(_Section):
    host: HostSection
    sglang: SglangSection = SglangSection()
    freeze: FreezeSection = FreezeSection()
    slo: dict[str, str | int | float] = Field(default_factory=dict)

    @field_validator("slo")
    @classmethod
    def _slo(cls, value: dict[str, str | int | float]) -> dict[str, str | int | float]:
        if value:
            parse_slo_items(value, where="")  # the grammar --slo takes, one bound a key
        return value

    def slo_limits(self) -> tuple[tuple[str, float], ...]:
        """The [slo] bounds as (key, limit in ms), () without any."""
        return tuple(parse_slo_items(self.slo).to_json().items()) if self.slo else ()


def _describe(error: Any) -> str:
    where = error["loc"]
    section, key = (where[0], ".".join(str(p) for p in where[1:])) if where else ("", "")
    place = f"[{section}] {key}".strip() if key else (f"[{section}]" if section else "the file")
    message = str(error["msg"]).removeprefix("Value error, ").replace("Input should be", "expected")
    if error["type"] == "extra_forbidden":
        message = "unknown key (check its spelling; the keys are listed in profiles/example-gpu-host.toml)"
    elif error["type"] == "missing":
        message = "missing"
    elif "input" in error and error["type"] not in ("value_error", "assertion_error"):
        message += f" (got {error['input']!r})"
    return f"{place}: {message}"


def parse_profile(data: dict[str, Any], *, where: str) -> Profile:
    """A profile from its parsed TOML; ProfileError names `where`, the key and what was expected."""
    try:
        return Profile.model_validate(data)
    except ValidationError as exc:
        problems = "; ".join(_describe(e) for e in exc.errors())
        raise ProfileError(f"{where}: {problems}") from None


def load_profile(path: Path) -> Profile:
    try:
        data = tomllib.loads(path.read_text())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ProfileError(f"{path}: not valid TOML ({exc}); fix the file or remove it") from None
    except OSError as exc:
        raise ProfileError(f"{path}: cannot be read ({exc.strerror})") from None
    return parse_profile(data, where=str(path))
