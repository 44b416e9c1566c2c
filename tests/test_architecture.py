"""The layout's rules, read from the package's own imports (AST), and what ``hetero`` and the plugin
actually import (fresh interpreters): only the glue imports pytest, nothing imports the CLI, layers import
no engine, engines import neither each other nor what judges them, reporting does not sign, and no two
packages import each other. An import counts wherever it is written (a lazy import is a dependency too)."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import pytest
from support import REPO

PACKAGE = REPO / "pytest_hetero"
PYTEST = ("pytest", "_pytest", "xdist", "pytest_html")
HEAVY = ("pytest", "_pytest", "kubernetes", "docker", "jinja2", "cryptography", "httpx", "numpy", "onnxruntime",
         "yaml", "jsonschema", "junitparser", "psutil")


def imports(path: Path, top_level_only: bool = False) -> list[str]:
    """Absolute names a module imports (``from x import y`` gives ``x`` and ``x.y``); with
    ``top_level_only``, only what runs at import time (module level, not under TYPE_CHECKING)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    nodes = _at_import_time(tree.body) if top_level_only else list(ast.walk(tree))
    found: list[str] = []
    for node in nodes:
        if isinstance(node, ast.Import):
            found += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append(node.module)
            found += [f"{node.module}.{alias.name}" for alias in node.names]
    return found


def _at_import_time(body: list[ast.stmt]) -> list[ast.AST]:
    """The statements of ``body`` that run when the module is imported: not function bodies, not
    ``if TYPE_CHECKING:`` blocks; into other ``if``/``try``/``with`` blocks and class bodies."""
    out: list[ast.AST] = []
    for node in body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            out += _at_import_time(node.orelse)
        elif isinstance(node, (ast.If, ast.Try, ast.With, ast.ClassDef)):
            for field in ("body", "orelse", "finalbody", "handlers"):
                for child in getattr(node, field, []):
                    out += _at_import_time(child.body if isinstance(child, ast.ExceptHandler) else [child])
        else:
            out.append(node)
    return out


def modules(folder: Path = PACKAGE) -> dict[str, Path]:
    """Dotted module name → file, for every module under ``folder``."""
    return {".".join(p.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__"): p
            for p in sorted(folder.rglob("*.py"))}


def under(name: str, *packages: str) -> bool:
    return any(name == p or name.startswith(p + ".") for p in packages)


def test_only_the_pytest_glue_imports_pytest() -> None:
    offenders = {name: [i for i in imports(path) if under(i, *PYTEST)] for name, path in modules().items()
                 if not under(name, "pytest_hetero.pytest_plugin")}
    assert {k: v for k, v in offenders.items() if v} == {}


def test_nothing_imports_the_cli() -> None:
    offenders = {name: [i for i in imports(path) if under(i, "pytest_hetero.cli")] for name, path in modules().items()
                 if not under(name, "pytest_hetero.cli")}
    assert {k: v for k, v in offenders.items() if v} == {}


def test_reporting_renders_and_bundle_never_imports_the_renderers() -> None:
    """Reporting may read the pure baseline diff; signing, finishing and sign-off reading are the bundle's;
    the bundle calls writers only through the hooks it is handed (no package cycle)."""
    reporting = {name: [i for i in imports(path) if under(i, "pytest_hetero.bundle")
                        and not under(i, "pytest_hetero.bundle.baseline")]
                 for name, path in modules(PACKAGE / "reporting").items()}
    assert {k: v for k, v in reporting.items() if v} == {}
    bundle = {name: [i for i in imports(path) if under(i, "pytest_hetero.reporting", "pytest_hetero.hooks",
                                                       "pytest_hetero.pytest_plugin", "pytest_hetero.cli")]
              for name, path in modules(PACKAGE / "bundle").items()}
    assert {k: v for k, v in bundle.items() if v} == {}


def test_engines_share_labels_not_each_other_for_cleanup() -> None:
    assert [i for i in imports(PACKAGE / "backends" / "labels.py") if under(i, "pytest_hetero")] == []
    docker = [i for i in imports(PACKAGE / "backends" / "docker" / "cleanup.py")
              if under(i, "pytest_hetero.backends") and not under(i, "pytest_hetero.backends.docker",
                                                                      "pytest_hetero.backends.labels")]
    assert docker == []


@pytest.mark.parametrize("name", ["pytest_hetero.hooks.specs", "pytest_hetero.hooks.builtin",
                                  "pytest_hetero.hooks.registry", "pytest_hetero.cli._parser",
                                  "pytest_hetero.pytest_plugin.plugin", "pytest_hetero.settings",
                                  "pytest_hetero.reporting.writers"])
def test_light_modules_import_nothing_heavy_at_import_time(name: str) -> None:
    path = modules()[name]
    own = [i for i in imports(path, top_level_only=True) if under(i, "pytest_hetero")
           and not under(i, "pytest_hetero.errors", "pytest_hetero.hooks", "pytest_hetero.settings",
                         "pytest_hetero.signals", "pytest_hetero.bundle.baseline", "pytest_hetero.evidence.model",
                         "pytest_hetero.pytest_plugin.options", "pytest_hetero.pytest_plugin.stash",
                         "pytest_hetero.cli._parser")
           and i not in ("pytest_hetero", "pytest_hetero.LAYERS", "pytest_hetero.__version__",
                         "pytest_hetero.signals")]
    heavy = [i for i in imports(path, top_level_only=True) if under(i, *HEAVY) and not under(i, "pytest", "_pytest")]
    assert (own, heavy) == ([], [])


def loaded_after(code: str) -> set[str]:
    """Top-level names of the modules a fresh interpreter holds after running ``code``."""
    script = (f"import contextlib, io, json, sys\n"
              f"with contextlib.redirect_stdout(io.StringIO()):\n"
              f"    try:\n"
              f"        {code}\n"
              f"    except SystemExit:\n"
              f"        pass\n"
              f"sys.__stdout__.write(json.dumps(sorted({{m.split('.')[0] for m in sys.modules}})))\n")
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True, cwd=REPO)
    return set(json.loads(done.stdout))


