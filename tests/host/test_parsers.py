"""Pure parsers and helpers of the host layer: systemctl show, journal JSON, targets, quoting, backoff."""

from __future__ import annotations

import json
import random
import shlex
from datetime import UTC, datetime
from pathlib import Path

import pytest

from console.host.base import HostError
from console.host.commands import shell_command, sudo_wants_password
from console.host.journal import CursorDeduplicator, decode_field, journalctl_argv, parse_journal_line
from console.host.knownhosts import HostIdentity, known_hosts_files
from console.host.ssh import ReconnectPolicy
from console.host.systemd import backup_path, parse_show, parse_systemd_timestamp
from console.host.targets import TargetError, parse_destination, resolve_target
from console.secrets import redact_command as redact

SHOW = """Id=sglang.service
ActiveState=active
SubState=running
MainPID=4242
ExecMainStartTimestamp=Mon 2026-11-30 04:20:00 UTC
NRestarts=2
Result=success
UnitFileState=enabled
NeedDaemonReload=no
FragmentPath=/etc/systemd/system/sglang.service
LoadState=loaded
Environment=A=b C=d
"""


def test_parse_show() -> None:
    state = parse_show(SHOW, "sglang.service")
    assert (state.active_state, state.sub_state, state.main_pid, state.n_restarts) == ("active", "running", 4242, 2)
    assert state.started_at == datetime(2026, 11, 30, 4, 20, tzinfo=UTC)
    assert state.unit_file_state == "enabled" and state.need_daemon_reload is False
    assert state.fragment_path == "/etc/systemd/system/sglang.service"
    assert state.properties["Environment"] == "A=b C=d" and state.running


def test_parse_show_stopped_and_missing() -> None:
    stopped = parse_show("ActiveState=inactive\nSubState=dead\nMainPID=0\nExecMainStartTimestamp=\n", "x.service")
    assert stopped.main_pid is None and stopped.started_at is None and not stopped.running
    with pytest.raises(HostError, match="does not exist"):
        parse_show("LoadState=not-found\nActiveState=inactive\n", "nope.service")


def test_timestamps() -> None:
    assert parse_systemd_timestamp("Mon 2026-11-30 04:20:00.123 UTC") == datetime(2026, 11, 30, 4, 20, tzinfo=UTC)
    plus = parse_systemd_timestamp("Mon 2026-11-30 05:20:00 +0100")
    assert plus is not None and plus.astimezone(UTC) == datetime(2026, 11, 30, 4, 20, tzinfo=UTC)
    assert parse_systemd_timestamp("n/a") is None and parse_systemd_timestamp("") is None


def test_backup_name() -> None:
    when = datetime(2026, 11, 30, 4, 25, tzinfo=UTC)
    assert backup_path("/etc/systemd/system/sglang.service", when).endswith("sglang.service.bak-20261130T042500Z")


def test_journal_fields_decoded_defensively() -> None:
    line = json.dumps(
        {
            "__CURSOR": "s=1;i=2",
            "__REALTIME_TIMESTAMP": "1796012753539438",
            "MESSAGE": [104, 105, 0xFF, 33],
            "PRIORITY": "6",
            "_PID": "77",
        }
    )
    entry = parse_journal_line(line)
    assert entry is not None
    assert entry.message == "hi\ufffd!" and entry.priority == 6 and entry.pid == 77
    assert entry.timestamp.year == 2026
    assert decode_field(["first", "second"]) == "second" and decode_field(None) is None
    assert parse_journal_line("not json") is None and parse_journal_line('{"MESSAGE": "no cursor"}') is None


def test_dedup_and_argv() -> None:
    seen = CursorDeduplicator(capacity=2)
    assert seen.first_time("a") and not seen.first_time("a") and seen.first_time("b") and seen.first_time("c")
    assert seen.first_time("a")  # forgotten beyond capacity
    assert journalctl_argv("sglang.service", lines=5, follow=True, after_cursor=None)[-3:] == ["-n", "5", "-f"]
    assert "--after-cursor=s=1;i=2" in journalctl_argv("u.service", lines=5, follow=False, after_cursor="s=1;i=2")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("gpu-01", (None, "gpu-01", None)),
        ("ops@gpu-01:2222", ("ops", "gpu-01", 2222)),
        ("10.0.0.5", (None, "10.0.0.5", None)),
        ("root@[::1]:22", ("root", "::1", 22)),
    ],
)
def test_destinations(text: str, expected: tuple[str | None, str, int | None]) -> None:
    assert parse_destination(text) == expected


