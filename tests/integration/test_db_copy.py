"""`db copy`: a ledger moved SQLite -> PostgreSQL -> SQLite keeps every event byte for
byte (so every hash and the tree head), its kernel sources and its identity; the copies
verify; a target that holds anything is refused and left as it was."""

from __future__ import annotations

import base64
import uuid
from pathlib import Path

import pytest
from sqlalchemy import create_engine, inspect, select, text
from sqlalchemy.engine import make_url

from ledger.integrity import copy as ledger_copy
from ledger.integrity import merkle
from ledger.integrity.checkpoint import Checkpoint, format_note
from ledger.services.service import LedgerService
from ledger.store.eventstore import Store
from ledger.store.schema import HEAD_REVISION
from ledger.store.tables import checkpoints, metadata

from campaign import Campaign, late_profile
from conftest import CliRunner, new_pg_database


@pytest.fixture(autouse=True)
def _no_env_db(monkeypatch):
    monkeypatch.delenv("KERNEL_LEDGER_DB", raising=False)


@pytest.fixture
def source_url(tmp_path: Path) -> str:
    """A SQLite ledger apart from the db_url and sqlite_url fixtures' file."""
    return f"sqlite:///{tmp_path / 'source' / 'ledger.sqlite3'}"


@pytest.fixture
def bare_pg_url(pg_server: str) -> str:
    """An empty PostgreSQL database: no schema at all."""
    name = f"kl_bare_{uuid.uuid4().hex[:12]}"
    admin = create_engine(
        make_url(pg_server).set(database="postgres"), isolation_level="AUTOCOMMIT"
    )
    with admin.connect() as conn:
        conn.execute(text(f'CREATE DATABASE "{name}"'))
    admin.dispose()
    return make_url(pg_server).set(database=name).render_as_string(hide_password=False)


def _campaign_ledger(url: str, root: Path) -> CliRunner:
    """A run of four rounds (KEEP, DISCARD, FAIL, KEEP), concluded, in the ledger at url."""
    cli = CliRunner(url)
    c = Campaign(root)
    assert cli("plan", "--config", c.config(), "--json").exit_code == 0
    for medians, status in (
        ([16.0, 37.0, 23.0], "passed"),
        ([15.0, 37.0, 26.0], "passed"),
        (None, "failed"),
        ([14.0, 33.0, 21.0], "passed"),
    ):
        done = cli(
            "record", "--run", c.run_id, "--result", c.round(medians, status=status), "--json"
        )
        assert done.exit_code == 0, done.stderr
        c.accepted(done.json()["decision"], done.json()["round"])
    out = root / "analysis"
    assert cli("analyze", "--run", c.run_id, "--output-dir", out, "--json").exit_code == 0
    return cli


def _indexes(url: str) -> list[tuple[str, str]]:
    store = Store(url)
    with store.transaction() as conn:
        found = inspect(conn)
        indexes = [
            (table, index["name"], tuple(index["column_names"]), bool(index["unique"]))
            for table in sorted(found.get_table_names())
            for index in found.get_indexes(table)
        ]
    store.close()
    return sorted(indexes)


def _dump(url: str) -> dict[str, list[dict]]:
    """Every row of every table, in primary-key order, binary columns as bytes."""
    store = Store(url)
    with store.transaction() as conn:
        dump = {
            t.name: [
                {k: bytes(v) if isinstance(v, memoryview) else v for k, v in r.items()}
                for r in conn.execute(select(t).order_by(*t.primary_key.columns)).mappings()
            ]
            for t in metadata.sorted_tables
        }
    store.close()
    return dump


