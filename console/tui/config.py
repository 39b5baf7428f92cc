"""The console's settings: `<workspace>/console.toml`, validated (an error names the file, the key and the fix).

refresh_s = 1.0              # seconds between refreshes of each host (after the previous one finished)
theme = "textual-dark"       # any Textual theme (ctrl+p -> Theme lists them)

[keys]                       # binding id = "key[,key...]" (ids: `?` in the console lists them)
edit = "E"
quit = "q,ctrl+q"

[thresholds]                 # colours: below the first light, up to the second moderate, above heavy
util = [10, 75]              # GPU utilisation % (idle dim, busy green)
memory = [95, 99]            # GPU memory used % (SGLang reserves most of it at start)
temperature = [75, 85]       # °C
power = [80, 95]             # % of the power limit

[fleet]                      # the fleet's figures from Prometheus (console.fleet.settings has every key)
prometheus = "http://prometheus:9090"
"""

from __future__ import annotations

import tomllib
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from console.errors import UsageError
from console.fleet.settings import FleetSettings

CONFIG_NAME = "console.toml"
Pair = Annotated[tuple[float, float], Field()]


class ConfigError(UsageError):
    """console.toml is malformed: exit 2 with what to fix."""


class Thresholds(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    util: Pair = (10.0, 75.0)
    memory: Pair = (95.0, 99.0)  # SGLang takes most of the memory up front (mem_fraction_static)
    temperature: Pair = (75.0, 85.0)
    power: Pair = (80.0, 95.0)

    @field_validator("util", "memory", "temperature", "power")
    @classmethod
    def _ordered(cls, value: tuple[float, float]) -> tuple[float, float]:
        if value[0] > value[1]:
            raise ValueError(f"expected [low, high] with low <= high, got {list(value)}")
        return value


class ConsoleConfig(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    refresh_s: Annotated[float, Field(gt=0.1, le=60.0)] = 1.0
    theme: str | None = None
    keys: dict[str, str] = Field(default_factory=dict)
    thresholds: Thresholds = Thresholds()
    fleet: FleetSettings = FleetSettings()

    @field_validator("keys")
    @classmethod
    def _keys(cls, value: dict[str, str]) -> dict[str, str]:
        for binding_id, keys in value.items():
            if not isinstance(keys, str) or not keys.strip() or any(not k.strip() for k in keys.split(",")):
                raise ValueError(f'{binding_id}: expected "key" or "key1,key2", got {keys!r}')
        return value


def load_config(workspace_root: Path, *, known_ids: set[str] | None = None) -> ConsoleConfig:
    """console.toml from the workspace (defaults when there is none). Unknown binding ids are errors too."""
    path = workspace_root / CONFIG_NAME
    if not path.is_file():
        return ConsoleConfig()
    try:
        data: dict[str, Any] = tomllib.loads(path.read_text())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: not valid TOML ({exc})") from None
    try:
        config = ConsoleConfig.model_validate(data)
    except ValidationError as exc:
        problems = []
        for error in exc.errors():
            where = ".".join(str(p) for p in error["loc"]) or "the file"
            message = str(error["msg"]).removeprefix("Value error, ").replace("Input should be", "expected")
            if error["type"] == "extra_forbidden":
                message = "unknown key"
            problems.append(f"{where}: {message}")
        raise ConfigError(f"{path}: {'; '.join(problems)}") from None
    if known_ids is not None:
        unknown = sorted(set(config.keys) - known_ids)
        if unknown:
            raise ConfigError(
                f"{path}: [keys] {', '.join(unknown)}: no such binding; the ids are {', '.join(sorted(known_ids))}"
            )
    return config
