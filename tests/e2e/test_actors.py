"""Who recorded each decision, as a user sees it: `history` (its `by` column, the `actor`
field and `--actor`), `show`, `check-merge`, the report and the web view's history, on
SQLite (the OS user and host, pinned by tests/conftest.py) and PostgreSQL (the database
role); and a wrong KERNEL_LEDGER_ACTOR refused before anything is written."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy.engine import make_url

from campaign import Campaign, record_round


def _principal(db_url: str) -> tuple[dict[str, str], str]:
    """The actor fields the backend takes, and how they read."""
    if db_url.startswith("sqlite"):
        return {"host": "test-host", "os_user": "tester"}, "tester@test-host"
    role = make_url(db_url).username
    return {"db_role": role}, f"role {role}"


@pytest.fixture
def two_agents(cli, db_url: str, tmp_path: Path, monkeypatch):
    """Round 1 (KEEP) recorded as agent-a, round 2 (DISCARD) and the conclusion as agent-b."""
    c = Campaign(tmp_path / "campaign")
    monkeypatch.setenv("KERNEL_LEDGER_ACTOR", "agent-a")
    assert cli("plan", "--config", c.config()).exit_code == 0
    assert record_round(cli, c, [16.0, 37.0, 23.0]) == "KEEP"
    monkeypatch.setenv("KERNEL_LEDGER_ACTOR", "agent-b")
    assert record_round(cli, c, [16.5, 37.0, 23.5]) == "DISCARD"
    analyzed = cli("analyze", "--run", c.run_id, "--output-dir", tmp_path / "out")
    assert analyzed.exit_code == 0, analyzed.stderr
    return c


def test_history_says_who_recorded_each_round_and_filters_by_actor(cli, db_url, two_agents):
    fields, principal = _principal(db_url)
    shown = cli("history", "--run", two_agents.run_id)
    assert shown.exit_code == 0, shown.stderr
    header, _, first, second, *_ = shown.stdout.splitlines()
    assert header.split()[-1] == "by"
    assert first.endswith(f"agent-a ({principal})")
    assert second.endswith(f"agent-b ({principal})")

    body = cli("history", "--run", two_agents.run_id, "--json").json()
    assert [r["actor"] for r in body["rounds"]] == [
        {**fields, "label": "agent-a"},
        {**fields, "label": "agent-b"},
    ]
    for name, rounds in (
        ("agent-b", [2]),
        ("AGENT-A", [1]),  # letter case aside
        ("agent", []),  # the whole name, not a part of it
        ("agent-%", []),  # no wildcard
        (fields.get("db_role") or fields["os_user"], [1, 2]),
    ):
        found = cli("history", "--actor", name, "--json")
        assert found.exit_code == 0, found.stderr
        assert [r["round"] for r in found.json()["rounds"]] == rounds, name
    none = cli("history", "--actor", "nobody")
    assert (none.exit_code, none.stdout) == (0, "no rounds match\n")
    both = cli("history", "--actor", "agent-b", "--decision", "KEEP", "--json").json()
    assert both["count"] == 0


def test_show_and_check_merge_name_who_recorded_the_decisions(cli, db_url, two_agents):
    fields, principal = _principal(db_url)
    c = two_agents
    shown = cli("show", "--run", c.run_id, "--round", "2")
    assert f"\n  recorded by: agent-b ({principal})\n" in shown.stdout
    detail = cli("show", "--run", c.run_id, "--round", "1", "--json").json()
    assert detail["actor"] == {**fields, "label": "agent-a"}

    # the run concluded short of its target: the gate fails, and still says who did what
    gate = cli("check-merge", "--run", c.run_id, "--kernel", c.best_kernel)
    assert gate.exit_code == 1
    assert gate.stdout.splitlines()[-2:] == [
        f"  round 1 KEEP recorded by agent-a ({principal})",
        f"  concluded inconclusive by agent-b ({principal})",
    ]
    body = cli("check-merge", "--run", c.run_id, "--kernel", c.best_kernel, "--json").json()
    assert body["decisions"] == [
        {"round": 1, "decision": "KEEP", "actor": {**fields, "label": "agent-a"}},
        {"round": 2, "decision": "DISCARD", "actor": {**fields, "label": "agent-b"}},
    ]
    assert body["concluded_by"] == {**fields, "label": "agent-b"}
    markdown = cli("check-merge", "--run", c.run_id, "--kernel", c.best_kernel, "--markdown")
    assert f"**Who recorded it**\n\n- round 1 KEEP recorded by agent-a ({principal})\n" in (
        markdown.stdout
    )


def test_the_report_and_the_web_history_name_who_recorded_each_round(
    cli, db_url, two_agents, tmp_path
):
    _, principal = _principal(db_url)
    out = tmp_path / "report.html"
    assert cli("report", "--run", two_agents.run_id, "--html", out).exit_code == 0
    html = out.read_text()
    assert html.count(f"recorded by agent-a ({principal})") == 1
    assert html.count(f"recorded by agent-b ({principal})") == 1

    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        from starlette.testclient import TestClient

    from ledger.reports.web import create_app

    with TestClient(create_app(db_url)) as client:
        page = client.get("/history", params={"actor": "agent-b"})
        assert page.status_code == 200
        assert f"recorded by agent-b ({principal})" in page.text
        assert "recorded by agent-a" not in page.text
        api = client.get("/api/history", params={"actor": "agent-a"}).json()
        logged = client.get("/api/events", params={"run": two_agents.run_id}).json()
        log = client.get("/events", params={"run": two_agents.run_id}).text
    labels = [e["actor"]["label"] for e in logged["events"]]
    assert labels[0] == "agent-a" and labels[-1] == "agent-b"  # the plan; the conclusion
    assert sorted(set(labels)) == ["agent-a", "agent-b"]
    assert log.count(f" · by agent-b ({principal})</span>") == labels.count("agent-b")
    assert [(r["round"], r["actor"]["label"]) for r in api["rounds"]] == [(1, "agent-a")]


def test_a_wrong_actor_label_is_refused_and_nothing_is_written(cli, tmp_path, monkeypatch):
    c = Campaign(tmp_path / "campaign")
    assert cli("plan", "--config", c.config()).exit_code == 0
    before = cli.event_count()
    for label, why in (
        ("x" * 129, "KERNEL_LEDGER_ACTOR must be 1 to 128 characters, not 129"),
        ("agent\nfake", "KERNEL_LEDGER_ACTOR must be printable characters only"),
    ):
        monkeypatch.setenv("KERNEL_LEDGER_ACTOR", label)
        result = cli("record", "--run", c.run_id, "--result", c.round([16.0, 37.0, 23.0]))
        assert result.exit_code == 2
        assert result.stderr.startswith(f"Error: {why}") and "nothing was written" in (
            result.stderr
        )
        assert cli.event_count() == before


def test_bundles_and_copies_carry_each_actor_verbatim(
    cli, db_url, two_agents, tmp_path, monkeypatch
):
    """A bundle's events keep the actors that appended them, into a ledger another actor
    imports them into, and `db copy` keeps them too; the event hashes are the same."""
    import json

    from conftest import CliRunner

    fields, _ = _principal(db_url)
    run = two_agents.run_id
    source = cli("history", "--run", run, "--json").json()["rounds"]
    bundle = tmp_path / "run.bundle.jsonl"
    assert cli("export", "--run", run, "--out", bundle).exit_code == 0
    lines = [json.loads(line) for line in bundle.read_text().splitlines()]
    labels = {e["actor"]["label"] for e in lines if e["type"] == "event"}
    assert labels == {"agent-a", "agent-b"}
    events = [e for e in lines if e["type"] == "event"]
    assert all(e["actor"] == {**fields, "label": e["actor"]["label"]} for e in events)

    monkeypatch.setenv("KERNEL_LEDGER_ACTOR", "importer")
    other = CliRunner(f"sqlite:///{tmp_path / 'imported.sqlite3'}")
    imported = other("import", bundle)
    assert imported.exit_code == 0, imported.stderr
    assert other("history", "--json").json()["rounds"] == source
    assert other("verify").exit_code == 0

    copied = CliRunner(f"sqlite:///{tmp_path / 'copied.sqlite3'}")
    assert copied("db", "upgrade").exit_code == 0
    assert cli("db", "copy", "--to", copied.db_url).exit_code == 0
    assert copied("history", "--json").json()["rounds"] == source
    exported = tmp_path / "again.bundle.jsonl"
    assert copied("export", "--run", run, "--out", exported).exit_code == 0
    again = [json.loads(line) for line in exported.read_text().splitlines()]
    assert [(e.get("event_hash"), e.get("actor")) for e in again[1:]] == [
        (e.get("event_hash"), e.get("actor")) for e in lines[1:]
    ]
