"""The packages of console/ and the arrows allowed between them, and console.host, console.sglang and console.core
knowing nothing of console.sim (the simulator registers itself into them).

ARROWS states, for every package, the packages it may import (at module level or inside a function): the base modules
at the bottom, then sglang, host, bench, core, and the two renderers (cli, tui) on top; sim beside them, reached only
through its plugin's registration from the composition root (the CLI's main). Nothing points back up and there
is no cycle.

Inside core, the operations with more than one module are sub-packages (apply, bench, predict, roll, snapshot,
status, tune). CORE_ARROWS states what each may import of the rest of core; the rest of console/ reaches a sub-
package only through its public surface (its __init__), and a module of a sub-package reaches its siblings by their
own paths, never through that surface (which imports them all: a cycle waiting for the next import). The parts of
core, sub-packages and the modules beside them, make no cycle among them.

Two proofs: every module of those packages is imported in a fresh interpreter with an import hook that refuses
console.sim (an import at module level, direct or through another package, fails it), and their source never
names the simulator's package or its `--sim-` options (which catches a lazy import inside a function, and
strings such as `python -m console.sim.nvidia_smi` or a `--sim-sglang-version` check)."""

from __future__ import annotations

import ast
import gc
import re
import subprocess
import sys
from collections.abc import Mapping
from graphlib import CycleError, TopologicalSorter
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
LAYERS = ("host", "sglang", "core")  # blind to the simulator

# single modules, importing nothing of ours
BASE = frozenset({"errors", "hints", "names", "secrets", "tomlwrite", "workspace"})
ARROWS: Mapping[str, frozenset[str]] = {
    **{base: frozenset() for base in BASE},
    "library_warnings": frozenset({"workspace"}),  # the CLI's first step: where a library's warnings go
    "sglang": frozenset({"hints", "names", "secrets"}),
    "host": frozenset({"hints", "names", "secrets", "sglang"}),
    "bench": frozenset({"secrets", "sglang"}),
    "fleet": BASE | {"sglang", "host"},
    "core": BASE | {"sglang", "host", "bench", "fleet"},
    "tui": BASE | {"sglang", "host", "bench", "fleet", "core"},
    "cli": BASE | {"library_warnings", "sglang", "host", "bench", "fleet", "core", "tui", "sim"},
    "sim": BASE | {"sglang", "host"},
    "__main__": frozenset({"cli"}),
}


# What each sub-package of console/core may import of the rest of core. Beside them, core's top level holds only the
# vocabulary every operation shares (session, events, pending, phases, exits, console_requests): at most
# CORE_TOP_LEVEL modules, so that a new operation becomes a sub-package instead of a flat row of near-synonyms.
CORE_TOP_LEVEL = 8
CORE_SUBPACKAGES = ("apply", "bench", "change", "deployment", "predict", "roll", "snapshot", "status", "tune")
CORE_ARROWS: Mapping[str, frozenset[str]] = {
    "apply": frozenset({"change", "deployment", "events", "exits", "phases", "session"}),  # a member is never alone
    "bench": frozenset({"deployment", "session", "status"}),  # the form's setup label, the unit's ask; a front door
    "change": frozenset({"exits"}),  # a start judged from systemd's state; below the session and the events
    "deployment": frozenset({"change"}),  # the type, its checks and restart order: below whoever reads or changes it
    "predict": frozenset({"bench", "events", "session"}),
    "roll": frozenset({"apply", "bench", "change", "deployment", "events", "phases", "session", "snapshot", "status"}),
    "snapshot": frozenset({"apply", "change", "deployment", "events", "session"}),
    "status": frozenset({"change", "deployment", "exits", "phases", "session", "snapshot"}),  # a stop's account
    # a deployment's tune: each trial the deployment's change (roll), its health as status judges it
    "tune": frozenset({"apply", "bench", "change", "deployment", "events", "predict", "roll", "session", "status"}),
}


def parse(path: Path) -> ast.Module:
    """The file's syntax tree, parsed with no garbage collection under way: CPython 3.11.7's ast.parse fails with
    "AST constructor recursion depth mismatch" when a finalizer runs inside it and raises (an earlier test's
    asyncio transport collected after its event loop closed, as seen once in a full run)."""
    gc.disable()
    try:
        return ast.parse(path.read_text(), str(path))
    finally:
        gc.enable()


def imports_of(path: Path) -> set[str]:
    """The console modules a file imports, anywhere in it (`console.core.apply`, ...)."""
    found: set[str] = set()
    for node in ast.walk(parse(path)):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return {name for name in found if name == "console" or name.startswith("console.")}


