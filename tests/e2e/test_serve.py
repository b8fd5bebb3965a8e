"""`kernel-ledger serve` at the HTTP level (starlette's TestClient): the JSON API, the
pages, injection from ledger content and from the query, and read-only by construction.
Runs on SQLite and PostgreSQL. The browser tests are in test_serve_browser.py."""

from __future__ import annotations

import re
import warnings

import pytest
from markupsafe import escape

from campaign import Campaign
from campaign import record_round as record

HOSTILE = '<script>alert("x")</script><img src=x onerror=alert(1)>'

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from starlette.testclient import TestClient


@pytest.fixture
def ledger(cli, tmp_path):
    """Two runs: one concluded, with a hostile hypothesis and op name; one open."""
    c = Campaign(tmp_path / "a", run_id="softmax-web-001")
    assert cli("plan", "--config", c.config()).exit_code == 0
    assert record(cli, c, [16.0, 36.0, 22.0], hypothesis=HOSTILE) == "KEEP"
    assert record(cli, c, [14.0, 30.0, 23.1]) == "DISCARD"
    assert record(cli, c, None, status="failed") == "FAIL"
    assert cli("analyze", "--run", c.run_id, "--output-dir", tmp_path / "out").exit_code == 0
    d = Campaign(tmp_path / "b", run_id="rmsnorm-web-002")
    doc = d.config_doc(op_name=HOSTILE, target={"soc": "NVIDIA H200"})
    from campaign import write_json

    assert cli("plan", "--config", write_json(tmp_path / "b" / "config.json", doc)).exit_code == 0
    assert cli("checkpoint").exit_code == 0
    return cli.db_url


@pytest.fixture
def client(ledger):
    from ledger.reports.web import create_app

    with TestClient(create_app(ledger)) as c:
        yield c


def test_runs_api_filters_and_pages(client):
    doc = client.get("/api/runs").json()
    assert [r["run_id"] for r in doc["runs"]] == ["rmsnorm-web-002", "softmax-web-001"]
    assert doc["next_after"] is None
    assert [r["run_id"] for r in client.get("/api/runs?status=open").json()["runs"]] == [
        "rmsnorm-web-002"
    ]
    assert [r["run_id"] for r in client.get("/api/runs?status=failed").json()["runs"]] == []
    assert [r["run_id"] for r in client.get("/api/runs?soc=NVIDIA+H200").json()["runs"]] == [
        "rmsnorm-web-002"
    ]
    first = client.get("/api/runs?limit=1").json()
    assert [r["run_id"] for r in first["runs"]] == ["rmsnorm-web-002"]
    assert first["next_after"] == "rmsnorm-web-002"
    second = client.get("/api/runs", params={"limit": 1, "after": first["next_after"]}).json()
    assert [r["run_id"] for r in second["runs"]] == ["softmax-web-001"]
    bad = client.get("/api/runs?status=sideways")
    assert bad.status_code == 400
    assert bad.json()["error"].startswith("status must be one of open, concluded")


def test_run_api_explains_every_round(client):
    doc = client.get("/api/run", params={"id": "softmax-web-001"}).json()
    assert [(r["round"], r["decision"], r["rule"]) for r in doc["rounds"]] == [
        (1, "KEEP", "keep"),
        (2, "DISCARD", "case-regression"),
        (3, "FAIL", "validation"),
    ]
    assert doc["rounds"][1]["explanation"] == (
        "DISCARD: worst case R = +5.00% on bf16-8x8193 is over its limit 2.00%."
    )
    assert doc["noise"]["noise_floor"] == 0.005
    assert doc["verification"]["status"] == "ok"


def test_event_log_pages_with_hash_and_chain_checks(client):
    first = client.get("/api/events", params={"run": "softmax-web-001", "limit": 4}).json()
    events = first["events"]
    assert [e["stream_version"] for e in events] == [1, 2, 3, 4]
    assert events[0]["parent_hash"] == "0" * 64
    assert all(e["hash_ok"] and e["parent_ok"] and e["readable"] for e in events)
    assert first["next_after"] == 4
    second = client.get(
        "/api/events", params={"run": "softmax-web-001", "after": 4, "limit": 100}
    ).json()
    assert second["events"][0]["stream_version"] == 5
    assert second["events"][0]["parent_hash"] == events[-1]["event_hash"]
    assert second["events"][0]["parent_ok"] and second["next_after"] is None


def test_kernel_diff_from_stored_sources(client):
    doc = client.get("/api/diff", params={"run": "softmax-web-001", "a": 0, "b": 1}).json()
    assert doc["rounds"] == [0, 1, 2, 3]
    assert doc["diff"].endswith("-# kernel v0.py\n-BLOCK = 128\n+# round 1\n+BLOCK = 1\n")
    assert doc["a"]["sha256"] != doc["b"]["sha256"] and doc["b"]["stored"]
    missing = client.get("/api/diff", params={"run": "softmax-web-001", "a": 0, "b": 9})
    assert missing.status_code == 404
    assert missing.json() == {"status": "error", "error": "run 'softmax-web-001' has no round 9"}


