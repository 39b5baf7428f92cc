"""Groups of hosts: `profiles/groups.toml`, and `@name` wherever a TARGET is taken.

    prod = ["gpu-a", "gpu-b", "gpu-c"]      # profile names
    eu = ["eu-*"]                           # globs over the profile names (fnmatch: * ? [..])
    all = ["@prod", "@eu"]                  # other groups

    [canary]                                # the table form, for a group with more to say
    members = ["gpu-a"]
    router = "http://router-1:30000"        # the SGLang router in front of the members (rolling changes)

Pure apart from load_groups (which reads the file and lists the profiles). Every problem is a GroupError, a
UsageError (exit 2): an unknown member, a glob that matches no profile, an empty group, a group that names itself
(directly or through others), an unknown `@name`, a malformed router URL. The message names the file, the group
and what to write instead."""

from __future__ import annotations

import fnmatch
import re
import tomllib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from console.errors import UsageError

GROUPS_FILE = "groups.toml"
GROUP_PREFIX = "@"
_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]*$")
_GLOB_CHARS = frozenset("*?[")
_TABLE_KEYS = frozenset({"members", "router"})


class GroupError(UsageError):
    """groups.toml or an `@name` is wrong: exit 2, the message says what to fix."""


@dataclass(frozen=True)
class Group:
    name: str
    members: tuple[str, ...]  # profile names, in the order written (globs sorted), each once
    router: str | None = None  # the SGLang router in front of the members, if the group names one


def is_group_ref(text: str) -> bool:
    return text.startswith(GROUP_PREFIX)


def profile_names(profiles_dir: Path) -> list[str]:
    """The profiles a group may name: profiles/NAME.toml, groups.toml itself excepted."""
    if not profiles_dir.is_dir():
        return []
    return sorted(
        p.stem for p in profiles_dir.iterdir() if p.suffix == ".toml" and p.is_file() and p.name != GROUPS_FILE
    )


def parse_groups(data: Mapping[str, Any], *, profiles: Iterable[str], where: str) -> dict[str, Group]:
    """Every group of a parsed groups.toml, its members resolved against the profile names."""
    known = sorted(set(profiles))
    raw: dict[str, tuple[list[str], str | None]] = {}
    for name, value in data.items():
        if not _NAME.match(name):
            raise GroupError(f"{where}: group name {name!r}: use letters, digits, '.', '_' and '-'")
        raw[name] = _members_and_router(name, value, where)
    resolved: dict[str, Group] = {}
    for name in raw:
        members = _expand(name, raw, known, where, path=())
        if not members:
            raise GroupError(f'{where}: group {name!r} is empty; list at least one profile, e.g. {name} = ["gpu-a"]')
        resolved[name] = Group(name=name, members=tuple(members), router=raw[name][1])
    return resolved


def _members_and_router(name: str, value: Any, where: str) -> tuple[list[str], str | None]:
    router: Any = None
    if isinstance(value, dict):
        unknown = sorted(set(value) - _TABLE_KEYS)
        if unknown:
            raise GroupError(f"{where}: [{name}] {', '.join(unknown)}: unknown key; the keys are members, router")
        if "members" not in value:
            raise GroupError(f'{where}: [{name}] needs members = ["profile", ...]')
        members, router = value["members"], value.get("router")
    else:
        members = value
    if not isinstance(members, list) or not all(isinstance(m, str) and m.strip() for m in members):
        raise GroupError(f'{where}: group {name!r}: expected a list of profile names, e.g. {name} = ["gpu-a", "gpu-*"]')
    if router is not None:
        router = _check_router(name, router, where)
    return [m.strip() for m in members], router


def _check_router(name: str, router: Any, where: str) -> str:
    if isinstance(router, str):
        parts = urlsplit(router)
        try:
            parts.port  # noqa: B018 - raises ValueError for a port out of range or not a number
        except ValueError:
            parts = urlsplit("")
        if parts.scheme in ("http", "https") and parts.hostname and not parts.query and not parts.fragment:
            return router.rstrip("/")
    raise GroupError(f'{where}: [{name}] router: expected an http(s) URL such as "http://router:30000", not {router!r}')