def package_of(module: str) -> str:
    """`console.core.apply` -> `core`; `console.errors` -> `errors`."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def allowed(source: str, target_module: str) -> bool:
    target = package_of(target_module)
    if target in ("", source):
        return True
    rules = ARROWS[source]
    return target in rules or any(target_module == f"console.{r}" or target_module.startswith(f"console.{r}.")
                                  for r in rules if "." in r)  # fmt: skip


def wrong_arrows(root: Path) -> list[str]:
    wrong = []
    for path in sorted(root.rglob("*.py")):
        source = package_of("console." + ".".join(path.relative_to(root).with_suffix("").parts))
        for module in sorted(imports_of(path)):
            if not allowed(source, module):
                wrong.append(f"{path.relative_to(root.parent)}: {source} -> {module}")
    return wrong


def test_every_package_imports_only_what_its_layer_allows() -> None:
    packages = {p.stem if p.is_file() else p.name for p in (ROOT / "console").iterdir() if p.name != "__pycache__"}
    packages.discard("__init__")
    assert packages == set(ARROWS), "a package without a row in ARROWS (or a row for one that is gone)"
    assert wrong_arrows(ROOT / "console") == []


def test_the_layers_have_no_cycle() -> None:
    graph = {source: {r.split(".")[0] for r in rules} for source, rules in ARROWS.items()}
    try:
        order = list(TopologicalSorter(graph).static_order())
    except CycleError as exc:  # pragma: no cover - the assertion below says it
        raise AssertionError(f"the allowed arrows make a cycle: {exc.args[1]}") from None
    assert order.index("sglang") < order.index("core") < order.index("tui") < order.index("cli")


def test_the_arrow_check_would_notice_an_arrow_back_up(tmp_path: Path) -> None:
    fake = tmp_path / "console"
    (fake / "host").mkdir(parents=True)
    (fake / "host" / "leaky.py").write_text("def f():\n    from console.core.apply import plan_apply\n")
    (fake / "sim").mkdir()
    (fake / "sim" / "fine.py").write_text("from console.host.base import HostError\n")
    assert wrong_arrows(fake) == ["console/host/leaky.py: host -> console.core.apply"]


def core_part(module: str) -> str:
    """`console.core.apply.run` -> `apply`; `console.core.session` -> `session`; `console.core` -> ``."""
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[:2] == ["console", "core"] else ""


def module_of(path: Path, root: Path) -> str:
    return ".".join(("console", *path.relative_to(root).with_suffix("").parts)).removesuffix(".__init__")


def core_graph(root: Path) -> dict[str, set[str]]:
    """Which parts of core each part imports (anywhere in its files)."""
    graph: dict[str, set[str]] = {}
    for path in sorted((root / "core").rglob("*.py")):
        source = core_part(module_of(path, root))
        if source:
            targets = {core_part(module) for module in imports_of(path)} - {"", source}
            graph.setdefault(source, set()).update(targets)
    return graph


def surface_breaches(root: Path) -> list[str]:
    """Imports of a core sub-package's own modules from outside it, and imports of a sub-package's surface from
    inside it."""
    wrong = []
    for path in sorted(root.rglob("*.py")):
        me = module_of(path, root)
        for module in sorted(imports_of(path)):
            part = core_part(module)
            if part not in CORE_SUBPACKAGES:
                continue
            package = f"console.core.{part}"
            inside = me == package or me.startswith(package + ".")
            if (module != package and not inside) or (module == package and inside):
                wrong.append(f"{path.relative_to(root.parent)}: {me} -> {module}")
    return wrong


def test_core_sub_packages_import_only_what_core_arrows_allow() -> None:
    graph = core_graph(ROOT / "console")
    assert set(CORE_SUBPACKAGES) == {p.parent.name for p in (ROOT / "console" / "core").glob("*/__init__.py")}
    assert set(CORE_ARROWS) == set(CORE_SUBPACKAGES)
    beyond = {part: sorted(graph.get(part, set()) - CORE_ARROWS[part]) for part in CORE_SUBPACKAGES}
    assert beyond == {part: [] for part in CORE_SUBPACKAGES}


def test_core_keeps_its_top_level_short() -> None:
    modules = sorted(p.stem for p in (ROOT / "console" / "core").glob("*.py") if p.stem != "__init__")
    assert len(modules) <= CORE_TOP_LEVEL, modules


def test_the_parts_of_core_have_no_cycle() -> None:
    for graph in (core_graph(ROOT / "console"), CORE_ARROWS):
        try:
            TopologicalSorter(graph).prepare()
        except CycleError as exc:
            raise AssertionError(f"the parts of console/core make a cycle: {exc.args[1]}") from None


def test_core_sub_packages_are_reached_only_through_their_public_surface() -> None:
    assert surface_breaches(ROOT / "console") == []


def test_the_surface_and_cycle_checks_would_notice(tmp_path: Path) -> None:
    fake = tmp_path / "console"
    for folder in ("core/apply", "core/tune", "tui"):
        (fake / folder).mkdir(parents=True)
    (fake / "core" / "apply" / "run.py").write_text("from console.core.tune import plan_tune\n")
    (fake / "core" / "apply" / "edit.py").write_text("from console.core.apply import plan_apply\n")
    (fake / "core" / "tune" / "run.py").write_text("from console.core.apply.run import plan_apply\n")
    (fake / "tui" / "screen.py").write_text("from console.core.tune.run import plan_tune\n")
    assert surface_breaches(fake) == [
        "console/core/apply/edit.py: console.core.apply.edit -> console.core.apply",
        "console/core/tune/run.py: console.core.tune.run -> console.core.apply.run",
        "console/tui/screen.py: console.tui.screen -> console.core.tune.run",
    ]
    with pytest.raises(CycleError):
        TopologicalSorter(core_graph(fake)).prepare()


def _imports(tree: ast.Module, *, type_checking: bool) -> list[ast.Import | ast.ImportFrom]:
    """The imports a module runs (at module level or inside a function), and with type_checking those under
    `if TYPE_CHECKING:` too."""
    found: list[ast.Import | ast.ImportFrom] = []

    def visit(node: ast.AST) -> None:
        if not type_checking and isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.orelse:
                visit(child)
            return
        if isinstance(node, ast.Import | ast.ImportFrom):
            found.append(node)
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return found


def import_graph(root: Path, *, type_checking: bool = False) -> dict[str, set[str]]:
    """Which modules of console/ each module imports when it runs (`from console.core import apply` is the module
    console.core.apply; `from console.core.apply import plan_apply` is console.core.apply itself); with type_checking
    also what it imports for the type checker alone."""
    modules = {module_of(path, root): path for path in root.rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for module, path in modules.items():
        targets: set[str] = set()
        for node in _imports(parse(path), type_checking=type_checking):
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                for alias in node.names:
                    submodule = f"{node.module}.{alias.name}"
                    targets.add(submodule if submodule in modules else node.module)
            elif isinstance(node, ast.Import):
                targets.update(alias.name for alias in node.names)
        graph[module] = {t for t in targets if t in modules and t != module}
    return graph


def import_cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """The groups of modules that reach each other through their imports (Tarjan's strongly connected components
    of two or more modules), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    groups: list[list[str]] = []

    def visit(module: str) -> None:
        index[module] = low[module] = len(index)
        stack.append(module)
        for target in sorted(graph.get(module, ())):
            if target not in index:
                visit(target)
                low[module] = min(low[module], low[target])
            elif target in stack:
                low[module] = min(low[module], index[target])
        if low[module] == index[module]:
            group = []
            while True:
                member = stack.pop()
                group.append(member)
                if member == module:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for module in sorted(graph):
        if module not in index:
            visit(module)
    return sorted(groups)