def _add_checkpoint(url: str) -> None:
    """Store the tree head of all but the last two events, as a checkpoint would."""
    store = Store(url)
    with store.transaction(write=True) as conn:
        hashes = [bytes.fromhex(e.event_hash) for e in store.iter_events(conn)]
        size = len(hashes) - 2
        head = Checkpoint(
            f"kernel-ledger/{store.ledger_id(conn)}", size, merkle.root(hashes[:size])
        )
        conn.execute(
            checkpoints.insert().values(
                checkpoint_id=1,
                origin=head.origin,
                tree_size=head.size,
                root_hash=base64.b64encode(head.root).decode("ascii"),
                note=format_note(head),
                signed=False,
                created_at="2026-12-01T10:00:00.000000Z",
            )
        )
    store.close()


def _copy(source_url: str, target_url: str):
    result = CliRunner(source_url)("db", "copy", "--to", target_url, "--json")
    assert result.exit_code == 0, result.stderr
    assert result.stderr == ""
    return result.json()


def _verify(url: str) -> None:
    result = CliRunner(url)("verify", "--json")
    assert result.exit_code == 0, result.stdout + result.stderr
    assert result.json()["status"] == "ok"


def test_sqlite_to_postgresql_and_back_preserves_every_hash(
    tmp_path: Path, sqlite_url: str, bare_pg_url: str, pg_server, pg_template
):
    _campaign_ledger(sqlite_url, tmp_path / "campaign")
    _add_checkpoint(sqlite_url)
    original = _dump(sqlite_url)
    assert len(original["events"]) >= 15 and len(original["blobs"]) == 5
    assert len(original["checkpoints"]) == 1 and len(original["rounds"]) == 4

    to_pg = _copy(sqlite_url, bare_pg_url)  # a database without a schema is migrated first
    back_url = f"sqlite:///{tmp_path / 'back' / 'ledger.sqlite3'}"
    fresh = {
        "sqlite": f"sqlite:///{tmp_path / 'fresh.sqlite3'}",
        "postgresql": new_pg_database(pg_server, pg_template),  # migrated by alembic
    }
    to_sqlite = _copy(bare_pg_url, back_url)  # a missing file is created

    root = merkle.root(bytes.fromhex(row["event_hash"]) for row in original["events"])
    (ledger_id,) = [r["value"] for r in original["ledger_info"] if r["key"] == "ledger_id"]
    for body in (to_pg, to_sqlite):
        assert body["events"] == body["tree_size"] == len(original["events"])
        assert (body["blobs"], body["runs"], body["ledger_id"]) == (5, 1, ledger_id)
        assert body["other_rows"] == {"checkpoints": 1, "ledger_info": 1}
        assert base64.b64decode(body["tree_root"]) == root
    for url in (bare_pg_url, back_url):
        copied = _dump(url)
        # every table: events with the same seq, ids, times, payload bytes and hashes; blobs;
        # the ledger id; the stored checkpoint; projections rebuilt with identical rows
        for table, rows in original.items():
            assert copied[table] == rows, table
        # the secondary indexes the copy dropped and built after its rows are the schema's
        assert _indexes(url) == _indexes(fresh[url.split(":")[0].split("+")[0]])
        _verify(url)
        current = CliRunner(url)("db", "current", "--json").json()
        assert current["revision"] == HEAD_REVISION and current["current"] is True
    _verify(sqlite_url)


def test_copy_into_an_empty_ledger_then_keep_recording(
    tmp_path: Path, source_url: str, db_url: str
):
    """The target may already be migrated (PostgreSQL: db upgrade by its owner) or not exist
    yet (SQLite); the copy is a working ledger where runs go on."""
    _campaign_ledger(source_url, tmp_path / "campaign")
    body = _copy(source_url, db_url)
    assert body["runs"] == 1
    target = CliRunner(db_url)
    c = Campaign(tmp_path / "more", run_id="softmax-t-002")
    assert target("plan", "--config", c.config(), "--json").exit_code == 0
    r1 = target("record", "--run", c.run_id, "--result", c.round([16.0, 37.0, 23.0]), "--json")
    assert r1.exit_code == 0, r1.stderr
    _verify(db_url)
    assert target.event_count() == body["events"] + 7


