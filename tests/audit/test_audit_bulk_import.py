"""`import FILE...`: several bundles imported in one transaction; all of them or (one
refused) none, the refusal naming its bundle."""

from __future__ import annotations

import json

import audit_kit
import pytest
from audit_kit import build_ledger, event_count, stream_rows

from ledger.integrity import bundle
from ledger.integrity.eventchecks import BAD_HASH
from ledger.store.eventstore import Store

from conftest import CliRunner

other_url = audit_kit.other_url
RUNS = ("softmax-a-001", "softmax-b-001")


def _exported(url: str, folder) -> list:
    store = Store(url)
    paths = []
    for run_id in RUNS:
        out = folder / f"{run_id}.bundle.jsonl"
        bundle.export_run(store, run_id, out)
        paths.append(out)
    store.close()
    return paths


def _seqs(url: str) -> list[tuple[int, str, str]]:
    store = Store(url)
    with store.transaction() as conn:
        rows = [(e.seq, e.stream_id, e.event_hash) for e in store.iter_events(conn)]
    store.close()
    return rows


def test_several_bundles_import_together(db_url, other_url, tmp_path):
    build_ledger(tmp_path / "src", url=db_url)
    paths = _exported(db_url, tmp_path)
    target = CliRunner(other_url)
    result = target("import", *paths, "--json")
    assert result.exit_code == 0, result.stderr
    body = result.json()
    sizes = [len(stream_rows(db_url, run_id)) for run_id in RUNS]
    assert body["status"] == "imported" and body["events_imported"] == sum(sizes)
    assert [b["run_id"] for b in body["bundles"]] == list(RUNS)
    assert [b["events_imported"] for b in body["bundles"]] == sizes
    assert body["bundles"][1]["first_seq"] == sizes[0] + 1  # in the order given
    for run_id in RUNS:
        assert stream_rows(other_url, run_id) == stream_rows(db_url, run_id)
    assert target("verify").exit_code == 0

    again = target("import", *paths, paths[0])
    assert again.exit_code == 0, again.stderr
    assert again.stdout.count("already in the ledger with these events; nothing to import") == 3
    assert event_count(other_url) == sum(sizes)


def test_progress_is_told_after_each_bundle_written(tmp_path):
    build_ledger(tmp_path / "src")
    paths = _exported(f"sqlite:///{tmp_path / 'src' / 'ledger.sqlite3'}", tmp_path)
    told: list[tuple[int, int]] = []
    store = Store(f"sqlite:///{tmp_path / 'target.sqlite3'}")
    bundle.import_bundles(store, [*paths, paths[0]], on_progress=lambda *a: told.append(a))
    store.close()
    assert told == [(1, 3), (2, 3), (3, 3)]


def _damaged(path, tmp_path):
    """The bundle with one payload byte changed (its hash left as it was)."""
    lines = path.read_bytes().splitlines(keepends=True)
    event = json.loads(lines[3])
    event["payload"]["round"] = event["payload"].get("round", 0) + 1
    lines[3] = bundle._line(event)
    out = tmp_path / f"damaged-{path.name}"
    out.write_bytes(b"".join(lines))
    return out


@pytest.mark.parametrize("where", ["first", "last"])
def test_one_refused_bundle_writes_nothing_of_any(db_url, other_url, tmp_path, where):
    build_ledger(tmp_path / "src", url=db_url)
    good, other = _exported(db_url, tmp_path)
    bad = _damaged(other, tmp_path)
    order = [bad, good] if where == "first" else [good, good, bad]
    target = CliRunner(other_url)
    refused = target("import", *order)
    assert refused.exit_code == 2, refused.stdout + refused.stderr
    assert refused.stderr == (
        f"Error: bundle {bad} does not verify (hash: {BAD_HASH}); nothing was imported\n"
    )
    assert refused.stderr.count("\n") == 1 and refused.stdout == ""
    assert event_count(other_url) == 0
    missing = target("import", good, tmp_path / "nowhere.jsonl")
    assert missing.exit_code == 2 and "nowhere.jsonl" in missing.stderr
    assert event_count(other_url) == 0


def test_a_signed_pinned_checkpoint_holds_every_bundle(tmp_path):
    """--checkpoint and --verifier-key reach the checks in the worker processes: each
    bundle is held against the pinned note, and a key that did not sign it refuses all."""
    build_ledger(tmp_path / "src")
    source = f"sqlite:///{tmp_path / 'src' / 'ledger.sqlite3'}"
    cli = CliRunner(source)
    key = tmp_path / "signer.key"
    verifier = cli("checkpoint", "--generate-key", key, "--json").json()["verifier_key"]
    signed = cli("checkpoint", "--sign", key, "--json").json()["note"]
    stranger = cli("checkpoint", "--generate-key", tmp_path / "other.key", "--json").json()
    paths = _exported(source, tmp_path)
    url = f"sqlite:///{tmp_path / 'target.sqlite3'}"
    pinned = ("--checkpoint", signed)
    refused = CliRunner(url)("import", *paths, *pinned, "--verifier-key", stranger["verifier_key"])
    assert refused.exit_code == 2 and "softmax-a-001.bundle.jsonl does not verify" in refused.stderr
    assert "(checkpoint: the checkpoint carries no valid signature" in refused.stderr
    assert event_count(url) == 0
    held = CliRunner(url)("import", *paths, *pinned, "--verifier-key", verifier, "--json")
    assert held.exit_code == 0, held.stderr
    assert held.json()["events_imported"] == event_count(source)