def _expand(
    name: str, raw: Mapping[str, tuple[list[str], str | None]], known: Sequence[str], where: str, path: tuple[str, ...]
) -> list[str]:
    """The profile names of group `name`; `path` is the chain of groups that led here (for cycles)."""
    if name in path:
        loop = (*path[path.index(name) :], name)
        chain = " -> ".join(f"@{g}" for g in loop)
        itself = "names itself" if len(loop) == 2 else "names itself through other groups"
        raise GroupError(f"{where}: group {name!r} {itself} ({chain}); remove the reference")
    out: list[str] = []
    for member in raw[name][0]:
        if is_group_ref(member):
            other = member[1:]
            if other not in raw:
                raise GroupError(f"{where}: group {name!r}: {member}: no such group; the groups are {_list(raw)}")
            found = _expand(other, raw, known, where, (*path, name))
        elif _GLOB_CHARS & set(member):
            found = fnmatch.filter(known, member)
            if not found:
                raise GroupError(f"{where}: group {name!r}: {member!r} matches no profile in profiles/")
        elif member in known:
            found = [member]
        else:
            raise GroupError(
                f"{where}: group {name!r}: {member!r} is not a profile (profiles/{member}.toml); "
                f"the profiles are {', '.join(known) or 'none yet'}"
            )
        out.extend(m for m in found if m not in out)
    return out


def _list(groups: Iterable[str]) -> str:
    return ", ".join(f"@{g}" for g in sorted(groups)) or "none"


def load_groups(profiles_dir: Path) -> dict[str, Group]:
    """profiles/groups.toml, resolved ({} when there is none)."""
    path = profiles_dir / GROUPS_FILE
    if not path.is_file():
        return {}
    try:
        data = tomllib.loads(path.read_text())
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise GroupError(f"{path}: not valid TOML ({exc}); fix the file") from None
    except OSError as exc:
        raise GroupError(f"{path}: cannot be read ({exc.strerror})") from None
    return parse_groups(data, profiles=profile_names(profiles_dir), where=str(path))


def expand_targets(targets: Sequence[str], groups: Mapping[str, Group], *, where: str = GROUPS_FILE) -> list[str]:
    """The command line's TARGETs with every `@name` replaced by its members (each host once, first place kept)."""
    out: list[str] = []
    for target in targets:
        if is_group_ref(target):
            group = groups.get(target[1:])
            if group is None:
                if not groups:
                    raise GroupError(f"{target}: no groups are defined; write them in profiles/{GROUPS_FILE}")
                raise GroupError(f"{target}: no such group in {where}; the groups are {_list(groups)}")
            members: Sequence[str] = group.members
        else:
            members = [target]
        out.extend(m for m in members if m not in out)
    return out


def resolve_group_targets(targets: Sequence[str], profiles_dir: Path) -> tuple[list[str], dict[str, Group]]:
    """expand_targets over profiles/groups.toml (read only when a TARGET names a group), and the groups named."""
    if not any(is_group_ref(t) for t in targets):
        return list(targets), {}
    groups = load_groups(profiles_dir)
    named = {t[1:]: groups[t[1:]] for t in targets if is_group_ref(t) and t[1:] in groups}
    return expand_targets(targets, groups, where=str(profiles_dir / GROUPS_FILE)), named


def group_for(hosts: Sequence[str], groups: Mapping[str, Group], named: Sequence[str]) -> Group:
    """The group a selection of hosts is rolled as (the console's overview): the first of the groups the console
    was opened with (`named`, `connect @prod`) that has every one of them. GroupError saying why there is none."""
    if not named:
        raise GroupError(
            "a rolling change runs over the hosts of a group: open the console with @GROUP (profiles/groups.toml)"
        )
    for name in named:
        group = groups.get(name)
        if group is not None and all(h in group.members for h in hosts):
            return group
    first = groups.get(named[0])
    outside = [h for h in hosts if first is None or h not in first.members]
    raise GroupError(
        f"{', '.join(outside) or ', '.join(hosts)}: not all in one of {_list(named)}; "
        "select the hosts of one group (a rolling change runs over one group's hosts)"
    )
