"""A throwaway PostgreSQL cluster for the test suite.

TEST-ONLY: the cluster runs with ``fsync=off``, ``synchronous_commit=off`` and
``full_page_writes=off`` and trusts every local connection. It is fast and not
crash-safe; never point it at data you want to keep.

In Python::

    with PgCluster() as pg:            # initdb + start on 127.0.0.1:<free port>
        engine = sqlalchemy.create_engine(pg.url)
        other_url = pg.create_database("other")
        pg.psql("CREATE ROLE app LOGIN")
    # stopped (pg_ctl stop -m immediate) and its folder removed

For a session-scoped pytest fixture (see ``session_cluster``)::

    url, stop_or_reason = session_cluster()
    if url is None:
        pytest.skip(stop_or_reason)
    yield url
    stop_or_reason()

From a shell (one cluster shared by several commands)::

    export KERNEL_LEDGER_TEST_PG_URL=$(python tests/pgcluster.py start --state-file .pgtest/pg.json)
    ...
    python tests/pgcluster.py stop --state-file .pgtest/pg.json

Environment:
    KERNEL_LEDGER_TEST_PG_URL     use this (external) cluster; ``session_cluster`` starts nothing
    KERNEL_LEDGER_REQUIRE_PG=1    failing to start PostgreSQL is an error, not a skip
    CI                            same as KERNEL_LEDGER_REQUIRE_PG=1 (unless "", "0" or "false")
    KERNEL_LEDGER_TEST_PG_BINDIR  take initdb/pg_ctl/postgres from this folder only
    KERNEL_LEDGER_TEST_PG_USER    non-root user to run the server as when we are root
                                  (default ``kledger-pg``, created if missing)
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import fcntl
import glob
import json
import os
import pwd
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any
from urllib.parse import quote

ENV_URL = "KERNEL_LEDGER_TEST_PG_URL"
ENV_REQUIRE = "KERNEL_LEDGER_REQUIRE_PG"
ENV_BINDIR = "KERNEL_LEDGER_TEST_PG_BINDIR"
ENV_USER = "KERNEL_LEDGER_TEST_PG_USER"

DEFAULT_RUN_USER = "kledger-pg"
DEFAULT_DBNAME = "kledger_test"
MIN_MAJOR = 13
HOST = "127.0.0.1"
_BINARIES = ("initdb", "pg_ctl", "postgres")
_EXTRA_BINDIR_GLOBS = ("/usr/lib/postgresql/*/bin", "/usr/pgsql-*/bin")
_STATE_FORMAT = 1
_USER_LOCK = "/tmp/.kernel-ledger-pg-useradd.lock"


class PgClusterError(RuntimeError):
    """The throwaway cluster could not be set up, started or used."""


class PgNotAvailable(PgClusterError):
    """No usable PostgreSQL server binaries were found."""


# --------------------------------------------------------------------------- binaries


def _version_key(path: Path) -> tuple[int, ...]:
    """Sort key for /usr/lib/postgresql/<version>/bin style folders."""
    nums = re.findall(r"\d+", path.parent.name)
    return tuple(int(n) for n in nums) or (-1,)


def _server_version(bindir: Path) -> tuple[int, str]:
    """(major, full version string) of the ``postgres`` binary in *bindir*."""
    try:
        out = subprocess.run(
            [str(bindir / "postgres"), "--version"],
            capture_output=True,
            text=True,
            timeout=20,
            check=False,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return -1, ""
    m = re.search(r"\(PostgreSQL\)\s+(\d+)(?:\.(\d+))?", out)
    if not m:
        return -1, ""
    return int(m.group(1)), m.group(0).split()[-1]


def find_pg_bindir(min_major: int = MIN_MAJOR) -> tuple[Path, str]:
    """Locate a folder holding initdb, pg_ctl and postgres of version >= *min_major*.

    Order: $KERNEL_LEDGER_TEST_PG_BINDIR (exclusively, when set), then the folder
    of ``initdb`` on PATH (symlinks resolved), then /usr/lib/postgresql/*/bin and
    /usr/pgsql-*/bin, newest first. Returns (bindir, version).
    """
    override = os.environ.get(ENV_BINDIR, "").strip()
    candidates: list[Path] = []
    if override:
        candidates.append(Path(override))
    else:
        on_path = shutil.which("initdb")
        if on_path:
            candidates.append(Path(on_path).resolve().parent)
        for pattern in _EXTRA_BINDIR_GLOBS:
            found = (Path(p) for p in glob.glob(pattern))
            candidates.extend(sorted(found, key=_version_key, reverse=True))
    seen: list[str] = []
    for bindir in candidates:
        if not all(os.access(bindir / b, os.X_OK) for b in _BINARIES):
            seen.append(f"{bindir} (incomplete)")
            continue
        major, version = _server_version(bindir)
        if major >= min_major:
            return bindir, version
        seen.append(f"{bindir} (version {version or 'unknown'})")
    where = f"; looked at: {', '.join(seen)}" if seen else ""
    raise PgNotAvailable(
        f"no PostgreSQL >= {min_major} server binaries ({', '.join(_BINARIES)}) found"
        f"{where}. Install them (.ci/ensure-postgres does) or set {ENV_URL}."
    )


# --------------------------------------------------------------------------- helpers


def pg_required() -> bool:
    """True when PostgreSQL must be available (CI or KERNEL_LEDGER_REQUIRE_PG=1)."""
    ci = os.environ.get("CI", "").strip().lower()
    return os.environ.get(ENV_REQUIRE, "").strip() == "1" or ci not in ("", "0", "false", "no")


def free_port(host: str = HOST) -> int:
    """A TCP port on *host* that nothing is bound to right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind((host, 0))
        return int(s.getsockname()[1])


