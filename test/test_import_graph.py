"""The import graph of ``para_core`` and ``para_ros`` has no cycle, counting every import: module level, inside
functions, relative imports resolved. Layers run one way (the command-line front doors on top, nothing below imports
them); a cycle means two modules each need the other, so neither can be read, tested or moved alone."""

from __future__ import annotations

import ast
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
PACKAGES = ("para_core", "para_ros")


def module_name(path: Path, root: Path) -> str:
    parts = list(path.relative_to(root).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def imports_of(source: str, module: str, is_package: bool, known: set[str]) -> list[tuple[int, str, bool]]:
    """(line, imported project module, inside a function) for every import anywhere in ``source``.

    ``from a.b import c`` names the module ``a.b.c`` when it exists, else ``a.b``; relative imports are resolved
    against ``module`` (``is_package``: ``module`` is a package's ``__init__``)."""
    found: list[tuple[int, str, bool]] = []

    def add(line: int, name: str, nested: bool) -> None:
        while name and name not in known:  # a name inside a module: fall back to the module
            name = name.rpartition(".")[0]
        if name:
            found.append((line, name, nested))

    def visit(node: ast.AST, nested: bool) -> None:
        for child in ast.iter_child_nodes(node):
            inner = nested or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, ast.Import):
                for alias in child.names:
                    add(child.lineno, alias.name, nested)
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    base = module.split(".") if is_package else module.split(".")[:-1]
                    base = base[: len(base) - (child.level - 1)]
                    parent = ".".join(base + ([child.module] if child.module else []))
                else:
                    parent = child.module or ""
                for alias in child.names:
                    add(child.lineno, f"{parent}.{alias.name}", nested)
            visit(child, inner)

    visit(ast.parse(source), False)
    return [(line, name, nested) for line, name, nested in found if name != module]


def project_modules(root: Path = REPO) -> dict[str, Path]:
    return {module_name(p, root): p for pkg in PACKAGES for p in sorted((root / pkg).rglob("*.py"))}


def import_graph(modules: dict[str, Path]) -> dict[str, set[str]]:
    known = set(modules)
    return {
        name: {dep for _, dep, _ in imports_of(path.read_text(), name, path.name == "__init__.py", known)}
        for name, path in modules.items()
    }