@pytest.mark.parametrize("text", ["gpu;rm -rf /", "a@b@", "host:99999", "-oProxyCommand=x", "us er@h", "[::1"])
def test_bad_destinations_say_what_to_do(text: str) -> None:
    with pytest.raises(TargetError):
        parse_destination(text)


def test_profiles(tmp_path: Path) -> None:
    (tmp_path / "gpu.toml").write_text(
        '[host]\nssh = "ops@gpu-01:2200"\nunit = "sglang-qwen.service"\nsudo = false\n'
        'gpu_command = ["/usr/bin/nvidia-smi"]\n[sglang]\nport = 30001\napi_key_env = "SGL_KEY"\n'
    )
    target = resolve_target("gpu", profiles_dir=tmp_path)
    assert (target.transport, target.ssh_user, target.ssh_host, target.ssh_port) == ("ssh", "ops", "gpu-01", 2200)
    assert target.unit == "sglang-qwen.service" and target.sudo is False
    assert target.gpu_command == ("/usr/bin/nvidia-smi",) and target.sglang.port == 30001
    (tmp_path / "leaky.toml").write_text('[host]\nssh = "h"\n[sglang]\napi_key = "sk-1"\n')
    with pytest.raises(TargetError, match="api_key_env"):
        resolve_target("leaky", profiles_dir=tmp_path)
    (tmp_path / "badunit.toml").write_text('[host]\nssh = "h"\nunit = "x; reboot"\n')
    with pytest.raises(TargetError, match=r"badunit.toml: \[host\] unit: expected a systemd service name"):
        resolve_target("badunit", profiles_dir=tmp_path)
    assert resolve_target("local", profiles_dir=tmp_path).transport == "local"
    assert resolve_target("alias-only", profiles_dir=tmp_path).ssh_host == "alias-only"


def test_example_profile_is_valid() -> None:
    profiles = Path(__file__).parents[2] / "profiles"
    target = resolve_target("example-gpu-host", profiles_dir=profiles)
    assert target.transport == "ssh" and target.sglang.api_key_env == "SGLANG_API_KEY"


def test_shell_command_quotes_and_uses_sudo_n() -> None:
    line = shell_command(["systemctl", "show", "a b;c", "$(x)"], sudo=True)
    assert shlex.split(line) == ["sudo", "-n", "--", "systemctl", "show", "a b;c", "$(x)"]
    with pytest.raises(HostError):
        shell_command(["echo", "nul\x00"])


def test_redact() -> None:
    text = redact("python -m sglang.launch_server --api-key sk-1 --admin-api-key=sk-2 HF_TOKEN=hf_3 --port 30000")
    assert "sk-1" not in text and "sk-2" not in text and "hf_3" not in text and "--port 30000" in text


def test_sudo_detection() -> None:
    assert sudo_wants_password("sudo: a password is required\n")
    assert not sudo_wants_password("Failed to restart x.service: Unit not found.")


def test_backoff_grows_and_is_capped() -> None:
    policy = ReconnectPolicy(initial_delay_s=0.2, max_delay_s=5.0, jitter=0.0)
    assert [policy.delay(n) for n in (1, 2, 3, 10)] == [0.2, 0.4, 0.8, 5.0]
    jittered = ReconnectPolicy(jitter=0.2).delay(1, random.Random(1))
    assert 0.16 <= jittered <= 0.24


def test_known_hosts_none_is_refused() -> None:
    with pytest.raises(HostError, match="always verifies"):
        known_hosts_files(None)
    assert HostIdentity("h", 22).name == "h" and HostIdentity("h", 2222).name == "[h]:2222"


def test_uptime_format() -> None:
    from console.cli.status import format_uptime

    assert format_uptime(None) == "–" and format_uptime(3725.4) == "01:02:05"
    assert format_uptime(2 * 86400 + 61) == "2d 00:01:01"