def _ensure_run_user(name: str, timeout: float = 20.0) -> pwd.struct_passwd:
    """Return the passwd entry of *name*, creating a system user if it is missing.

    Creation is serialized between our processes (parallel test workers) with a
    lock file, and retried for a while if useradd fails (e.g. /etc/passwd busy).
    """
    if shutil.which("useradd"):
        cmd = [
            "useradd",
            "--system",
            "--no-create-home",
            "--home-dir",
            "/nonexistent",
            "--shell",
            "/usr/sbin/nologin",
            "--user-group",
            name,
        ]
    elif shutil.which("adduser"):  # busybox / alpine
        cmd = ["adduser", "-S", "-D", "-H", "-s", "/sbin/nologin", name]
    else:
        cmd = []
    deadline = time.monotonic() + timeout
    error = "neither useradd nor adduser found"
    # Parallel workers must not run useradd concurrently: the "already exists" check
    # of useradd happens before it takes the passwd lock, so two can both add the user.
    with open(_USER_LOCK, "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        while True:
            with contextlib.suppress(KeyError):
                return pwd.getpwnam(name)
            if not cmd or time.monotonic() > deadline:
                break
            proc = subprocess.run(cmd, capture_output=True, text=True, check=False)
            if proc.returncode != 0:
                error = f"{' '.join(cmd)}: rc={proc.returncode} {proc.stderr.strip()}"
                time.sleep(0.2)
    raise PgClusterError(
        f"running as root and could not create the non-root user {name!r} for PostgreSQL ({error})"
    )


def _world_traversable(path: Path) -> bool:
    """True when every folder from / down to *path* can be entered by any user."""
    path = path.resolve()
    for p in (path, *path.parents):
        try:
            if not p.stat().st_mode & 0o001:
                return False
        except OSError:
            return False
    return True


def _pid_alive(pid: int) -> bool:
    """True while the process runs; a zombie (exited, not yet reaped) counts as gone."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    with contextlib.suppress(OSError, IndexError):
        stat = Path(f"/proc/{pid}/stat").read_text()
        if stat.rsplit(")", 1)[1].split()[0] == "Z":
            return False
    return True


def _read_postmaster_pid(data_dir: Path) -> int | None:
    try:
        first = (data_dir / "postmaster.pid").read_text().splitlines()[0]
        return int(first.strip())
    except (OSError, ValueError, IndexError):
        return None


# --------------------------------------------------------------------------- the cluster


class PgCluster:
    """A private PostgreSQL cluster in a temporary folder (see module docstring).

    Attributes once started: ``url`` (SQLAlchemy URL of ``dbname``), ``host``,
    ``port``, ``superuser``, ``dbname``, ``base_dir`` (temp folder, also the unix
    socket folder), ``data_dir``, ``log_path``, ``bindir``, ``version``.
    """

    def __init__(
        self,
        dbname: str = DEFAULT_DBNAME,
        *,
        superuser: str = "postgres",
        start_timeout: float = 30.0,
        tmp_parent: str | os.PathLike[str] | None = None,
        run_user: str | None = None,
        stop_at_exit: bool = True,
    ) -> None:
        self.dbname = dbname
        self.superuser = superuser
        self.host = HOST
        self.port: int = 0
        self.start_timeout = start_timeout
        self.bindir: Path | None = None
        self.version = ""
        self.base_dir: Path | None = None
        self._tmp_parent = tmp_parent
        self._run_user_name = run_user
        self._uid: int | None = None  # None: run as ourselves
        self._gid: int | None = None
        self._stop_at_exit = stop_at_exit
        self._started = False
        self._stopped = False

    # ---- paths / urls

    @property
    def data_dir(self) -> Path:
        return self._base() / "data"

    @property
    def log_path(self) -> Path:
        return self._base() / "postgres.log"

    @property
    def url(self) -> str:
        return self.url_for(self.dbname)

    def url_for(self, dbname: str, user: str | None = None) -> str:
        """SQLAlchemy URL (postgresql+psycopg://) for *dbname* as *user* (default superuser)."""
        user = user or self.superuser
        return (
            f"postgresql+psycopg://{quote(user, safe='')}@{self.host}:{self.port}"
            f"/{quote(dbname, safe='')}"
        )

    def _base(self) -> Path:
        if self.base_dir is None:
            raise PgClusterError("cluster not started")
        return self.base_dir

    # ---- process plumbing

    def _run(self, cmd: Sequence[str], timeout: float) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if not k.startswith("PG")}
        env.update(LC_ALL="C", LANG="C", HOME=str(self._base()), TZ="UTC")
        extra: dict[str, Any] = {}
        if self._uid is not None:
            user = self._run_user_name or ""
            env.update(USER=user, LOGNAME=user)
            extra = {"user": self._uid, "group": self._gid, "extra_groups": []}
        try:
            return subprocess.run(
                list(cmd),
                cwd=self._base(),
                env=env,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                text=True,
                timeout=timeout,
                check=False,
                **extra,
            )
        except subprocess.TimeoutExpired as exc:
            raise PgClusterError(
                f"{Path(cmd[0]).name} timed out after {timeout:.0f}s{self._log_suffix()}"
            ) from exc

    def log_tail(self, lines: int = 30) -> str:
        try:
            text = self.log_path.read_text(errors="replace")
        except (OSError, PgClusterError):
            return ""
        return "\n".join(text.splitlines()[-lines:])

    def _log_suffix(self) -> str:
        tail = self.log_tail()
        return f"\n--- server log tail ({self.log_path}) ---\n{tail}" if tail else ""

    # ---- lifecycle

    def start(self) -> PgCluster:
        """initdb, start, wait until it accepts connections, create ``dbname``."""
        if self._started:
            return self
        t0 = time.monotonic()
        self.bindir, self.version = find_pg_bindir()
        if os.geteuid() == 0:
            self._run_user_name = (
                self._run_user_name or os.environ.get(ENV_USER, "").strip() or DEFAULT_RUN_USER
            )
            entry = _ensure_run_user(self._run_user_name)
            self._uid, self._gid = entry.pw_uid, entry.pw_gid
            if self._uid == 0:
                raise PgClusterError(f"run user {self._run_user_name!r} is root (uid 0)")
        parent = Path(self._tmp_parent or tempfile.gettempdir())
        if self._uid is not None and not _world_traversable(parent):
            parent = Path("/tmp")  # the server user must be able to reach its folder
        self.base_dir = Path(tempfile.mkdtemp(prefix="kledger-pg-", dir=parent))
        self._started = True
        if self._stop_at_exit:
            atexit.register(self.stop)
        try:
            if self._uid is not None:
                os.chown(self.base_dir, self._uid, self._gid or -1)
            self._initdb()
            self._start_server()
            self._wait_ready(t0 + self.start_timeout)
            self.create_database(self.dbname)
        except BaseException:
            self.stop()
            raise
        return self

    def _initdb(self) -> None:
        assert self.bindir is not None
        proc = self._run(
            [
                str(self.bindir / "initdb"),
                "-D",
                str(self.data_dir),
                "-U",
                self.superuser,
                "--auth=trust",
                "-E",
                "UTF8",
                "--locale=C",
                "--no-sync",
            ],
            timeout=max(self.start_timeout, 60.0),
        )
        if proc.returncode != 0:
            out = (proc.stdout + proc.stderr).strip()[-3000:]
            raise PgClusterError(f"initdb failed (rc={proc.returncode}):\n{out}")
        with (self.data_dir / "postgresql.conf").open("a") as conf:
            conf.write(
                "\n# kernel-ledger THROWAWAY TEST CLUSTER: durability is switched off below.\n"
                "include 'kledger_test.conf'\n"
            )

    def _write_test_conf(self) -> None:
        sock_dir = str(self._base()).replace("'", "''")
        # Unix socket paths are limited to ~107 bytes.
        if len(f"{sock_dir}/.s.PGSQL.{self.port}") > 100:
            raise PgClusterError(f"temp folder path too long for a unix socket: {sock_dir}")
        path = self.data_dir / "kledger_test.conf"
        path.write_text(
            "# Test-only settings: fast, NOT crash-safe. Never use for real data.\n"
            f"listen_addresses = '{self.host}'\n"
            f"port = {self.port}\n"
            f"unix_socket_directories = '{sock_dir}'\n"
            "fsync = off\n"
            "synchronous_commit = off\n"
            "full_page_writes = off\n"
            "timezone = 'UTC'\n"
            "log_timezone = 'UTC'\n"
            "max_connections = 200\n"
        )
        if self._uid is not None:
            os.chown(path, self._uid, self._gid or -1)

    def _start_server(self) -> None:
        assert self.bindir is not None
        last_error = ""
        for _attempt in range(4):
            self.port = free_port(self.host)
            self._write_test_conf()
            log_size = self.log_path.stat().st_size if self.log_path.exists() else 0
            proc = self._run(
                [
                    str(self.bindir / "pg_ctl"),
                    "start",
                    "-D",
                    str(self.data_dir),
                    "-l",
                    str(self.log_path),
                    "-w",
                    "-t",
                    str(max(1, int(self.start_timeout))),
                ],
                timeout=self.start_timeout + 10,
            )
            if proc.returncode == 0:
                return
            try:
                with self.log_path.open(errors="replace") as fh:
                    fh.seek(log_size)
                    new_log = fh.read()
            except OSError:
                new_log = ""
            last_error = (proc.stdout + proc.stderr).strip()
            if "already in use" not in new_log:  # anything but a lost port race is fatal
                break
            self._kill_postmaster()  # pg_ctl -w may time out with a server still around
        raise PgClusterError(
            f"PostgreSQL {self.version} did not start on {self.host}:{self.port}: "
            f"{last_error}{self._log_suffix()}"
        )

    def _wait_ready(self, deadline: float) -> None:
        last: Exception | None = None
        while True:
            try:
                self.psql("SELECT 1", dbname="postgres")
                return
            except PgClusterError:
                raise
            except Exception as exc:  # psycopg.OperationalError and friends
                last = exc
            if time.monotonic() > deadline:
                raise PgClusterError(
                    f"PostgreSQL on {self.host}:{self.port} does not accept connections: "
                    f"{last}{self._log_suffix()}"
                )
            time.sleep(0.1)

    def is_running(self) -> bool:
        if self.base_dir is None:
            return False
        pid = _read_postmaster_pid(self.data_dir)
        return pid is not None and _pid_alive(pid)

    def _kill_postmaster(self) -> None:
        """Last resort when pg_ctl cannot stop it: SIGQUIT (immediate), then SIGKILL."""
        pid = _read_postmaster_pid(self.data_dir)
        if pid is None or not _pid_alive(pid):
            return
        with contextlib.suppress(OSError):
            cmdline = Path(f"/proc/{pid}/cmdline").read_bytes()
            if b"postgres" not in cmdline:
                return  # stale pid file, pid reused by something else
        for sig, wait in ((signal.SIGQUIT, 5.0), (signal.SIGKILL, 5.0)):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, sig)
            deadline = time.monotonic() + wait
            while time.monotonic() < deadline:
                if not _pid_alive(pid):
                    return
                time.sleep(0.05)

    def stop(self) -> None:
        """Stop the server (pg_ctl stop -m immediate) and delete its folder. Idempotent."""
        if self._stopped or self.base_dir is None:
            return
        self._stopped = True
        atexit.unregister(self.stop)
        try:
            if self.bindir is not None and (self.data_dir / "postmaster.pid").exists():
                pid = _read_postmaster_pid(self.data_dir)
                # -W: pg_ctl's own wait mistakes an unreaped (zombie) postmaster for a live one
                proc = self._run(
                    [
                        str(self.bindir / "pg_ctl"),
                        "stop",
                        "-D",
                        str(self.data_dir),
                        "-m",
                        "immediate",
                        "-W",
                    ],
                    timeout=30,
                )
                deadline = time.monotonic() + 15
                while pid is not None and _pid_alive(pid) and time.monotonic() < deadline:
                    time.sleep(0.05)
                if proc.returncode != 0 or (pid is not None and _pid_alive(pid)):
                    self._kill_postmaster()
        except PgClusterError:
            self._kill_postmaster()
        finally:
            shutil.rmtree(self.base_dir, ignore_errors=True)

    def __enter__(self) -> PgCluster:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # ---- SQL helpers (psycopg 3)

    def connect(self, dbname: str | None = None, user: str | None = None) -> Any:
        """An autocommit ``psycopg.Connection`` (close it, or use it as a context manager)."""
        try:
            import psycopg
        except ImportError as exc:
            raise PgClusterError("psycopg (3) is required: pip install 'psycopg[binary]'") from exc
        return psycopg.connect(
            host=self.host,
            port=self.port,
            user=user or self.superuser,
            dbname=dbname or self.dbname,
            autocommit=True,
            connect_timeout=5,
        )

    def psql(
        self,
        sql: str,
        params: Sequence[Any] | dict[str, Any] | None = None,
        *,
        dbname: str | None = None,
        user: str | None = None,
    ) -> list[tuple[Any, ...]] | None:
        """Run *sql* (autocommit; several ``;``-separated statements allowed without params).

        Returns the rows of the last statement if it produced any, else None.
        """
        with self.connect(dbname, user) as conn, conn.cursor() as cur:
            cur.execute(sql, params)
            return cur.fetchall() if cur.description is not None else None

    def create_database(self, name: str, owner: str | None = None) -> str:
        """CREATE DATABASE *name* (owned by *owner*, default the superuser); return its URL."""
        from psycopg import sql

        stmt = sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name))
        if owner:
            stmt = sql.SQL("{} OWNER {}").format(stmt, sql.Identifier(owner))
        with self.connect("postgres") as conn:
            conn.execute(stmt)
        return self.url_for(name)

    def drop_database(self, name: str) -> None:
        from psycopg import sql

        with self.connect("postgres") as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(name))
            )

    # ---- state file (CLI)

    def to_state(self) -> dict[str, Any]:
        return {
            "format": _STATE_FORMAT,
            "url": self.url,
            "host": self.host,
            "port": self.port,
            "superuser": self.superuser,
            "dbname": self.dbname,
            "base_dir": str(self.base_dir),
            "data_dir": str(self.data_dir),
            "log": str(self.log_path),
            "bindir": str(self.bindir),
            "version": self.version,
            "run_user": self._run_user_name if self._uid is not None else None,
            "pid": _read_postmaster_pid(self.data_dir),
        }

    @classmethod
    def from_state(cls, state: dict[str, Any]) -> PgCluster:
        """Re-attach to a cluster started elsewhere (e.g. by the CLI); no atexit stop."""
        self = cls(state["dbname"], superuser=state["superuser"], stop_at_exit=False)
        self.host = state["host"]
        self.port = int(state["port"])
        self.base_dir = Path(state["base_dir"])
        self.bindir = Path(state["bindir"])
        self.version = state.get("version", "")
        self._started = True
        run_user = state.get("run_user")
        if run_user and os.geteuid() == 0:
            entry = pwd.getpwnam(run_user)
            self._run_user_name, self._uid, self._gid = run_user, entry.pw_uid, entry.pw_gid
        return self


