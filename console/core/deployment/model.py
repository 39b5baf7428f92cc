"""A deployment: every SGLang server that together serves one model, as one thing (pure).

    deployment = Deployment.single(target)                  # one host: the deployment of one member
    deployment = parse_deployment(data, name="kimi-2node", where=path, targets=...)   # profiles/deployments/NAME.toml
    deployment.kind                                          # "single" | "multinode" | "pd"
    deployment.front_door                                    # rank 0's member, or None (PD: the router)

Its members are units on hosts (console.host.targets.Target, each with the member's unit and port) with the role each
plays: `rank` (node `rank` of one model over several hosts), `prefill` or `decode` (servers behind smg in PD mode, the
deployment's `router`), or `single` (a host on its own). Every verb that takes a TARGET takes one of these: the CLI,
the console, predict, tune and freeze; the restart order (order.py) and the checks across members (checks.py) read it.

A malformed deployment profile is a DeploymentError (a ProfileError: exit 1 as a malformed host profile is) naming
the file, the member and what to write instead. The file is read by load.py; everything here is pure.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from console.host.profile import ProfileError, check_sglang_version, check_unit_name
from console.host.targets import Target

Role = Literal["single", "rank", "prefill", "decode"]
Kind = Literal["single", "multinode", "pd"]
DEPLOYMENTS_DIR = "deployments"  # profiles/deployments/NAME.toml
DEFAULT_BOOTSTRAP_PORT = 8998  # SGLang's --disaggregation-bootstrap-port default
DEFAULT_DRAIN_TIMEOUT_S = 120.0
DEFAULT_STOP_TIMEOUT_S = 60.0


class DeploymentError(ProfileError):
    """A deployment profile (or its use) is wrong: the message names the file, the member and the fix."""


@dataclass(frozen=True)
class Member:
    """One unit of a deployment on its host, with its role."""

    name: str
    target: Target  # the host profile's, with the member's own unit and SGLang port
    role: Role
    rank: int | None = None  # the node rank (role "rank")
    url: str | None = None  # the URL the router knows it by, where the profile says (else from the SSH address)
    bootstrap_port: int | None = None  # a prefill's, where the profile says (else the unit's, else 8998)

    @property
    def host(self) -> str:
        """The host profile's name (the TARGET of the host verbs: logs, trust)."""
        return self.target.label

    @property
    def unit(self) -> str:
        return self.target.unit

    @property
    def serves_api(self) -> bool:
        """Whether its HTTP API is the real one: every member but a rank >= 1, which serves a dummy /health that is
        always 200 and no /generate (SGLang 0.5.23 entrypoints/engine.py)."""
        return self.role != "rank" or self.rank == 0

    @property
    def worker_type(self) -> Literal["prefill", "decode"] | None:
        return self.role if self.role in ("prefill", "decode") else None

    def worker_url(self, peer_address: str | None) -> str:
        """The URL a router knows it by: the profile's `url`, else the address the SSH connection reached (loopback
        for a local or demo host) and its SGLang port."""
        if self.url is not None:
            return self.url
        address = peer_address or "127.0.0.1"
        host = f"[{address}]" if ":" in address else address
        return f"http://{host}:{self.target.sglang.port}"

    def describe(self) -> str:
        """`rank1 (gpu-b)`, `decode-0 (gpu-c)`: what a message calls it."""
        return self.name if self.name == self.host else f"{self.name} ({self.host})"

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"name": self.name, "host": self.host, "unit": self.unit, "role": self.role}
        if self.rank is not None:
            out["rank"] = self.rank
        if self.url is not None:
            out["url"] = self.url
        if self.bootstrap_port is not None:
            out["bootstrap_port"] = self.bootstrap_port
        return out


@dataclass(frozen=True)
class RouterSpec:
    """smg in front of prefill and decode servers (PD mode): the deployment's front door."""

    url: str
    metrics: str | None = None  # smg's --prometheus-port endpoint (smg_pd_* counters)
    target: Target | None = None  # the host whose unit runs smg, where the profile names it

    def to_json(self) -> dict[str, Any]:
        return {
            "url": self.url,
            "metrics": self.metrics,
            "host": self.target.label if self.target else None,
            "unit": self.target.unit if self.target else None,
        }


