"""The house rules, read from the code: layers without loops, public names across modules, rung doors.

An ``ast`` walk over every module of ``fleetlib/`` collects its imports -- those inside functions too,
those under ``if TYPE_CHECKING:`` left out (they never run) -- and checks:

* **no import cycle** between modules (strongly connected components by Tarjan's algorithm); a package
  importing its own submodules through ``__init__`` is an edge like any other;
* **no private name imported from another module** (``from fleetlib.x import _y``): what another module
  needs gets a public name, even inside a private module;
* **no pandas or CPython internals** (``pandas._libs``, ``pandas.core.internals``, ``_from_mgr``,
  ``_from_arrays``, ``BlockManager``, ``ctypes``);
* **outside a rung, only the rung's door**: code outside ``scheduling/``, ``runtime/`` and ``program/``
  imports a rung's names as ``from fleetlib.<rung> import name`` with ``name`` in its ``__all__``;
* **no compatibility shims**: no module-level ``__getattr__`` redirect.

Each check is also run on small hand-built trees, so a test that could never fail is caught.
"""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "fleetlib"
RUNGS = ("scheduling", "runtime", "program")
INTERNALS = re.compile(r"\bpandas\._libs\b|\bpandas\.core\.internals\b|\b_from_mgr\b|\b_from_arrays\b"
                       r"|\bBlockManager\b|\bctypes\b")


@dataclass
class Module:
    """One module of the tree: its dotted name, file, syntax tree and whether it is a package."""

    name: str
    path: Path
    tree: ast.Module
    is_package: bool
    imports: list[tuple[str, str | None, int]] = field(default_factory=list)  # (target, name, line)


def modules(root: Path, package: str = "fleetlib") -> dict[str, Module]:
    """Read every ``.py`` file under ``root`` (the package folder) into :class:`Module` records."""
    out = {}
    for path in sorted(root.rglob("*.py")):
        parts = [package, *path.relative_to(root).with_suffix("").parts]
        is_package = parts[-1] == "__init__"
        if is_package:
            parts = parts[:-1]
        name = ".".join(parts)
        out[name] = Module(name, path, ast.parse(path.read_text(encoding="utf-8"), str(path)), is_package)
    for module in out.values():
        module.imports = list(_imports(module, package))
    return out


def _type_checking_nodes(tree: ast.Module) -> set[int]:
    skip: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for inner in node.body:
                skip.update(id(n) for n in ast.walk(inner))
    return skip


def _imports(module: Module, package: str) -> Iterable[tuple[str, str | None, int]]:
    """Yield ``(target module, imported name or None, line)`` for every import of the package."""
    skip = _type_checking_nodes(module.tree)
    for node in ast.walk(module.tree):
        if id(node) in skip:
            continue
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.name.split(".")
                if not module.is_package:
                    base = base[:-1]
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if target == package or target.startswith(package + "."):
                for alias in node.names:
                    yield target, alias.name, node.lineno
        elif isinstance(node, ast.Import):
            for alias in node.names:
                if alias.name == package or alias.name.startswith(package + "."):
                    yield alias.name, None, node.lineno


def import_graph(mods: Mapping[str, Module]) -> dict[str, set[str]]:
    """Module -> the modules it imports (``from pkg import sub`` is an edge to ``pkg.sub``)."""
    graph: dict[str, set[str]] = {name: set() for name in mods}
    for module in mods.values():
        for target, name, _line in module.imports:
            dest = f"{target}.{name}" if name is not None and f"{target}.{name}" in mods else target
            if dest in mods and dest != module.name:
                graph[module.name].add(dest)
    return graph