# --------------------------------------------------------------------------- pytest helper


def session_cluster(
    dbname: str = DEFAULT_DBNAME,
) -> tuple[str, Callable[[], None]] | tuple[None, str]:
    """PostgreSQL for a test session.

    Returns ``(url, stop)``: the URL from $KERNEL_LEDGER_TEST_PG_URL (``stop`` does
    nothing) or of a freshly started PgCluster (``stop`` stops it). If no cluster
    can be started, returns ``(None, reason)`` so the caller can ``pytest.skip(reason)``
    -- except under CI / KERNEL_LEDGER_REQUIRE_PG=1, where it raises PgClusterError.
    """
    external = os.environ.get(ENV_URL, "").strip()
    if external:
        return external, lambda: None
    cluster = PgCluster(dbname)
    try:
        cluster.start()
    except Exception as exc:  # no binaries, no user, initdb/start/connect failure, ...
        reason = f"PostgreSQL test cluster unavailable: {exc}"
        if pg_required():
            raise PgClusterError(
                f"{reason}\n(PostgreSQL is required here because CI or {ENV_REQUIRE}=1 is set;"
                f" run .ci/ensure-postgres or set {ENV_URL})"
            ) from exc
        return None, reason
    return cluster.url, cluster.stop


# --------------------------------------------------------------------------- CLI


