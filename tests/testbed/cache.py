"""The cached Debian tree and Python packages the testbed hosts boot from.

Both live under /var/tmp/opsconsole-testbed/, named by a hash of their recipe, built in a temporary
directory and renamed into place when complete, under a lock so that parallel test runs neither race
nor see a half-built tree. A later run with the same recipe finds them and skips the build.
"""

from __future__ import annotations

import fcntl
import glob
import logging
import os
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from tests.support import lockfile
from tests.support.lockfile import RUNTIME_LOCK
from tests.testbed import recipe
from tests.testbed.system import run

log = logging.getLogger(__name__)

CACHE_ROOT = Path(os.environ.get("OPSCONSOLE_TESTBED_CACHE", "/var/tmp/opsconsole-testbed"))
COMPLETE_MARKER = ".opsconsole-testbed-complete"
REPO_ROOT = Path(__file__).resolve().parents[2]
PRUNE_AFTER_S = 7 * 24 * 3600


@dataclass(frozen=True)
class BuildReport:
    path: Path
    built: bool  # False when it came from the cache
    seconds: float


@contextmanager
def cache_lock(root: Path = CACHE_ROOT) -> Iterator[None]:
    root.mkdir(parents=True, exist_ok=True)
    with open(root / ".lock", "w") as lock_file:
        fcntl.flock(lock_file, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock_file, fcntl.LOCK_UN)


def machine_mirror() -> str:
    """The Debian mirror from this machine's apt sources (or $OPSCONSOLE_TESTBED_MIRROR)."""
    explicit = os.environ.get("OPSCONSOLE_TESTBED_MIRROR")
    if explicit:
        return explicit
    deb822 = [Path(p).read_text() for p in sorted(glob.glob("/etc/apt/sources.list.d/*.sources"))]
    one_line = ["/etc/apt/sources.list", *sorted(glob.glob("/etc/apt/sources.list.d/*.list"))]
    lists = [Path(p).read_text() for p in one_line if Path(p).exists()]
    return recipe.mirror_from_apt_sources(deb822, lists)


def ensure_tree(root: Path = CACHE_ROOT) -> BuildReport:
    """The booted hosts' root filesystem (read-only for them: they boot it with --volatile=overlay)."""
    mirror = machine_mirror()
    return _ensure(tree_path(root, mirror), root, lambda tmp: _build_tree(tmp, mirror))


def tree_path(root: Path = CACHE_ROOT, mirror: str | None = None) -> Path:
    """Where ensure_tree keeps the tree of this recipe (named by its hash)."""
    tree_recipe = recipe.tree_recipe(mirror if mirror is not None else machine_mirror())
    return root / f"tree-{recipe.recipe_key(tree_recipe)}"


def ensure_site(root: Path = CACHE_ROOT) -> BuildReport:
    """The project's runtime lock for the container's python3, bound in at recipe.SITE_MOUNT."""
    requirements = project_requirements()
    return _ensure(site_path(root), root, lambda tmp: _build_site(tmp, requirements))


def site_path(root: Path = CACHE_ROOT) -> Path:
    """Where ensure_site keeps the packages of this recipe (named by its hash)."""
    site_recipe = recipe.site_recipe(project_requirements(), f"cp{sys.version_info.major}{sys.version_info.minor}")
    return root / f"site-{recipe.recipe_key(site_recipe)}"


def project_requirements() -> list[str]:
    """The runtime lock's pins (requirements-runtime.txt, `make lock`): the hosts get the versions CI passed on."""
    pins = lockfile.read(RUNTIME_LOCK)
    return [f"{pin.name}=={pin.version}" + (f"; {pin.marker}" if pin.marker else "") for pin in pins]


def _ensure(final: Path, root: Path, build: Callable[[Path], None]) -> BuildReport:
    marker = final / COMPLETE_MARKER
    if marker.exists():  # fast path without the lock: complete entries never change
        os.utime(marker)  # last use, for pruning
        return BuildReport(final, built=False, seconds=0.0)
    with cache_lock(root):
        if marker.exists():
            os.utime(marker)
            return BuildReport(final, built=False, seconds=0.0)
        _remove_abandoned_builds(root)
        _prune_unused(root, kind=final.name.split("-", 1)[0])
        started = time.monotonic()
        tmp = Path(tempfile.mkdtemp(dir=root, prefix=f".build-{final.name}-"))
        try:
            build(tmp)
            (tmp / COMPLETE_MARKER).write_text(time.strftime("%Y-%m-%dT%H:%M:%SZ\n", time.gmtime()))
            os.chmod(tmp, 0o755)
            os.rename(tmp, final)
        except BaseException:
            _remove_tree(tmp)
            raise
        seconds = time.monotonic() - started
        log.info("built %s in %.1f s", final, seconds)
        return BuildReport(final, built=True, seconds=seconds)


