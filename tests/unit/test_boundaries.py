"""The layers, checked on the source: nothing in ledger/ imports cli/, and the pure core
(the decision rules, statistics, the controller, the round path, the evidence fold and the
projections, with every ledger module they import in turn) imports no store, no database
driver and nothing that reads files, the network or the clock."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LEDGER = ROOT / "ledger"
PURE_CORE = (
    "ledger.decide",
    "ledger.stats",
    "ledger.controller",
    "ledger.round",
    "ledger.evidence",
    "ledger.projections",
)
# what the pure core must not reach, directly or through a ledger module it imports
FORBIDDEN = (
    "cli",
    "ledger.store",
    "ledger.service",
    "ledger.jsonio",
    "ledger.inputs",
    "ledger.samples",
    "ledger.profiles",
    "sqlalchemy",
    "alembic",
    "psycopg",
    "os",
    "io",
    "pathlib",
    "shutil",
    "tempfile",
    "subprocess",
    "socket",
    "glob",
    "time",
    "datetime",
    "uuid",
)


def _module_path(name: str) -> Path:
    base = ROOT.joinpath(*name.split("."))
    return base / "__init__.py" if base.is_dir() else base.with_suffix(".py")


def imports(name: str) -> set[str]:
    """Every module a ledger module imports, at the top or inside a function."""
    path = _module_path(name)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                parts = package.split(".")
                base = ".".join(parts[: len(parts) - node.level + 1])
                module = f"{base}.{node.module}" if node.module else base
            else:
                module = node.module or ""
            found.add(module)
            # `from ledger import stats` imports the module ledger.stats
            for alias in node.names:
                if _module_path(f"{module}.{alias.name}").exists():
                    found.add(f"{module}.{alias.name}")
    return found


def _reaches(start: str) -> dict[str, str]:
    """Every module `start` imports, transitively through ledger modules: name -> importer."""
    seen: dict[str, str] = {}
    todo = [start]
    while todo:
        current = todo.pop()
        for module in imports(current):
            if module in seen or module == start:
                continue
            seen[module] = current
            if module.split(".")[0] == "ledger" and _module_path(module).exists():
                todo.append(module)
    return seen


def _forbidden(module: str) -> bool:
    return any(module == f or module.startswith(f"{f}.") for f in FORBIDDEN)


def _ledger_modules() -> list[str]:
    return sorted(
        ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        for path in LEDGER.rglob("*.py")
    )


@pytest.mark.parametrize("module", _ledger_modules())
def test_ledger_never_imports_the_cli(module: str):
    assert not [m for m in imports(module) if m == "cli" or m.startswith("cli.")]


@pytest.mark.parametrize("module", PURE_CORE)
def test_the_pure_core_reaches_no_io(module: str):
    reached = _reaches(module)
    bad = {m: f"imported by {by}" for m, by in reached.items() if _forbidden(m)}
    assert bad == {}


def test_the_check_sees_an_import_inside_a_function():
    """The scan is not blind: a module known to import the store lazily is caught."""
    assert "ledger.store.eventstore" in _reaches("ledger.service")
    assert any(_forbidden(m) for m in _reaches("ledger.legacy"))
    assert "ledger.bottleneck" in _reaches("ledger.controller")  # imported in a function