def find_cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected component with more than one module (or a module importing itself), each as one
    cycle through it (``a -> b -> ... -> a``), found by Tarjan's algorithm (iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(sorted(graph[start])))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            advanced = False
            for child in children:
                if child not in graph:
                    continue
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph[child]))))
                    advanced = True
                    break
                if child in on_stack:
                    low[node] = min(low[node], index[child])
            if advanced:
                continue
            work.pop()
            if work:
                low[work[-1][0]] = min(low[work[-1][0]], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    member = stack.pop()
                    on_stack.discard(member)
                    component.append(member)
                    if member == node:
                        break
                if len(component) > 1 or node in graph[node]:
                    components.append(sorted(component))
    return [cycle_through(graph, set(c)) for c in components]


def cycle_through(graph: dict[str, set[str]], component: set[str]) -> list[str]:
    """One shortest cycle from the component's first module back to itself (breadth first inside the component)."""
    start = min(component)
    parents: dict[str, str] = {}
    frontier = [start]
    while frontier:
        nxt = []
        for node in frontier:
            for child in sorted(graph[node] & component):
                if child == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(parents[path[-1]])
                    return path[::-1] + [start]
                if child not in parents:
                    parents[child] = node
                    nxt.append(child)
        frontier = nxt
    return [start, start]


def _write(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_imports_resolve_relative_nested_and_from_names(tmp_path):
    _write(
        tmp_path,
        {
            "para_core/__init__.py": "",
            "para_core/model/__init__.py": "",
            "para_core/model/a.py": "def f():\n    from . import b\n    from .b import thing\n",
            "para_core/model/b.py": "from para_core.model.c import x\nimport para_core.model\n",
            "para_core/model/c.py": "from ..model import a as _a\n",
            "para_ros/__init__.py": "",
        },
    )
    modules = project_modules(tmp_path)
    found = {
        name: imports_of(p.read_text(), name, p.name == "__init__.py", set(modules)) for name, p in modules.items()
    }
    assert found["para_core.model.a"] == [(2, "para_core.model.b", True), (3, "para_core.model.b", True)]
    assert found["para_core.model.b"] == [(1, "para_core.model.c", False), (2, "para_core.model", False)]
    assert found["para_core.model.c"] == [(1, "para_core.model.a", False)]


def test_the_checker_finds_a_cycle_through_an_import_inside_a_function(tmp_path):
    _write(
        tmp_path,
        {
            "para_core/__init__.py": "",
            "para_ros/__init__.py": "",
            "para_core/a.py": "import para_core.b\n",
            "para_core/b.py": "from para_core import c\n",
            "para_core/c.py": "def late():\n    from . import a\n",
            "para_core/d.py": "import para_core.a\n",
        },
    )
    assert find_cycles(import_graph(project_modules(tmp_path))) == [
        ["para_core.a", "para_core.b", "para_core.c", "para_core.a"]
    ]
    (tmp_path / "para_core/c.py").write_text("def late():\n    pass\n")
    assert find_cycles(import_graph(project_modules(tmp_path))) == []


FRONT_DOORS = ("para_ros.commands", "para_core.train.cli")  # the command-line front doors: the top floor


def is_front_door(module: str) -> bool:
    return any(module == door or module.startswith(door + ".") for door in FRONT_DOORS)


def test_nothing_below_the_front_doors_imports_them():
    """The commands (``para_ros.commands``: para-deploy, para-sim, para-bag; ``para_core.train.cli``: para-train) sit
    on top: no other module imports them, so a command can change without touching the layers it drives."""
    modules = project_modules()
    assert "para_ros.commands.deploy" in modules and "para_core.train.cli" in modules
    graph = import_graph(modules)
    offenders = [
        f"{m} imports {d}"
        for m, deps in sorted(graph.items())
        if not is_front_door(m)
        for d in sorted(deps)
        if is_front_door(d)
    ]
    assert not offenders, "\n".join(offenders)
    assert not is_front_door("para_ros.commandsx") and is_front_door("para_ros.commands.sim")


def test_no_import_cycles_in_the_project():
    modules = project_modules()
    assert "para_core.model.v4" in modules and "para_ros.nodes.chunk_executor" in modules
    cycles = find_cycles(import_graph(modules))
    assert not cycles, "import cycles (each module imports the next, inside functions too):\n" + "\n".join(
        " -> ".join(c) for c in cycles
    )


# The folders from the bottom floor up: a module may import its own folder and the folders before it, never one
# after it. A package's top-level modules (para_ros/paths.py, stamps.py, dds_env.py) are its own floor, ``PKG``.
FOLDER_ORDER = (
    "para_core",
    "para_core.model",
    "para_core.calibration",
    "para_core.data",
    "para_core.eval",
    "para_core.train",
    "para_ros",
    "para_ros.adapters",
    "para_ros.viz",
    "para_ros.robot",
    "para_ros.observation",
    "para_ros.execution",
    "para_ros.inference",
    "para_ros.ros_io",
    "para_ros.bag",
    "para_ros.calibration",
    "para_ros.sim",
    "para_ros.nodes",
    "para_ros.deploy",
    "para_ros.teleop",
    "para_ros.commands",
)


def folder_of(module: str, modules: dict[str, Path]) -> str:
    """``para_ros.sim.lockstep`` -> ``para_ros.sim``; a package's own top-level module -> the package."""
    parts = module.split(".")
    if len(parts) >= 2 and (len(parts) > 2 or modules[module].name == "__init__.py"):
        return ".".join(parts[:2])
    return parts[0]


def folder_order_violations(graph: dict[str, set[str]], modules: dict[str, Path], order=FOLDER_ORDER) -> list[str]:
    floor = {name: i for i, name in enumerate(order)}
    out = []
    for module, deps in sorted(graph.items()):
        here = folder_of(module, modules)
        if here not in floor:
            out.append(f"{module}: its folder {here} is not in FOLDER_ORDER")
            continue
        for dep in sorted(deps):
            there = folder_of(dep, modules)
            if there != here and floor.get(there, len(order)) > floor[here]:
                out.append(f"{module} ({here}) imports {dep} ({there}), a folder above it")
    return out


def test_folders_import_downwards_only():
    """Folder by folder, imports go one way: the simulator below the nodes, the nodes below the graph that runs
    them, recordings below the calibration that reads them, the commands on top. A module cycle test does not see
    two folders that each import the other through different modules; this does."""
    modules = project_modules()
    assert {folder_of(m, modules) for m in modules} == set(FOLDER_ORDER)  # every folder placed, none left over
    violations = folder_order_violations(import_graph(modules), modules)
    assert not violations, "\n".join(violations)


def test_the_folder_check_sees_two_folders_importing_each_other(tmp_path):
    _write(
        tmp_path,
        {
            "para_core/__init__.py": "",
            "para_ros/__init__.py": "",
            "para_ros/sim/__init__.py": "",
            "para_ros/sim/scene.py": "",
            "para_ros/sim/sweep.py": "def run():\n    from para_ros.nodes import params\n",
            "para_ros/nodes/__init__.py": "",
            "para_ros/nodes/params.py": "",
            "para_ros/nodes/sim_node.py": "from para_ros.sim import scene\n",
        },
    )
    modules = project_modules(tmp_path)
    order = ("para_core", "para_ros", "para_ros.sim", "para_ros.nodes")
    assert find_cycles(import_graph(modules)) == []  # no module cycle ...
    assert folder_order_violations(import_graph(modules), modules, order) == [  # ... but the folders cross
        "para_ros.sim.sweep (para_ros.sim) imports para_ros.nodes.params (para_ros.nodes), a folder above it"
    ]


def test_the_simulator_imports_without_ros(tmp_path):
    """``para_ros.sim`` is ROS-free: every module of it imports with rclpy, rcl_interfaces and every message package
    blocked (a fresh interpreter whose import system refuses them)."""
    modules = sorted(m for m in project_modules() if m.startswith("para_ros.sim"))
    blocked = ("rclpy", "rcl_interfaces", "para_msgs", "rosidl_runtime_py", "builtin_interfaces", "launch_ros")
    code = textwrap.dedent(f"""
        import importlib, importlib.abc, sys
        BLOCKED = {blocked!r}
        class Refuse(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in BLOCKED or name.split(".")[0].endswith("_msgs"):
                    raise ImportError(f"ROS module {{name}} imported")
        sys.meta_path.insert(0, Refuse())
        for m in {modules!r}:
            importlib.import_module(m)
        assert not [m for m in sys.modules if m.split(".")[0] in BLOCKED], "a ROS module was imported"
        print("ok", len({modules!r}))
    """)
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert res.returncode == 0 and res.stdout.startswith("ok"), res.stderr[-2000:]


@pytest.mark.parametrize(
    "module", ["para_ros.nodes.chunk_executor", "para_ros.nodes.sim_node", "para_ros.commands.deploy"]
)
def test_the_processes_that_need_no_model_import_no_torch(module):
    """The executor, the simulator node and the launcher start beside the inference node on the same cores: torch
    (1.5-2 s of one core to import) is for the inference node alone. Imported in a fresh interpreter whose import
    system refuses torch and transformers."""
    code = textwrap.dedent(f"""
        import importlib, importlib.abc, sys
        class Refuse(importlib.abc.MetaPathFinder):
            def find_spec(self, name, path=None, target=None):
                if name.split(".")[0] in ("torch", "transformers"):
                    raise ImportError(f"{{name}} imported")
        sys.meta_path.insert(0, Refuse())
        importlib.import_module({module!r})
        print("ok")
    """)
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, cwd=REPO)
    assert res.returncode == 0 and res.stdout.startswith("ok"), res.stderr[-2000:]
