"""The opsconsole command lines that messages name, in one place (pure, standard library only).

A message that tells the operator what to run takes its line from here, so that it parses as written:
tests/test_hints.py parses every line below with the CLI's own parser (console.cli.build_parser), each placeholder
given an example, and holds that no other string in console/ names an opsconsole verb.

    APPLY_SET.line(HOST="gpu-a", FLAG="enable-metrics") -> "opsconsole apply gpu-a --set enable-metrics"
    APPLY_SET.line(FLAG="enable-metrics")               -> "opsconsole apply HOST --set enable-metrics"
    verb("bench")                                       -> "opsconsole bench"  (the verb's name, not a line to run)

A placeholder is a whole word `{NAME}`: filled, its value is shell-quoted where it needs it; left out, the reader
sees NAME. An error's prefix (`opsconsole apply: ...`) names no command and is written where it is printed.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass

PROGRAM = "opsconsole"
# The CLI's verbs (console.cli.HANDLERS; tests/test_hints.py holds the two equal).
VERBS = ("connect", "demo", "status", "check-args", "apply", "bench", "compare", "freeze", "snapshots", "diff",
         "restore", "restart", "logs", "trust", "tune", "predict")  # fmt: skip
_PLACEHOLDER = re.compile(r"^\{([A-Z][A-Z_]*)\}$")


def verb(name: str) -> str:
    """`opsconsole VERB`: a verb named (who holds a lock, what wrote a file), not a line to run."""
    if name not in VERBS:
        raise ValueError(f"{name!r} is not an opsconsole verb")
    return f"{PROGRAM} {name}"


@dataclass(frozen=True)
class CommandLine:
    """`opsconsole VERB WORD...`, some words `{PLACEHOLDER}`s."""

    verb: str
    words: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        verb(self.verb)

    @property
    def placeholders(self) -> tuple[str, ...]:
        return tuple(m.group(1) for w in self.words if (m := _PLACEHOLDER.match(w)))

    def line(self, **values: str) -> str:
        """The line with `values` in their places (shell-quoted); a placeholder without a value reads as its name."""
        unknown = sorted(set(values) - set(self.placeholders))
        if unknown:
            raise ValueError(f"{self.verb}: no placeholder {', '.join(unknown)} in {' '.join(self.words)!r}")
        out = [PROGRAM, self.verb]
        for word in self.words:
            match = _PLACEHOLDER.match(word)
            if match is None:
                out.append(word)
            else:
                name = match.group(1)
                out.append(shlex.quote(values[name]) if name in values else name)
        return " ".join(out)


def command(verb_name: str, *words: str) -> CommandLine:
    return CommandLine(verb_name, words)


# Every line a message names (tests/test_hints.py parses each one).
APPLY_SET = command("apply", "{HOST}", "--set", "{FLAG}")  # FLAG: a boolean launch flag, without its dashes
APPLY_ROLLING = command("apply", "--rolling", "{GROUP}")
APPLY_DEPLOYMENT = command("apply", "{DEPLOYMENT}", "--set", "FLAG=VALUE")
APPLY_GATE = command("apply", "{DEPLOYMENT}", "--set", "gated-launch-port=PORT")
BENCH = command("bench", "{HOST}")
BENCH_REPEATED = command("bench", "{HOST}", "--concurrency", "{LEVEL}", "--repeat", "3")
CHECK_ARGS_EXAMPLE = command("check-args", "--", "--model-path", "M", "--speculative-algorithm", "EAGLE")
COMPARE = command("compare", "{RUN_A}", "{RUN_B}")
CONNECT_WEB = command("connect", "{HOST}", "--web")
DEMO = command("demo")
DEMO_WEB = command("demo", "--web")
FREEZE = command("freeze", "{HOST}", "--name", "{NAME}")
LOGS = command("logs", "{HOST}")
RESTART = command("restart", "{HOST}")
RESTART_DEPLOYMENT = command("restart", "{DEPLOYMENT}")
RESTART_ROLLING = command("restart", "--rolling", "{GROUP}")
RESTORE = command("restore", "{HOST}", "{SNAPSHOT}")
SNAPSHOTS = command("snapshots")
STATUS_DEPLOYMENT = command("status", "{DEPLOYMENT}")
STATUS_MEMBER = command("status", "{HOST}")
STATUS_OVER_SSH = command("status", "{GROUP}", "--ssh")
TRUST = command("trust", "{HOST}")
TUNE_DEPLOYMENT = command("tune", "{DEPLOYMENT}")
