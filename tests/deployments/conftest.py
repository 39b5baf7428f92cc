"""Deployment profiles on disk, for the tests of the pure parts: host profiles and a deployment over them."""

from __future__ import annotations

from pathlib import Path

import pytest

HOST = """\
[host]
ssh = "ops@{name}:22"
unit = "sglang.service"

[sglang]
port = 30000
"""

TWO_NODES = """\
description = "Kimi over two nodes"

[[member]]
host = "gpu-a"
role = "rank"
rank = 0

[[member]]
host = "gpu-b"
role = "rank"
rank = 1
"""

PD = """\
[router]
url = "http://router-1:8000"
metrics = "http://router-1:29000"

[[member]]
host = "gpu-a"
role = "prefill"
bootstrap_port = 8998

[[member]]
host = "gpu-b"
role = "prefill"

[[member]]
host = "gpu-c"
role = "decode"

[[member]]
host = "gpu-d"
role = "decode"
"""


def write_hosts(profiles: Path, *names: str) -> None:
    profiles.mkdir(parents=True, exist_ok=True)
    for name in names:
        (profiles / f"{name}.toml").write_text(HOST.format(name=name))


def write_deployment(profiles: Path, name: str, text: str) -> Path:
    folder = profiles / "deployments"
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"{name}.toml"
    path.write_text(text)
    return path


@pytest.fixture
def profiles(tmp_path: Path) -> Path:
    folder = tmp_path / "profiles"
    write_hosts(folder, "gpu-a", "gpu-b", "gpu-c", "gpu-d")
    write_deployment(folder, "kimi-2node", TWO_NODES)
    write_deployment(folder, "kimi-pd", PD)
    return folder
