"""Which host a Prometheus label value names (issue 36): a profile with `ssh = "gpu-a"`, an ssh_config alias whose
HostName is 10.0.0.5, is the host Prometheus labels instance="10.0.0.5:30000" (the address it scraped). The
ssh_config is read with asyncssh's parser from a file here; nothing connects."""

from __future__ import annotations

from pathlib import Path

from console.core.status import host_names
from console.fleet.telemetry import HostNames
from console.host.profile import parse_profile
from console.host.sshconfig import configured_host_name
from console.host.targets import Target, target_from_profile

SSH_CONFIG = """\
Host gpu-a
    HostName 10.0.0.5
    Port 2222
    User ops
Host gpu-b
    HostName %h.dc1.example
Host behind-1 behind-2
    HostName 127.0.0.1
    ProxyJump bastion
Host *
    ServerAliveInterval 5
"""


def _target(label: str, ssh: str, config: Path) -> Target:
    profile = parse_profile({"host": {"ssh": ssh}}, where=label)
    return target_from_profile(label, profile, path=None, ssh_config=(str(config),))


def test_an_alias_is_matched_by_its_name_and_by_the_address_its_ssh_config_gives(tmp_path: Path) -> None:
    config = tmp_path / "ssh_config"
    config.write_text(SSH_CONFIG)
    profiles = {"prod-a": "gpu-a", "prod-b": "ops@gpu-b:22", "plain": "10.0.0.9"}
    names = host_names({label: _target(label, ssh, config) for label, ssh in profiles.items()})
    assert names.host_of("10.0.0.5:30000") == "prod-a" and names.host_of("10.0.0.5:9400") == "prod-a"
    assert names.host_of("gpu-a:30000") == "prod-a" and names.host_of("prod-a") == "prod-a"
    assert names.host_of("gpu-b.dc1.example:30000") == "prod-b"  # HostName's %h expanded as ssh does
    assert names.host_of("10.0.0.9:30000") == "plain"  # no HostName applies: the host itself
    assert names.host_of("10.0.0.6:30000") is None and names.host_of("2222") is None  # the ssh port names nothing


def test_an_address_two_hosts_share_names_neither(tmp_path: Path) -> None:
    config = tmp_path / "ssh_config"
    config.write_text(SSH_CONFIG)
    names = host_names({"one": _target("one", "behind-1", config), "two": _target("two", "behind-2", config)})
    assert names.host_of("127.0.0.1:30000") is None and names.ambiguous == ("127.0.0.1",)
    assert names.host_of("behind-1:30000") == "one" and names.host_of("behind-2:9400") == "two"


def test_a_hosts_own_name_wins_over_another_hosts_alias_in_either_order() -> None:
    for hosts in ({"gpu-b": ["b.example"], "b.example": []}, {"b.example": [], "gpu-b": ["b.example"]}):
        names = HostNames(hosts)
        assert names.host_of("b.example:30000") == "b.example" and names.ambiguous == ()


def test_an_unreadable_ssh_config_leaves_the_alias_as_it_is(tmp_path: Path) -> None:
    config = tmp_path / "ssh_config"
    config.write_text("Host gpu-a\n    HostName\n")  # HostName without its value: asyncssh refuses the file
    target = _target("prod-a", "gpu-a", config)
    assert configured_host_name(target) is None
    assert host_names({"prod-a": target}).host_of("gpu-a:30000") == "prod-a"
    assert configured_host_name(Target(label="local", transport="local")) is None
