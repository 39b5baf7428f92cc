"""`opsconsole freeze / snapshots / diff / restore` end to end: the real CLI -> real sshd -> real systemd -> the
simulator, on a testbed host with a disk of its own (it is halted and booted again). Every outcome is read on the
host itself (root, around the console): the document's bytes, the unit file, is-enabled, /server_info."""

from __future__ import annotations

import json
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from console.core.snapshot import Snapshot
from tests.e2e.cli import json_output, opsconsole, server_info
from tests.testbed.host import GpuHost

pytestmark = pytest.mark.testbed

TIMEOUT = "120"
STEPS_3 = ("--set", "speculative-num-steps=3", "--set", "speculative-num-draft-tokens=4")
SECRET = "tb-freeze-key-5c0ffee9a1"
KEY_ENV = "OPSCONSOLE_TESTBED_FREEZE_KEY"
DOCS = "/home/ops/production_*.md"


@pytest.fixture(scope="module")
def _persistent_host(testbed_ready: None) -> Iterator[GpuHost]:
    host = GpuHost.boot("gpu5", persistent=True)
    try:
        yield host
    finally:
        host.teardown()


@pytest.fixture
def host(_persistent_host: GpuHost) -> Iterator[GpuHost]:
    """The persistent host as it booted: its unit, running, no documents, no snapshots or records in the workspace."""
    host = _persistent_host

    def clean() -> None:
        host.link_up()
        if not host.is_pristine():
            host.restore()
        host.root_run(f"rm -f {DOCS}")
        shutil.rmtree(host.workspace / "profiles" / "snapshots", ignore_errors=True)
        for path in (host.workspace / "logs").glob("*"):
            path.unlink()

    clean()
    try:
        yield host
    finally:
        clean()


def _freeze(host: GpuHost, name: str, *args: str, target: str | None = None) -> dict[str, Any]:
    done = opsconsole(host, "freeze", target or host.name, "--name", name, *args, "--yes", "--json")
    result = json_output(done)
    assert done.returncode == (0 if result["ok"] else 1), done.stderr
    return result


def _apply(host: GpuHost, *args: str) -> None:
    done = opsconsole(host, "apply", host.name, *args, "--yes", "--json", "--timeout", TIMEOUT)
    assert done.returncode == 0, done.stderr


def _snapshot(host: GpuHost, name: str) -> Snapshot:
    path = host.workspace / "profiles" / "snapshots" / f"{name}.toml"
    return Snapshot.from_toml(path.read_text(), where=str(path))


def _is_enabled(host: GpuHost) -> str:
    return host.root_run(["systemctl", "is-enabled", host.unit], check=False).stdout.strip()


def test_freeze_documents_the_setup_enables_it_and_it_comes_back_by_itself_after_a_reboot(host: GpuHost) -> None:
    _apply(host, *STEPS_3)  # the setup to freeze is not the one the host booted with
    bench = opsconsole(host, "bench", host.name, "--concurrency", "1,4", "--requests", "8", "--input-len", "64",
                       "--output-len", "32", "--label", "steps3", "--json", timeout=120)  # fmt: skip
    assert bench.returncode == 0, bench.stderr
    records = json.loads(bench.stdout)
    host.root_run(["systemctl", "disable", "--quiet", host.unit])
    assert _is_enabled(host) == "disabled"
    unit_before = host.unit_file_text()

    result = _freeze(host, "v3", "--note", "steps 3 wins at C = 4")
    assert (result["state"], result["unit_file_state"], result["healthy"]) == ("frozen", "enabled", True)
    doc_path = "/home/ops/production_v3.md"
    assert result["document"] == doc_path
    # On the host: the document with the flags and the benchmark table, the unit as it ran, enabled.
    doc = host.root_run(["cat", doc_path]).stdout
    assert "--speculative-num-steps 3 --speculative-eagle-topk 1 --speculative-num-draft-tokens 4" in doc
    assert "steps 3 wins at C = 4" in doc
    for rec in records:
        row = f"| C = {rec['max_concurrency']} | {rec['output_throughput']:,.1f} |"
        assert row in doc, row
    assert f"opsconsole restore {host.name} v3" in doc
    assert host.unit_file_text() == unit_before  # it already had [Install]: nothing to rewrite
    assert _is_enabled(host) == "enabled"
    kept = _snapshot(host, "v3")
    assert kept.unit.text == unit_before and kept.server.resolved["speculative_num_steps"] == 3
    assert [b["run_id"] for b in kept.benchmarks] == [r["run_id"] for r in records]

    # Halted and booted again with its disk: nothing starts it but systemd, and it runs the frozen values.
    before_pid = host.service_properties("MainPID")["MainPID"]
    host.reboot()
    host.wait_healthy(timeout=60)
    assert host.service_properties("ActiveState", "MainPID")["MainPID"] != before_pid
    info = server_info(host)
    assert {k: info[k] for k in ("speculative_num_steps", "speculative_num_draft_tokens")} == {
        k: kept.server.resolved[k] for k in ("speculative_num_steps", "speculative_num_draft_tokens")
    }
    assert host.root_run(["cat", doc_path]).stdout == doc  # the document is on its disk too
    status = json_output(opsconsole(host, "status", host.name, "--json"))
    assert status["production"]["snapshot"] == "v3" and status["production"]["in_sync"] is True


