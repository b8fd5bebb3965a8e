"""Ledgers written by earlier releases, one at each landed schema revision, are carried to
head by `db upgrade` and then pass every check of `verify`, with every stored event (and so
every hash) untouched; `db rebuild-projections` then folds the same rows again.

tests/fixtures/ledgers/<revision>.sqlite3 were made by the code of the commit where that
revision landed (tests/fixtures/ledgers/README.md says how)."""

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


def test_a_ledger_for_every_landed_revision():
    made = {path.stem for path in FIXTURES}
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
    assert _rows(path, "SELECT version_num FROM alembic_version") == [(fixture.stem,)]
    assert before, "the fixture holds a campaign"
    cli = CliRunner(f"sqlite:///{path}")

    upgraded = cli("db", "upgrade")
    assert upgraded.exit_code == 0, upgraded.stderr
    if fixture.stem == HEAD_REVISION:
        assert upgraded.stdout == f"schema at revision {HEAD_REVISION} (already current)\n"
    else:
        assert upgraded.stdout == f"schema at revision {HEAD_REVISION} (was {fixture.stem})\n"
    checked = cli("verify", "--json")
    assert checked.exit_code == 0, checked.stdout + checked.stderr
    assert checked.json()["status"] == "ok"
    assert checked.json()["events_checked"] == len(before)
    assert _rows(path, events) == before  # no event rewritten: every hash holds

    rounds = "SELECT * FROM rounds ORDER BY run_id, round"
    stored = _rows(path, rounds)
    rebuilt = cli("db", "rebuild-projections", "--json")
    assert rebuilt.exit_code == 0, rebuilt.stderr
    assert rebuilt.json() == {"status": "ok", "runs": 1}
    assert _rows(path, rounds) == stored
    assert cli("verify").exit_code == 0
