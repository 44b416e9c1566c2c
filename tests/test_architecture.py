"""The layout's rules, read from the package's own imports (AST), so the structure cannot drift.

Each rule names the modules that break it. An import counts wherever it is written (module level or
inside a function: a lazy import is still a dependency); imports under ``if TYPE_CHECKING:`` count
only for the cycle rule's exemption (type names do not load code).
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "pytest_hetero"
ENGINES = ("pytest_hetero.backends.local", "pytest_hetero.backends.docker", "pytest_hetero.backends.kubernetes")
GLUE = "pytest_hetero.pytest_plugin"
PYTEST_MODULES = ("pytest", "_pytest", "xdist", "pytest_html")


def _module_name(path: Path) -> str:
    rel = path.relative_to(PACKAGE.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _resolve(module: str, node: ast.ImportFrom, is_package: bool) -> str:
    if node.level == 0:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def _type_checking_lines(tree: ast.Module) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for child in node.body:
                lines.update(range(child.lineno, (child.end_lineno or child.lineno) + 1))
    return lines


def imports() -> dict[str, list[tuple[str, bool]]]:
    """``{module: [(imported module, type-only)]}`` for every module of the package."""
    out: dict[str, list[tuple[str, bool]]] = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        module = _module_name(path)
        tree = ast.parse(path.read_text(encoding="utf-8"))
        typing_only = _type_checking_lines(tree)
        found: list[tuple[str, bool]] = []
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                found += [(alias.name, node.lineno in typing_only) for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                target = _resolve(module, node, path.name == "__init__.py")
                found.append((target, node.lineno in typing_only))
                # ``from pkg import submodule`` depends on the submodule too
                found += [(f"{target}.{a.name}", node.lineno in typing_only) for a in node.names
                          if (PACKAGE.parent / (f"{target}.{a.name}".replace(".", "/") + ".py")).exists()
                          or (PACKAGE.parent / f"{target}.{a.name}".replace(".", "/")).is_dir()]
        out[module] = found
    return out


def _within(name: str, prefix: str) -> bool:
    return name == prefix or name.startswith(prefix + ".")


def _breaking(rule: str, check: object) -> list[str]:
    assert callable(check)
    return sorted({f"{module} imports {target}" for module, targets in imports().items()
                   for target, _ in targets if check(module, target)})


def test_only_the_pytest_glue_imports_pytest() -> None:
    found = _breaking("pytest", lambda m, t: not _within(m, GLUE)
                      and any(_within(t, p) for p in PYTEST_MODULES))
    assert found == []


def test_nothing_imports_the_cli() -> None:
    found = _breaking("cli", lambda m, t: not _within(m, "pytest_hetero.cli") and _within(t, "pytest_hetero.cli"))
    assert found == []


def test_layers_import_no_engine() -> None:
    found = _breaking("layers", lambda m, t: _within(m, "pytest_hetero.layers")
                      and any(_within(t, e) for e in ENGINES))
    assert found == []


def test_engines_import_neither_each_other_nor_the_layers() -> None:
    def crosses(module: str, target: str) -> bool:
        mine = next((e for e in ENGINES if _within(module, e)), None)
        if mine is None:
            return False
        other_engine = any(_within(target, e) for e in ENGINES if e != mine)
        upward = any(_within(target, p) for p in ("pytest_hetero.layers", GLUE, "pytest_hetero.cli",
                                                   "pytest_hetero.reporting", "pytest_hetero.bundle"))
        return other_engine or upward

    assert _breaking("engines", crosses) == []


def test_reporting_does_not_sign() -> None:
    found = _breaking("reporting", lambda m, t: _within(m, "pytest_hetero.reporting")
                      and _within(t, "pytest_hetero.bundle.signing"))
    assert found == []


def _package(module: str) -> str:
    parts = module.split(".")
    return ".".join(parts[:2])


def package_graph() -> dict[str, set[str]]:
    """Package → packages it imports at run time (``pytest_hetero.<first part>``; a top-level module is
    its own node; type-only imports left out)."""
    graph: dict[str, set[str]] = defaultdict(set)
    for module, targets in imports().items():
        for target, type_only in targets:
            if type_only or not _within(target, "pytest_hetero"):
                continue
            a, b = _package(module), _package(target)
            if a != b and b != "pytest_hetero":
                graph[a].add(b)
    return graph


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Groups of nodes that reach each other (Tarjan), each sorted; single nodes left out."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                top = stack.pop()
                group.append(top)
                if top == node:
                    break
            if len(group) > 1:
                out.append(sorted(group))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return sorted(out)


def test_no_import_cycles_between_packages() -> None:
    graph = package_graph()
    cycles = strongly_connected(graph)
    edges = sorted(f"{a} -> {b}" for group in cycles for a in group for b in graph[a] if b in group)
    assert edges == []