def test_a_target_that_holds_anything_is_refused(tmp_path: Path, source_url: str, db_url: str):
    _campaign_ledger(source_url, tmp_path / "a")
    _campaign_ledger(db_url, tmp_path / "b")
    before = _dump(db_url)
    result = CliRunner(source_url)("db", "copy", "--to", db_url, "--json")
    assert result.exit_code == 2
    assert result.error.startswith("the ledger at ") and result.stderr == ""
    assert "is not empty" in result.error and "nothing was written" in result.error
    assert result.json()["exit_code"] == 2
    assert _dump(db_url) == before


def test_copy_onto_itself_is_refused(tmp_path: Path, sqlite_url: str):
    _campaign_ledger(sqlite_url, tmp_path / "a")
    before = _dump(sqlite_url)
    same = f"sqlite:///{tmp_path / '.' / 'ledger.sqlite3'}"
    result = CliRunner(sqlite_url)("db", "copy", "--to", same)
    assert result.exit_code == 2
    assert result.stderr.startswith("Error: --to names the ledger being copied")
    assert _dump(sqlite_url) == before


def test_bad_target_urls_write_nothing(tmp_path: Path, sqlite_url: str):
    _campaign_ledger(sqlite_url, tmp_path / "a")
    cli = CliRunner(sqlite_url)
    for url, code in (("", 2), ("not a url", 2), ("mysql://x@y/z", 2)):
        result = cli("db", "copy", "--to", url)
        assert result.exit_code == code, (url, result.stderr)
        assert result.stderr.startswith("Error: ") and "Traceback" not in result.stderr
        assert "--to" in result.stderr and "--db" not in result.stderr, result.stderr


def test_a_copy_that_reads_back_differently_is_rolled_back(
    tmp_path: Path, source_url: str, db_url: str, monkeypatch
):
    """The copy is compared with the source inside its transaction; any difference (here a
    driver that would hand back one altered payload) leaves the target empty."""
    from ledger.errors import CheckFailed

    _campaign_ledger(source_url, tmp_path / "a")
    source_id = _dump(source_url)["ledger_info"][0]["value"]
    source = Store(source_url)
    target = ledger_copy.open_target(source, db_url)
    indexes = _indexes(db_url)
    real = target.iter_event_pages

    def altered(conn, **kwargs):
        for page in real(conn, **kwargs):
            yield [(*r[:7], r[7] + b" ", *r[8:]) if r[0] == 5 else r for r in page]

    monkeypatch.setattr(target, "iter_event_pages", altered)
    with pytest.raises(CheckFailed, match="reads back differently"):
        ledger_copy.copy_ledger(source, target)
    source.close()
    target.close()
    emptied = _dump(db_url)
    assert all(rows == [] for table, rows in emptied.items() if table != "ledger_info")
    assert emptied["ledger_info"][0]["value"] != source_id
    assert _indexes(db_url) == indexes  # the ones dropped for the copy are back


def test_runs_split_across_pages_and_revisited_after_they_concluded(
    tmp_path: Path,
    source_url: str,
    db_url: str,
    monkeypatch,
):
    """The copy folds a page of events at a time and writes a run's rows once it concludes.
    With pages of three events every run is split; a second run is planned and left open in
    between, and a profile lands on the first after its conclusion, so the run is folded
    again from the source and its rows in the copy updated. The projections equal the
    source's, row for row."""
    monkeypatch.setattr(ledger_copy, "BATCH", 3)
    cli = _campaign_ledger(source_url, tmp_path / "a")
    other = Campaign(tmp_path / "b", run_id="softmax-t-002")
    assert cli("plan", "--config", other.config(), "--json").exit_code == 0
    done = cli("record", "--run", other.run_id, "--result", other.round([16.0, 37.0, 23.0]))
    assert done.exit_code == 0, done.stderr
    first = Campaign(tmp_path / "a").run_id
    # `profile` refuses a concluded run now; a ledger written before holds such a profile
    source = Store(source_url)
    try:
        late_profile(
            LedgerService(source), first, {"aiv_vec_ratio": 0.54, "aiv_scalar_ratio": 0.12}
        )
    finally:
        source.close()
    original = _dump(source_url)
    assert len(original["profiles"]) >= 1 and len(original["runs"]) == 2

    body = _copy(source_url, db_url)
    assert body["runs"] == 2
    copied = _dump(db_url)
    for table in ("runs", "run_cases", "rounds", "profiles", "events", "blobs"):
        assert copied[table] == original[table], table
    _verify(db_url)