def test_restore_of_an_older_snapshot_brings_its_values_back(host: GpuHost) -> None:
    assert _freeze(host, "v1")["ok"]
    _apply(host, *STEPS_3)
    assert _freeze(host, "v2")["ok"]
    listing = json_output(opsconsole(host, "snapshots", "--json"))
    assert [(s["name"], s["production"]) for s in listing["snapshots"]] == [("v1", False), ("v2", True)]
    diff = json_output(opsconsole(host, "diff", "v1", "v2", "--json"))
    assert {c["key"]: (c["a"], c["b"]) for c in diff["flags"]} == {
        "--speculative-num-steps": ("2", "3"),
        "--speculative-num-draft-tokens": ("3", "4"),
    }

    done = opsconsole(host, "restore", host.name, "v1", "--yes", "--json", "--timeout", TIMEOUT)
    restored = json_output(done)
    assert done.returncode == 0, done.stderr
    assert (restored["state"], restored["snapshot"]) == ("verified", "v1")
    info = server_info(host)
    assert (info["speculative_num_steps"], info["speculative_num_draft_tokens"]) == (2, 3)
    assert host.unit_file_text() == host.unit_text  # v1 was the unit the host booted with, byte for byte
    # production is still v2 (the document on the host says so): status says how the host differs from it
    status = json_output(opsconsole(host, "status", host.name, "--json"))
    production = status["production"]
    assert (production["snapshot"], production["in_sync"]) == ("v2", False)
    assert [d["text"] for d in production["drift"]] == [
        "steps 2, production v2 has 3",
        "draft tokens 3, production v2 has 4",
    ]
    assert "production  v2: DRIFT: steps 2, production v2 has 3" in opsconsole(host, "status", host.name).stdout


def test_freeze_is_refused_while_an_edit_is_unapplied(host: GpuHost) -> None:
    path = host.unit_path
    host.root_run(f"sed -i 's/--speculative-num-steps 2/--speculative-num-steps 3/' {path}")  # no daemon-reload
    edited = host.unit_sha256()
    result = _freeze(host, "v1")
    assert result["state"] == "refused" and result["ok"] is False
    assert [r["code"] for r in result["refusals"]] == ["daemon-reload", "process-flags", "resolved"]
    host.root_run(["systemctl", "daemon-reload"])  # loaded now, but the server still runs the old flags
    result = _freeze(host, "v1")
    assert [r["code"] for r in result["refusals"]] == ["process-flags", "resolved"]
    assert "--speculative-num-steps: runs 2, the unit says 3" in result["refusals"][0]["message"]
    # nothing was written: no document, no snapshot, the unit as the edit left it
    assert host.root_run(f"ls {DOCS}", check=False).returncode != 0
    assert not (host.workspace / "profiles" / "snapshots").exists()
    assert host.unit_sha256() == edited


def test_a_unit_carrying_an_api_key_leaves_no_trace_of_it(host: GpuHost, monkeypatch: pytest.MonkeyPatch) -> None:
    flag = "    --speculative-num-draft-tokens 3 \\\n"
    unit = host.unit_text.replace(flag, f"{flag}    --api-key {SECRET} \\\n").replace("[Install]\n", "")
    unit = unit.replace("WantedBy=multi-user.target\n", "")  # freeze must add it back, with the key in the text
    host.install_unit(unit)
    profile = host.workspace / "profiles" / "gpu5-key.toml"
    profile.write_text(
        f'[host]\nssh = "{host.name}"\n\n[sglang]\nport = {host.sglang_port}\napi_key_env = "{KEY_ENV}"\n'
    )
    monkeypatch.setenv(KEY_ENV, SECRET)
    try:
        done = opsconsole(host, "freeze", "gpu5-key", "--name", "keyed", "--yes")
        shown = opsconsole(host, "snapshots")
        result = _freeze(host, "keyed-json", target="gpu5-key")
    finally:
        profile.unlink()
    assert done.returncode == 0, done.stderr
    assert result["ok"] and result["unit_changed"] is False  # the first freeze added [Install] already
    on_host = host.unit_file_text()
    assert SECRET in on_host and on_host.endswith("[Install]\nWantedBy=multi-user.target\n")  # the key stays there
    docs = host.root_run(f"cat {DOCS}").stdout
    assert "--api-key ***" in docs
    outputs = {
        "freeze": done.stdout + done.stderr,
        "snapshots": shown.stdout,
        "freeze --json": json.dumps(result),
        "documents": docs,
    }
    leaks = [name for name, text in outputs.items() if SECRET in text]
    leaks += [
        str(p) for p in Path(host.workspace).rglob("*") if p.is_file() and SECRET in p.read_text(errors="replace")
    ]
    assert leaks == [], f"the API key appears in: {leaks}"
