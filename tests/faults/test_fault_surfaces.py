"""Surfaces left running or driven by an agent (issue 31): the drop-in beside its ledger,
the web view under foreign Host headers and slow or idle clients, the MCP server asked for
paths outside its folders, and absurd values for every option of every command. Each probe
records its figures for docs/reliability.md (`make faults`)."""

from __future__ import annotations

import random
import socket
import sys
import time
from pathlib import Path

import pytest
from faultkit import record_figures, scale

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "e2e"))

from test_absurd_values import CASES, _argv, _no_internal_error
from test_serve_guarded import HEADER_TIMEOUT, LIMIT, closed_within, get, server  # noqa: F401

from campaign import Campaign
from campaign import record_round as record
from conftest import CliRunner


@pytest.fixture
def ledger(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("KERNEL_LEDGER_DB", raising=False)
    url = f"sqlite:///{tmp_path / 'ledger.sqlite3'}"
    cli = CliRunner(url)
    c = Campaign(tmp_path / "a", run_id="softmax-guard-001")
    assert cli("plan", "--config", c.config()).exit_code == 0
    assert record(cli, c, [16.0, 36.0, 22.0]) == "KEEP"
    return url


def test_foreign_host_headers(server) -> None:  # noqa: F811
    port, records = server
    rng = random.Random(31)
    tries = scale(100, 2000)
    leaked = refused = sent = 0
    alphabet = "abcdefghijklmnopqrstuvwxyz0123456789.-:[]"
    for _ in range(tries):
        host = "".join(rng.choice(alphabet) for _ in range(rng.randint(1, 40)))
        if host.strip("[]").split(":")[0] in ("127.0.0.1", "localhost", "ledger.example.org", ""):
            continue
        status, _, body = get(port, "/api/run?id=softmax-guard-001", host)
        sent += 1
        refused += status == 400
        leaked += b"softmax-guard-001" in body
    record_figures("foreign Host headers", tries=sent, refused=refused, leaked=leaked)
    assert leaked == 0 and refused == sent
    assert not [r for r in records if r.exc_info]


def test_slow_and_idle_clients(server) -> None:  # noqa: F811
    port, records = server
    slow = scale(4, 40)
    started = time.monotonic()
    trickling = []
    for _ in range(slow):
        conn = socket.create_connection(("127.0.0.1", port), timeout=10)
        conn.sendall(b"GET / HTTP/1.1\r\nHo")
        trickling.append(conn)
    idle = [socket.create_connection(("127.0.0.1", port), timeout=10) for _ in range(3 * LIMIT)]
    closed = 0
    deadline = time.monotonic() + HEADER_TIMEOUT + 5
    for conn in trickling + idle:
        with_time = max(0.05, deadline - time.monotonic())
        closed += closed_within(conn, with_time)
    seconds = time.monotonic() - started
    served = get(port, "/api/runs")[0] == 200
    for conn in trickling + idle:
        conn.close()
    record_figures(
        "slow and idle web clients",
        connections=len(trickling) + len(idle),
        limit=LIMIT,
        closed=closed,
        seconds=round(seconds, 2),
        new_client_served=served,
    )
    assert closed == len(trickling) + len(idle) and served
    assert not [r for r in records if r.exc_info]


def test_absurd_values_every_option(tmp_path, monkeypatch) -> None:
    monkeypatch.chdir(tmp_path)
    monkeypatch.delenv("KERNEL_LEDGER_DB", raising=False)
    cli = CliRunner(f"sqlite:///{tmp_path / 'ledger.sqlite3'}")
    c = Campaign(tmp_path / "campaign")
    assert cli("plan", "--config", c.config()).exit_code == 0
    assert record(cli, c, [15.0, 33.0, 20.0]) == "KEEP"
    cases = CASES if scale(0, 1) else random.Random(31).sample(CASES, 60)
    codes: dict[int, int] = {}
    for case in cases:
        argv = _argv(*case, c)
        result = cli(*argv)
        _no_internal_error(result, argv)
        codes[result.exit_code] = codes.get(result.exit_code, 0) + 1
    record_figures(
        "absurd values, every option of every command",
        tries=len(cases),
        exit_codes=dict(sorted(codes.items())),
        internal_errors=0,
    )


def test_drop_in_beside_its_ledger(tmp_path, monkeypatch) -> None:
    from test_ledger_never_an_output import _main  # the drop-in's command line

    monkeypatch.chdir(tmp_path)
    tries = scale(3, 30)
    refused = 0
    for i in range(tries):
        folder = tmp_path / f"runs-{i}" / "softmax"
        c = Campaign(tmp_path / f"campaign-{i}", run_id=f"softmax-t-{i:03d}")
        name = ("state.json", "ledger.sqlite3", "rounds.json")[i % 3]
        monkeypatch.setenv("KERNEL_LEDGER_DB", f"sqlite:///{folder / name}")
        code, out = _main("plan", "--output-dir", folder, "--config", c.config())
        refused += code == 1 and "is inside the run folder" in out["error"]
        assert not folder.exists()
    record_figures("drop-in with its ledger in the run folder", tries=tries, refused=refused)
    assert refused == tries
