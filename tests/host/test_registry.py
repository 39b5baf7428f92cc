"""Transports console.host does not implement itself come from a registry that their owners fill in."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from console.host import registry
from console.host.base import HostError, ServiceManager
from console.host.connect import open_host
from console.host.targets import Target


@pytest.fixture
def empty_registry() -> Iterator[None]:
    """No provider registered for the test; the registry is put back afterwards."""
    saved = dict(registry._providers)
    registry._providers.clear()
    try:
        yield
    finally:
        registry._providers.clear()
        registry._providers.update(saved)


async def test_a_transport_nobody_registered_is_explained(empty_registry: None) -> None:
    with pytest.raises(HostError, match="demo1: the demo host is not available in this build") as refused:
        await open_host(Target(label="demo1", transport="demo", control="/nonexistent.sock"))
    assert "nothing registered a service manager for transport 'demo'" in str(refused.value)


@pytest.mark.system
async def test_the_registered_factory_makes_the_service_and_names_the_gpu_command(
    empty_registry: None, tmp_path: Path
) -> None:
    made: list[Target] = []
    marker = tmp_path / "ran"
    fake_smi = tmp_path / "fake-smi"
    fake_smi.write_text(f"#!/bin/sh\ntouch {marker}\nexit 1\n")
    fake_smi.chmod(0o755)

    class Manager:  # what a provider returns; open_host only hands it over
        unit = "x.service"

    def factory(target: Target) -> ServiceManager:
        made.append(target)
        return Manager()  # type: ignore[return-value]

    registry.register_service_factory("demo", factory, gpu_command=[str(fake_smi)])
    target = Target(label="d", transport="demo", control="/c.sock")
    session = await open_host(target)
    try:
        assert made == [target] and isinstance(session.service, Manager)
        await session.gpus()  # the profile names no gpu_command: the provider's runs
        assert marker.exists()
    finally:
        await session.close()
    marker.unlink()
    own = Target(label="d", transport="demo", control="/c.sock", gpu_command=("/bin/true",))
    session = await open_host(own)
    try:
        await session.gpus()  # the profile's own command wins over the provider's
        assert not marker.exists()
    finally:
        await session.close()


def test_ssh_and_local_cannot_be_taken_over() -> None:
    for transport in ("ssh", "local"):
        with pytest.raises(ValueError, match="is console\\.host's own"):
            registry.register_service_factory(transport, lambda target: None)  # type: ignore[arg-type,return-value]
