"""`verify --chain`, the fast check: seq, hash and chain over the stored rows, on SQLite and
PostgreSQL, on an intact ledger and on copies someone changed behind the ledger's back."""

from __future__ import annotations

import json

from sqlalchemy import create_engine

from ledger.integrity.hashing import event_hash

from campaign import Campaign

RUN = "softmax-t-001"
HASH_REASON = "event_hash does not match the event's content"


def _ledger(cli, campaign: Campaign, tmp_path) -> int:
    """A run with three rounds and a profile, concluded: returns the event count."""
    assert cli("plan", "--config", campaign.config()).exit_code == 0
    for medians in ([16.0, 37.0, 23.0], [15.0, 37.0, 26.0], [14.0, 33.0, 21.0]):
        result = cli("record", "--run", RUN, "--result", campaign.round(medians), "--json")
        assert result.exit_code == 0, result.stderr
        campaign.accepted(result.json()["decision"], result.json()["round"])
    profile = tmp_path / "profile.json"
    profile.write_text(json.dumps({"aiv_vec_ratio": 0.54, "aiv_scalar_ratio": 0.12}))
    assert cli("profile", "--run", RUN, "--baseline", profile).exit_code == 0
    assert cli("analyze", "--run", RUN, "--output-dir", tmp_path / "analysis").exit_code == 0
    return cli.event_count()


def _tamper(url: str, *statements: str) -> None:
    """Run SQL on the ledger with its append-only guards switched off, as someone with
    write access to the database could."""
    engine = create_engine(url)
    with engine.begin() as conn:
        if engine.dialect.name == "sqlite":
            names = conn.exec_driver_sql(
                "SELECT name FROM sqlite_master WHERE type = 'trigger' AND tbl_name = 'events'"
            ).scalars()
            for name in list(names):
                conn.exec_driver_sql(f"DROP TRIGGER {name}")
        else:
            conn.exec_driver_sql("ALTER TABLE events DISABLE TRIGGER USER")
        for statement in statements:
            conn.exec_driver_sql(statement)
        if engine.dialect.name != "sqlite":
            conn.exec_driver_sql("ALTER TABLE events ENABLE TRIGGER USER")
    engine.dispose()


def _row(url: str, seq: int) -> dict:
    engine = create_engine(url)
    with engine.connect() as conn:
        row = conn.exec_driver_sql(f"SELECT * FROM events WHERE seq = {seq}").mappings().one()
    engine.dispose()
    return dict(row)


def test_chain_of_an_intact_ledger(cli, campaign, tmp_path):
    total = _ledger(cli, campaign, tmp_path)
    text = cli("verify", "--chain")
    assert (text.exit_code, text.stderr) == (0, "")
    assert text.stdout == (
        f"chain verified: {total} events in 1 run; checks seq, hash, chain all ok\n"
    )
    body = cli("verify", "--chain", "--json")
    assert (body.exit_code, body.stderr, body.stdout.count("\n")) == (0, "", 1)
    assert body.json() == {
        "status": "ok",
        "events_checked": total,
        "runs_checked": 1,
        "events_without_actor": 0,
        "checks": {"seq": "ok", "hash": "ok", "chain": "ok"},
        "first_failure": None,
        "warnings": [],
    }
    one = cli("verify", "--chain", "--run", RUN, "--json")
    assert one.exit_code == 0 and one.json()["events_checked"] == total
    assert cli("verify", "--json").json()["events_checked"] == total  # the full replay agrees


def test_an_unknown_run_is_rejected_input(cli, campaign, tmp_path):
    _ledger(cli, campaign, tmp_path)
    for chain in (["--chain"], []):
        result = cli("verify", *chain, "--run", "nope")
        assert (result.exit_code, result.stdout) == (2, "")
        assert result.stderr == "Error: run 'nope' is not in the ledger\n"


def test_chain_takes_no_replay_options(cli, campaign, tmp_path):
    _ledger(cli, campaign, tmp_path)
    for extra in (("--artifacts",), ("--checkpoint", "note.txt"), ("--bundle", "b.jsonl")):
        result = cli("verify", "--chain", *extra, "--json")
        assert result.exit_code == 2
        assert result.json()["error"] == (
            "--chain checks the hash chain alone; it takes no --checkpoint, --verifier-key, "
            "--artifacts or --bundle"
        )


def test_chain_names_a_changed_event(cli, campaign, tmp_path):
    _ledger(cli, campaign, tmp_path)
    _tamper(
        cli.db_url, "UPDATE events SET recorded_at = '2020-01-01T00:00:00.000000Z' WHERE seq = 5"
    )
    text = cli("verify", "--chain")
    assert (text.exit_code, text.stdout) == (1, "")
    assert text.stderr == f"Error: verification failed at seq 5 ({RUN} v5): hash: {HASH_REASON}\n"
    body = cli("verify", "--chain", "--json")
    assert body.exit_code == 1 and body.stdout.count("\n") == 1
    assert body.json() == {
        "status": "failed",
        "events_checked": 4,
        "runs_checked": 1,
        "events_without_actor": 0,
        "checks": {"seq": "ok", "hash": "failed", "chain": "not run"},
        "first_failure": {
            "seq": 5,
            "stream_id": RUN,
            "stream_version": 5,
            "check": "hash",
            "reason": HASH_REASON,
        },
        "warnings": [],
        "error": f"verification failed at seq 5 ({RUN} v5): hash: {HASH_REASON}",
    }
    full = cli("verify")  # the full replay stops at the same event, for the same reason
    assert (full.exit_code, full.stderr) == (1, text.stderr)


def test_chain_names_a_rehashed_event_and_a_gap(cli, campaign, tmp_path):
    _ledger(cli, campaign, tmp_path)
    row = _row(cli.db_url, 6)
    row["recorded_at"] = "2020-01-01T00:00:00.000000Z"
    rehashed = event_hash(
        **{k: row[k] for k in ("stream_id", "stream_version", "event_id", "event_type")},
        schema_version=row["schema_version"],
        recorded_at=row["recorded_at"],
        parent_hash=row["parent_hash"],
        payload=bytes(row["payload"]),
        actor=row["actor"],
    )
    _tamper(
        cli.db_url,
        f"UPDATE events SET recorded_at = '{row['recorded_at']}', event_hash = '{rehashed}' "
        "WHERE seq = 6",
    )
    relinked = cli("verify", "--chain")
    assert (relinked.exit_code, relinked.stdout) == (1, "")
    assert relinked.stderr == (
        f"Error: verification failed at seq 7 ({RUN} v7): chain: parent_hash does not link to "
        "the previous event of the run\n"
    )
    _tamper(cli.db_url, "DELETE FROM events WHERE seq = 3")
    gap = cli("verify", "--chain", "--json")
    assert gap.exit_code == 1
    assert gap.json()["first_failure"] == {
        "seq": 4,
        "stream_id": RUN,
        "stream_version": 4,
        "check": "seq",
        "reason": "expected seq 3, found 4: the log has a gap",
    }
    assert gap.json()["checks"] == {"seq": "failed", "hash": "not run", "chain": "not run"}
    assert cli("verify", "--json").json()["first_failure"] == gap.json()["first_failure"]
