"""Least privilege on a shared PostgreSQL ledger: an owner that migrates and grants, and an
application role that plans, records and reads through the CLI but can never change or
remove what was appended (refused by privileges, before the append-only triggers)."""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy import exc as sa_exc
from sqlalchemy.engine import make_url

from ledger.store import roles
from ledger.store.tables import PROJECTION_TABLES, metadata

from campaign import Campaign
from conftest import CliRunner

LOG_TABLES = ("events", "blobs", "ledger_info")


@dataclass
class Shared:
    owner: str
    app: str
    admin_url: str  # the cluster's superuser, on the ledger database
    owner_url: str
    app_url: str


@pytest.fixture
def shared(pg_server: str, monkeypatch) -> Shared:
    """Two fresh login roles and a database owned by the first, with no schema yet."""
    monkeypatch.delenv("KERNEL_LEDGER_DB", raising=False)
    tag = uuid.uuid4().hex[:8]
    owner, app, db = f"kl_owner_{tag}", f"kl_app_{tag}", f"kl_shared_{tag}"
    server = make_url(pg_server)
    admin = create_engine(server.set(database="postgres"), isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE ROLE "{owner}" LOGIN'))
        conn.execute(text(f'CREATE ROLE "{app}" LOGIN'))
        conn.execute(text(f'CREATE DATABASE "{db}" OWNER "{owner}"'))
    admin.dispose()

    def url(user: str | None) -> str:
        target = server.set(database=db) if user is None else server.set(database=db, username=user)
        return target.render_as_string(hide_password=False)

    return Shared(owner, app, url(None), url(owner), url(app))


def _granted(shared: Shared) -> None:
    owner = CliRunner(shared.owner_url)
    upgraded = owner("db", "upgrade", "--json")
    assert upgraded.exit_code == 0, upgraded.stderr
    granted = owner("db", "grant", "--role", shared.app, "--json")
    assert granted.exit_code == 0, granted.stderr
    body = granted.json()
    assert (body["role"], body["owner"], body["schema"]) == (shared.app, shared.owner, "public")
    assert body["grants"]["events"] == ["SELECT", "INSERT"]
    assert body["grants"]["runs"] == ["SELECT", "INSERT", "UPDATE"]
    assert body["grants"]["alembic_version"] == ["SELECT"]


def _campaign(app: CliRunner, root: Path) -> Campaign:
    """plan, three rounds (KEEP, FAIL, KEEP), a profile, a diagnosis and analyze."""
    c = Campaign(root)
    planned = app("plan", "--config", c.config(), "--json")
    assert planned.exit_code == 0, planned.stderr
    profile = root / "profile.json"
    profile.write_text('{"task_duration_us": 42.0, "aiv_scalar_ratio": 0.41, "block_dim": 40}')
    done = app("profile", profile, "--run", c.run_id, "--baseline", "--json")
    assert done.exit_code == 0, done.stderr
    for medians, status in (([16.0, 37.0, 23.0], "passed"), (None, "failed")):
        result = app(
            "record", "--run", c.run_id, "--result", c.round(medians, status=status), "--json"
        )
        assert result.exit_code == 0, result.stderr
        c.accepted(result.json()["decision"], result.json()["round"])
    diagnosed = app(
        "diagnose",
        "--run",
        c.run_id,
        "--bottleneck",
        "scalar-flow-control",
        "--evidence",
        "aiv_scalar_ratio 0.41",
        "--json",
    )
    assert diagnosed.exit_code == 0, diagnosed.stderr
    result = app("record", "--run", c.run_id, "--result", c.round([14.0, 33.0, 21.0]), "--json")
    assert result.exit_code == 0, result.stderr
    analyzed = app("analyze", "--run", c.run_id, "--output-dir", root / "out", "--json")
    assert analyzed.exit_code == 0, analyzed.stderr
    return c


def _denied(url: str, statement: str, match: str = "permission denied") -> None:
    engine = create_engine(url, isolation_level="AUTOCOMMIT")
    try:
        with engine.connect() as conn, pytest.raises(sa_exc.DBAPIError) as caught:
            conn.execute(text(statement))
    finally:
        engine.dispose()
    assert match in str(caught.value.orig), statement


def _count(url: str, table: str) -> int:
    engine = create_engine(url)
    with engine.connect() as conn:
        n = conn.execute(text(f"SELECT count(*) FROM {table}")).scalar_one()
    engine.dispose()
    return n


def test_application_role_runs_a_campaign_through_the_cli(shared: Shared, tmp_path: Path):
    _granted(shared)
    app = CliRunner(shared.app_url)
    c = _campaign(app, tmp_path / "campaign")
    for args in (
        ("status", "--run", c.run_id, "--json"),
        ("history", "--op", "softmax", "--json"),
        ("show", "--run", c.run_id, "--round", "1", "--json"),
        ("verify", "--json"),
        ("db", "current", "--json"),
    ):
        result = app(*args)
        assert result.exit_code == 0, (args, result.stderr)
    assert app("status", "--run", c.run_id, "--json").json()["run"]["status"] == "concluded"


def test_application_role_cannot_change_or_remove_anything(shared: Shared, tmp_path: Path):
    _granted(shared)
    _campaign(CliRunner(shared.app_url), tmp_path / "campaign")
    events, blobs = _count(shared.app_url, "events"), _count(shared.app_url, "blobs")
    assert events > 0 and blobs > 0
    _denied(shared.app_url, "UPDATE events SET event_type = 'Forged'")
    _denied(shared.app_url, "UPDATE blobs SET content = ''")
    _denied(shared.app_url, "UPDATE ledger_info SET value = 'forged'")
    projections = {t.name for t in PROJECTION_TABLES}
    for table in (t for t in metadata.sorted_tables if t.name not in projections):
        column = next(iter(table.c)).name  # every log table (checkpoints too), generically
        _denied(shared.app_url, f"UPDATE {table.name} SET {column} = {column}")
        _denied(shared.app_url, f"DELETE FROM {table.name}")
        _denied(shared.app_url, f"TRUNCATE {table.name}")
        _denied(shared.app_url, f"ALTER TABLE {table.name} DISABLE TRIGGER ALL", "must be owner")
        _denied(shared.app_url, f"DROP TABLE {table.name}", "must be owner")
    for table in (t.name for t in PROJECTION_TABLES):
        _denied(shared.app_url, f"DELETE FROM {table}")
        _denied(shared.app_url, f"TRUNCATE {table}")
    _denied(shared.app_url, "UPDATE alembic_version SET version_num = '9999'")
    _denied(shared.app_url, "CREATE TABLE shadow (x int)")
    _denied(shared.app_url, "SET session_replication_role = replica")
    regrant = CliRunner(shared.app_url)("db", "grant", "--role", shared.owner)
    assert regrant.exit_code == 2 and "must run as the role that owns" in regrant.stderr
    assert (_count(shared.app_url, "events"), _count(shared.app_url, "blobs")) == (events, blobs)
    # the owner may not change the log either: the append-only triggers refuse it
    for statement in ("DELETE FROM events", "TRUNCATE blobs", "UPDATE events SET seq = seq"):
        _denied(shared.owner_url, statement, "append-only")


def test_grant_revokes_what_the_application_must_not_have(shared: Shared):
    _granted(shared)
    admin = create_engine(shared.admin_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'GRANT ALL ON runs, events TO "{shared.app}"'))
    admin.dispose()
    again = CliRunner(shared.owner_url)("db", "grant", "--role", shared.app)
    assert again.exit_code == 0, again.stderr
    assert "events: SELECT, INSERT" in again.stdout
    _denied(shared.app_url, "DELETE FROM runs")
    _denied(shared.app_url, "TRUNCATE events")


