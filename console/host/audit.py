"""The audit log: one JSON line per remote command (time, host, command, exit status, duration).

Commands are redacted before they are written, and stdin (where unit texts travel) is never logged.
"""

from __future__ import annotations

import json
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

from console.secrets import redact_command

AUDIT_FILE_NAME = "audit.jsonl"


class AuditLog:
    def __init__(self, path: Path) -> None:
        self.path = path
        self._lock = threading.Lock()

    @classmethod
    def in_logs(cls, logs_dir: Path) -> AuditLog:
        return cls(logs_dir / AUDIT_FILE_NAME)

    def record(self, *, host: str, command: str, exit_status: int | None, started: float, note: str = "") -> None:
        """One entry for `command` on `host`; `started` is time.monotonic() when the command began."""
        entry = {
            "time": datetime.now(UTC).isoformat(timespec="milliseconds"),
            "host": host,
            "command": redact_command(command),
            "exit_status": exit_status,
            "duration_s": round(time.monotonic() - started, 4),
        }
        if note:
            entry["note"] = note
        line = json.dumps(entry, sort_keys=False) + "\n"
        with self._lock:
            try:
                handle = self.path.open("a", encoding="utf-8")
            except FileNotFoundError:  # its folder is made when it is missing, not tried at every line
                self.path.parent.mkdir(parents=True, exist_ok=True)
                handle = self.path.open("a", encoding="utf-8")
            with handle:
                handle.write(line)
