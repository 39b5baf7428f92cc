"""Names that reach a remote shell or a unit file, checked in one place (pure, stdlib only)."""

from __future__ import annotations

import re

# An environment variable name as systemd's Environment= and the shell accept it.
ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def is_env_name(name: str) -> bool:
    """The whole text is one such name (fullmatch: `$` alone would let a trailing newline through)."""
    return ENV_NAME.fullmatch(name) is not None
