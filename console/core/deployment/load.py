"""A TARGET as a deployment: `profiles/deployments/NAME.toml`, else a host (the deployment of one member).

    deployment = resolve_deployment("kimi-2node", workspace)     # the profile's members, their hosts resolved
    deployment = resolve_deployment("gpu-a", workspace)          # Deployment.single(the host's target)

Reads the files; the model and its rules are model.py's.
"""

from __future__ import annotations

import tomllib
from pathlib import Path

from console import hints
from console.core.deployment.model import DEPLOYMENTS_DIR, Deployment, DeploymentError, Member, parse_deployment
from console.host.profile import ProfileError, load_profile
from console.host.targets import Target, resolve_target, target_from_profile


def deployments_dir(profiles_dir: Path) -> Path:
    return profiles_dir / DEPLOYMENTS_DIR


def deployment_names(profiles_dir: Path) -> list[str]:
    """The deployments the workspace names (profiles/deployments/NAME.toml)."""
    folder = deployments_dir(profiles_dir)
    if not folder.is_dir():
        return []
    return sorted(p.stem for p in folder.iterdir() if p.suffix == ".toml" and p.is_file())


def is_deployment(text: str, profiles_dir: Path) -> bool:
    """Whether TARGET names a deployment profile (not a host)."""
    return bool(text) and "/" not in text and (deployments_dir(profiles_dir) / f"{text}.toml").is_file()


def load_deployment(name: str, profiles_dir: Path, *, ssh_config: str | None = None) -> Deployment:
    """profiles/deployments/NAME.toml, every member's host profile resolved; DeploymentError naming what to fix."""
    path = deployments_dir(profiles_dir) / f"{name}.toml"
    host_profile = profiles_dir / f"{name}.toml"
    if host_profile.is_file():
        raise DeploymentError(
            f"{name}: both a host ({host_profile}) and a deployment ({path}); rename one of them, so that the "
            "name says which"
        )
    try:
        data = tomllib.loads(path.read_text())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise DeploymentError(f"{path}: not valid TOML ({exc}); fix the file or remove it") from None
    except OSError as exc:
        raise DeploymentError(f"{path}: cannot be read ({exc.strerror})") from None
    configs = (str(Path(ssh_config).expanduser()),) if ssh_config else ()

    def target_of(host: str) -> Target:
        profile = profiles_dir / f"{host}.toml"
        if not profile.is_file():
            raise DeploymentError(
                f"{path}: member host {host!r}: no host profile {profile}; write one (see "
                "profiles/example-gpu-host.toml) or correct the name"
            )
        return target_from_profile(host, load_profile(profile), path=profile, ssh_config=configs)

    return parse_deployment(data, name=name, where=str(path), target_of=target_of)


def resolve_deployment(text: str, profiles_dir: Path, *, ssh_config: str | None = None) -> Deployment:
    """A deployment profile's deployment, else the host TARGET names as the deployment of one member."""
    if is_deployment(text, profiles_dir):
        return load_deployment(text, profiles_dir, ssh_config=ssh_config)
    return Deployment.single(resolve_target(text, profiles_dir=profiles_dir, ssh_config=ssh_config))


def refuse_deployment(text: str, profiles_dir: Path, verb: str) -> None:
    """The host verbs (logs, trust) take a host: for a deployment, DeploymentError naming its members' hosts."""
    if is_deployment(text, profiles_dir):
        deployment = load_deployment(text, profiles_dir)
        hosts = ", ".join(dict.fromkeys(m.host for m in deployment.members))
        raise DeploymentError(
            f"{text} is a deployment (profiles/deployments/{text}.toml); {verb} takes one host: one of its members' "
            f"hosts, {hosts} (status, apply, restart and connect take the deployment)"
        )


def membership(target: Target, profiles_dir: Path) -> tuple[Deployment, Member] | None:
    """The deployment (and member) whose member is this host's unit, if a deployment profile names it; profiles that
    cannot be read are passed over (status of that deployment says why)."""
    if target.profile_path is None:
        return None
    for name in deployment_names(profiles_dir):
        try:
            deployment = load_deployment(name, profiles_dir)
        except ProfileError:
            continue
        for member in deployment.members:
            if member.target.profile_path == target.profile_path and member.unit == target.unit:
                return deployment, member
    return None


def refuse_member_change(target: Target, profiles_dir: Path, verb: str) -> None:
    """A change (apply, restart, restore, tune) of one member of a deployment alone is refused: a rank cannot rejoin
    a running group, and a PD server changed alone skips smg and the checks across members. DeploymentError naming
    the deployment and what to run instead."""
    found = membership(target, profiles_dir)
    if found is None:
        return
    deployment, member = found
    role = f"rank {member.rank}" if member.rank is not None else f"a {member.role} server"
    why = (
        "a rank cannot rejoin a running group: every rank restarts together"
        if deployment.kind == "multinode"
        else "changed alone it would skip smg and the checks across the prefill and decode servers"
    )
    instead = (
        f"tune the deployment: {hints.TUNE_DEPLOYMENT.line(DEPLOYMENT=deployment.name)}"
        if verb == "a tune"
        else f"change the deployment: {hints.APPLY_DEPLOYMENT.line(DEPLOYMENT=deployment.name)}, "
        f"{hints.RESTART_DEPLOYMENT.line(DEPLOYMENT=deployment.name)}"
    )
    raise DeploymentError(
        f"{target.label} ({member.unit}) is {role} of the deployment {deployment.name}: {verb} of it alone is refused "
        f"({why}); {instead}"
    )
