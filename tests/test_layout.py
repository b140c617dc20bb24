"""The package's architecture, checked: sub-packages on floors, imports only pointing down, no cycles, small modules."""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parents[1] / "lib" / "tirbench"
#: Floors, bottom first: a module imports only modules of its own floor or of floors below.
FLOORS = ["core", "workloads", "schedules", "bench", "compile", "kernel", "tuning", "report"]
#: Inside schedules, the families' floors.
SCHEDULE_FLOORS = ["common", "intrinsics", "elementwise", "window", "gemm", "conv", "spaces"]
MAX_LINES = 450


def _modules() -> dict[str, Path]:
    return {".".join(("tirbench", *p.relative_to(PACKAGE).with_suffix("").parts)).removesuffix(".__init__"): p
            for p in PACKAGE.rglob("*.py")}


def _imports(path: Path) -> set[str]:
    """Every tirbench module ``path`` imports (``from tirbench.x import y`` counts ``tirbench.x.y`` where that is a
    module), at any depth of the file (imports inside functions count too)."""
    modules, found = _modules(), set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {a.name for a in node.names if a.name.startswith("tirbench")}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("tirbench"):
            found.add(node.module)
            found |= {f"{node.module}.{a.name}" for a in node.names if f"{node.module}.{a.name}" in modules}
    return {m for m in found if m in modules and m != "tirbench"}


def _floor(module: str, floors: list[str], depth: int) -> int | None:
    parts = module.split(".")
    return floors.index(parts[depth]) if len(parts) > depth and parts[depth] in floors else None


GRAPH = {name: _imports(path) for name, path in _modules().items()}


@pytest.mark.parametrize("module", sorted(GRAPH))
def test_imports_point_down(module: str) -> None:
    here = _floor(module, FLOORS, 1)
    for dep in GRAPH[module]:
        there = _floor(dep, FLOORS, 1)
        assert here is not None and there is not None and there <= here, f"{module} imports {dep} (a floor up)"
        if here == there == FLOORS.index("schedules"):
            a, b = _floor(module, SCHEDULE_FLOORS, 2), _floor(dep, SCHEDULE_FLOORS, 2)
            assert a is None or b is None or b <= a, f"{module} imports {dep} (a schedule family above it)"


def test_core_imports_nothing_else_and_bench_no_tuning() -> None:
    for module, deps in GRAPH.items():
        if module.startswith("tirbench.core"):
            assert all(d.startswith("tirbench.core") for d in deps), (module, deps)
        if module.startswith("tirbench.bench"):
            assert not any(d.startswith("tirbench.tuning") for d in deps), (module, deps)


def test_no_import_cycles() -> None:
    state: dict[str, int] = {}

    def visit(m: str, path: list[str]) -> None:
        if state.get(m) == 1:
            raise AssertionError("import cycle: " + " -> ".join(path[path.index(m):] + [m]))
        if state.get(m) == 2:
            return
        state[m] = 1
        for dep in GRAPH.get(m, ()):
            if dep != m and not m.startswith(dep + "."):   # a module importing its own package's __init__ is no cycle
                visit(dep, path + [m])
        state[m] = 2

    for m in GRAPH:
        visit(m, [])


def test_package_root_holds_only_init_and_modules_stay_small() -> None:
    assert sorted(p.name for p in PACKAGE.glob("*.py")) == ["__init__.py"]
    long = {str(p.relative_to(PACKAGE)): n for p in PACKAGE.rglob("*.py") if (n := len(p.read_text().splitlines())) > MAX_LINES}
    assert not long, f"modules over {MAX_LINES} lines: {long}"


def test_package_inits_reexport_nothing() -> None:
    """Sub-package ``__init__``s hold a docstring only (``workloads`` keeps its factories, as before, and ``kernel``
    its one-call functions: ``tirbench.kernel.gemm(...)``)."""
    for init in PACKAGE.rglob("__init__.py"):
        if init.parent.name in ("workloads", "kernel"):
            continue
        body = ast.parse(init.read_text()).body
        assert all(isinstance(n, ast.Expr) or (isinstance(n, ast.Assign) and n.targets[0].id == "__version__")
                   for n in body), f"{init.relative_to(PACKAGE)} does more than document its package"
