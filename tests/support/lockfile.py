"""The lock (requirements.txt, requirements-runtime.txt at the repo's root: `make lock`), read: each pinned package
with its version, hashes and environment marker. The testbed installs its hosts' packages from the runtime lock
(tests/testbed/cache.py); tests/test_lock.py holds the lock to pyproject.toml's ranges; `make test-latest` prints how
the newest releases differ from it:

    python -m tests.support.lockfile diff     # the packages this interpreter has at other versions than the lock's
"""

from __future__ import annotations

import re
import sys
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path

from packaging.markers import Marker
from packaging.utils import canonicalize_name

REPO = Path(__file__).resolve().parents[2]
LOCK = REPO / "requirements.txt"
RUNTIME_LOCK = REPO / "requirements-runtime.txt"

_PIN = re.compile(
    r"^(?P<name>[A-Za-z0-9][A-Za-z0-9._-]*)==(?P<version>[^\s;\\]+)\s*(?:;\s*(?P<marker>[^\\]+?))?\s*\\?$"
)
_HASH = re.compile(r"--hash=(sha256:[0-9a-f]{64})")


@dataclass(frozen=True)
class Pin:
    name: str  # canonical (PEP 503)
    version: str
    marker: str | None
    hashes: tuple[str, ...]

    def applies(self) -> bool:
        """Whether this interpreter and platform install it (a universal lock also pins other platforms' packages)."""
        return self.marker is None or Marker(self.marker).evaluate()


def read(path: Path = LOCK) -> list[Pin]:
    pins: list[Pin] = []
    current: dict[str, object] | None = None
    for raw in path.read_text(encoding="utf-8").splitlines():
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        match = _PIN.match(line)
        if match:
            if current is not None:
                pins.append(_pin(current))
            current = {**match.groupdict(), "hashes": []}
        if current is not None:
            current["hashes"] += _HASH.findall(line)  # type: ignore[operator]
    if current is not None:
        pins.append(_pin(current))
    return pins


def _pin(fields: dict[str, object]) -> Pin:
    marker = fields["marker"]
    return Pin(
        name=canonicalize_name(str(fields["name"])),
        version=str(fields["version"]),
        marker=str(marker).strip() if marker else None,
        hashes=tuple(fields["hashes"]),  # type: ignore[arg-type]
    )


def differences(pins: list[Pin]) -> list[tuple[str, str, str]]:
    """(package, locked version, installed version or 'absent') where this interpreter's packages differ from the
    lock; packages installed beside the lock are listed with 'not in the lock'."""
    installed = {canonicalize_name(d.metadata["Name"]): d.version for d in metadata.distributions()}
    installed.pop("opsconsole", None)
    out: list[tuple[str, str, str]] = []
    locked = {p.name: p for p in pins if p.applies()}
    for name, pin in sorted(locked.items()):
        have = installed.get(name)
        if have != pin.version:
            out.append((name, pin.version, have or "absent"))
    for name in sorted(set(installed) - set(locked)):
        out.append((name, "not in the lock", installed[name]))
    return out


def main(argv: list[str]) -> int:
    if argv != ["diff"]:
        print("usage: python -m tests.support.lockfile diff", file=sys.stderr)
        return 2
    rows = differences(read())
    if not rows:
        print("every package is at the lock's version")
        return 0
    width = max(len(name) for name, _, _ in rows)
    print(f"{len(rows)} packages differ from the lock (requirements.txt):")
    for name, locked, have in rows:
        print(f"  {name:<{width}}  {locked:>16} -> {have}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
