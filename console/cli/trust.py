"""`opsconsole trust TARGET`: show the host's key fingerprint; record it only after the operator types yes.

The key goes into the known_hosts file ssh would use for that host (UserKnownHostsFile from the
ssh_config, else ~/.ssh/known_hosts). A changed key replaces the old entry, after the same confirmation.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TextIO

from console.cli.common import run_verb, workspace_of
from console.errors import ExitCode
from console.host.knownhosts import HostKeyStatus, fingerprint, key_status, record_key
from console.host.ssh import SshTransport
from console.host.targets import resolve_target


async def trust_main(args: argparse.Namespace, stdin: TextIO, out: TextIO) -> int:
    target = resolve_target(args.target, profiles_dir=workspace_of(args).profiles, ssh_config=args.ssh_config)
    if target.transport != "ssh":
        print(f"{target.label} is a {target.transport} host; there is no SSH host key to trust", file=out)
        return ExitCode.OK
    transport = SshTransport(target)
    files = [Path(p) for p in transport.known_hosts]
    key = await transport.server_host_key()
    status, recorded = key_status(files, transport.identity, key)
    name = transport.identity.name
    print(f"Host {name} ({target.label}) presents a {key.get_algorithm()} key:", file=out)
    print(f"  {fingerprint(key)}", file=out)
    if status is HostKeyStatus.TRUSTED:
        print(f"It is already trusted in {files[0]}.", file=out)
        return ExitCode.OK
    if status is HostKeyStatus.CHANGED:
        print("WARNING: this is NOT the key recorded for this host, which is:", file=out)
        for old in recorded:
            print(f"  {old}", file=out)
        print("Someone may be intercepting the connection, or the host was reinstalled.", file=out)
    print(f"Compare it with the host: ssh-keygen -lf /etc/ssh/ssh_host_{_kind(key)}_key.pub", file=out)
    out.write(f"Type yes to record it in {files[0]}: ")
    out.flush()
    answer = stdin.readline().strip()
    if answer != "yes":
        print("Not recorded.", file=out)
        return ExitCode.FAILED
    record_key(files[0], transport.identity, key, replace=status is HostKeyStatus.CHANGED)
    print(f"Recorded {name} in {files[0]}.", file=out)
    return ExitCode.OK


def _kind(key: object) -> str:
    algorithm = str(getattr(key, "get_algorithm", lambda: "")())
    return {"ssh-ed25519": "ed25519", "ssh-rsa": "rsa"}.get(algorithm, "ecdsa" if "ecdsa" in algorithm else "*")


def run(args: argparse.Namespace) -> int:
    return run_verb("trust", lambda: trust_main(args, sys.stdin, sys.stdout))