def test_history_api_pages_with_a_keyset_and_explains(client):
    first = client.get("/api/history", params={"limit": 2}).json()
    assert [(r["round"], r["decision"]) for r in first["rounds"]] == [(1, "KEEP"), (2, "DISCARD")]
    assert first["rounds"][1]["explanation"].startswith("DISCARD: worst case R = +5.00%")
    page = client.get(first["next"].replace("/history", "/api/history")).json()
    assert [(r["round"], r["decision"]) for r in page["rounds"]] == [(3, "FAIL")]
    assert page["next"] is None
    keep = client.get("/api/history", params={"decision": "keep"}).json()["rounds"]
    assert [r["round"] for r in keep] == [1]


def test_checkpoints_verify_on_request(client):
    plain = client.get("/api/checkpoints").json()
    assert len(plain["checkpoints"]) == 1 and plain["verification"] is None
    checked = client.get("/api/checkpoints?verify=1").json()
    assert checked["verification"]["status"] == "ok"
    assert checked["checkpoints"][0]["status"] == "ok"


def test_ledger_text_is_escaped_on_every_page(client):
    pages = [
        "/",
        "/run?id=softmax-web-001",
        "/run?id=rmsnorm-web-002",
        "/history",
        "/events?run=softmax-web-001",
        "/diff?run=softmax-web-001&a=0&b=1",
        "/checkpoints?verify=1",
    ]
    for url in pages:
        response = client.get(url)
        assert response.status_code == 200, url
        assert response.headers["content-type"].startswith("text/html")
        assert "default-src 'none'" in response.headers["content-security-policy"]
        body = response.text
        assert "<script" not in body.lower(), url
        assert "<img" not in body.lower(), url
    body = client.get("/run?id=softmax-web-001").text
    assert str(escape(HOSTILE)) in body
    assert str(escape(HOSTILE)) in client.get("/").text


@pytest.mark.parametrize(
    "url",
    [
        "/run?id=../../etc/passwd",
        "/run?id=%3Cscript%3Ealert(1)%3C%2Fscript%3E",
        "/events?run=..%2F..%2Fledger.sqlite3",
        "/diff?run=../x&a=0&b=1",
    ],
)
def test_ids_from_the_query_name_runs_only(client, url):
    response = client.get(url)
    assert response.status_code == 404
    assert "is not in the ledger" in response.text
    assert "<script>alert" not in response.text


def test_bad_numbers_are_refused_in_one_sentence(client):
    response = client.get("/api/events?run=softmax-web-001&after=x")
    assert response.status_code == 400
    assert response.json()["error"] == (
        "after must be a whole number from 0 to 9007199254740991, not 'x'"
    )


def test_no_route_writes(client):
    from ledger.reports.web import create_app

    app = create_app(client.app.state.store.url)
    for route in app.routes:
        assert route.methods <= {"GET", "HEAD"}, route.path
    for method in ("POST", "PUT", "PATCH", "DELETE"):
        for url in ("/", "/api/runs", "/run?id=softmax-web-001", "/checkpoints"):
            assert client.request(method, url).status_code == 405, (method, url)
    for url in ("/", "/run?id=softmax-web-001", "/history", "/diff?run=softmax-web-001&b=1"):
        for form in re.findall(r"<form[^>]*>", client.get(url).text):
            assert 'method="get"' in form, form


def test_the_connection_cannot_write(client):
    from sqlalchemy import text

    from ledger.errors import LedgerError

    store = client.app.state.store
    assert store.read_only
    for statement in (
        "CREATE TABLE intruder (x INTEGER)",
        "INSERT INTO checkpoints (checkpoint_id, origin, tree_size, root_hash, note, signed, "
        "created_at) VALUES (99, 'o', 0, 'r', 'n', false, 'now')",
    ):
        with (
            pytest.raises(LedgerError, match=r"read-only|readonly|read only"),
            store.transaction(write=True) as conn,
        ):
            conn.execute(text(statement))


def test_serve_binds_to_this_machine_by_default():
    from cli.serve import COMMAND

    assert COMMAND.options["host"].default == "127.0.0.1"


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_serve_refuses_a_missing_ledger(cli, tmp_path):
    result = cli("--db", f"sqlite:///{tmp_path / 'none.sqlite3'}", "serve", db=False)
    assert result.exit_code == 4
    assert result.stderr.startswith("Error: there is no ledger at ")
    assert not (tmp_path / "none.sqlite3").exists()