def test_an_event_that_does_not_fold_is_named_and_nothing_is_written(
    tmp_path: Path,
    source_url: str,
    db_url: str,
    monkeypatch,
):
    from ledger.core import projections
    from ledger.errors import CheckFailed

    _campaign_ledger(source_url, tmp_path / "a")
    real = projections.RunFold.apply

    def refusing(self, version, at, event):
        if version == 4:
            raise projections.ProjectionError("refused for the test")
        return real(self, version, at, event)

    monkeypatch.setattr(projections.RunFold, "apply", refusing)
    source = Store(source_url)
    target = ledger_copy.open_target(source, db_url)
    with pytest.raises(CheckFailed, match=r"event seq 4 \(softmax-t-001 v4\) does not fold"):
        ledger_copy.copy_ledger(source, target)
    source.close()
    target.close()
    assert all(rows == [] for table, rows in _dump(db_url).items() if table != "ledger_info")


@pytest.mark.parametrize(
    ("change", "check"),
    [
        ("payload", "hash"),  # a payload byte changed, its hash left as it was
        ("rehashed", "canonical"),  # a payload rewritten non-canonically and re-hashed
        ("parent", "hash"),
    ],
)
def test_a_source_event_that_does_not_verify_is_refused_and_nothing_is_written(
    tmp_path: Path,
    source_url: str,
    db_url: str,
    change: str,
    check: str,
):
    """db copy checks each event it moves (hash, chain, canonical payload) instead of
    copying damage into a ledger that would then verify no better."""
    import sqlite3

    from ledger.errors import CheckFailed
    from ledger.integrity.hashing import event_hash

    _campaign_ledger(source_url, tmp_path / "a")
    path = make_url(source_url).database
    conn = sqlite3.connect(path)
    for (name,) in conn.execute("SELECT name FROM sqlite_master WHERE type='trigger'").fetchall():
        conn.execute(f"DROP TRIGGER {name}")
    row = conn.execute(
        "SELECT stream_id, stream_version, event_id, event_type, schema_version, recorded_at, "
        "parent_hash, actor, payload FROM events WHERE seq = 5"
    ).fetchone()
    fields = dict(
        zip(
            (
                "stream_id",
                "stream_version",
                "event_id",
                "event_type",
                "schema_version",
                "recorded_at",
                "parent_hash",
                "actor",
            ),
            row[:8],
            strict=True,
        )
    )
    payload = bytes(row[8])
    if change == "payload":
        conn.execute(
            "UPDATE events SET payload = ? WHERE seq = 5", (payload.replace(b"{", b"{ ", 1),)
        )
    elif change == "rehashed":
        spaced = payload.replace(b"{", b"{ ", 1)
        digest = event_hash(**fields, payload=spaced)
        conn.execute(
            "UPDATE events SET payload = ?, event_hash = ? WHERE seq = 5", (spaced, digest)
        )
    else:
        conn.execute("UPDATE events SET parent_hash = ? WHERE seq = 5", ("1" * 64,))
    conn.commit()
    conn.close()
    source = Store(source_url)
    target = ledger_copy.open_target(source, db_url)
    with pytest.raises(CheckFailed, match=rf"event seq 5 \(\S+ v\d+\) does not verify \({check}:"):
        ledger_copy.copy_ledger(source, target)
    source.close()
    target.close()
    assert all(rows == [] for table, rows in _dump(db_url).items() if table != "ledger_info")
