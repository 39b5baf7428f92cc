"""The SSH transport against a real OpenSSH sshd on loopback."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from pathlib import Path

import pytest

from console.host.audit import AuditLog
from console.host.base import SudoPasswordRequired
from console.host.knownhosts import HostKeyRefused
from console.host.ssh import SHELL_POOL, ConnectionState, SshTransport
from console.host.targets import Target, resolve_target
from tests.host.sshd_lab import TEST_USER, ClientSide, Sshd


def make_transport(client: ClientSide, **kwargs: object) -> SshTransport:
    target = resolve_target(client.alias, profiles_dir=client.dir / "profiles", ssh_config=str(client.config))
    return SshTransport(target, audit=AuditLog(client.dir / "logs" / "audit.jsonl"), **kwargs)  # type: ignore[arg-type]


async def test_runs_a_command_with_quoted_arguments(client: ClientSide) -> None:
    transport = make_transport(client)
    try:
        result = await transport.run(["printf", "%s|", "a b", "$HOME", "'q'"])
        assert result.ok
        assert result.stdout == "a b|$HOME|'q'|"
        assert transport.state.phase == "connected"
        failed = await transport.run(["sh", "-c", "echo oops >&2; exit 3"])
        assert (failed.exit_status, failed.stderr.strip()) == (3, "oops")
        assert (await transport.run(["cat"], timeout=5)).stdout == ""  # stdin is closed when there is no input
        assert (await transport.run(["cat"], input="unit text\n")).stdout == "unit text\n"
    finally:
        await transport.close()


async def test_unknown_host_key_is_refused_with_its_fingerprint(client: ClientSide, sshd: Sshd) -> None:
    client.known_hosts.write_text("")
    transport = make_transport(client)
    with pytest.raises(HostKeyRefused) as refused:
        await transport.run(["true"])
    fingerprint = (await transport.server_host_key()).get_fingerprint("sha256")
    assert fingerprint in str(refused.value)
    assert "opsconsole trust lab" in str(refused.value)
    assert "not in known_hosts" in str(refused.value)
    await transport.close()


async def test_changed_host_key_is_refused(client: ClientSide, sshd: Sshd, tmp_path: Path) -> None:
    import subprocess

    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-f", str(tmp_path / "other")], check=True)
    other = (tmp_path / "other.pub").read_text().strip()
    client.known_hosts.write_text(f"[127.0.0.1]:{sshd.port} {other}\n")
    transport = make_transport(client)
    with pytest.raises(HostKeyRefused, match="CHANGED"):
        await transport.run(["true"])
    await transport.close()


async def test_more_concurrent_commands_than_max_sessions_all_succeed(client: ClientSide) -> None:
    transport = make_transport(client)
    try:
        results = await asyncio.gather(*(transport.run(["echo", str(i)]) for i in range(40)))
        assert [r.stdout.strip() for r in results] == [str(i) for i in range(40)]
    finally:
        await transport.close()


async def test_a_burst_past_the_hosts_max_sessions_waits_for_slots_on_the_same_connection(
    narrow_client: Callable[[int], ClientSide],
) -> None:
    """An sshd allowing fewer sessions than the shells and the channel budget together refuses channels in a
    burst ("open failed"); the commands wait for slots instead of dropping the connection, which would end
    every other command in flight without its exit status."""
    states: list[ConnectionState] = []
    transport = make_transport(narrow_client(SHELL_POOL + 2), on_state=states.append)
    try:
        results = await asyncio.gather(*(transport.run(["echo", str(i)]) for i in range(40)))
        assert [r.stdout.strip() for r in results] == [str(i) for i in range(40)]
        assert [s.phase for s in states] == ["connecting", "connected"]
    finally:
        await transport.close()


async def test_a_host_whose_max_sessions_the_shells_fill_still_streams_and_runs_commands(
    narrow_client: Callable[[int], ClientSide],
) -> None:
    """With MaxSessions as small as the shell pool, the shells would hold every session: a stream (the journal
    pane's follow) gets one when an idle shell gives its own up, and the commands keep running meanwhile."""
    states: list[ConnectionState] = []
    transport = make_transport(narrow_client(SHELL_POOL), on_state=states.append)
    try:
        assert (await transport.run(["true"])).ok
        async with asyncio.timeout(10):
            while transport.command_shells < SHELL_POOL:  # the pool fills in the background: every session taken
                await asyncio.sleep(0.01)
        lines = [line async for line in transport.stream(["sh", "-c", "echo one; echo two"])]
        assert transport.command_shells == SHELL_POOL - 1
        results = await asyncio.gather(*(transport.run(["echo", str(i)]) for i in range(12)))
        assert lines == ["one", "two"]
        assert [r.stdout.strip() for r in results] == [str(i) for i in range(12)]
        assert [s.phase for s in states] == ["connecting", "connected"]
    finally:
        await transport.close()


async def test_reconnects_after_the_sshd_is_killed(client: ClientSide, sshd: Sshd) -> None:
    states: list[ConnectionState] = []
    transport = make_transport(client, on_state=states.append)
    try:
        assert (await transport.run(["echo", "before"])).stdout.strip() == "before"
        sshd.stop()
        deadline = asyncio.get_running_loop().time() + 5
        while transport.state.phase == "connected":  # the drop is noticed without any command
            assert asyncio.get_running_loop().time() < deadline, "drop not noticed"
            await asyncio.sleep(0.01)
        await asyncio.to_thread(sshd.start)
        assert (await transport.run(["echo", "after"])).stdout.strip() == "after"
        phases = [s.phase for s in states]
        assert "reconnecting" in phases
        assert phases[-1] == "connected"
        assert any(s.phase == "reconnecting" and s.last_error for s in states)
    finally:
        await transport.close()
        if sshd.process is None:
            sshd.start()


async def test_closed_while_reconnecting_it_leaves_nothing_running(client: ClientSide, sshd: Sshd) -> None:
    """A CLI verb ending after a dropped link closes its transport mid-reconnect: the reconnect has ended when
    close() returns, not only been told to (left to asyncio.run's final sweep, a reconnect caught starting its
    ProxyCommand never ends, and the CLI hangs on exit)."""
    transport = make_transport(client)
    try:
        assert (await transport.run(["true"])).ok
        sshd.stop()
        while transport.state.phase != "reconnecting":
            await asyncio.sleep(0.01)  # polls the transport's state
        await transport.close()
        here = asyncio.current_task()
        assert [t for t in asyncio.all_tasks() if t is not here and not t.done()] == []
    finally:
        if sshd.process is None:
            sshd.start()


async def test_port_forward_reaches_a_server_on_the_host(client: ClientSide) -> None:
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readline()
        writer.write(b"HTTP/1.0 200 OK\r\nContent-Length: 2\r\n\r\nok")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    transport = make_transport(client)
    try:
        local = await transport.forward_port("127.0.0.1", port)
        reader, writer = await asyncio.open_connection("127.0.0.1", local)
        writer.write(b"GET / HTTP/1.0\r\n\r\n")
        body = await reader.read()
        writer.close()
        assert body.endswith(b"ok")
        assert await transport.forward_port("127.0.0.1", port) == local
    finally:
        await transport.close()
        server.close()
        await server.wait_closed()


async def test_audit_log_records_commands_without_secrets(client: ClientSide) -> None:
    transport = make_transport(client)
    try:
        await transport.run(["echo", "--api-key", "sk-very-secret", "HF_TOKEN=hf_secret"])
        await transport.run(["sh", "-c", "cat >/dev/null"], input="--api-key sk-in-stdin")
    finally:
        await transport.close()
    text = (client.dir / "logs" / "audit.jsonl").read_text()
    assert "sk-very-secret" not in text and "hf_secret" not in text and "sk-in-stdin" not in text
    entries = [json.loads(line) for line in text.splitlines()]
    assert entries[0]["host"] == "lab"
    assert entries[0]["exit_status"] == 0
    assert entries[0]["command"].startswith("echo --api-key '***'") or "***" in entries[0]["command"]
    assert {"time", "host", "command", "exit_status", "duration_s"} <= entries[0].keys()


async def test_sudo_password_prompt_becomes_a_clear_error(client: ClientSide) -> None:
    transport = make_transport(client)
    try:
        with pytest.raises(SudoPasswordRequired, match="NOPASSWD"):
            await transport.run(["true"], sudo=True)
    finally:
        await transport.close()


async def test_stream_yields_lines_as_they_come(client: ClientSide) -> None:
    transport = make_transport(client)
    try:
        lines = [line async for line in transport.stream(["sh", "-c", "for i in 1 2 3; do echo $i; done"])]
        assert lines == ["1", "2", "3"]
    finally:
        await transport.close()


async def test_port_forward_keeps_its_local_port_across_a_reconnect(client: ClientSide, sshd: Sshd) -> None:
    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"hello")
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(answer, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    transport = make_transport(client)
    try:
        local = await transport.forward_port("127.0.0.1", port)
        sshd.stop()
        await asyncio.to_thread(sshd.start)
        assert (await transport.run(["true"])).ok  # reconnected (waits for the background reconnect)
        deadline = asyncio.get_running_loop().time() + 5
        while True:
            try:
                reader, writer = await asyncio.open_connection("127.0.0.1", local)
                data = await reader.read()
                writer.close()
                if data == b"hello":
                    break
            except OSError:
                pass
            assert asyncio.get_running_loop().time() < deadline, "the forward did not come back"
            await asyncio.sleep(0.02)
        assert await transport.forward_port("127.0.0.1", port) == local
    finally:
        await transport.close()
        server.close()
        await server.wait_closed()
        if sshd.process is None:
            sshd.start()


async def test_aes_gcm_is_offered_first_unless_the_ssh_config_names_its_ciphers(client: ClientSide) -> None:
    """A cipher object per packet (asyncssh's chacha20-poly1305) was a twentieth of the console's CPU with 16 hosts:
    AES-GCM goes first. An operator's `Ciphers` line is what is offered, as written."""
    transport = make_transport(client)
    try:
        assert (await transport.run(["true"])).ok
        assert transport._conn is not None
        assert transport._conn.get_extra_info("send_cipher").startswith("aes")
        assert transport._conn.get_extra_info("send_cipher").endswith("-gcm@openssh.com")
    finally:
        await transport.close()
    client.config.write_text(client.config.read_text() + "  Ciphers chacha20-poly1305@openssh.com\n")
    transport = make_transport(client)
    try:
        assert transport.ciphers is None
        assert (await transport.run(["true"])).ok
        assert transport._conn is not None
        assert transport._conn.get_extra_info("send_cipher") == "chacha20-poly1305@openssh.com"
    finally:
        await transport.close()


def test_known_hosts_none_in_ssh_config_is_refused(client: ClientSide) -> None:
    from console.host.base import HostError

    client.config.write_text(
        client.config.read_text().replace(f"UserKnownHostsFile {client.known_hosts}", "UserKnownHostsFile none")
    )
    transport = make_transport(client)
    with pytest.raises(HostError, match="always verifies"):
        _ = transport.known_hosts


async def test_command_timeout_is_reported(client: ClientSide) -> None:
    from console.host.base import HostError

    transport = make_transport(client)
    try:
        # Connected, with a command shell idle first: the 0.2 s are then the command's own. On a fresh transport
        # they also cover the connect and the shell's start, which a loaded machine does not finish in 0.2 s
        # (HostNotAnswering "while a command shell was starting", once in a fresh-clone run).
        assert (await transport.run(["true"])).exit_status == 0
        with pytest.raises(HostError, match=r"did not finish within 0\.2 s"):
            await transport.run(["sleep", "5"], timeout=0.2)
    finally:
        await transport.close()


async def test_a_stream_cut_by_a_drop_raises_connection_dropped(client: ClientSide, sshd: Sshd) -> None:
    from console.host.base import ConnectionDropped

    transport = make_transport(client)
    try:
        lines = transport.stream(["sh", "-c", "echo first; exec sleep 30"])
        assert await anext(lines) == "first"
        sshd.stop()
        with pytest.raises(ConnectionDropped):
            await asyncio.wait_for(anext(lines), 10)
        await asyncio.to_thread(sshd.start)
        resumed = [line async for line in transport.stream(["echo", "again"])]
        assert resumed == ["again"]
    finally:
        await transport.close()
        if sshd.process is None:
            sshd.start()


def _behind_lab(client: ClientSide, sshd: Sshd, alias: str, port: int) -> Target:
    """A Host ALIAS in the test's ssh_config, reached through `lab` with ProxyJump."""
    client.config.write_text(
        client.config.read_text()
        + f"Host {alias}\n  Hostname 127.0.0.1\n  Port {port}\n  User {TEST_USER}\n  ProxyJump lab\n"
        + f"  IdentityFile {sshd.client_key}\n  IdentitiesOnly yes\n  UserKnownHostsFile {client.known_hosts}\n"
    )
    return resolve_target(alias, profiles_dir=client.dir, ssh_config=str(client.config))


async def test_proxyjump_from_ssh_config_is_honoured(client: ClientSide, sshd: Sshd) -> None:
    # `jumped` is reached through `lab` (a direct-tcpip channel from the sshd to itself): ProxyJump works
    # and both hops verify their host keys against the same known_hosts.
    transport = SshTransport(_behind_lab(client, sshd, "jumped", sshd.port))
    try:
        assert transport.options.tunnel == "lab"
        assert (await transport.run(["echo", "via-jump"])).stdout.strip() == "via-jump"
    finally:
        await transport.close()


async def test_keys_from_the_ssh_agent(client: ClientSide, sshd: Sshd, monkeypatch: pytest.MonkeyPatch) -> None:
    import subprocess

    socket_path = client.dir / "agent.sock"
    agent = subprocess.Popen(["ssh-agent", "-D", "-a", str(socket_path)], stdout=subprocess.DEVNULL)
    try:
        deadline = asyncio.get_running_loop().time() + 5
        while not socket_path.exists():
            assert asyncio.get_running_loop().time() < deadline, "ssh-agent did not start"
            await asyncio.sleep(0.01)
        monkeypatch.setenv("SSH_AUTH_SOCK", str(socket_path))
        subprocess.run(["ssh-add", "-q", str(sshd.client_key)], check=True, env={"SSH_AUTH_SOCK": str(socket_path)})
        client.config.write_text(
            f"Host agentlab\n  Hostname 127.0.0.1\n  Port {sshd.port}\n  User {TEST_USER}\n"
            f"  UserKnownHostsFile {client.known_hosts}\n"
        )
        target = resolve_target("agentlab", profiles_dir=client.dir, ssh_config=str(client.config))
        transport = SshTransport(target)
        try:
            assert (await transport.run(["echo", "agent"])).stdout.strip() == "agent"
        finally:
            await transport.close()
    finally:
        agent.kill()
        agent.wait()


async def test_default_ssh_config_in_home_is_read(
    client: ClientSide, sshd: Sshd, monkeypatch: pytest.MonkeyPatch
) -> None:
    # No --ssh-config: ~/.ssh/config (HOME is the test's tmp dir) gives HostName, Port and UserKnownHostsFile,
    # and the host key is checked under the HostName, not the alias.
    (client.dir / ".ssh").mkdir(exist_ok=True)
    (client.dir / ".ssh" / "config").write_text(client.config.read_text())
    target = resolve_target("lab", profiles_dir=client.dir / "profiles")
    transport = SshTransport(target)
    try:
        assert transport.identity.name == f"[127.0.0.1]:{sshd.port}"
        assert transport.known_hosts == [str(client.known_hosts)]
        assert (await transport.run(["echo", "home"])).stdout.strip() == "home"
    finally:
        await transport.close()


async def test_a_jump_host_that_cannot_reach_the_target_is_a_clear_error(client: ClientSide, sshd: Sshd) -> None:
    # The jump host answers, but nothing listens behind it: asyncssh raises ChannelOpenError, which must
    # become a HostError naming the host (the verbs print HostErrors; anything else is a traceback).
    from console.host.base import HostError
    from tests.host.sshd_lab import _free_port

    transport = SshTransport(_behind_lab(client, sshd, "unreachable", _free_port()))
    try:
        with pytest.raises(HostError, match="cannot connect to unreachable"):
            await transport.run(["true"])
        assert transport.state.phase == "failed"
    finally:
        await transport.close()


async def test_a_name_that_does_not_resolve_says_what_target_can_be(tmp_path: Path) -> None:
    from console.host.base import HostError

    target = resolve_target("ops@no-such-host.invalid", profiles_dir=tmp_path)
    transport = SshTransport(target)
    try:
        with pytest.raises(HostError, match=r"no host of that name; TARGET is a profile"):
            await transport.run(["true"])
    finally:
        await transport.close()
