"""A deployment profile read and refused: profiles/deployments/NAME.toml, its members on host profiles with roles."""

from __future__ import annotations

from pathlib import Path

import pytest

from console.core.deployment import Deployment, DeploymentError, resolve_deployment
from tests.deployments.conftest import PD, TWO_NODES, write_deployment


def test_two_nodes_are_one_deployment_of_ranks(profiles: Path) -> None:
    deployment = resolve_deployment("kimi-2node", profiles)
    assert deployment.kind == "multinode"
    assert [(m.name, m.host, m.role, m.rank) for m in deployment.members] == [
        ("gpu-a", "gpu-a", "rank", 0),
        ("gpu-b", "gpu-b", "rank", 1),
    ]
    assert deployment.front_door is not None and deployment.front_door.name == "gpu-a"
    assert [m.serves_api for m in deployment.ranks] == [True, False]  # rank 1's /health is a dummy 200
    assert deployment.description == "Kimi over two nodes"
    assert deployment.members[1].target.ssh_host == "gpu-b"


def test_prefill_and_decode_behind_smg(profiles: Path) -> None:
    deployment = resolve_deployment("kimi-pd", profiles)
    assert deployment.kind == "pd"
    assert [m.name for m in deployment.prefill] == ["gpu-a", "gpu-b"]
    assert [m.name for m in deployment.decode] == ["gpu-c", "gpu-d"]
    assert deployment.front_door is None and deployment.router is not None
    assert deployment.router.url == "http://router-1:8000"
    assert deployment.members[0].bootstrap_port == 8998 and deployment.members[1].bootstrap_port is None
    assert [m.worker_type for m in deployment.members] == ["prefill", "prefill", "decode", "decode"]


def test_a_host_is_the_deployment_of_one_member(profiles: Path) -> None:
    deployment = resolve_deployment("gpu-c", profiles)
    assert deployment.kind == "single" and deployment.is_single
    assert deployment == Deployment.single(deployment.members[0].target)
    assert deployment.front_door == deployment.members[0]


def test_two_members_on_one_host_with_their_own_units_and_ports(profiles: Path) -> None:
    write_deployment(
        profiles,
        "shared",
        '[router]\nurl = "http://r:8000"\n'
        '[[member]]\nhost = "gpu-a"\nrole = "prefill"\nunit = "sglang-prefill.service"\nport = 30001\n'
        '[[member]]\nhost = "gpu-a"\nrole = "decode"\nunit = "sglang-decode.service"\nport = 30002\n',
    )
    deployment = resolve_deployment("shared", profiles)
    assert [m.name for m in deployment.members] == ["gpu-a/sglang-prefill.service", "gpu-a/sglang-decode.service"]
    assert [(m.unit, m.target.sglang.port) for m in deployment.members] == [
        ("sglang-prefill.service", 30001),
        ("sglang-decode.service", 30002),
    ]


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (TWO_NODES.replace("rank = 1", "rank = 2"), "the ranks are 0, 2; a deployment of 2 nodes has ranks 0 to 1"),
        (TWO_NODES.replace("rank = 1\n", ""), "a rank member needs rank = N"),
        (TWO_NODES.replace('host = "gpu-b"', 'host = "gpu-z"'), "member host 'gpu-z': no host profile"),
        (TWO_NODES.replace('role = "rank"\nrank = 1', 'role = "decode"'), "rank members beside prefill or decode"),
        (TWO_NODES + '[router]\nurl = "http://r:1"\n', "the ranks' front door is rank 0"),
        (TWO_NODES.replace("description", "descripton"), "descripton: unknown key"),
        (TWO_NODES.replace('role = "rank"\nrank = 1', 'role = "ranks"\nrank = 1'), "[[member]] 2 role: expected"),
        (PD.replace('[router]\nurl = "http://router-1:8000"\nmetrics = "http://router-1:29000"\n', ""),
         "add [router] url"),
        (PD.replace('role = "decode"', 'role = "prefill"'), "add a decode member"),
        (PD.replace("http://router-1:8000", "router-1:8000"), "expected an http(s) URL"),
        (PD.replace('role = "prefill"\nbootstrap_port = 8998', 'role = "decode"\nbootstrap_port = 8998'),
         "bootstrap_port is a prefill server's"),
        (TWO_NODES.replace('host = "gpu-b"', 'host = "gpu-a"'), "the same unit on the same host is two members"),
        ("[[member]]\nhost = 'gpu-a'\nrole = 'rank'\nrank = 0\n", "one rank is a single host"),
        ("description = 'x'\n", "member: missing"),
    ],
)  # fmt: skip
def test_a_malformed_profile_names_the_file_the_member_and_the_fix(profiles: Path, text: str, says: str) -> None:
    path = write_deployment(profiles, "bad", text)
    with pytest.raises(DeploymentError) as caught:
        resolve_deployment("bad", profiles)
    assert str(path) in str(caught.value)
    assert says in str(caught.value)


def test_a_name_both_a_host_and_a_deployment_is_refused(profiles: Path) -> None:
    write_deployment(profiles, "gpu-a", TWO_NODES)
    with pytest.raises(DeploymentError, match=r"both a host .* and a deployment"):
        resolve_deployment("gpu-a", profiles)


def test_not_toml_is_said_so(profiles: Path) -> None:
    write_deployment(profiles, "broken", "[[member]\n")
    with pytest.raises(DeploymentError, match="not valid TOML"):
        resolve_deployment("broken", profiles)


def test_a_member_host_is_known_as_one_and_its_change_alone_is_refused(profiles: Path) -> None:
    from console.core.deployment import membership, refuse_member_change
    from console.host.targets import resolve_target

    rank1 = resolve_target("gpu-b", profiles_dir=profiles)
    found = membership(rank1, profiles)
    assert found is not None and (found[0].name, found[1].rank) == ("kimi-2node", 1)
    with pytest.raises(DeploymentError) as refused:
        refuse_member_change(rank1, profiles, "a change")
    said = str(refused.value)
    assert "gpu-b (sglang.service) is rank 1 of the deployment kimi-2node" in said
    assert "opsconsole apply kimi-2node --set FLAG=VALUE" in said and "opsconsole restart kimi-2node" in said
    other = profiles / "gpu-z.toml"
    other.write_text((profiles / "gpu-a.toml").read_text())
    refuse_member_change(resolve_target("gpu-z", profiles_dir=profiles), profiles, "a change")  # not a member: fine
