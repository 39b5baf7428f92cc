"""Keeping secrets (API keys, tokens, passwords) off the screen, out of logs and out of the workspace.

One place decides what a secret is: a flag or environment variable whose name looks like one
(`--api-key`, `--admin-api-key`, `HF_TOKEN`, `*_PASSWORD`, `*_SECRET`; not `--speculative-num-draft-tokens`).
Pure code, stdlib only: check-args imports it on its fast path.
"""

from __future__ import annotations

import functools
import re
import shlex
from collections.abc import Iterable, Mapping
from typing import Any, TextIO

REDACTED = "***"
# `token` as a word at the end (HF_TOKEN, --hf-token, --token), but not SGLang's counting args that end in
# first_token / per_token (bucket_time_to_first_token, kt_max_deferred_experts_per_token).
SECRET_NAME = re.compile(
    r"(api[-_]?key|(?<![A-Za-z])(?<!first_)(?<!first-)(?<!per_)(?<!per-)token$|password|passwd|secret)", re.IGNORECASE
)
# Values shorter than this are not searched for in free text: masking every "1" in the output would
# destroy it, and so short a key is no secret worth the name.
_MIN_SECRET_LEN = 3
# `NAME=value`, `--flag=value`; also with the opening quote of a systemd `Environment="NAME=value ..."` word.
_ASSIGNMENT = re.compile(r"^([\"']?)(-{0,2}[A-Za-z0-9_.-]+)=(.*)$", re.DOTALL)


@functools.lru_cache(maxsize=4096)
def is_secret_name(name: str) -> bool:
    """Whether a flag (with or without dashes) or an environment variable name holds a secret. (Cached: every
    key of every JSON answer the console reads is asked, and a server's keys are the same each second.)"""
    return bool(SECRET_NAME.search(name.lstrip("-")))


def secret_values(argv: Iterable[str], env: Mapping[str, str] | None = None) -> set[str]:
    """The values of secret-named flags in argv and secret-named variables in env."""
    secrets = {v for k, v in (env or {}).items() if is_secret_name(k) and v}
    words = list(argv)
    for i, word in enumerate(words):
        name, sep, inline = word.partition("=")
        if not name.startswith("-") or not is_secret_name(name):
            continue
        if sep and inline:
            secrets.add(inline)
        elif i + 1 < len(words) and not words[i + 1].startswith("--"):
            secrets.add(words[i + 1])
    return secrets


def secrets_in_unit(text: str) -> set[str]:
    """Secret values in a unit file's text: secret-named flags anywhere in ExecStart, secret-named
    `NAME=value` words (Environment= assignments). Reads words, not the unit's structure, so that it works
    on any unit, even one the unit model cannot parse."""
    words = [w.removeprefix("Environment=").strip("\"'") for w in text.replace("\\\n", " ").split()]
    env = {}
    for word in words:
        name, sep, value = word.partition("=")
        if sep and not name.startswith("-"):
            env[name] = value
    return secret_values(words, env)


def redact(value: Any, secrets: set[str]) -> Any:
    """Replace every secret in strings, lists and dicts, and the value of every secret-named dict key."""
    if isinstance(value, str):
        for secret in sorted(secrets, key=len, reverse=True):
            if len(secret) >= _MIN_SECRET_LEN:
                value = value.replace(secret, REDACTED)
        return value
    if isinstance(value, list | tuple):
        return [redact(v, secrets) for v in value]
    if isinstance(value, dict):
        return {
            k: (REDACTED if is_secret_name(str(k)) and v not in (None, "") else redact(v, secrets))
            for k, v in value.items()
        }
    return value


