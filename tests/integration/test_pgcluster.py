"""The throwaway PostgreSQL cluster of tests/pgcluster.py starts, serves and cleans up."""

from __future__ import annotations

import importlib.util
import json
import socket
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

PGCLUSTER_PATH = Path(__file__).resolve().parents[1] / "pgcluster.py"


def _load_pgcluster() -> ModuleType:
    # tests/ is not a package and not necessarily on sys.path: load by file path,
    # sharing the module object if a conftest already imported it as "pgcluster".
    if "pgcluster" in sys.modules:
        return sys.modules["pgcluster"]
    spec = importlib.util.spec_from_file_location("pgcluster", PGCLUSTER_PATH)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["pgcluster"] = module
    spec.loader.exec_module(module)
    return module


pgc = _load_pgcluster()
sqlalchemy = pytest.importorskip("sqlalchemy")
pytest.importorskip("psycopg")

pytestmark = pytest.mark.postgres


def _start_or_skip(cluster):
    try:
        return cluster.start()
    except pgc.PgNotAvailable as exc:
        if pgc.pg_required():
            raise
        pytest.skip(str(exc))


def _port_is_free(host: str, port: int) -> bool:
    with socket.socket() as s:
        s.settimeout(1)
        if s.connect_ex((host, port)) == 0:
            return False  # something still accepts connections
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind((host, port))
            s.listen()
        except OSError:
            return False
    return True


def test_cluster_lifecycle():
    cluster = pgc.PgCluster("kl_lifecycle")
    with _start_or_skip(cluster) as pg:
        base, port = pg.base_dir, pg.port
        assert base.is_dir()
        assert pg.url == f"postgresql+psycopg://postgres@127.0.0.1:{port}/kl_lifecycle"
        assert pg.superuser == "postgres" and pg.host == "127.0.0.1"

        engine = sqlalchemy.create_engine(pg.url)
        try:
            with engine.begin() as conn:
                conn.exec_driver_sql("CREATE TABLE t (id int PRIMARY KEY, note text)")
                conn.exec_driver_sql("INSERT INTO t VALUES (1, 'é€'), (2, 'b')")
            with engine.connect() as conn:
                rows = conn.exec_driver_sql("SELECT note FROM t ORDER BY id").scalars().all()
                assert rows == ["é€", "b"]
                assert conn.exec_driver_sql("SHOW server_encoding").scalar() == "UTF8"
                assert conn.exec_driver_sql("SHOW fsync").scalar() == "off"
        finally:
            engine.dispose()

        # A plain (non-superuser) login role can be created and can connect.
        pg.psql("CREATE ROLE app LOGIN")
        app_engine = sqlalchemy.create_engine(pg.url_for("kl_lifecycle", user="app"))
        try:
            with app_engine.connect() as conn:
                who = conn.exec_driver_sql(
                    "SELECT current_user, rolsuper FROM pg_roles WHERE rolname = current_user"
                ).one()
                assert tuple(who) == ("app", False)
                with pytest.raises(sqlalchemy.exc.ProgrammingError, match="permission denied"):
                    conn.exec_driver_sql("SELECT * FROM t")
        finally:
            app_engine.dispose()

        # Extra databases.
        other = pg.create_database("kl_other", owner="app")
        assert other.endswith(f":{port}/kl_other")
        assert pg.psql("SELECT current_database()", dbname="kl_other") == [("kl_other",)]
        assert pg.is_running()

    assert not base.exists()
    assert _port_is_free("127.0.0.1", port)
    assert not cluster.is_running()
    cluster.stop()  # idempotent


def test_cli_start_stop(tmp_path):
    state_file = tmp_path / "pg.json"

    def cli(*args):
        return subprocess.run(
            [sys.executable, str(PGCLUSTER_PATH), *args, "--state-file", str(state_file)],
            capture_output=True,
            text=True,
            timeout=90,
            check=False,
        )

    try:
        pgc.find_pg_bindir()
    except pgc.PgNotAvailable as exc:
        if pgc.pg_required():
            raise
        pytest.skip(str(exc))

    started = cli("start")
    assert started.returncode == 0, started.stderr
    url = started.stdout.strip()
    state = json.loads(state_file.read_text())
    try:
        assert state["url"] == url
        assert url.startswith("postgresql+psycopg://postgres@127.0.0.1:")
        engine = sqlalchemy.create_engine(url)
        try:
            with engine.connect() as conn:
                assert conn.exec_driver_sql("SELECT 1").scalar() == 1
        finally:
            engine.dispose()
        assert cli("status").stdout.strip() == url
        assert cli("start").returncode == 1  # refuses to clobber a running cluster
    finally:
        stopped = cli("stop")
    assert stopped.returncode == 0, stopped.stderr
    assert not state_file.exists()
    assert not Path(state["base_dir"]).exists()
    assert _port_is_free("127.0.0.1", state["port"])
    assert cli("stop").returncode == 0  # nothing to stop is fine


def test_session_cluster_prefers_external_url(monkeypatch):
    monkeypatch.setenv(pgc.ENV_URL, "postgresql+psycopg://u@db.example:5432/x")
    url, stop = pgc.session_cluster()
    assert url == "postgresql+psycopg://u@db.example:5432/x"
    stop()  # a no-op, must not raise


def test_session_cluster_fails_loudly_only_when_required(monkeypatch, tmp_path):
    monkeypatch.delenv(pgc.ENV_URL, raising=False)
    monkeypatch.setenv(pgc.ENV_BINDIR, str(tmp_path))  # no binaries here
    monkeypatch.delenv("CI", raising=False)
    monkeypatch.delenv(pgc.ENV_REQUIRE, raising=False)
    url, reason = pgc.session_cluster()
    assert url is None and "no PostgreSQL" in reason

    monkeypatch.setenv("CI", "true")
    with pytest.raises(pgc.PgClusterError, match="required"):
        pgc.session_cluster()
    monkeypatch.setenv("CI", "false")
    monkeypatch.setenv(pgc.ENV_REQUIRE, "1")
    with pytest.raises(pgc.PgClusterError, match="required"):
        pgc.session_cluster()
