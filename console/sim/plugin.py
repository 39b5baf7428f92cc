"""What the simulator contributes to the rest of the console, registered by `register()`.

- The stand-in as an SGLang launcher (console.sglang.launchers): a unit whose ExecStart runs
  `python -m console.sim` is an SGLang unit; its `--sim-*` options are its own (kept, never checked as SGLang
  flags) and `--sim-sglang-version V` says which SGLang version's flags it takes.

console.host and console.sglang import nothing from console.sim; the composition root (the CLI verbs, the
core session) calls `register()` before it parses a unit. Standard library only, and cheap
to call again: `opsconsole check-args` calls it on its fast path.
"""

from __future__ import annotations

from console.sglang.launchers import LauncherSpec, register_launcher

STAND_IN = LauncherSpec(module="console.sim", own_option_prefix="--sim-", version_option="--sim-sglang-version")


def register() -> None:
    """Register the stand-in launcher (idempotent)."""
    register_launcher(STAND_IN)