def cycles(graph: Mapping[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan's algorithm, iterative)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
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
            child = next(children, None)
            if child is not None:
                if child not in index:
                    index[child] = low[child] = counter
                    counter += 1
                    stack.append(child)
                    on_stack.add(child)
                    work.append((child, iter(sorted(graph.get(child, ())))))
                elif child in on_stack:
                    low[node] = min(low[node], index[child])
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
                if len(component) > 1:
                    found.append(sorted(component))
    return found


def private_imports(mods: Mapping[str, Module]) -> list[str]:
    """``file:line target._name`` for every private name imported from another module."""
    bad = []
    for module in mods.values():
        for target, name, line in module.imports:
            if (name is not None and name.startswith("_") and not name.startswith("__")
                    and target != module.name and f"{target}.{name}" not in mods):
                bad.append(f"{module.path.name}:{line} {target}.{name}")
    return bad


def internals(mods: Mapping[str, Module]) -> list[str]:
    """``file:line`` of every code line that reaches into pandas or CPython internals."""
    bad = []
    for module in mods.values():
        for i, line in enumerate(module.path.read_text(encoding="utf-8").splitlines(), 1):
            code = line.split("#", 1)[0]
            if INTERNALS.search(code):
                bad.append(f"{module.path}:{i}")
    return bad


def door_names(mods: Mapping[str, Module], rung: str, package: str = "fleetlib") -> set[str]:
    """The names of ``fleetlib.<rung>.__all__`` (a literal list in the rung's ``__init__``)."""
    door = mods[f"{package}.{rung}"]
    for node in door.tree.body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", None) == "__all__" for t in node.targets):
            return set(ast.literal_eval(node.value))
    return set()


def door_violations(mods: Mapping[str, Module], package: str = "fleetlib") -> list[str]:
    """Imports from a rung, made outside it, that go past the rung's door."""
    doors = {rung: door_names(mods, rung, package) for rung in RUNGS if f"{package}.{rung}" in mods}
    bad = []
    for module in mods.values():
        own = module.name.split(".")[1] if module.name.count(".") else ""
        for target, name, line in module.imports:
            parts = target.split(".")
            if len(parts) < 2 or parts[1] not in doors or parts[1] == own:
                continue
            if name is None and len(parts) == 2:  # ``import fleetlib.<rung>``: the door itself
                continue
            if name is None or len(parts) > 2 or name not in doors[parts[1]]:
                bad.append(f"{module.path.name}:{line} {target}{'' if name is None else '.' + name}")
    return bad


def getattr_redirects(mods: Mapping[str, Module]) -> list[str]:
    """Modules that define a module-level ``__getattr__`` (a redirect of old names)."""
    return [m.name for m in mods.values()
            if any(isinstance(n, ast.FunctionDef) and n.name == "__getattr__" for n in m.tree.body)]


# ---------------------------------------------------------------------------------------------------
# The checks on fleetlib itself
# ---------------------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def house() -> dict[str, Module]:
    return modules(PACKAGE)


def test_no_import_cycles(house: dict[str, Module]) -> None:
    assert cycles(import_graph(house)) == []


def test_no_private_name_is_imported_from_another_module(house: dict[str, Module]) -> None:
    assert private_imports(house) == []


def test_no_pandas_or_cpython_internals(house: dict[str, Module]) -> None:
    assert internals(house) == []


def test_outside_a_rung_only_its_door_is_used(house: dict[str, Module]) -> None:
    assert door_violations(house) == []


def test_every_door_exports_read_measure_readers(house: dict[str, Module]) -> None:
    for rung in RUNGS:
        assert {"read", "measure", "READERS"} <= door_names(house, rung), rung


def test_no_module_redirects_old_names(house: dict[str, Module]) -> None:
    assert getattr_redirects(house) == []


# ---------------------------------------------------------------------------------------------------
# The checks can fail: small trees built by hand
# ---------------------------------------------------------------------------------------------------


def _tree(tmp_path: Path, files: Mapping[str, str]) -> dict[str, Module]:
    root = tmp_path / "pkg"
    for rel, text in files.items():
        path = root / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    return modules(root, package="pkg")


def test_a_cycle_through_an_import_inside_a_function_is_found(tmp_path: Path) -> None:
    mods = _tree(tmp_path, {"__init__.py": "", "a.py": "from pkg.b import x\n",
                            "b.py": "def f():\n    from pkg.a import y\n", "c.py": "import pkg.a\n"})
    assert cycles(import_graph(mods)) == [["pkg.a", "pkg.b"]]


def test_a_type_checking_import_is_no_cycle(tmp_path: Path) -> None:
    guarded = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg.a import y\n"
    mods = _tree(tmp_path, {"__init__.py": "", "a.py": "from pkg.b import x\n", "b.py": guarded})
    assert cycles(import_graph(mods)) == []


def test_a_long_cycle_is_one_component(tmp_path: Path) -> None:
    files = {"__init__.py": ""}
    n = 40
    for i in range(n):
        files[f"m{i}.py"] = f"from pkg.m{(i + 1) % n} import x\n"
    mods = _tree(tmp_path, files)
    assert cycles(import_graph(mods)) == [sorted(f"pkg.m{i}" for i in range(n))]


def test_private_names_and_relative_imports(tmp_path: Path) -> None:
    mods = _tree(tmp_path, {"__init__.py": "", "_helpers.py": "def ok(): ...\ndef _no(): ...\n",
                            "a.py": "from pkg._helpers import ok\nfrom ._helpers import _no\n",
                            "b.py": "from pkg import _helpers\n"})
    assert private_imports(mods) == ["a.py:2 pkg._helpers._no"]


def test_internals_are_found_but_not_in_comments(tmp_path: Path) -> None:
    mods = _tree(tmp_path, {"__init__.py": "", "a.py": "import ctypes\n# pandas._libs is not used here\n"
                            "x = df._from_mgr\n"})
    assert [line.rsplit(":", 1)[1] for line in internals(mods)] == ["1", "3"]


def test_door_violations(tmp_path: Path) -> None:
    mods = _tree(tmp_path, {
        "__init__.py": "",
        "runtime/__init__.py": "from pkg.runtime.model import young\n__all__ = ['young']\n",
        "runtime/model.py": "def young(): ...\ndef daly(): ...\n",
        "runtime/goodput.py": "from pkg.runtime.model import daly\n",  # inside the rung: fine
        "cli.py": "from pkg.runtime import young\nfrom pkg.runtime.model import daly\n"
                  "from pkg.runtime import model\nimport pkg.runtime.model\n",
    })
    assert door_violations(mods, package="pkg") == [
        "cli.py:2 pkg.runtime.model.daly", "cli.py:3 pkg.runtime.model", "cli.py:4 pkg.runtime.model"]


def test_getattr_redirects(tmp_path: Path) -> None:
    redirect = "def __getattr__(name):\n    raise AttributeError(name)\n"
    mods = _tree(tmp_path, {"__init__.py": "", "old.py": redirect})
    assert getattr_redirects(mods) == ["pkg.old"]


if __name__ == "__main__":  # python tests/test_architecture.py: the findings, for a person
    found = modules(PACKAGE)
    for title, items in (("cycles", cycles(import_graph(found))), ("private", private_imports(found)),
                         ("internals", internals(found)), ("doors", door_violations(found)),
                         ("redirects", getattr_redirects(found))):
        print(f"{title}: {len(items)}")
        for item in items[:20]:
            print("   ", item)
    sys.exit(0)