def _load_state(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())
    except FileNotFoundError:
        return None
    except (OSError, ValueError) as exc:
        raise SystemExit(f"pgcluster: cannot read state file {path}: {exc}") from exc


def _cmd_start(args: argparse.Namespace) -> int:
    state_file = Path(args.state_file)
    old = _load_state(state_file)
    if old is not None:
        old_cluster = PgCluster.from_state(old)
        if old_cluster.is_running():
            print(
                f"pgcluster: {state_file} describes a running cluster ({old['url']});"
                " stop it first",
                file=sys.stderr,
            )
            return 1
        old_cluster.stop()  # stale: clean up its folder
    t0 = time.monotonic()
    cluster = PgCluster(args.dbname, start_timeout=args.timeout, stop_at_exit=False)
    try:
        cluster.start()
    except PgClusterError as exc:
        print(f"pgcluster: {exc}", file=sys.stderr)
        return 1
    state_file.parent.mkdir(parents=True, exist_ok=True)
    tmp = state_file.with_name(state_file.name + ".tmp")
    tmp.write_text(json.dumps(cluster.to_state(), indent=2) + "\n")
    tmp.replace(state_file)
    print(
        f"pgcluster: PostgreSQL {cluster.version} on {cluster.host}:{cluster.port}, "
        f"folder {cluster.base_dir}, started in {time.monotonic() - t0:.2f}s",
        file=sys.stderr,
    )
    print(cluster.url)
    return 0