def redact_argv(argv: Iterable[str]) -> list[str]:
    """argv with the values of secret flags (`--api-key K`, `--api-key=K`) and assignments (`HF_TOKEN=K`) masked."""
    masked: list[str] = []
    hide_next = False
    for word in argv:
        if hide_next:
            masked.append(REDACTED)
            hide_next = False
            continue
        match = _ASSIGNMENT.match(word)
        if match and is_secret_name(match.group(2)):
            masked.append(f"{match.group(1)}{match.group(2)}={REDACTED}")
        else:
            masked.append(word)
            hide_next = word.startswith("-") and is_secret_name(word)
    return masked


# `api_key='K'`, `HF_TOKEN=K` (an assignment, a repr) and `"api_key": "K"` (JSON, a dict's repr) in free text.
# A colon counts only after a quoted key: log lines say `#new-token: 6` of counts that are no secrets.
_VALUE = r"""('[^']*'|"[^"]*"|[^\s,)}\]]+)"""
_INLINE_ASSIGNMENT = re.compile(r"([A-Za-z0-9_.-]+)(\s*=\s*)" + _VALUE)
_QUOTED_KEY = re.compile(r"""(["'][A-Za-z0-9_.-]+["'])(\s*:\s*)""" + _VALUE)
_NOT_A_VALUE = frozenset({"None", "null", "''", '""', "false", "False"})


def mask_line(line: str) -> str:
    """Free text with the values of secret-named assignments (`api_key='K'`) and flags (`--api-key K`) masked."""

    def hide(match: re.Match[str]) -> str:
        name, sep, value = match.groups()
        if not is_secret_name(name.strip("\"'")) or value in _NOT_A_VALUE:
            return match.group(0)
        quote = value[0] if value[:1] in ("'", '"') else ""
        return f"{name}{sep}{quote}{REDACTED}{quote}"

    words = _QUOTED_KEY.sub(hide, _INLINE_ASSIGNMENT.sub(hide, line)).split(" ")
    for i in range(1, len(words)):  # `--api-key K`: the word after a secret-named flag
        if words[i - 1].startswith("-") and is_secret_name(words[i - 1]) and words[i]:
            words[i] = REDACTED
    return " ".join(words)


@functools.lru_cache(maxsize=256)
def redact_command(command: str) -> str:
    """A shell command line with secret values masked (for the audit log and error messages). Kept for commands
    that come again: the console's poll is the same long script every second for every host, and splitting it as a
    shell does was a thirtieth of the console's CPU with 16 hosts."""
    try:
        words = shlex.split(command)
    except ValueError:
        words = command.split()
    return shlex.join(redact_argv(words))


class RedactingWriter:
    """A text stream that masks known secret values before they reach the wrapped stream."""

    def __init__(self, stream: TextIO, secrets: set[str]) -> None:
        self._stream = stream
        self.secrets = secrets

    def write(self, text: str) -> int:
        self._stream.write(redact(text, self.secrets))
        return len(text)

    def flush(self) -> None:
        self._stream.flush()

    def isatty(self) -> bool:
        return self._stream.isatty()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


class SecretMask:
    """The secrets one host session has seen (its unit's keys and tokens, the console's own API key), and the
    one way text and data from that host are masked before anything else sees them."""

    def __init__(self, values: Iterable[str] = ()) -> None:
        self._values: set[str] = {v for v in values if v}

    @property
    def values(self) -> frozenset[str]:
        return frozenset(self._values)

    def learn(self, values: Iterable[str]) -> None:
        self._values.update(v for v in values if v)

    def learn_launch(self, argv: Iterable[str], env: Mapping[str, str] | None = None) -> None:
        """Remember the values of secret-named flags and environment variables of a launch."""
        self.learn(secret_values(argv, env))

    def text(self, text: str) -> str:
        """A log line or message: known secret values masked, then every secret-named assignment and flag
        (SGLang logs `server_args=ServerArgs(..., api_key='K', ...)` and its launch command at every start)."""
        return "\n".join(mask_line(line) for line in redact(text, self._values).split("\n"))

    def data(self, value: Any) -> Any:
        """JSON-like data: known values masked in every string, secret-named keys' values replaced."""
        return redact(value, self._values)
