"""The audit log makes its folder when it is missing, also when it went away while the console runs."""

from __future__ import annotations

import json
import shutil
import time
from pathlib import Path

from console.host.audit import AuditLog


def test_the_audit_log_makes_its_folder_when_it_is_missing(tmp_path: Path) -> None:
    log = AuditLog(tmp_path / "logs" / "deeper" / "audit.jsonl")
    log.record(host="h", command="echo one", exit_status=0, started=time.monotonic())
    shutil.rmtree(tmp_path / "logs")  # an operator clears the logs while the console runs
    log.record(host="h", command="echo two", exit_status=0, started=time.monotonic())
    log.record(host="h", command="echo three", exit_status=1, started=time.monotonic())
    entries = [json.loads(line) for line in log.path.read_text().splitlines()]
    assert [(e["command"], e["exit_status"]) for e in entries] == [("echo two", 0), ("echo three", 1)]