def _build_tree(tmp: Path, mirror: str) -> None:
    run(
        [
            "debootstrap",
            "--variant=minbase",
            "--include=" + ",".join(recipe.PACKAGES),
            recipe.SUITE,
            str(tmp),
            mirror,
        ],
        timeout=900,
        what="debootstrap of the testbed tree (needs the Debian mirror from this machine's apt sources)",
    )
    etc = tmp / "etc"
    for unit in recipe.MASKED_UNITS:
        link = etc / "systemd/system" / unit
        link.unlink(missing_ok=True)
        link.symlink_to("/dev/null")
    # debootstrap copies this machine's hostname, which would beat --hostname and make sudo complain.
    (etc / "hostname").unlink(missing_ok=True)
    # Host keys are generated per boot (so a test's known_hosts is exact): drop the ones the package made.
    for key in (etc / "ssh").glob("ssh_host_*"):
        key.unlink()
    (etc / "ssh/sshd_config.d/opsconsole-testbed.conf").write_text(recipe.SSHD_DROP_IN)
    _chroot(tmp, ["useradd", "--create-home", "--shell", "/bin/bash", "--groups", "systemd-journal", recipe.SUDO_USER])
    _chroot(tmp, ["useradd", "--create-home", "--shell", "/bin/bash", recipe.PASSWORD_SUDO_USER])
    for user in (recipe.SUDO_USER, recipe.PASSWORD_SUDO_USER):
        _chroot(tmp, ["usermod", "-p", "*", user])  # unlocked for key login, yet no password works
        sudoers = etc / "sudoers.d" / f"opsconsole-{user}"
        sudoers.write_text(recipe.SUDOERS[user])
        sudoers.chmod(0o440)
    _chroot(tmp, ["visudo", "-c"])
    nvidia_smi = tmp / "usr/local/bin/nvidia-smi"
    nvidia_smi.write_text(recipe.NVIDIA_SMI_STAND_IN)
    nvidia_smi.chmod(0o755)
    for mount in (recipe.REPO_MOUNT, recipe.SITE_MOUNT, recipe.BOOT_MOUNT, "/var/lib/sglang"):
        (tmp / mount.lstrip("/")).mkdir(parents=True, exist_ok=True)
    # The tree is shared read-only by every booted host; apt caches are just weight.
    shutil.rmtree(tmp / "var/cache/apt/archives", ignore_errors=True)


def _build_site(tmp: Path, requirements: list[str]) -> None:
    # From the lock itself, hashes checked; `requirements` (its pins) only names the entry.
    run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            "--no-compile",
            "--only-binary=:all:",
            "--require-hashes",
            "--no-deps",
            "--target",
            str(tmp),
            "-r",
            str(RUNTIME_LOCK),
        ],
        timeout=600,
        what="pip install of the project's runtime dependencies (requirements-runtime.txt) for the testbed",
    )


def _chroot(root: Path, argv: list[str]) -> None:
    run(["chroot", str(root), *argv], timeout=120, what=f"{argv[0]} inside the testbed tree")


def _remove_abandoned_builds(root: Path) -> None:
    """Called under the lock, so every .build-* directory belongs to a build that died."""
    for stale in root.glob(".build-*"):
        log.warning("removing an abandoned testbed build: %s", stale)
        _remove_tree(stale)


def _prune_unused(root: Path, kind: str) -> None:
    """Entries of an older recipe that no run has used for PRUNE_AFTER_S (each use touches the marker)."""
    for entry in root.glob(f"{kind}-*"):
        marker = entry / COMPLETE_MARKER
        if marker.exists() and time.time() - marker.stat().st_mtime > PRUNE_AFTER_S:
            log.info("removing testbed cache entry unused for a week: %s", entry)
            _remove_tree(entry)


def _remove_tree(path: Path) -> None:
    # A debootstrap that died may have left /proc or /sys mounted inside: unmount before deleting.
    mounts = [line.split()[1] for line in Path("/proc/mounts").read_text().splitlines()]
    for mount in sorted((m for m in mounts if m.startswith(str(path) + "/")), reverse=True):
        subprocess.run(["umount", "--lazy", mount], check=False)
    subprocess.run(["rm", "-rf", "--one-file-system", str(path)], check=False)
