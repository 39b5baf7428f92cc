"""console.host and console.sglang know nothing of console.sim: the simulator registers itself into them.

Two proofs: every module of both packages is imported in a fresh interpreter with an import hook that refuses
console.sim (an import at module level, direct or through another package, fails it), and their source never
names the simulator's package or its `--sim-` options (which catches a lazy import inside a function, and
strings such as `python -m console.sim.nvidia_smi` or a `--sim-sglang-version` check)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ("host", "sglang")

PROBE = """
import importlib, importlib.abc, pkgutil, sys

class RefuseSim(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name == "console.sim" or name.startswith("console.sim."):
            raise ImportError(f"{name} imported while importing the layer")
        return None

sys.meta_path.insert(0, RefuseSim())
imported = []
for package in sys.argv[1:]:
    module = importlib.import_module(package)
    imported.append(package)
    for info in pkgutil.walk_packages(module.__path__, package + "."):
        importlib.import_module(info.name)
        imported.append(info.name)
print(len(imported), sorted(m for m in sys.modules if m.startswith("console.sim")))
"""


@pytest.mark.system
def test_host_and_sglang_import_nothing_from_the_simulator() -> None:
    packages = [f"console.{layer}" for layer in LAYERS]
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *packages], capture_output=True, text=True, timeout=120, cwd=ROOT, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    count, sim_modules = done.stdout.split(" ", 1)
    assert int(count) >= 20 and sim_modules.strip() == "[]"  # every module was really imported


@pytest.mark.parametrize("layer", LAYERS)
def test_host_and_sglang_sources_do_not_name_the_simulator(layer: str) -> None:
    sources = sorted((ROOT / "console" / layer).rglob("*.py"))
    assert sources
    offenders = [
        f"{path.relative_to(ROOT)}:{number}: {line.strip()}"
        for path in sources
        for number, line in enumerate(path.read_text().splitlines(), 1)
        if "console.sim" in line or "console/sim" in line or "--sim-" in line
    ]
    assert offenders == []


@pytest.mark.system
def test_the_probe_would_notice_an_import_of_the_simulator(tmp_path: Path) -> None:
    """The hook really refuses console.sim: a layer module that imports it makes the probe fail."""
    package = tmp_path / "fake_layer"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "leaky.py").write_text("import console.sim.plugin\n")
    done = subprocess.run(
        [sys.executable, "-c", PROBE, "fake_layer"],
        capture_output=True,
        text=True,
        timeout=60,
        cwd=ROOT,
        env={"PYTHONPATH": f"{tmp_path}:{ROOT}"},
        check=False,
    )
    assert done.returncode != 0 and "ImportError: console.sim imported while importing the layer" in done.stderr