@dataclass(frozen=True)
class Deployment:
    name: str
    members: tuple[Member, ...]
    router: RouterSpec | None = None
    description: str = ""
    sglang_version: str | None = None  # the rules' version while no member answers
    drain_timeout_s: float = DEFAULT_DRAIN_TIMEOUT_S
    stop_timeout_s: float = DEFAULT_STOP_TIMEOUT_S
    path: str | None = None  # the profile it was read from (None: a single host)

    @classmethod
    def single(cls, target: Target) -> Deployment:
        """A host on its own: the deployment of one member."""
        return cls(target.label, (Member(target.label, target, "single"),), sglang_version=target.sglang_version)

    @property
    def kind(self) -> Kind:
        roles = {m.role for m in self.members}
        if roles == {"single"}:
            return "single"
        return "multinode" if roles == {"rank"} else "pd"

    @property
    def is_single(self) -> bool:
        return self.kind == "single"

    @property
    def ranks(self) -> tuple[Member, ...]:
        """The rank members by rank (empty unless multinode)."""
        return tuple(sorted((m for m in self.members if m.role == "rank"), key=lambda m: m.rank or 0))

    @property
    def prefill(self) -> tuple[Member, ...]:
        return tuple(m for m in self.members if m.role == "prefill")

    @property
    def decode(self) -> tuple[Member, ...]:
        return tuple(m for m in self.members if m.role == "decode")

    @property
    def front_door(self) -> Member | None:
        """The member whose server takes the deployment's requests: rank 0, the single host; None for PD (smg)."""
        if self.kind == "pd":
            return None
        return self.ranks[0] if self.kind == "multinode" else self.members[0]

    def member(self, name: str) -> Member:
        for m in self.members:
            if m.name == name:
                return m
        names = ", ".join(m.name for m in self.members)
        raise DeploymentError(f"{self.name}: no member {name!r}; its members are {names}")

    def to_json(self) -> dict[str, Any]:
        return {
            "deployment": self.name,
            "kind": self.kind,
            "description": self.description,
            "members": [m.to_json() for m in self.members],
            "router": self.router.to_json() if self.router else None,
        }


# --- the profile ------------------------------------------------------------------------------------------------


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", strict=True, frozen=True)


Port = Annotated[int, Field(ge=1, le=65535)]


def _check_url(value: str | None) -> str | None:
    if value is None:
        return value
    parts = urlsplit(value)
    try:
        parts.port  # noqa: B018 - raises ValueError for a port out of range or not a number
    except ValueError:
        parts = urlsplit("")
    if parts.scheme in ("http", "https") and parts.hostname and not parts.query and not parts.fragment:
        return value.rstrip("/")
    raise ValueError(f'expected an http(s) URL such as "http://router-1:8000", not {value!r}')


class MemberSection(_Strict):
    host: str
    role: Literal["rank", "prefill", "decode"]
    rank: Annotated[int, Field(ge=0)] | None = None
    name: str | None = None
    unit: str | None = None
    port: Port | None = None
    url: str | None = None
    bootstrap_port: Port | None = None

    @field_validator("unit")
    @classmethod
    def _unit(cls, value: str | None) -> str | None:
        return None if value is None else check_unit_name(value)

    @field_validator("url")
    @classmethod
    def _url(cls, value: str | None) -> str | None:
        return _check_url(value)


class RouterSection(_Strict):
    url: str
    metrics: str | None = None
    host: str | None = None
    unit: str | None = None

    @field_validator("url", "metrics")
    @classmethod
    def _urls(cls, value: str | None) -> str | None:
        return _check_url(value)

    @field_validator("unit")
    @classmethod
    def _unit(cls, value: str | None) -> str | None:
        return None if value is None else check_unit_name(value)


class DeploymentSection(_Strict):
    description: str = ""
    sglang_version: str | None = None
    drain_timeout: Annotated[float, Field(gt=0)] | Annotated[int, Field(gt=0)] = DEFAULT_DRAIN_TIMEOUT_S
    stop_timeout: Annotated[float, Field(gt=0)] | Annotated[int, Field(gt=0)] = DEFAULT_STOP_TIMEOUT_S
    router: RouterSection | None = None
    member: list[MemberSection]

    @field_validator("sglang_version")
    @classmethod
    def _version(cls, value: str | None) -> str | None:
        return check_sglang_version(value)


def _describe(error: Any) -> str:
    where = [str(p) for p in error["loc"]]
    if len(where) >= 2 and where[0] == "member" and where[1].isdigit():
        place = f"[[member]] {int(where[1]) + 1}" + (f" {'.'.join(where[2:])}" if where[2:] else "")
    elif where:
        place = where[0] if len(where) == 1 else f"[{where[0]}] {'.'.join(where[1:])}"
    else:
        place = "the file"
    message = str(error["msg"]).removeprefix("Value error, ").replace("Input should be", "expected")
    if error["type"] == "extra_forbidden":
        message = "unknown key (the keys are listed in docs/deployments.md)"
    elif error["type"] == "missing":
        message = "missing" if where != ["member"] else "missing: list its members as [[member]] tables"
    elif "input" in error and error["type"] not in ("value_error", "assertion_error"):
        message += f" (got {error['input']!r})"
    return f"{place}: {message}"


# How a member's host profile becomes its Target: load.py reads profiles/HOST.toml (DeploymentError when absent).
TargetOf = Callable[[str], Target]


