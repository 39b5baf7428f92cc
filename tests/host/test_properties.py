"""Properties of the pure host helpers: quoting round-trips, redaction never leaks, CSV parsing never raises."""

from __future__ import annotations

import shlex

from hypothesis import given
from hypothesis import strategies as st

from console.host.commands import shell_command
from console.host.gpu import _NOT_AVAILABLE, _UNIT_SUFFIXES, clean_value, parse_snapshot
from console.host.journal import parse_journal_line
from console.secrets import redact_command as redact

ARG = st.text(st.characters(blacklist_characters="\x00", blacklist_categories=("Cs",)), max_size=30)


@given(st.lists(ARG, min_size=1, max_size=8), st.booleans())
def test_the_remote_shell_sees_exactly_the_argv(argv: list[str], sudo: bool) -> None:
    words = shlex.split(shell_command(argv, sudo=sudo))
    assert words == (["sudo", "-n", "--", *argv] if sudo else argv)


# Secrets in upper case and digits, other words in lower case: a secret can never hide inside another word.
SECRET = st.from_regex(r"[A-Z0-9]{8,30}", fullmatch=True)
WORDS = st.lists(st.text("abcdefghij -'\"$", max_size=12), max_size=4)


@given(SECRET, WORDS)
def test_api_keys_never_reach_the_audit_log(secret: str, rest: list[str]) -> None:
    for line in (
        shlex.join(["python", "-m", "sglang.launch_server", "--api-key", secret, *rest]),
        shlex.join(["env", f"SGLANG_API_KEY={secret}", *rest]),
        shlex.join(["x", f"--api-key={secret}"]),
    ):
        assert secret not in redact(line)


@given(st.text(max_size=400), st.text(max_size=100), st.integers(-1, 255))
def test_gpu_output_of_any_shape_never_raises(stdout: str, stderr: str, status: int) -> None:
    snapshot = parse_snapshot(stdout, stderr, status)
    assert all(gpu.index >= 0 for gpu in snapshot.gpus)


@given(st.text(max_size=300))
def test_journal_lines_of_any_shape_never_raise(line: str) -> None:
    parse_journal_line(line)


def _clean_value_in_full(raw: str) -> str | None:
    """clean_value without its shortcut for values that end in a digit (what it was before it had one)."""
    value = raw.strip()
    if value.lower() in _NOT_AVAILABLE:
        return None
    for suffix in _UNIT_SUFFIXES:
        if value.endswith(suffix) and value[: -len(suffix)].strip().replace(".", "", 1).isdigit():
            return value[: -len(suffix)].strip()
    return value


@given(st.text("0123456789. %MiBWHzNa/[]x", max_size=12) | st.sampled_from(sorted(_NOT_AVAILABLE)))
def test_a_gpu_value_is_cleaned_the_same_with_the_shortcut(raw: str) -> None:
    assert clean_value(raw) == _clean_value_in_full(raw)
