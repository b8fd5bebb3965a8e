"""A confined MCP server (issue 31, point 2): every path a tool names (in or out) must
resolve inside the folder the server runs in, a root its client declares, or an
--allow-path folder; outside, the call is a tool error and nothing is read or written. An
oversized argument is refused without being echoed. A real `kernel-ledger mcp` over stdio,
driven by the MCP SDK's client, on SQLite and PostgreSQL."""

from __future__ import annotations

import pytest

pytest.importorskip("mcp")

from test_mcp import run_async, server

from campaign import Campaign
from conftest import CliRunner

PRECIOUS = b"root:x:0:0:root:/root:/bin/bash\n"


@pytest.fixture
def workspace(db_url, tmp_path):
    """A planned run in tmp/ws (the served folder) and a file outside it, in tmp/outside."""
    ws, outside = tmp_path / "ws", tmp_path / "outside"
    ws.mkdir()
    outside.mkdir()
    c = Campaign(ws / "campaign")
    cli = CliRunner(db_url)
    assert cli("plan", "--config", c.config()).exit_code == 0
    (outside / "passwd").write_bytes(PRECIOUS)
    return cli, c, ws, outside


def _refused(answer, argument: str) -> str:
    is_error, doc = answer
    assert is_error and doc["exit_code"] == 2, doc
    assert doc["error"].startswith(f"argument '{argument}': ")
    assert "is outside the folders this server may use" in doc["error"]
    return doc["error"]


def test_paths_outside_the_served_folder_are_refused(db_url, workspace):
    cli, c, ws, outside = workspace
    events = cli.event_count()
    link = ws / "innocent.py"
    link.symlink_to(outside / "passwd")
    foreign_config = outside / "config.json"
    foreign_config.write_bytes(c.config().read_bytes())

    async def calls():
        async with server(db_url, cwd=ws) as call:
            return [
                await call("checkout", run=c.run_id, out=outside / "passwd", force=True),
                await call("checkout", run=c.run_id, out=str(link), force=True),
                await call("checkout", run=c.run_id, out="../outside/passwd", force=True),
                await call("plan", config=foreign_config),
                await call("analyze", run=c.run_id, output_dir=outside / "analysis"),
                await call("verify", checkpoint=outside / "passwd"),
                await call("check-merge", run=c.run_id, kernel=outside / "passwd"),
                await call("checkout", run=c.run_id, out=ws / "restored.py"),
            ]

    answers = run_async(calls)
    for answer, argument in zip(
        answers, ["out", "out", "out", "config", "output_dir", "checkpoint", "kernel"], strict=False
    ):
        _refused(answer, argument)
    assert (outside / "passwd").read_bytes() == PRECIOUS
    assert not (outside / "analysis").exists()
    assert cli.event_count() == events  # nothing planned from outside, nothing concluded
    is_error, doc = answers[-1]
    assert not is_error, doc
    assert (ws / "restored.py").read_bytes() == (c.root / "kernels" / "v0.py").read_bytes()


def test_allow_path_and_client_roots_widen_it(db_url, workspace, tmp_path):
    _, c, ws, outside = workspace
    other = tmp_path / "declared"
    other.mkdir()

    async def calls():
        async with server(db_url, outside, cwd=ws) as call:
            allowed = await call("checkout", run=c.run_id, out=outside / "k.py")
            still = await call("checkout", run=c.run_id, out=other / "k.py")
        async with server(db_url, cwd=ws, roots=[other]) as call:
            rooted = await call("checkout", run=c.run_id, out=other / "k.py")
            beyond = await call("checkout", run=c.run_id, out=outside / "k2.py")
        return allowed, still, rooted, beyond

    allowed, still, rooted, beyond = run_async(calls)
    assert not allowed[0] and (outside / "k.py").is_file()
    _refused(still, "out")
    assert not rooted[0] and (other / "k.py").is_file()
    _refused(beyond, "out")
    assert not (outside / "k2.py").exists()


def test_an_oversized_argument_is_refused_without_being_echoed(db_url, workspace):
    _, c, ws, _ = workspace
    huge = "x" * 10_000_000

    async def calls():
        async with server(db_url, cwd=ws) as call:
            return [
                await call("show", run=huge),
                await call("history", search=huge),
                await call("status", **{huge[:100_000]: 1}),
                await call(huge[:100_000]),
                await call("status", run=c.run_id),
            ]

    *refused, alive = run_async(calls)
    for is_error, doc in refused:
        assert is_error and doc["exit_code"] == 2, doc["error"][:200]
        assert len(doc["error"]) < 400, len(doc["error"])
    assert "over the 65536-character limit" in refused[0][1]["error"]
    assert not alive[0]
