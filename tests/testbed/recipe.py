"""What a testbed GPU host is made of: pure data and text, no I/O.

Everything that ends up inside the cached Debian tree is defined here, so that the cache key (a hash of
this recipe) changes whenever the tree would change, and so that it can be unit-tested without root.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Sequence

SUITE = "bookworm"
PACKAGES = (
    "systemd",
    "systemd-sysv",
    "dbus",
    "openssh-server",
    "python3",
    "iproute2",
    "procps",
    "sudo",
    "libnss-myhostname",
)

# Inside the container: the repository (read-only), the Python packages it needs, and the per-boot files
# (host key, authorized key) that the launcher binds in.
REPO_MOUNT = "/opt/opsconsole"
SITE_MOUNT = "/opt/opsconsole-site"
BOOT_MOUNT = "/etc/opsconsole-testbed"
PYTHONPATH = f"{REPO_MOUNT}:{SITE_MOUNT}"

SUDO_USER = "ops"  # NOPASSWD sudo, member of systemd-journal
PASSWORD_SUDO_USER = "nosudo"  # sudo asks for a password it does not have: the sudo-password error path

# Units that are useless or harmful in a container (they spin on the missing console, or reach the network).
MASKED_UNITS = (
    "getty@.service",
    "console-getty.service",
    "systemd-timesyncd.service",
    "apt-daily.timer",
    "apt-daily-upgrade.timer",
)

SSHD_DROP_IN = f"""\
# opsconsole testbed: host key and client key are generated per boot and bound in at {BOOT_MOUNT}.
HostKey {BOOT_MOUNT}/ssh_host_ed25519_key
AuthorizedKeysFile .ssh/authorized_keys {BOOT_MOUNT}/authorized_keys
PasswordAuthentication no
KbdInteractiveAuthentication no
PermitRootLogin no
"""

NVIDIA_SMI_STAND_IN = f"""\
#!/bin/sh
# opsconsole testbed: the simulator's nvidia-smi, printing the real format for the simulated GPUs.
PYTHONPATH={PYTHONPATH}
export PYTHONPATH
PYTHONDONTWRITEBYTECODE=1
export PYTHONDONTWRITEBYTECODE
exec python3 -m console.sim.nvidia_smi "$@"
"""

SUDOERS = {
    SUDO_USER: f"{SUDO_USER} ALL=(ALL:ALL) NOPASSWD: ALL\n",
    PASSWORD_SUDO_USER: f"{PASSWORD_SUDO_USER} ALL=(ALL:ALL) ALL\n",
}

SERVICE_NAME = "sglang.service"
SERVICE_PATH = f"/etc/systemd/system/{SERVICE_NAME}"
SGLANG_PORT = 30000

# The launch flags of the operators' real Qwen3.5-122B setup, served by the simulator.
SIM_LAUNCH_FLAGS: tuple[tuple[str, str | None], ...] = (
    ("--model-path", "Qwen/Qwen3.5-122B-A10B-FP8"),
    ("--tp-size", "4"),
    ("--speculative-algorithm", "EAGLE"),
    ("--speculative-num-steps", "2"),
    ("--speculative-eagle-topk", "1"),
    ("--speculative-num-draft-tokens", "3"),
    ("--mem-fraction-static", "0.85"),
    ("--host", "127.0.0.1"),
    ("--port", str(SGLANG_PORT)),
    ("--enable-metrics", None),
    ("--sim-profile", "qwen3.5-122b-fp8-4x-rtxpro6000"),
    ("--sim-time-scale", "0.01"),
)


def render_exec_start(program: Sequence[str], flags: Iterable[tuple[str, str | None]]) -> str:
    """ExecStart= as operators write it: the launcher on the first line, one flag per continued line."""
    lines = [" ".join(program)]
    lines += [flag if value is None else f"{flag} {value}" for flag, value in flags]
    return "ExecStart=" + " \\\n    ".join(lines)


def sglang_unit(
    exec_start: str | None = None,
    *,
    description: str = "SGLang server (Qwen3.5-122B-A10B-FP8, EAGLE speculative decoding)",
) -> str:
    """The sglang.service a GPU host runs: the simulator with real flags, unless exec_start says otherwise.

    exec_start replaces the whole ExecStart= line (tests of the testbed itself run a trivial server).
    """
    if exec_start is None:
        exec_start = render_exec_start(("/usr/bin/python3", "-m", "console.sim"), SIM_LAUNCH_FLAGS)
    return f"""\
