"""The layers of docs/architecture.md, held against the imports of every module in src/; and
the test modules, which import helpers from tests/helpers.py and never one another."""

from __future__ import annotations

import ast
from pathlib import Path

from tests.helpers import REPO

PACKAGE = REPO / "src" / "seedvar"
ENTRY = {"cli", "preflight"}  # the top-level modules that may import every layer
EVERY = {"foundation", "data", "training", "tracking", "stats", "seeds", "scale", "results"}
MAY_IMPORT = {  # a layer -> the layers its modules may import (besides its own)
    "foundation": set(),
    "data": {"foundation"},
    "training": {"foundation"},
    "tracking": {"foundation"},
    "stats": {"foundation"},
    "seeds": {"foundation", "data", "training", "tracking"},
    "scale": {"foundation", "training", "tracking", "seeds"},
    "results": {"foundation", "data", "stats", "seeds"},
    "sweep": {"foundation", "stats", "seeds", "scale", "tracking", "results"},
    "report": {"foundation", "data", "stats", "results", "tracking", "seeds", "sweep"},
    "entry": EVERY | {"report", "sweep"},
}


def layer_of(name: str) -> str:
    """`scale`, `config`, ... -> its layer: a subpackage is one; top-level modules below cli."""
    if (PACKAGE / name).is_dir():
        return name
    return "entry" if name in ENTRY else "foundation"


def imported(path: Path) -> set[str]:
    """The first names under seedvar (subpackages and modules) that `path` imports."""
    names = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            parts = node.module.split(".")
            if parts[0] == "seedvar":
                names |= {parts[1]} if len(parts) > 1 else {a.name for a in node.names}
        elif isinstance(node, ast.Import):
            names |= {a.name.split(".")[1] for a in node.names if a.name.startswith("seedvar.")}
    return names - {"__version__"}


def test_every_module_imports_only_the_layers_below_its_own():
    crossings = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE)
        layer = layer_of(relative.parts[0].removesuffix(".py"))
        for name in imported(path):
            target = layer_of(name)
            if target != layer and target not in MAY_IMPORT[layer]:
                crossings.append(f"{relative} ({layer}) imports seedvar.{name} ({target})")
    assert crossings == []
    subpackages = {p.name for p in PACKAGE.iterdir() if (p / "__init__.py").exists()}
    assert set(MAY_IMPORT) == subpackages | {"foundation", "entry"}  # every layer is listed
    assert imported(PACKAGE / "results" / "aggregate.py") >= {"stats", "seeds"}  # it reads them
    assert "report" not in imported(PACKAGE / "results" / "record.py")  # rules and numbers only


def imported_from_tests(path: Path) -> set[str]:
    """The modules under tests/ that `path` imports (`tests.helpers`, ...), relative imports
    and `from tests import x` included."""
    modules = []
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            modules += [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level <= 1:
            module = node.module or ""
            if node.level == 1:  # from .x import y, from . import x: a module of tests/
                module = f"tests.{module}".rstrip(".")
            if module == "tests":
                modules += [f"tests.{alias.name}" for alias in node.names]
            else:
                modules.append(module)
    return {".".join(m.split(".")[:2]) for m in modules if m.startswith("tests.")}


def test_no_test_module_imports_another():
    """Test modules share helpers through tests/helpers.py (and tests/postgres.py) and fixtures
    through conftest.py, never by importing conftest or another test module: that would run
    the other module's import-time code, and tie its tests to helpers it happens to hold."""
    crossings = []
    for path in sorted((REPO / "tests").glob("test_*.py")):
        for module in sorted(imported_from_tests(path)):
            name = module.split(".")[1]
            if name == "conftest" or name.startswith("test_"):
                crossings.append(f"{path.name} imports {module}")
    assert crossings == []
    assert imported_from_tests(Path(__file__)) == {"tests.helpers"}  # the imports are seen
