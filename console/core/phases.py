"""SGLang's startup phases, read from its log lines (pure: no I/O).

SGLang prints fixed markers while it starts (model_runner.py, cuda_graph_runner.py, http_server.py):
"Load weight begin/end", "KV Cache is allocated", "Capture cuda graph begin/end", with EAGLE-family drafts
"Capture draft cuda graph begin/end" and "Capture draft extend cuda graph begin/end", then uvicorn starts,
a warm-up request runs, and "The server is fired up and ready to roll!". A start of a large model takes
minutes, so the operator wants to see which of these steps it is in and how far along, and — when it dies —
the lines that say why. `PhaseTracker.feed()` turns journal lines into that picture.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum


class PhaseState(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    DONE = "done"
    SKIPPED = "skipped"  # a later phase started first: this one did not happen in this configuration


@dataclass(frozen=True)
class PhaseSpec:
    name: str
    label: str
    begin_markers: tuple[str, ...]  # regular expressions searched in a line
    end_markers: tuple[str, ...]

    def begins(self, line: str) -> bool:
        return _matches(line, self.begin_markers)

    def ends(self, line: str) -> bool:
        return _matches(line, self.end_markers)


# SGLang's CUDA graph lines changed over releases: 0.5.6-0.5.14 "Capture cuda graph begin", "Capture draft cuda
# graph begin", "Capture draft extend cuda graph begin"; 0.5.17 one line per captured graph, "Capture target prefill
# CUDA graph begin", "target verify" (or "target decode" without speculation), "draft prefill", "draft decode",
# "draft extend" [0.5.17 cuda_graph_setup.py:363-453, eagle_worker_v2.py:364-479]. A phase covers all of its graphs:
# it reopens at each begin and ends at the last end.
_TARGET_GRAPH = r"Capture (?:target \w+ )?cuda graph"
_DRAFT_GRAPH = r"Capture (?:[\w-]+ )*?draft (?:(?:prefill|decode) )?cuda graph"
_DRAFT_EXTEND_GRAPH = r"Capture draft extend cuda graph"

# In the order a start goes through them. A phase with a begin marker of an earlier phase's end marker
# (kv_cache starts when weights are loaded) is measured from that moment.
LOAD_WEIGHTS = PhaseSpec("load_weights", "loading weights", ("Load weight begin",), ("Load weight end",))
# 0.5.23 no longer says "KV Cache is allocated": its pool's line is "Memory pool end" [kv_cache_configurator.py:498-501]
KV_CACHE = PhaseSpec(
    "kv_cache", "allocating KV cache", ("Load weight end",), ("KV Cache is allocated", "Memory pool end")
)
CUDA_GRAPH = PhaseSpec("cuda_graph", "capturing CUDA graphs", (_TARGET_GRAPH + " begin",), (_TARGET_GRAPH + " end",))
DRAFT_CUDA_GRAPH = PhaseSpec(
    "draft_cuda_graph", "capturing draft CUDA graphs", (_DRAFT_GRAPH + " begin",), (_DRAFT_GRAPH + " end",)
)
DRAFT_EXTEND_CUDA_GRAPH = PhaseSpec(
    "draft_extend_cuda_graph",
    "capturing draft extend CUDA graphs",
    (_DRAFT_EXTEND_GRAPH + " begin",),
    (_DRAFT_EXTEND_GRAPH + " end",),
)
WARMUP = PhaseSpec(
    "warmup",
    "warm-up",
    ("Started server process", "Waiting for application startup", "Application startup complete", "Uvicorn running on"),
    ("The server is fired up and ready to roll",),
)
READY_MARKER = "The server is fired up and ready to roll"

# "Loading safetensors checkpoint shards:  45% Completed | 18/40" and tqdm's "Capturing batches (...): 45%|"
_PERCENT = re.compile(r"(\d{1,3})%(?:\s*Completed|\|)")

# What a dying start looks like: Python's traceback and its last line, argparse's usage error, CUDA OOM,
# SGLang's own "child failed" message, and systemd's lines about the unit's main process.
_FAILURE_PATTERNS = tuple(
    re.compile(p)
    for p in (
        r"Traceback \(most recent call last\)",
        r"(?:^|[\s\]])(?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception)(?::|$)",
        r"\berror: (?:unrecognized arguments|argument|ambiguous option)",
        r"CUDA out of memory",
        r"Received sigquit from a child process",
        r"Main process exited, code=(?:exited|killed|dumped), status=(?!0/)",
        r"Failed with result '",
        r"Failed to start ",
        r"Start request repeated too quickly",
        r"Scheduled restart job",
    )
)
# The line that states the cause best: a Python exception line ("ValueError: ...").
_EXCEPTION_LINE = re.compile(r"(?:^|[\s\]])((?:[A-Za-z_][\w.]*\.)?[A-Z]\w*(?:Error|Exception)(?::.*)?)$")


def is_failure_line(line: str) -> bool:
    """True for a line that only appears when a start is failing (traceback, exception, systemd exit)."""
    return any(p.search(line) for p in _FAILURE_PATTERNS)


LineKind = str  # "failure" | "ready" | "phase" | "warning" | "normal"
_MARKED_PHASES = (LOAD_WEIGHTS, KV_CACHE, CUDA_GRAPH, DRAFT_CUDA_GRAPH, DRAFT_EXTEND_CUDA_GRAPH)
_WARNING = re.compile(r"\b(WARNING|Warning|warning|deprecated|DEPRECATED)\b")


def classify_line(line: str) -> LineKind:
    """How a journal line should stand out: a failure, the ready line, a startup phase marker, a warning."""
    if is_failure_line(line):
        return "failure"
    if READY_MARKER in line:
        return "ready"
    if any(spec.begins(line) or spec.ends(line) for spec in _MARKED_PHASES):
        return "phase"
    if _WARNING.search(line):
        return "warning"
    return "normal"


def expected_phases(*, speculative: bool, cuda_graph: bool = True) -> tuple[PhaseSpec, ...]:
    """The phases a start goes through: draft graphs only with an EAGLE-family draft, no capture with
    --disable-cuda-graph."""
    phases: list[PhaseSpec] = [LOAD_WEIGHTS, KV_CACHE]
    if cuda_graph:
        phases.append(CUDA_GRAPH)
        if speculative:
            phases += [DRAFT_CUDA_GRAPH, DRAFT_EXTEND_CUDA_GRAPH]
    phases.append(WARMUP)
    return tuple(phases)


@dataclass
class PhaseStatus:
    name: str
    label: str
    state: PhaseState = PhaseState.PENDING
    started_at: datetime | None = None
    ended_at: datetime | None = None
    progress: float = 0.0  # 0..1 within the phase, from percentages SGLang prints where it prints them

    @property
    def duration_s(self) -> float | None:
        if self.started_at is None or self.ended_at is None:
            return None
        return (self.ended_at - self.started_at).total_seconds()

    def to_json(self) -> dict[str, object]:
        return {
            "name": self.name,
            "label": self.label,
            "state": self.state.value,
            "started_at": self.started_at.isoformat() if self.started_at else None,
            "ended_at": self.ended_at.isoformat() if self.ended_at else None,
            "duration_s": None if self.duration_s is None else round(self.duration_s, 3),
            "progress": round(self.progress, 3),
        }


@dataclass(frozen=True)
class PhaseEvent:
    """Something worth telling the operator: a phase started or ended, progress moved, a failure line, ready."""

    kind: str  # "started", "ended", "progress", "failure", "ready"
    phase: str | None
    at: datetime
    line: str


@dataclass
class PhaseTracker:
    """Feeds on one start's log lines; knows which phase the server is in, and why it failed if it did."""

    specs: tuple[PhaseSpec, ...]
    phases: list[PhaseStatus] = field(init=False)
    ready_at: datetime | None = field(default=None, init=False)
    failure_lines: list[str] = field(default_factory=list, init=False)
    lines_seen: list[str] = field(default_factory=list, init=False)
    keep_lines: int = 200

    def __post_init__(self) -> None:
        self.phases = [PhaseStatus(s.name, s.label) for s in self.specs]

    @classmethod
    def for_start(cls, *, speculative: bool, cuda_graph: bool = True) -> PhaseTracker:
        return cls(expected_phases(speculative=speculative, cuda_graph=cuda_graph))

    @property
    def ready(self) -> bool:
        return self.ready_at is not None

    @property
    def failed(self) -> bool:
        return bool(self.failure_lines)

    @property
    def current(self) -> PhaseStatus | None:
        """The phase running now (the latest one started), if any."""
        running = [p for p in self.phases if p.state is PhaseState.RUNNING]
        return running[-1] if running else None

    @property
    def progress(self) -> float:
        """Overall 0..1: finished phases count whole, the running ones by their own progress."""
        if self.ready:
            return 1.0
        total = 0.0
        for p in self.phases:
            if p.state in (PhaseState.DONE, PhaseState.SKIPPED):
                total += 1.0
            elif p.state is PhaseState.RUNNING:
                total += min(p.progress, 0.99)
        return total / len(self.phases)

    def feed(self, line: str, at: datetime) -> list[PhaseEvent]:
        """Take one log line (as journald stored it) and return what changed."""
        self.lines_seen.append(line)
        del self.lines_seen[: -self.keep_lines]
        events: list[PhaseEvent] = []
        if is_failure_line(line):
            self.failure_lines.append(line)
            events.append(PhaseEvent("failure", self._current_name(), at, line))
        # End markers before begin markers: "Load weight end" ends load_weights and begins kv_cache.
        for spec, status in zip(self.specs, self.phases, strict=True):
            if spec.ends(line) and status.state is not PhaseState.DONE:
                if status.started_at is None:
                    status.started_at = at
                status.state, status.ended_at, status.progress = PhaseState.DONE, at, 1.0
                events.append(PhaseEvent("ended", spec.name, at, line))
        for index, (spec, status) in enumerate(zip(self.specs, self.phases, strict=True)):
            if not spec.begins(line):
                continue
            if status.state is PhaseState.PENDING or (
                # a draft model loads its weights and KV cache again after the target's: the phase reopens
                status.state is PhaseState.DONE and not spec.ends(line) and spec is not WARMUP
            ):
                if status.state is PhaseState.PENDING:
                    status.started_at = at
                status.state, status.ended_at, status.progress = PhaseState.RUNNING, None, 0.0
                events.append(PhaseEvent("started", spec.name, at, line))
                self._skip_pending_before(index)
        current = self.current
        if current is not None:
            # tqdm redraws with carriage returns, so one journal line can hold many bars: the last one is current.
            percents = _PERCENT.findall(line)
            if percents and READY_MARKER not in line:
                fraction = min(int(percents[-1]), 100) / 100
                if fraction != current.progress:
                    current.progress = fraction
                    events.append(PhaseEvent("progress", current.name, at, line))
        if READY_MARKER in line and self.ready_at is None:
            self.ready_at = at
            for status in self.phases:
                if status.state is PhaseState.PENDING:
                    status.state = PhaseState.SKIPPED
                elif status.state is PhaseState.RUNNING:
                    status.state, status.ended_at, status.progress = PhaseState.DONE, at, 1.0
            events.append(PhaseEvent("ready", None, at, line))
        return events

    def mark_ready(self, at: datetime) -> None:
        """/health said 200: the server is ready even if its log line was not (yet) read."""
        if self.ready_at is None:
            self.feed(READY_MARKER + "! (health check passed)", at)

    def explanation(self, limit: int = 12) -> list[str]:
        """The lines that say why a start failed: failure lines, the exception line last; else the tail."""
        lines = self.failure_lines or self.lines_seen
        picked = lines[-limit:]
        exception = next((ln for ln in reversed(self.failure_lines) if _EXCEPTION_LINE.search(ln)), None)
        if exception is not None and exception not in picked:
            picked = [*picked[1:], exception]
        return picked

    def _current_name(self) -> str | None:
        current = self.current
        return current.name if current else None

    def _skip_pending_before(self, index: int) -> None:
        for status in self.phases[:index]:
            if status.state is PhaseState.PENDING:
                status.state = PhaseState.SKIPPED


@functools.cache
def _pattern(marker: str) -> re.Pattern[str]:
    return re.compile(marker, re.IGNORECASE)


def _matches(line: str, markers: tuple[str, ...]) -> bool:
    return any(_pattern(m).search(line) for m in markers)


def exception_line(lines: list[str]) -> str | None:
    """The last Python exception line ("ValueError: ...") among lines, without any log prefix."""
    for line in reversed(lines):
        match = _EXCEPTION_LINE.search(line.rstrip())
        if match:
            return match.group(1)
    return None