def _cmd_stop(args: argparse.Namespace) -> int:
    state_file = Path(args.state_file)
    state = _load_state(state_file)
    if state is None:
        print(f"pgcluster: no state file {state_file}; nothing to stop", file=sys.stderr)
        return 0
    t0 = time.monotonic()
    PgCluster.from_state(state).stop()
    state_file.unlink(missing_ok=True)
    print(f"pgcluster: stopped {state['url']} in {time.monotonic() - t0:.2f}s", file=sys.stderr)
    return 0


def _cmd_status(args: argparse.Namespace) -> int:
    state = _load_state(Path(args.state_file))
    if state is None or not PgCluster.from_state(state).is_running():
        print("pgcluster: not running", file=sys.stderr)
        return 1
    print(state["url"])
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="pgcluster", description="Throwaway PostgreSQL cluster for tests (not crash-safe)."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    p_start = sub.add_parser("start", help="start a cluster; print its URL")
    p_start.add_argument("--state-file", required=True)
    p_start.add_argument("--dbname", default=DEFAULT_DBNAME)
    p_start.add_argument("--timeout", type=float, default=30.0)
    p_start.set_defaults(func=_cmd_start)
    p_stop = sub.add_parser("stop", help="stop the cluster of a state file and delete it")
    p_stop.add_argument("--state-file", required=True)
    p_stop.set_defaults(func=_cmd_stop)
    p_status = sub.add_parser("status", help="print the URL if running (exit 1 if not)")
    p_status.add_argument("--state-file", required=True)
    p_status.set_defaults(func=_cmd_status)
    args = parser.parse_args(argv)
    return int(args.func(args))


if __name__ == "__main__":
    sys.exit(main())