def test_grant_refusals(shared: Shared, sqlite_url: str):
    owner = CliRunner(shared.owner_url)
    not_yet = owner("db", "grant", "--role", shared.app)
    assert not_yet.exit_code == 4 and "has no schema yet" in not_yet.stderr
    assert owner("db", "upgrade").exit_code == 0
    for role, message in (
        ("kl_nobody", "role 'kl_nobody' does not exist"),
        (shared.owner, "grant to the application role, not to the owner"),
        ("", "--role needs a NAME, not a blank"),
        ("x" * 64, "--role needs a PostgreSQL role name"),
    ):
        result = owner("db", "grant", "--role", role, "--json")
        assert result.exit_code == 2, (role, result.stderr)
        assert message in result.error and result.stderr == ""
        assert result.json()["exit_code"] == 2
    lite = CliRunner(sqlite_url)("db", "grant", "--role", "app")
    assert lite.exit_code == 2 and "a SQLite ledger has no roles" in lite.stderr
    garbage = CliRunner("garbage")("db", "grant", "--role", "app")
    assert garbage.exit_code == 2 and "--db 'garbage' is not a database URL" in garbage.stderr


def test_grant_sql_names_every_table_and_never_a_destructive_privilege():
    grants = roles.privileges()
    assert set(grants) == set(metadata.tables) | {"alembic_version"}
    for table in LOG_TABLES:
        assert grants[table] == ("SELECT", "INSERT")
    projections = {t.name for t in PROJECTION_TABLES}
    for table in set(metadata.tables) - projections:  # a table a later revision adds too
        assert grants[table] == ("SELECT", "INSERT"), table
    for table in PROJECTION_TABLES:
        assert grants[table.name] == ("SELECT", "INSERT", "UPDATE")
    statements = roles.grant_statements('app "x"')
    assert statements[0] == 'GRANT USAGE ON SCHEMA public TO "app ""x"""'
    granted = [s for s in statements if s.startswith("GRANT ") and " ON TABLE " in s]
    assert len(granted) == len(grants)
    for s in granted:
        assert "DELETE" not in s and "TRUNCATE" not in s and "ALL" not in s
    result = CliRunner("sqlite:///unused.sqlite3")("db", "grant", "--role", "app", "--sql")
    assert result.exit_code == 0
    assert result.stdout.startswith("BEGIN;\n") and result.stdout.endswith(";\nCOMMIT;\n")
    assert result.stdout.count(";\n") == len(statements) + 2
    assert "GRANT SELECT, INSERT ON TABLE public.events TO app;" in result.stdout


