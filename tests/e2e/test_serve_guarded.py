"""`serve` left running (issue 31, points 3-5): the Host header checked against the
addresses it serves (DNS rebinding), slow and idle clients timed out, a connection limit
below the descriptor limit, no traceback in the log for a client's behaviour, security
headers on every answer and every query parameter range-checked. Real sockets against the
server `serve` runs (ledger.reports.web.server_config), on SQLite and PostgreSQL."""

from __future__ import annotations

import contextlib
import logging
import socket
import threading
import time
import warnings

import pytest

from campaign import Campaign
from campaign import record_round as record

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient

HEADER_TIMEOUT = 1.0
LIMIT = 12


@pytest.fixture
def ledger(cli, tmp_path):
    """One run: KEEP, DISCARD, then a round from the kept kernel again (its parent is 1)."""
    c = Campaign(tmp_path / "a", run_id="softmax-guard-001")
    assert cli("plan", "--config", c.config()).exit_code == 0
    assert record(cli, c, [16.0, 36.0, 22.0]) == "KEEP"
    assert record(cli, c, [14.0, 30.0, 23.1]) == "DISCARD"
    assert record(cli, c, None, status="failed") == "FAIL"
    return cli.db_url


class Logged(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)


@pytest.fixture
def server(ledger):
    """The server serve runs, on a free port, with a short header timeout and a small
    connection limit; yields (port, log records)."""
    import uvicorn

    from ledger.reports.web import allowed_hosts, create_app, server_config

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    app = create_app(ledger, hosts=allowed_hosts("127.0.0.1", ["ledger.example.org"]))
    config = server_config(app, "127.0.0.1", port, limit=LIMIT, header_timeout=HEADER_TIMEOUT)
    running = uvicorn.Server(config)
    running.install_signal_handlers = lambda: None  # type: ignore[method-assign]
    logged = Logged()
    logging.getLogger().addHandler(logged)
    thread = threading.Thread(target=running.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not running.started:
        assert time.monotonic() < deadline, "the server did not start"
        time.sleep(0.05)
    try:
        yield port, logged.records
    finally:
        running.should_exit = True
        thread.join(10)
        logging.getLogger().removeHandler(logged)


def get(port: int, path: str, host: str = "127.0.0.1") -> tuple[int, dict[str, str], bytes]:
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        conn.sendall(f"GET {path} HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n".encode())
        data = b""
        while chunk := conn.recv(65536):
            data += chunk
    head, _, body = data.partition(b"\r\n\r\n")
    lines = head.decode("latin-1").split("\r\n")
    headers = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:])}
    return int(lines[0].split()[1]), headers, body


def closed_within(conn: socket.socket, seconds: float) -> bool:
    conn.settimeout(seconds)
    try:
        return conn.recv(1) == b""
    except TimeoutError:
        return False
    except ConnectionResetError:
        return True


def no_traceback(records: list[logging.LogRecord]) -> None:
    assert [r.getMessage() for r in records if r.exc_info or r.levelno >= logging.ERROR] == []


def test_a_foreign_host_header_is_refused(server) -> None:
    port, records = server
    path = "/api/run?id=softmax-guard-001"
    for host in ("evil.example.com", "evil.example.com:8000", "127.0.0.1.evil.example.com"):
        status, headers, body = get(port, path, host)
        assert status == 400, host
        assert b"softmax-guard-001" not in body
        assert body.startswith(b"Error: this server answers only requests for ")
        assert headers["content-security-policy"].startswith("default-src 'none'")
    for host in ("127.0.0.1", f"127.0.0.1:{port}", "localhost", f"[::1]:{port}"):
        assert get(port, path, host)[0] == 200, host
    assert get(port, path, "Ledger.Example.Org:443")[0] == 200  # --allow-host
    no_traceback(records)


def test_security_headers_on_every_answer(server) -> None:
    port, _ = server
    for path, expected in (("/", 200), ("/nowhere", 404), ("/api/nowhere", 404)):
        status, headers, _ = get(port, path)
        assert status == expected
        assert headers["x-content-type-options"] == "nosniff"
        assert headers["content-security-policy"].startswith("default-src 'none'")
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        conn.sendall(b"POST /api/runs HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n")
        conn.sendall(b"Connection: close\r\n\r\n")
        answer = conn.recv(65536).decode("latin-1").lower()
    assert answer.startswith("http/1.1 405") and "x-content-type-options: nosniff" in answer


def test_a_slow_header_is_timed_out(server) -> None:
    port, records = server
    with socket.create_connection(("127.0.0.1", port), timeout=10) as conn:
        conn.sendall(b"GET / HTTP/1.1\r\nHo")
        started = time.monotonic()
        closed = False
        for byte in b"st: 127.0.0.1\r\nX-Slow: aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa":
            try:
                conn.sendall(bytes([byte]))
            except (BrokenPipeError, ConnectionResetError):
                closed = True
                break
            if closed_within(conn, 0.2):
                closed = True
                break
        assert closed, "a header trickled byte by byte was never timed out"
        assert time.monotonic() - started < HEADER_TIMEOUT + 3
    assert get(port, "/")[0] == 200
    no_traceback(records)


def test_idle_connections_are_limited_and_timed_out(server) -> None:
    port, records = server
    idle = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(3 * LIMIT)]
    try:
        time.sleep(0.3)
        refused = [c for c in idle if closed_within(c, 0.05)]
        assert len(refused) >= 2 * LIMIT  # over the limit: closed at once
        survivors = [c for c in idle if c not in refused]
        assert all(closed_within(c, HEADER_TIMEOUT + 3) for c in survivors)
        assert get(port, "/api/runs")[0] == 200  # a new client is served
    finally:
        for conn in idle:
            with contextlib.suppress(OSError):
                conn.close()
    no_traceback(records)


@pytest.mark.parametrize(
    "query",
    [
        "/api/events?run=softmax-guard-001&after=99999999999999999999",
        "/api/events?run=softmax-guard-001&after=-1",
        "/api/events?run=softmax-guard-001&limit=99999999999999999999",
        "/api/history?after_at=2026-01-01&after_run=r&after_round=99999999999999999999",
        "/api/history?like=softmax-guard-001&like_version=99999999999999999999",
        "/api/diff?run=softmax-guard-001&a=0&b=99999999999999999999",
        "/api/history?since=garbage",
        "/api/history?until=2026-13-45",
        "/api/history?since=0001-01-01T00:00:00%2B01:00",
        "/history?since=garbage",
        "/events?run=softmax-guard-001&after=1e400",
    ],
)
def test_every_parameter_is_range_checked(ledger, query) -> None:
    from ledger.reports.web import create_app

    with TestClient(create_app(ledger)) as client:
        response = client.get(query)
    assert response.status_code == 400, (query, response.text[:200])
    assert "internal error" not in response.text


def test_a_rounds_diff_compares_it_with_its_parent(ledger) -> None:
    from ledger.reports.web import create_app

    with TestClient(create_app(ledger)) as client:
        page = client.get("/run", params={"id": "softmax-guard-001"}).text
    # round 2 and round 3 both started from round 1's kept kernel, not from the round before
    for a, b in ((0, 1), (1, 2), (1, 3)):
        assert f"/diff?run=softmax-guard-001&amp;a={a}&amp;b={b}" in page
    assert "a=2&amp;b=3" not in page