def test_the_modules_of_console_make_no_import_cycle() -> None:
    """No module reaches itself through its imports, at module level, inside a function (a cycle put off until the
    first call, which keeps the two modules one piece) or for the type checker alone (the cycle the next refactor
    trips on: tui's context -> screens.bench -> screens.runs was one)."""
    assert import_cycles(import_graph(ROOT / "console", type_checking=True)) == []


def test_the_console_cycle_check_would_notice(tmp_path: Path) -> None:
    fake = tmp_path / "console"
    (fake / "cli").mkdir(parents=True)
    (fake / "cli" / "__init__.py").write_text("")
    (fake / "cli" / "apply.py").write_text("import console.cli.common\n\n\ndef run():\n"
                                           "    from console.cli.rolling import rolling_main\n")  # fmt: skip
    (fake / "cli" / "rolling.py").write_text("from console.cli import apply\n")
    (fake / "cli" / "common.py").write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                                            "    from console.cli.apply import run\n")  # fmt: skip
    (fake / "cli" / "status.py").write_text("import console.cli.common\n")
    assert import_cycles(import_graph(fake)) == [["console.cli.apply", "console.cli.rolling"]]
    with_types = [["console.cli.apply", "console.cli.common", "console.cli.rolling"]]
    assert import_cycles(import_graph(fake, type_checking=True)) == with_types


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
def test_the_layers_import_nothing_from_the_simulator() -> None:
    packages = [f"console.{layer}" for layer in LAYERS]
    done = subprocess.run(
        [sys.executable, "-c", PROBE, *packages], capture_output=True, text=True, timeout=120, cwd=ROOT, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    count, sim_modules = done.stdout.split(" ", 1)
    assert int(count) >= 20 and sim_modules.strip() == "[]"  # every module was really imported


@pytest.mark.parametrize("layer", LAYERS)
def test_the_layers_sources_do_not_name_the_simulator(layer: str) -> None:
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


# textual-serve's one home beside the console: the server that runs a console per browser tab (`--web`), which draws
# nothing itself and imports nothing of console/tui.
TEXTUAL = ("textual", "textual_serve")


def test_textual_is_imported_only_by_the_console_ui() -> None:
    """textual and textual-serve belong to console/tui (the console and its web server, tui/web.py): the core and the
    CLI are the console's other renderer's ground and its fast path (a function-level import counts too)."""
    outside = []
    for path in sorted((ROOT / "console").rglob("*.py")):
        where = path.relative_to(ROOT / "console")
        if where.parts[0] == "tui":
            continue
        for node in ast.walk(parse(path)):
            names = [a.name for a in node.names] if isinstance(node, ast.Import) else []
            if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
                names = [node.module]
            outside += [f"{path.relative_to(ROOT)}: {n}" for n in names if n.split(".")[0] in TEXTUAL]
    assert outside == []


def stale_references(sources: list[Path], root: Path) -> list[str]:
    """The names of our own code that comments and docstrings give (`console.core.status.HostWatcher`,
        `console/core/roll/gate.py`) and that do not exist: a module moved without its mentions (issue 39, item 8).
        A dotted name resolves when its longest module prefix is a file or package and the next part is defined or
        imported there; an all-capitals part is a placeholder (`console.cli.VERB`). Only names under a package or module
    of ours count: `console.toml` is a file, `console.notify` a variable."""
    stale = []
    for source in sources:
        text = source.read_text()
        named = re.findall(r"\bconsole/[\w/]+\.py\b", text)
        stale += [f"{source.relative_to(root)}: {path}" for path in named if not (root / path).exists()]
        for dotted in re.findall(r"\bconsole(?:\.\w+)+", text):
            parts = dotted.split(".")
            ours = (root / "console" / parts[1]).is_dir() or (root / "console" / f"{parts[1]}.py").is_file()
            if ours and not any(part.isupper() for part in parts) and not _defined(root, parts):
                stale.append(f"{source.relative_to(root)}: {dotted}")
    return stale


def _defined(root: Path, parts: list[str]) -> bool:
    """Whether a dotted name of ours is a module, or a name its longest module prefix defines or imports."""
    for k in range(len(parts), 0, -1):
        base = root.joinpath(*parts[:k])
        module = next((m for m in (base.with_suffix(".py"), base / "__init__.py") if m.is_file()), None)
        if module is not None:
            if k == len(parts):
                return True
            name = re.escape(parts[k])
            defines = rf"^\s*(?:async def|def|class) {name}\b|\b{name}\b\s*[:=]|^\s+{name},|import .*\b{name}\b"
            return re.search(defines, module.read_text(), re.M) is not None
    return False


def test_comments_name_only_modules_and_names_that_exist() -> None:
    sources = sorted((ROOT / "console").rglob("*.py"))
    assert stale_references(sources, ROOT) == []


def test_the_reference_check_would_notice_a_moved_module(tmp_path: Path) -> None:
    (tmp_path / "console" / "core").mkdir(parents=True)
    (tmp_path / "console" / "core" / "status.py").write_text("class HostWatcher: ...\n")
    comment = tmp_path / "console" / "core" / "note.py"
    comment.write_text('"""See console.core.status.HostWatcher, console.core.monitor and console/core/gate.py;\n'
                       'console.core.status.Gone; each console.cli.VERB."""\n')  # fmt: skip
    assert stale_references([comment], tmp_path) == [
        "console/core/note.py: console/core/gate.py",
        "console/core/note.py: console.core.monitor",
        "console/core/note.py: console.core.status.Gone",
    ]