def parse_deployment(data: Mapping[str, Any], *, name: str, where: str, target_of: TargetOf) -> Deployment:
    """The deployment a profile's parsed TOML describes, its members' hosts resolved by `target_of`.
    DeploymentError naming `where`, the member and the fix."""
    try:
        section = DeploymentSection.model_validate(dict(data))
    except ValidationError as exc:
        raise DeploymentError(f"{where}: {'; '.join(_describe(e) for e in exc.errors())}") from None
    if not section.member:
        raise DeploymentError(f"{where}: no [[member]]; a deployment names at least two members (docs/deployments.md)")
    members = tuple(_member(i, m, where, target_of) for i, m in enumerate(section.member, start=1))
    members = _named(members, section.member, where)
    router = None
    if section.router is not None:
        router_target = None
        if section.router.host is not None:
            router_target = target_of(section.router.host)
            if section.router.unit is not None:
                router_target = dataclasses.replace(router_target, unit=section.router.unit)
        elif section.router.unit is not None:
            raise DeploymentError(f'{where}: [router] unit: name the host that runs it too (host = "PROFILE")')
        router = RouterSpec(section.router.url, section.router.metrics, router_target)
    deployment = Deployment(
        name,
        members,
        router,
        section.description,
        section.sglang_version,
        float(section.drain_timeout),
        float(section.stop_timeout),
        where,
    )
    _check_shape(deployment, where)
    return deployment


def _member(index: int, section: MemberSection, where: str, target_of: TargetOf) -> Member:
    place = f"{where}: [[member]] {index} ({section.host})"
    if section.role == "rank" and section.rank is None:
        raise DeploymentError(f"{place}: a rank member needs rank = N (its unit's --node-rank)")
    if section.role != "rank" and section.rank is not None:
        raise DeploymentError(f'{place}: rank is for role = "rank"; a {section.role} server has none')
    if section.role != "prefill" and section.bootstrap_port is not None:
        raise DeploymentError(f"{place}: bootstrap_port is a prefill server's; remove it from this {section.role}")
    try:
        target = target_of(section.host)
    except DeploymentError:
        raise
    except ProfileError as exc:
        raise DeploymentError(f"{place}: {exc}") from None
    if section.unit is not None:
        target = dataclasses.replace(target, unit=section.unit)
    if section.port is not None:
        target = dataclasses.replace(target, sglang=dataclasses.replace(target.sglang, port=section.port))
    return Member("", target, section.role, section.rank, section.url, section.bootstrap_port)


def _named(members: tuple[Member, ...], sections: list[MemberSection], where: str) -> tuple[Member, ...]:
    """Each member's name: the profile's, else its host's, else host/unit where two members share a host."""
    units = [(m.host, m.unit) for m in members]
    same = sorted({f"{h} {u}" for h, u in units if units.count((h, u)) > 1})
    if same:
        raise DeploymentError(
            f"{where}: {', '.join(same)}: the same unit on the same host is two members; give one its own unit "
            '(unit = "sglang-decode.service") or remove it'
        )
    hosts = [m.host for m in members]
    out = []
    for member, section in zip(members, sections, strict=True):
        name = section.name or (member.host if hosts.count(member.host) == 1 else f"{member.host}/{member.unit}")
        out.append(dataclasses.replace(member, name=name))
    seen: dict[str, int] = {}
    for m in out:
        seen[m.name] = seen.get(m.name, 0) + 1
    twice = sorted(n for n, c in seen.items() if c > 1)
    if twice:
        raise DeploymentError(f"{where}: member name {', '.join(twice)} more than once; give each member its own name")
    return tuple(out)


def _check_shape(deployment: Deployment, where: str) -> None:
    """What roles may stand together, the ranks 0..N-1 each once, the router where (and only where) it belongs."""
    roles = {m.role for m in deployment.members}
    if "rank" in roles and roles != {"rank"}:
        raise DeploymentError(
            f"{where}: rank members beside prefill or decode members: a multi-node prefill or decode server is not "
            "supported yet; make this two deployments, or one of ranks"
        )
    if roles == {"rank"}:
        ranks = sorted(m.rank or 0 for m in deployment.members)
        if ranks != list(range(len(ranks))):
            listed = ", ".join(str(r) for r in ranks)
            raise DeploymentError(
                f"{where}: the ranks are {listed}; a deployment of {len(ranks)} nodes has ranks 0 to {len(ranks) - 1}, "
                "each once (the units' --node-rank)"
            )
        if len(ranks) < 2:
            raise DeploymentError(f"{where}: one rank is a single host; name the host itself (profiles/HOST.toml)")
        if deployment.router is not None:
            raise DeploymentError(
                f"{where}: [router] is smg in front of prefill and decode servers; the ranks' front door is rank 0"
            )
        return
    missing = [r for r in ("prefill", "decode") if r not in roles]
    if missing:
        raise DeploymentError(
            f'{where}: prefill and decode servers work in pairs: add a {missing[0]} member (role = "{missing[0]}")'
        )
    if deployment.router is None:
        raise DeploymentError(
            f'{where}: prefill and decode servers are reached through smg: add [router] url = "http://ROUTER:PORT"'
        )