def test_an_event_id_another_run_holds_refuses_the_import(tmp_path):
    """Event ids are unique in a ledger: a bundle whose event id this ledger already holds
    under another run is refused by name, and nothing is written."""
    import sqlite3

    build_ledger(tmp_path / "src")
    source = f"sqlite:///{tmp_path / 'src' / 'ledger.sqlite3'}"
    first_a = stream_rows(source, RUNS[0])[0]
    paths = _exported(source, tmp_path)
    target = tmp_path / "target.sqlite3"
    url = f"sqlite:///{target}"
    assert CliRunner(url)("import", paths[1]).exit_code == 0  # run B only
    with sqlite3.connect(target) as conn:  # its first event takes the id of A's first
        conn.execute("DROP TRIGGER IF EXISTS events_refuse_update")
        conn.execute("UPDATE events SET event_id = ? WHERE seq = 1", (first_a[0],))
    before = event_count(url)
    refused = CliRunner(url)("import", paths[0])
    assert refused.exit_code == 2, refused.stderr
    assert refused.stderr == (
        f"Error: event id {first_a[0]} of the bundle is already used by run 'softmax-b-001' "
        "version 1 in this ledger; nothing was imported\n"
    )
    assert event_count(url) == before


@pytest.mark.parametrize("order", ["older-first", "newer-first"])
def test_two_exports_of_one_run_in_one_command(tmp_path, order):
    """An earlier and a later export of the same run: whichever comes first, the run is
    imported whole, once, with the source's events."""
    from ledger.services.service import LedgerService

    from campaign import Campaign

    source_url = f"sqlite:///{tmp_path / 'source.sqlite3'}"
    campaign = Campaign(tmp_path / "campaign", run_id="bundled-001")
    source = LedgerService(Store(source_url), clock=audit_kit.Clock())
    source.plan(campaign.config())
    audit_kit.record(source, campaign, [16.0, 37.0, 23.0])
    older = tmp_path / "older.jsonl"
    bundle.export_run(source.store, "bundled-001", older)
    audit_kit.record(source, campaign, [15.0, 37.0, 26.0])
    newer = tmp_path / "newer.jsonl"
    bundle.export_run(source.store, "bundled-001", newer)
    source.store.close()
    url = f"sqlite:///{tmp_path / 'target.sqlite3'}"
    paths = [older, newer] if order == "older-first" else [newer, older]
    result = CliRunner(url)("import", *paths, "--json")
    assert result.exit_code == 0, result.stderr
    counts = [b["events_imported"] for b in result.json()["bundles"]]
    assert counts == ([7, 4] if order == "older-first" else [11, 0])
    assert stream_rows(url, "bundled-001") == stream_rows(source_url, "bundled-001")
    assert CliRunner(url)("verify").exit_code == 0


# --- what an import leaves in an SQLite file ----------------------------------------------


def _schema(path) -> list[tuple]:
    import sqlite3

    with sqlite3.connect(path) as conn:
        return conn.execute(
            "SELECT type, name, tbl_name, sql FROM sqlite_master ORDER BY 2"
        ).fetchall()


def _all_rows(path) -> dict[str, list[tuple]]:
    """Every table's rows but the ledger's own id, once `PRAGMA integrity_check` found
    every index entry to match its row."""
    import sqlite3

    with sqlite3.connect(path) as conn:
        assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
        tables = [
            t
            for (t,) in conn.execute("SELECT name FROM sqlite_master WHERE type='table'")
            if t != "ledger_info"
        ]
        return {t: sorted(conn.execute(f'SELECT * FROM "{t}"').fetchall()) for t in tables}


def test_an_import_leaves_the_schema_and_sound_indexes(tmp_path):
    build_ledger(tmp_path / "src")
    paths = _exported(f"sqlite:///{tmp_path / 'src' / 'ledger.sqlite3'}", tmp_path)
    fresh, target = tmp_path / "fresh.sqlite3", tmp_path / "target.sqlite3"
    assert CliRunner(f"sqlite:///{fresh}")("db", "upgrade").exit_code == 0
    assert CliRunner(f"sqlite:///{target}")("import", *paths).exit_code == 0
    assert _schema(target) == _schema(fresh)
    rows = _all_rows(target)
    assert len(rows["events"]) == event_count(f"sqlite:///{target}") > 0
