"""`opsconsole check-args`: the rules of an SGLang version on launch flags or a unit file (console.core.check_args).

Kept free of textual, asyncssh, httpx, pydantic and rich: it is the fast path (benchmarks/cli_startup.py)."""

from console.core.check_args import run

__all__ = ["run"]