def test_a_read_only_role_verifies_and_reads_but_cannot_write(shared: Shared, tmp_path: Path):
    """An auditor with SELECT alone (docs/operations.md) can run the read commands."""
    _granted(shared)
    c = _campaign(CliRunner(shared.app_url), tmp_path / "campaign")
    auditor = f"{shared.app}_ro"
    admin = create_engine(shared.admin_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE ROLE "{auditor}" LOGIN'))
    admin.dispose()
    owner = create_engine(shared.owner_url, isolation_level="AUTOCOMMIT")
    with owner.connect() as conn:
        conn.execute(text(f'GRANT SELECT ON ALL TABLES IN SCHEMA public TO "{auditor}"'))
    owner.dispose()
    ro = CliRunner(make_url(shared.app_url).set(username=auditor).render_as_string(False))
    for args in (("verify",), ("status", "--run", c.run_id), ("history", "--op", "softmax")):
        result = ro(*args, "--json")
        assert result.exit_code == 0, (args, result.stderr)
    other = Campaign(tmp_path / "other", run_id="softmax-ro-001")
    refused = ro("plan", "--config", other.config(), "--json")
    assert refused.exit_code == 4 and "permission denied for table" in refused.error
    assert refused.stderr == "" and refused.stdout.count("\n") == 1


def _actors(url: str) -> list[tuple[str, dict]]:
    """(event type, actor) of every event, in seq order."""
    engine = create_engine(url)
    with engine.connect() as conn:
        rows = conn.execute(text("SELECT event_type, actor FROM events ORDER BY seq")).all()
    engine.dispose()
    return [(kind, json.loads(actor)) for kind, actor in rows]


def test_each_role_appends_as_itself_and_cannot_claim_another(shared: Shared, tmp_path: Path):
    """Two application roles share a ledger: every event names the role that appended it,
    as the database says (`current_user`), and a role that writes another's name, or none,
    is refused by the database itself."""
    _granted(shared)
    second = f"{shared.app}_b"
    admin = create_engine(shared.admin_url, isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f'CREATE ROLE "{second}" LOGIN'))
    admin.dispose()
    assert CliRunner(shared.owner_url)("db", "grant", "--role", second).exit_code == 0
    second_url = make_url(shared.app_url).set(username=second).render_as_string(False)
    first, other = CliRunner(shared.app_url), CliRunner(second_url)
    c = Campaign(tmp_path / "campaign")
    assert first("plan", "--config", c.config()).exit_code == 0
    planned = len(_actors(shared.app_url))
    recorded = other("record", "--run", c.run_id, "--result", c.round([16.0, 37.0, 23.0]))
    assert recorded.exit_code == 0, recorded.stderr
    actors = _actors(shared.app_url)
    label = {"label": "test-suite"}  # tests/conftest.py pins it
    assert [a for _, a in actors[:planned]] == [{"db_role": shared.app, **label}] * planned
    assert [a for _, a in actors[planned:]] == [{"db_role": second, **label}] * (
        len(actors) - planned
    )
    assert {kind for kind, _ in actors[planned:]} >= {"RoundSubmitted", "RoundDecided"}
    assert first("verify").exit_code == 0

    # a client that writes the other role's name (or no actor) into a row is refused
    engine = create_engine(shared.app_url)
    with engine.connect() as conn:
        last = conn.execute(text("SELECT * FROM events ORDER BY seq DESC LIMIT 1")).mappings()
        row = dict(last.one())
    engine.dispose()
    forged = {
        **row,
        "seq": row["seq"] + 1,
        "event_id": str(uuid.uuid4()),
        "stream_version": row["stream_version"] + 1,
        "parent_hash": row["event_hash"],
    }
    columns = ", ".join(forged)
    values = ", ".join(f":{k}" for k in forged)
    insert = f"INSERT INTO events ({columns}) VALUES ({values})"
    for claimed in (json.dumps({"db_role": second}), json.dumps({"os_user": second}), None):
        engine = create_engine(shared.app_url)
        try:
            with engine.begin() as conn, pytest.raises(sa_exc.DBAPIError) as caught:
                conn.execute(text(insert), {**forged, "actor": claimed})
        finally:
            engine.dispose()
        assert f"role {shared.app} may append only events whose actor names it" in str(
            caught.value.orig
        ), claimed
    assert len(_actors(shared.app_url)) == len(actors)
