"""The projection rows: `runs`, `run_cases`, `rounds` and `profiles`, as the pure folds of
ledger/core/projections.py shape them, read and written in the caller's transaction. `Store`
offers these functions as its methods (`store.load_view(conn, run_id)`, ...)."""

from __future__ import annotations

import functools
from operator import attrgetter
from typing import Any

from sqlalchemy import Connection, bindparam, select

from ledger.core.projections import CaseRow, ProfileRow, RoundRow, RunRow, RunView, row_fields
from ledger.errors import InputError
from ledger.store.driver import fetch
from ledger.store.history import ROUND_BOOLEANS, ROUND_COLUMNS
from ledger.store.tables import profiles, rounds, run_cases, runs


def load_view(conn: Connection, run_id: str) -> RunView | None:
    """The run's `runs` and `run_cases` rows (no rounds or profiles), or None.

    Read with the driver's cursor (`driver.fetch`): `verify` reads every run's rows back."""
    found = fetch(conn, _RUN_ROW, {"run": run_id}, _RUN_BOOLEANS)
    if not found:
        return None
    cases = fetch(conn, _CASE_ROWS, {"run": run_id}, ())
    return RunView(run=RunRow(*found[0]), cases=tuple(CaseRow(*c) for c in cases))


def save_view(conn: Connection, before: RunView | None, after: RunView) -> None:
    """Write what changed from `before` (None: a new run) to `after`."""
    # Rows go to the driver as plain tuples in column order, through statements written
    # once per dialect: no per-row dict and no SQLAlchemy parameter processing (the
    # values are str, int, float, bool and None, which both drivers take as they are).
    run_id = after.run.run_id
    if before is None:
        _write(conn, "insert", runs, [_RUN_VALUES(after.run)])
        _write(conn, "insert", run_cases, [_CASE_VALUES(c) for c in after.cases])
    else:
        _write(conn, "update", runs, [(*_RUN_VALUES(after.run), run_id)])
        changed = [
            (*_CASE_VALUES(new), run_id, new.position)
            for old, new in zip(before.cases, after.cases, strict=True)
            if old != new
        ]
        _write(conn, "update", run_cases, changed)
    added = after.rounds[len(before.rounds) if before else 0 :]
    _write(conn, "insert", rounds, list(added))  # a RoundRow is a tuple of its columns
    new_profiles = after.profiles[len(before.profiles) if before else 0 :]
    _write(conn, "insert", profiles, [_PROFILE_VALUES(p) for p in new_profiles])


def all_run_ids(conn: Connection) -> list[str]:
    return list(conn.execute(select(runs.c.run_id).order_by(runs.c.run_id)).scalars())


def unknown_run(conn: Connection, run_id: str) -> InputError:
    """The refusal of a run id the ledger does not hold. Where a run it holds is a likely
    typo of it (`l2norm-01` for `l2norm-001`) or the one run it begins, it names that run."""
    import difflib

    known = all_run_ids(conn)
    near = difflib.get_close_matches(run_id, known, n=1, cutoff=0.8)
    if not near and run_id:
        near = [r for r in known if r.startswith(run_id)]
    hint = f"; did you mean {near[0]!r}? (`status` lists the runs)" if len(near) == 1 else ""
    return InputError(f"run {run_id!r} is not in the ledger{hint}")


def stored_projection(conn: Connection, run_id: str) -> RunView | None:
    """The run's whole stored projection: its rows, rounds and profiles, or None."""
    view = load_view(conn, run_id)
    if view is None:
        return None
    rows = fetch(conn, _RUN_ROUNDS, {"run": run_id}, ROUND_BOOLEANS)
    found = fetch(conn, _RUN_PROFILES, {"run": run_id}, ())
    return RunView(
        run=view.run,
        cases=view.cases,
        rounds=tuple(map(RoundRow._make, rows)),
        profiles=tuple(ProfileRow(*p) for p in found),
    )


def clear_projections(conn: Connection) -> None:
    """Delete every projection row (`db rebuild-projections` folds them again)."""
    for table in (profiles, rounds, run_cases, runs):
        conn.execute(table.delete())


_RUN_ROW = select(*(runs.c[name] for name in RunRow.__slots__)).where(
    runs.c.run_id == bindparam("run")
)
_RUN_BOOLEANS = tuple(
    i for i, name in enumerate(RunRow.__slots__) if runs.c[name].type.python_type is bool
)
_CASE_ROWS = (
    select(*(run_cases.c[name] for name in CaseRow.__slots__))
    .where(run_cases.c.run_id == bindparam("run"))
    .order_by(run_cases.c.position)
)
_RUN_ROUNDS = (
    select(*ROUND_COLUMNS).where(rounds.c.run_id == bindparam("run")).order_by(rounds.c.round)
)
_RUN_PROFILES = (
    select(*(profiles.c[name] for name in ProfileRow.__slots__))
    .where(profiles.c.run_id == bindparam("run"))
    .order_by(profiles.c.stream_version)
)
_RUN_VALUES = attrgetter(*RunRow.__slots__)
_CASE_VALUES = attrgetter(*CaseRow.__slots__)
_PROFILE_VALUES = attrgetter(*ProfileRow.__slots__)
_ROW_CLASSES = {"runs": RunRow, "run_cases": CaseRow, "rounds": RoundRow, "profiles": ProfileRow}
_ROW_KEYS = {"runs": ("run_id",), "run_cases": ("run_id", "position")}


def _write(conn: Connection, kind: str, table: Any, rows: list[tuple[Any, ...]]) -> None:
    """Insert (or update by key) projection rows given as tuples of their row class's
    fields in order (an update's tuples end with the key's values)."""
    if rows:
        conn.exec_driver_sql(_projection_sql(conn.dialect.paramstyle, kind, table.name), rows)


@functools.cache
def _projection_sql(paramstyle: str, kind: str, table: str) -> str:
    mark = "?" if paramstyle == "qmark" else "%s"
    names = row_fields(_ROW_CLASSES[table])
    if kind == "insert":
        return f"INSERT INTO {table} ({', '.join(names)}) VALUES ({', '.join([mark] * len(names))})"
    sets = ", ".join(f"{name} = {mark}" for name in names)
    keys = " AND ".join(f"{name} = {mark}" for name in _ROW_KEYS[table])
    return f"UPDATE {table} SET {sets} WHERE {keys}"
