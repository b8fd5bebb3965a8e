"""The layers, checked on the source.

- Nothing in ledger/ imports cli/.
- Each sub-package of ledger/ imports only its own layer and the layers below it
  (`LAYERS`, lowest first): the core never reaches inputs or the store, the store never
  reaches the verifier, the services never reach the reports.
- Only the store touches SQL: no module outside ledger/store/ imports SQLAlchemy or the tables.
- The pure core (every module of ledger/core/, with every ledger module they import in
  turn) imports no store, no database driver and nothing that reads files, the network or
  the clock.
- No import cycles among the modules of ledger/, cli/ and migrations/: a helper that several
  layers use lives in a leaf module (ledger/text.py, ledger/errors.py)."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
LEDGER = ROOT / "ledger"
PURE_CORE_PACKAGE = "ledger.core"
# lowest first; a module may import modules of its own layer and of the layers below
LAYERS = (
    # leaves: no ledger import (the harness runs where kernel-ledger is not installed)
    ("ledger.errors", "ledger.text", "ledger.harness"),
    # canonical bytes and hashes are pure: the events and the folds hash with them
    ("ledger.core", "ledger.integrity.hashing"),
    ("ledger.inputs", "ledger.files"),
    ("ledger.store",),
    ("ledger.integrity",),
    ("ledger.services",),
    ("ledger.reports",),
)
# what the pure core must not reach, directly or through a ledger module it imports
FORBIDDEN = (
    "cli",
    "ledger.store",
    "ledger.services.service",
    "ledger.inputs.jsonio",
    "ledger.inputs.models",
    "ledger.inputs.samples",
    "ledger.inputs.profiles",
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
            # `from ledger import stats` imports the module ledger.core.stats
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


def _modules(*packages: str) -> list[str]:
    return sorted(
        ".".join(path.relative_to(ROOT).with_suffix("").parts).removesuffix(".__init__")
        for package in packages
        for path in (ROOT / package).rglob("*.py")
    )


def _ledger_modules() -> list[str]:
    return _modules("ledger")


@pytest.mark.parametrize("module", _ledger_modules())
def test_ledger_never_imports_the_cli(module: str):
    assert not [m for m in imports(module) if m == "cli" or m.startswith("cli.")]


def _layer(module: str) -> int | None:
    """The layer of a ledger module: the most specific prefix in LAYERS wins."""
    best: tuple[int, int] | None = None
    for rank, prefixes in enumerate(LAYERS):
        for prefix in prefixes:
            inside = module == prefix or module.startswith(f"{prefix}.")
            if inside and (best is None or len(prefix) > best[1]):
                best = (rank, len(prefix))
    return None if best is None else best[0]


PURE_CORE = tuple(m for m in _ledger_modules() if _layer(m) == 1)


def test_every_ledger_module_has_a_layer():
    assert [m for m in _ledger_modules() if m != "ledger" and _layer(m) is None] == []
    assert "ledger.core.decide" in PURE_CORE and "ledger.integrity.hashing" in PURE_CORE


@pytest.mark.parametrize("module", _ledger_modules())
def test_imports_go_down_the_layers(module: str):
    own = _layer(module)
    upward = sorted(
        m for m in imports(module) if m.startswith("ledger.") and (_layer(m) or 0) > (own or 0)
    )
    assert upward == [], f"{module} (layer {own}) imports a layer above it"


@pytest.mark.parametrize("module", _ledger_modules())
def test_only_the_store_touches_sql(module: str):
    if module.startswith("ledger.store"):
        return
    sql = sorted(
        m
        for m in imports(module)
        if m.split(".")[0] == "sqlalchemy" or m.startswith("ledger.store.tables")
    )
    assert sql == [], f"{module} reaches SQL directly"


@pytest.mark.parametrize("module", PURE_CORE)
def test_the_pure_core_reaches_no_io(module: str):
    reached = _reaches(module)
    bad = {m: f"imported by {by}" for m, by in reached.items() if _forbidden(m)}
    assert bad == {}


def test_the_check_sees_an_import_inside_a_function():
    """The scan is not blind: a module known to import the store lazily is caught."""
    assert "ledger.store.eventstore" in _reaches("ledger.services.service")
    assert any(_forbidden(m) for m in _reaches("ledger.services.legacy"))
    assert "ledger.core.bottleneck" in _reaches("ledger.core.controller")  # imported in a function
    assert _layer("ledger.integrity.hashing") == 1 and _layer("ledger.integrity.verify") == 4


def _path(graph: dict[str, set[str]], start: str, goal: str) -> list[str] | None:
    """A shortest import path from `start` to `goal` (breadth first), or None."""
    paths = {start: [start]}
    todo = [start]
    while todo:
        current = todo.pop(0)
        for nxt in sorted(graph[current]):
            if nxt == goal:
                return [*paths[current], goal]
            if nxt not in paths:
                paths[nxt] = [*paths[current], nxt]
                todo.append(nxt)
    return None


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """One shortest cycle, as [a, b, ..., a], through each group of modules that reach each
    other (a strongly connected component of more than one module)."""
    cycles, seen = [], set()
    for start in sorted(graph):
        cycle = None if start in seen else _path(graph, start, start)
        if cycle is not None and len(cycle) > 2:
            cycles.append(cycle)
            seen.update(m for m in graph if _path(graph, start, m) and _path(graph, m, start))
    return cycles


def test_no_import_cycles():
    """Every import counts (at the top, inside a function, under TYPE_CHECKING): a cycle is
    a tangle of concerns whichever way Python happens to resolve it."""
    names = _modules("ledger", "cli", "migrations")
    graph = {name: {m for m in imports(name) if m in names and m != name} for name in names}
    found = [" -> ".join(cycle) for cycle in _cycles(graph)]
    assert found == [], "import cycles:\n" + "\n".join(found)


def test_the_cycle_check_names_a_cycle():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a", "d"}, "d": set(), "e": {"e"}}
    assert _cycles(graph) == [["a", "b", "c", "a"]]
