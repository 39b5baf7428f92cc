"""Where the simulator gets its performance model, profiles and SGLang's launch rules.

Those live in modules written by other parts of the project (console.sim.engine, console.sim.profiles,
console.sglang.rules). Until each exists, a clearly marked placeholder with the same contract is used,
so the server, the nvidia-smi stand-in and the demo can be built and tested meanwhile.
"""

from __future__ import annotations

from typing import Any

try:
    from console.sim import profiles as _profiles  # type: ignore[attr-defined,unused-ignore]
except ImportError:  # pragma: no cover - removed once profiles.py lands
    from console.sim import _placeholders as _profiles

try:
    from console.sim.engine import Engine as _Engine  # type: ignore[import-not-found,unused-ignore]
except ImportError:  # pragma: no cover - removed once engine.py lands
    from console.sim._placeholders import Engine as _Engine

try:
    from console.sglang.rules import check_launch as _check_launch  # type: ignore[import-not-found,unused-ignore]
except ImportError:  # pragma: no cover - removed once rules.py lands
    from console.sim._placeholders import check_launch as _check_launch

Engine: Any = _Engine
check_launch: Any = _check_launch
PROFILES: dict[str, Any] = _profiles.PROFILES
DEFAULT_PROFILE: str = _profiles.DEFAULT_PROFILE


def get_profile(name: str) -> Any:
    return _profiles.get_profile(name)
