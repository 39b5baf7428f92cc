"""The lock (requirements.txt, requirements-runtime.txt; `make lock`) against pyproject.toml: every range there has its
package pinned here at a version inside it, every pin carries hashes (pip installs it with --require-hashes), the
runtime lock is the runtime closure at the full lock's versions, and the venv `make` built is the lock."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.support import lockfile

REPO = Path(__file__).resolve().parents[1]


def _pyproject() -> dict:
    with open(REPO / "pyproject.toml", "rb") as f:
        return tomllib.load(f)


def _ranges(extra: str | None) -> list[Requirement]:
    project = _pyproject()["project"]
    texts = project["dependencies"] if extra is None else project["optional-dependencies"][extra]
    return [Requirement(text) for text in texts]


@pytest.mark.parametrize(("lock", "extras"), [(lockfile.LOCK, (None, "dev")), (lockfile.RUNTIME_LOCK, (None,))])
def test_every_range_of_pyproject_is_pinned_inside_it(lock: Path, extras: tuple[str | None, ...]) -> None:
    pins = {pin.name: pin for pin in lockfile.read(lock)}
    for extra in extras:
        for requirement in _ranges(extra):
            pin = pins.get(canonicalize_name(requirement.name))
            assert pin is not None, f"{requirement} is in pyproject.toml but not in {lock.name}: run `make lock`"
            assert requirement.specifier.contains(pin.version, prereleases=True), (
                f"{lock.name} pins {pin.name}=={pin.version}, outside pyproject.toml's {requirement}: run `make lock`"
            )


def test_every_pin_has_hashes_and_the_runtime_lock_agrees_with_the_full_one() -> None:
    full = {pin.name: pin for pin in lockfile.read(lockfile.LOCK)}
    runtime = lockfile.read(lockfile.RUNTIME_LOCK)
    assert len(full) > 50 and len(runtime) > 20
    for pin in [*full.values(), *runtime]:
        assert pin.hashes, f"{pin.name} has no --hash: pip's --require-hashes refuses the lock"
    for pin in runtime:
        assert pin.name in full and full[pin.name].version == pin.version, (
            f"requirements-runtime.txt pins {pin.name}=={pin.version}, requirements.txt "
            f"{full[pin.name].version if pin.name in full else 'nothing'}: run `make lock`"
        )


def test_the_lock_names_no_package_index() -> None:
    """pip installs it from the machine's own configuration: no index or find-links line is written in."""
    for lock in (lockfile.LOCK, lockfile.RUNTIME_LOCK):
        text = lock.read_text(encoding="utf-8")
        assert "--index-url" not in text and "--extra-index-url" not in text and "--find-links" not in text
        assert "://" not in text


def test_this_venv_is_the_lock() -> None:
    """`make` installs from the lock into a new venv: the packages the tests run on are exactly its pins."""
    assert lockfile.differences(lockfile.read()) == []


def test_the_pin_reader_reads_markers_versions_and_continued_hashes(tmp_path: Path) -> None:
    lock = tmp_path / "requirements.txt"
    lock.write_text(
        "# header\n"
        "Foo_Bar==1.2.3 \\\n    --hash=sha256:" + "a" * 64 + " \\\n    --hash=sha256:" + "b" * 64 + "\n    # via x\n"
        "colorama==0.4.6 ; sys_platform == 'win32' \\\n    --hash=sha256:" + "c" * 64 + "\n"
    )
    foo, colorama = lockfile.read(lock)
    assert (foo.name, foo.version, foo.marker, len(foo.hashes)) == ("foo-bar", "1.2.3", None, 2)
    assert colorama.marker == "sys_platform == 'win32'" and not colorama.applies()