@pytest.mark.parametrize("argv", [["--version"], ["--help"]], ids=["version", "help"])
def test_hetero_version_and_help_import_nothing_heavy(argv: list[str]) -> None:
    loaded = loaded_after(f"from pytest_hetero.cli import main; main({argv!r})")
    assert loaded & {*HEAVY, "pluggy"} == set()


@pytest.mark.parametrize(("argv", "allowed"), [
    (["lint", "matrices/example-cpu.matrix.yaml"], {"yaml", "jsonschema"}),
    (["probe", "cpu"], {"psutil"}),
    (["keygen", "{tmp}/k"], {"cryptography"}),
    (["explain-pending", "--from", "{tmp}/none.txt"], {"yaml"}),
], ids=["lint", "probe", "keygen", "explain-pending"])
def test_each_subcommand_imports_only_what_it_uses(argv: list[str], allowed: set[str], tmp_path: Path) -> None:
    argv = [a.replace("{tmp}", str(tmp_path)) for a in argv]
    loaded = loaded_after(f"from pytest_hetero.cli import main; main({argv!r})")
    assert loaded & set(HEAVY) <= allowed


def test_the_plugin_module_imports_no_engine_renderer_or_signing() -> None:
    loaded = loaded_after("import pytest_hetero.pytest_plugin.plugin")
    assert loaded & set(HEAVY) == {"pytest", "_pytest"}
    assert not {"pytest_hetero.matrix", "pytest_hetero.layers", "pytest_hetero.backends",
                "pytest_hetero.reporting", "pytest_hetero.bundle.signing"} & _dotted(
        "import pytest_hetero.pytest_plugin.plugin")


def _dotted(code: str) -> set[str]:
    done = subprocess.run([sys.executable, "-c", f"{code}\nimport json, sys\nprint(json.dumps(sorted(sys.modules)))"],
                          capture_output=True, text=True, check=True, cwd=REPO)
    return set(json.loads(done.stdout))


ENGINES = ("pytest_hetero.backends.local", "pytest_hetero.backends.docker", "pytest_hetero.backends.kubernetes")
"""The engine modules; ``backends.protocol``, ``backends.host``, ``backends.labels`` and ``backends.streams``
are the neutral ground they share."""


def test_layers_import_no_engine() -> None:
    offenders = {name: [i for i in imports(path) if under(i, *ENGINES)]
                 for name, path in modules(PACKAGE / "layers").items()}
    assert {k: v for k, v in offenders.items() if v} == {}


def test_engines_import_neither_each_other_nor_what_judges_them() -> None:
    """An engine answers in engine terms: it never reaches another engine, the layers (verdicts), the
    glue, the CLI, the reports or the bundle."""
    offenders: dict[str, list[str]] = {}
    for engine in ENGINES:
        folder = PACKAGE / engine.split(".")[-2] / engine.split(".")[-1]
        files = modules(folder) if folder.is_dir() else {engine: folder.with_suffix(".py")}
        for name, path in files.items():
            found = [i for i in imports(path) if under(i, *(e for e in ENGINES if e != engine), "pytest_hetero.layers",
                                                         "pytest_hetero.pytest_plugin", "pytest_hetero.cli",
                                                         "pytest_hetero.reporting", "pytest_hetero.bundle")]
            if found:
                offenders[name] = found
    assert offenders == {}


def package_of(module: str) -> str:
    """``pytest_hetero.<first part>``: a subpackage, or a top-level module as its own node."""
    return ".".join(module.split(".")[:2])


def package_graph() -> dict[str, set[str]]:
    """Package → the packages it imports when code runs (function-level imports count; type-only do not)."""
    graph: dict[str, set[str]] = {}
    for name, path in modules().items():
        tree = ast.parse(path.read_text(encoding="utf-8"))
        typing_only: set[int] = set()
        for node in ast.walk(tree):
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                for child in node.body:
                    typing_only.update(range(child.lineno, (child.end_lineno or child.lineno) + 1))
        for node in ast.walk(tree):
            if isinstance(node, (ast.Import, ast.ImportFrom)) and node.lineno not in typing_only:
                targets = [a.name for a in node.names] if isinstance(node, ast.Import) else (
                    [node.module] if node.module and node.level == 0 else [])
                for target in targets:
                    a, b = package_of(name), package_of(target)
                    if under(target, "pytest_hetero") and a != b and b != "pytest_hetero":
                        graph.setdefault(a, set()).add(b)
    return graph


def strongly_connected(graph: dict[str, set[str]]) -> list[list[str]]:
    """Groups of nodes that reach one another (Tarjan), each sorted; single nodes left out."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    out: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        for nxt in sorted(graph.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group: list[str] = []
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
    edges = sorted(f"{a} -> {b}" for group in strongly_connected(graph) for a in group for b in graph[a]
                   if b in group)
    assert edges == []
