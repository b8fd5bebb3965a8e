"""Ledgers written by earlier releases, one at each landed schema revision, are carried to
head by `db upgrade` and then pass every check of `verify`, with every stored event (and so
every hash) untouched; `db rebuild-projections` then folds the same rows again.

tests/fixtures/ledgers/<revision>[-<what>].sqlite3 were made by the code of the commit where
that revision was head (tests/fixtures/ledgers/README.md says how)."""

from __future__ import annotations

import shutil
import sqlite3
from pathlib import Path

import pytest

from ledger.store.schema import HEAD_REVISION, KNOWN_REVISIONS

from conftest import CliRunner

LEDGERS = Path(__file__).resolve().parents[1] / "fixtures" / "ledgers"
FIXTURES = sorted(LEDGERS.glob("*.sqlite3"))


def _rows(path: Path, sql: str) -> list[tuple]:
    with sqlite3.connect(path) as conn:
        return conn.execute(sql).fetchall()


def _revision(fixture: Path) -> str:
    return fixture.stem.partition("-")[0]


def test_a_ledger_for_every_landed_revision():
    made = {_revision(path) for path in FIXTURES}
    # 0003 and 0004 landed in one commit: no release ever wrote a ledger at 0003
    assert made == set(KNOWN_REVISIONS) - {"0003"}


@pytest.mark.parametrize("fixture", FIXTURES, ids=lambda p: p.stem)
def test_db_upgrade_carries_it_to_head_and_verify_passes(
    fixture: Path, tmp_path: Path, monkeypatch
):
    monkeypatch.delenv("KERNEL_LEDGER_DB", raising=False)
    path = tmp_path / "ledger.sqlite3"
    shutil.copyfile(fixture, path)
    events = "SELECT seq, event_id, payload, event_hash FROM events ORDER BY seq"
    before = _rows(path, events)
    revision = _revision(fixture)
    assert _rows(path, "SELECT version_num FROM alembic_version") == [(revision,)]
    assert before, "the fixture holds a campaign"
    cli = CliRunner(f"sqlite:///{path}")

    upgraded = cli("db", "upgrade")
    assert upgraded.exit_code == 0, upgraded.stderr
    if revision == HEAD_REVISION:
        assert upgraded.stdout == f"schema at revision {HEAD_REVISION} (already current)\n"
    else:
        assert upgraded.stdout == f"schema at revision {HEAD_REVISION} (was {revision})\n"
    checked = cli("verify", "--json")
    assert checked.exit_code == 0, checked.stdout + checked.stderr
    assert checked.json()["status"] == "ok"
    assert checked.json()["events_checked"] == len(before)
    # the events from before 0009 name no actor, and verify counts them; 0009's all do
    unnamed = 0 if revision >= "0009" else len(before)
    assert checked.json()["events_without_actor"] == unnamed
    said = f"{len(before)} events from before actors were recorded (they name no actor)\n"
    assert (said in cli("verify").stdout) == bool(unnamed)
    assert _rows(path, events) == before  # no event rewritten: every hash holds

    projection = [
        "SELECT * FROM runs ORDER BY run_id",
        "SELECT * FROM run_cases ORDER BY run_id, position",
        "SELECT * FROM rounds ORDER BY run_id, round",
    ]
    stored = [_rows(path, sql) for sql in projection]
    runs = len(stored[0])
    rebuilt = cli("db", "rebuild-projections", "--json")
    assert rebuilt.exit_code == 0, rebuilt.stderr
    assert rebuilt.json() == {"status": "ok", "runs": runs}
    assert [_rows(path, sql) for sql in projection] == stored
    assert cli("verify").exit_code == 0


def test_0008_fills_target_met_of_runs_planned_with_a_target_of_0(tmp_path: Path, monkeypatch):
    """Made at 0007: a campaign, a run planned with a target of 0 and left open, and one
    planned with a target of 0 and analyzed at once (which then concluded `passed`). After
    the upgrade the open run's target is not met (no round yet); the analyzed one keeps its
    recorded conclusion, which verify accepts as recorded under the earlier rule."""
    monkeypatch.delenv("KERNEL_LEDGER_DB", raising=False)
    path = tmp_path / "ledger.sqlite3"
    shutil.copyfile(LEDGERS / "0007-target-zero.sqlite3", path)
    met = "SELECT run_id, target_met, conclusion FROM runs ORDER BY run_id"
    assert _rows(path, met) == [
        ("softmax-demo-001", 1, "passed"),
        ("softmax-target-zero-analyzed", 1, "passed"),
        ("softmax-target-zero-open", 1, None),
    ]
    cli = CliRunner(f"sqlite:///{path}")
    assert cli("db", "upgrade").exit_code == 0
    assert _rows(path, met) == [
        ("softmax-demo-001", 1, "passed"),
        ("softmax-target-zero-analyzed", 1, "passed"),
        ("softmax-target-zero-open", 0, None),
    ]
    shown = cli("status", "--run", "softmax-target-zero-open", "--json").json()
    assert shown["run"]["target_met"] is False
    assert cli("verify").exit_code == 0
    concluded = cli("analyze", "--run", "softmax-target-zero-open", "--output-dir", str(tmp_path))
    assert concluded.exit_code == 0, concluded.stderr
    shown = cli("status", "--run", "softmax-target-zero-open", "--json").json()
    assert shown["run"]["conclusion"] == "inconclusive"
    assert cli("verify").exit_code == 0
