"""The programs a unit's ExecStart may run to start SGLang, and the options that are theirs, not SGLang's.

SGLang itself is known here: `python -m sglang.launch_server` and `sglang serve`. Any other program that
takes SGLang's launch flags (the project's SGLang stand-in, a site's wrapper module) registers itself:

    register_launcher(LauncherSpec(module="my.wrapper", own_option_prefix="--wrap-", version_option="--wrap-v"))

after which a unit running `python -m my.wrapper ...` is an SGLang unit: its `--wrap-*` options stay in the
unit untouched and are never checked as SGLang flags, and `--wrap-v X` names the SGLang version whose flags
it takes. This module knows no launcher but SGLang's; the program that owns one registers it, and whoever
parses units (the CLI, the core session) has the registration done first.

Standard library only: `opsconsole check-args` imports it on its fast path.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class LauncherSpec:
    """A program started as `python -m MODULE` that takes SGLang's launch flags."""

    module: str
    # Its own options (`--wrap-profile X`): kept in the unit, passed to it, never read as SGLang flags.
    own_option_prefix: str | None = None
    # Its own option that names the SGLang version it behaves as (`--wrap-sglang-version 0.5.9`).
    version_option: str | None = None

    def __post_init__(self) -> None:
        if not self.module or " " in self.module:
            raise ValueError(f"a launcher is a Python module name (python -m MODULE), not {self.module!r}")
        if self.own_option_prefix is not None and not (
            self.own_option_prefix.startswith("--") and len(self.own_option_prefix) > 2
        ):
            raise ValueError(f"own_option_prefix must look like '--name-', not {self.own_option_prefix!r}")
        if self.version_option is not None and not self.owns(self.version_option):
            raise ValueError(f"version_option {self.version_option!r} must start with {self.own_option_prefix!r}")

    def owns(self, option: str) -> bool:
        """Whether this option word (`--x` or `--x=value`) is the launcher's own rather than SGLang's."""
        return self.own_option_prefix is not None and option.startswith(self.own_option_prefix)

    def version_in(self, own_options: tuple[str, ...] | list[str]) -> str | None:
        """The SGLang version its own options name (the last one, as argparse does), or None."""
        option = self.version_option
        if option is None:
            return None
        found: str | None = None
        for i, word in enumerate(own_options):
            if word == option and i + 1 < len(own_options):
                found = own_options[i + 1]
            elif word.startswith(option + "="):
                found = word.partition("=")[2]
        return found

    @property
    def command(self) -> str:
        return f"python -m {self.module}"


SGLANG = LauncherSpec(module="sglang.launch_server")

_registry: dict[str, LauncherSpec] = {SGLANG.module: SGLANG}


def register_launcher(spec: LauncherSpec) -> None:
    """Make units that run `python -m spec.module` SGLang units. Registering the same spec again is a no-op;
    a different spec for a module already registered is a programming error (two owners of one module)."""
    known = _registry.get(spec.module)
    if known is not None and known != spec:
        raise ValueError(f"launcher {spec.module!r} is already registered as {known}; not replacing it with {spec}")
    _registry[spec.module] = spec


def launcher_for_module(module: str) -> LauncherSpec | None:
    return _registry.get(module)


def registered_launchers() -> tuple[LauncherSpec, ...]:
    """SGLang's first, then the registered ones in registration order."""
    return tuple(_registry.values())