[Unit]
Description={description}
After=network-online.target
Wants=network-online.target

[Service]
Type=simple
Environment="PYTHONPATH={PYTHONPATH}" "PYTHONDONTWRITEBYTECODE=1"
Environment="SGLANG_ENABLE_SPEC_V2=1"
Environment=CUDA_VISIBLE_DEVICES=0,1,2,3
Environment=HF_HOME=/var/lib/sglang/hf
WorkingDirectory=/var/lib/sglang
{exec_start}
Restart=on-failure
RestartSec=2
TimeoutStartSec=900
TimeoutStopSec=30
LimitNOFILE=65535

[Install]
WantedBy=multi-user.target
"""


def tree_recipe(mirror: str) -> dict[str, object]:
    """Everything that decides the cached tree's content; its hash names the cache entry."""
    return {
        "suite": SUITE,
        "variant": "minbase",
        "packages": list(PACKAGES),
        "mirror": mirror,
        "masked": list(MASKED_UNITS),
        "sshd": SSHD_DROP_IN,
        "nvidia_smi": NVIDIA_SMI_STAND_IN,
        "sudoers": SUDOERS,
        "users": [SUDO_USER, PASSWORD_SUDO_USER],
        "mounts": [REPO_MOUNT, SITE_MOUNT, BOOT_MOUNT],
        "layout": 1,  # bump when the build steps change in a way the rest of the recipe does not show
    }


def site_recipe(requirements: Sequence[str], python_tag: str) -> dict[str, object]:
    return {"requirements": sorted(requirements), "python": python_tag, "layout": 1}


def recipe_key(recipe: dict[str, object]) -> str:
    return hashlib.sha256(json.dumps(recipe, sort_keys=True).encode()).hexdigest()[:16]


class MirrorNotFound(Exception):
    pass


_DEB822_STANZA = re.compile(r"\n\s*\n")


def mirror_from_apt_sources(deb822_files: Sequence[str], one_line_lists: Sequence[str], suite: str = SUITE) -> str:
    """The Debian mirror this machine already uses for `suite`, read from its own apt sources.

    deb822_files: texts of /etc/apt/sources.list.d/*.sources; one_line_lists: texts of sources.list files.
    The first `Types: deb` stanza that carries `suite` itself (not -security or -updates) wins; without one,
    the first plain `deb URI suite ...` line. Never a hard-coded host: the machine decides.
    """
    for text in deb822_files:
        for stanza in _DEB822_STANZA.split(text):
            fields = _deb822_fields(stanza)
            if "deb" not in fields.get("types", "").split():
                continue
            if suite in fields.get("suites", "").split() and fields.get("uris"):
                return fields["uris"].split()[0].rstrip("/")
    for text in one_line_lists:
        for line in text.splitlines():
            words = _strip_options(line.split("#", 1)[0].split())
            if len(words) >= 3 and words[0] == "deb" and words[2] == suite:
                return words[1].rstrip("/")
    raise MirrorNotFound(
        f"no apt source for Debian {suite} on this machine (looked in /etc/apt/sources.list.d/*.sources and "
        f"/etc/apt/sources.list); add one, or set OPSCONSOLE_TESTBED_MIRROR to a Debian mirror URL"
    )


def _deb822_fields(stanza: str) -> dict[str, str]:
    fields: dict[str, str] = {}
    last: str | None = None
    for line in stanza.splitlines():
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        if line[0].isspace() and last is not None:  # continuation line
            fields[last] += " " + line.strip()
            continue
        key, sep, value = line.partition(":")
        if sep:
            last = key.strip().lower()
            fields[last] = value.strip()
    return fields


def _strip_options(words: list[str]) -> list[str]:
    """`deb [arch=amd64 signed-by=...] URI suite` -> without the bracketed options."""
    if len(words) > 1 and words[1].startswith("["):
        end = next((i for i, w in enumerate(words) if w.endswith("]")), None)
        if end is not None:
            return [words[0], *words[end + 1 :]]
    return words
