"""Service managers for transports that console.host does not implement itself.

console.host runs SGLang units through systemd (over SSH or locally). A host whose service manager lives
elsewhere, such as the demo host (`transport = "demo"`, a supervisor inside `opsconsole demo`), is
provided by the package that owns it, which registers a factory here:

    register_service_factory("demo", make_manager, gpu_command=("python3", "-m", "my.nvidia_smi"))

and `open_host` looks the transport up. The composition root above both packages (the CLI verbs, the core
session) has the registration done before it opens a host, so console.host imports nothing of its
providers. Standard library only.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from console.host.base import ServiceManager
    from console.host.targets import Target

ServiceFactory = Callable[["Target"], "ServiceManager"]


@dataclass(frozen=True)
class ServiceProvider:
    transport: str
    factory: ServiceFactory  # Target -> its ServiceManager; raises HostError when it cannot be reached
    gpu_command: tuple[str, ...] | None  # the `nvidia-smi` to run when the target's profile names none


_providers: dict[str, ServiceProvider] = {}


def register_service_factory(
    transport: str, factory: ServiceFactory, *, gpu_command: Sequence[str] | None = None
) -> None:
    """Provide the service manager of `transport` hosts. Registering again replaces the provider (the latest
    registration wins, so a test can put its own in)."""
    if transport in ("ssh", "local"):
        raise ValueError(f"transport {transport!r} is console.host's own; register another name")
    command = tuple(gpu_command) if gpu_command is not None else None
    _providers[transport] = ServiceProvider(transport, factory, command)


def service_provider(transport: str) -> ServiceProvider | None:
    """The registered provider for `transport`, or None when nothing registered it."""
    return _providers.get(transport)
