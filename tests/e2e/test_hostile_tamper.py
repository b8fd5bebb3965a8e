"""Tampering that `verify` used to miss or crash on (docs/reliability.md, section 6): a
changed `blobs.size`, a deleted profile blob (which `export` must not leave out silently), a
payload or blob stored as text instead of bytes, an emptied `ledger_info`; and an import
pinned to a checkpoint (`import --checkpoint`). The guards are taken off first, as someone
with write access to the database could."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text

from campaign import write_json
from conftest import CliRunner, new_pg_database


def _one_line(result, code: int) -> str:
    assert result.exit_code == code, (result.exit_code, result.stderr)
    assert result.stderr.startswith("Error: ") and result.stderr.count("\n") == 1, result.stderr
    assert "internal error" not in result.stderr
    return result.stderr


def _ledger(cli, campaign, tmp_path: Path) -> str:
    """A run with one kept round and a profile of the starting kernel; returns the
    profile file's sha256."""
    assert cli("plan", "--config", campaign.config()).exit_code == 0
    result = cli("record", "--run", campaign.run_id, "--result", campaign.round([15.0, 33.0, 20.0]))
    assert result.exit_code == 0, result.stderr
    signals = write_json(
        tmp_path / "signals.json",
        {"aiv_scalar_ratio": 0.12, "aiv_vec_ratio": 0.54, "aiv_mte2_ratio": 0.3},
    )
    result = cli("profile", signals, "--run", campaign.run_id, "--baseline")
    assert result.exit_code == 0, result.stderr
    assert cli("verify").exit_code == 0
    return _profile_sha(cli)


def _profile_sha(cli) -> str:
    with _unguarded(cli.db_url) as conn:
        payload = conn.execute(
            text("SELECT payload FROM events WHERE event_type = 'ProfileRecorded'")
        ).scalar_one()
    return json.loads(bytes(payload))["files"][0]["sha256"]


class _unguarded:
    """A connection to the ledger with its append-only guards off, committed on exit."""

    def __init__(self, url: str) -> None:
        self.engine = create_engine(url)
        self.sqlite = url.startswith("sqlite")

    def __enter__(self):
        self.conn = self.engine.connect()
        if self.sqlite:
            names = self.conn.execute(
                text("SELECT name FROM sqlite_master WHERE type = 'trigger'")
            ).scalars()
            for name in list(names):
                self.conn.execute(text(f'DROP TRIGGER "{name}"'))
        else:
            for table in ("events", "blobs", "ledger_info"):
                self.conn.execute(text(f"ALTER TABLE {table} DISABLE TRIGGER USER"))
        return self.conn

    def __exit__(self, *exc_info) -> None:
        self.conn.commit()
        self.conn.close()
        self.engine.dispose()


def test_a_changed_blob_size_is_found(cli, campaign, tmp_path):
    _ledger(cli, campaign, tmp_path)
    with _unguarded(cli.db_url) as conn:
        conn.execute(
            text("UPDATE blobs SET size = size + 1 WHERE sha256 = (SELECT min(sha256) FROM blobs)")
        )
    stderr = _one_line(cli("verify"), 1)
    assert "blobs: stored blob" in stderr and "size or storage type" in stderr


def test_a_deleted_profile_blob_is_found_and_not_exported(cli, campaign, tmp_path):
    digest = _ledger(cli, campaign, tmp_path)
    with _unguarded(cli.db_url) as conn:
        conn.execute(text("DELETE FROM blobs WHERE sha256 = :d"), {"d": digest})
    stderr = _one_line(cli("verify"), 1)
    assert f"profile file {digest} is not stored" in stderr
    out = tmp_path / "run.bundle.jsonl"
    stderr = _one_line(cli("export", "--run", campaign.run_id, "--out", out), 1)
    assert f"profile file {digest} is not stored" in stderr and not out.exists()


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_a_payload_stored_as_text_fails_at_its_seq(cli, campaign, tmp_path):
    _ledger(cli, campaign, tmp_path)
    with _unguarded(cli.db_url) as conn:
        conn.execute(text("UPDATE events SET payload = CAST(payload AS TEXT) WHERE seq = 3"))
    for command in (["verify"], ["verify", "--chain"], ["verify", "--run", campaign.run_id]):
        stderr = _one_line(cli(*command), 1)
        assert "at seq 3 " in stderr and "column payload is stored as text, not blob" in stderr


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_a_blob_stored_as_text_is_found(cli, campaign, tmp_path):
    _ledger(cli, campaign, tmp_path)
    with _unguarded(cli.db_url) as conn:
        conn.execute(text("UPDATE blobs SET content = CAST(content AS TEXT)"))
    stderr = _one_line(cli("verify"), 1)
    assert "blobs: stored blob" in stderr


def test_an_emptied_ledger_info_is_a_failed_check(cli, campaign, tmp_path):
    _ledger(cli, campaign, tmp_path)
    with _unguarded(cli.db_url) as conn:
        conn.execute(text("DELETE FROM ledger_info"))
    for command in (
        ["verify"],
        ["checkpoint"],
        ["export", "--run", campaign.run_id, "--out", tmp_path / "b"],
    ):
        assert "ledger_info.ledger_id is missing" in _one_line(cli(*command), 1)


def test_import_pinned_to_a_checkpoint(cli, campaign, tmp_path, request):
    _ledger(cli, campaign, tmp_path)
    note = tmp_path / "checkpoint.txt"
    assert cli("checkpoint", "--out", note).exit_code == 0
    bundle = tmp_path / "run.bundle.jsonl"
    assert cli("export", "--run", campaign.run_id, "--out", bundle).exit_code == 0

    # the same run id planned in another ledger: a bundle of it is not the pinned history
    forger = CliRunner(f"sqlite:///{tmp_path / 'forger.sqlite3'}")
    assert forger("plan", "--config", campaign.config("forged.json")).exit_code == 0
    forged = tmp_path / "forged.bundle.jsonl"
    assert forger("export", "--run", campaign.run_id, "--out", forged).exit_code == 0

    if cli.db_url.startswith("sqlite"):
        target = CliRunner(f"sqlite:///{tmp_path / 'target.sqlite3'}")
    else:
        server, template = (request.getfixturevalue(n) for n in ("pg_server", "pg_template"))
        target = CliRunner(new_pg_database(server, template))
    stderr = _one_line(target("import", forged, "--checkpoint", note), 2)
    assert "does not verify (checkpoint:" in stderr and "nothing was imported" in stderr
    assert "--verifier-key checks" in _one_line(
        target("import", bundle, "--verifier-key", "x+y"), 2
    )
    result = target("import", bundle, "--checkpoint", note, "--json")
    assert result.exit_code == 0, result.stderr
    assert result.json()["events_imported"] > 0
    assert target("verify").exit_code == 0
