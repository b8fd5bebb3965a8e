"""`kernel-ledger mcp` driven by the MCP SDK's own client over stdio, a real subprocess, on
SQLite and PostgreSQL: the demo campaign end to end with the CLI's decisions, results equal
to the CLI's --json objects, tool errors for bad input (nothing written), a conflict between
two clients, a restart, and the run resources."""

from __future__ import annotations

import json
import os
import re
import sys
from contextlib import asynccontextmanager
from pathlib import Path

import anyio
import pytest
from sqlalchemy.engine import make_url

pytest.importorskip("mcp")

from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, get_default_environment, stdio_client

from cli.mcpserver import input_schema, tool_description, tools
from ledger.store.eventstore import Store

from conftest import CliRunner, new_pg_database

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "examples" / "softmax-demo"
RUN = "softmax-demo-001"


@asynccontextmanager
async def server(url: str, *allowed: Path, cwd: Path = ROOT, roots=None, client=None):
    """A client of `kernel-ledger mcp` run in `cwd`, with an --allow-path per `allowed`, and
    (with `roots`) a client that declares those folders as its roots; `client`: the name it
    declares (clientInfo)."""
    args = ["-m", "cli", "--db", url, "mcp"]
    for folder in allowed:
        args += ["--allow-path", str(folder)]
    # the SDK starts the server with a few variables only: add the actor the tests pin
    pinned = {k: v for k, v in os.environ.items() if k.startswith("KERNEL_LEDGER_")}
    env = {**get_default_environment(), **pinned}
    params = StdioServerParameters(command=sys.executable, args=args, cwd=str(cwd), env=env)
    options = {}
    if roots is not None:
        import mcp_types as types

        async def list_roots(context):
            return types.ListRootsResult(
                roots=[types.Root(uri=Path(r).resolve().as_uri()) for r in roots]
            )

        options["list_roots_callback"] = list_roots
    if client is not None:
        import mcp_types as types

        options["client_info"] = types.Implementation(name=client, version="1.0")
    async with stdio_client(params) as streams, ClientSession(*streams, **options) as session:
        await session.initialize()
        yield Client(session)


class Client:
    def __init__(self, session: ClientSession) -> None:
        self.session = session

    async def __call__(self, name: str, **arguments):
        """(is_error, structured result) of one tool call."""
        result = await self.session.call_tool(name, {k: _arg(v) for k, v in arguments.items()})
        text = result.content[0].text
        if result.is_error:
            assert text == f"Error: {result.structured_content['error']}"
        else:
            assert json.loads(text) == result.structured_content
        return result.is_error, result.structured_content

    async def ok(self, name: str, **arguments):
        is_error, doc = await self(name, **arguments)
        assert not is_error, doc
        return doc


def _arg(value):
    return str(value) if isinstance(value, Path) else value


def run_async(fn, *args):
    return anyio.run(fn, *args)


@pytest.fixture
def other_url(db_url: str, request, tmp_path: Path) -> str:
    """A second fresh ledger on the same backend as db_url."""
    if db_url.startswith("sqlite"):
        return f"sqlite:///{tmp_path / 'other.sqlite3'}"
    return new_pg_database(
        request.getfixturevalue("pg_server"), request.getfixturevalue("pg_template")
    )


def test_the_tools_are_the_commands_declared_tools():
    assert list(tools()) == [
        "analyze", "assess", "check-merge", "checkout", "compare", "diagnose", "history",
        "knowledge_export", "noise", "plan", "profile", "record", "schema", "show", "status",
        "suggest", "template", "verify",
    ]  # fmt: skip


def test_checkout_tool_requires_the_file_it_writes():
    """The command line prints the kernel when --out is left out; a tool's result cannot
    carry it, so the tool's schema requires `out`, and a call without it is refused."""
    from cli.mcpserver import call_tool

    assert input_schema(tools()["checkout"])["required"] == ["run", "out"]
    assert input_schema(tools()["analyze"])["required"] == ["run"]  # the others as they were
    is_error, doc, _ = call_tool(None, "checkout", {"run": RUN})
    assert is_error and doc["error"] == "missing argument 'out'" and doc["exit_code"] == 2


def test_schemas_name_the_fixed_sets_and_say_what_each_field_is():
    from ledger.core.bottleneck import Bottleneck

    listed = tools()
    diagnose = input_schema(listed["diagnose"])["properties"]["bottleneck"]
    assert diagnose["enum"] == [b.value for b in Bottleneck] and "latency-bound" in diagnose["enum"]
    history = input_schema(listed["history"])["properties"]
    assert history["decision"]["enum"] == ["KEEP", "DISCARD", "NOISE", "FAIL"]
    assert history["bottleneck"]["enum"] == diagnose["enum"]
    record = input_schema(listed["record"])
    assert record == {
        "type": "object",
        "properties": {
            "run": {
                "type": "string",
                "pattern": "^[a-z0-9][a-z0-9._-]{0,127}$",
                "description": "The run to record into.",
            },
            "result": {
                "type": "string",
                "description": "The round result (JSON, schema_version 1; `template round` "
                "returns one): round, parent_kernel_sha256, candidate, hypothesis, change, "
                "verification and measurements. A path on the server's machine, relative to "
                "the folder it runs in.",
            },
            "dry_run": {
                "type": "boolean",
                "description": "Check the round result against the run and say what would be "
                "decided; write nothing.",
                "default": False,
            },
            "strict": {
                "type": "boolean",
                "description": "Refuse the file when a key looks like a typo of a known one "
                "(otherwise a warning).",
                "default": False,
            },
        },
        "required": ["run", "result"],
        "additionalProperties": False,
    }
    compare = input_schema(listed["compare"])["properties"]["rounds"]
    assert (compare["type"], compare["minItems"], compare["maxItems"]) == ("array", 2, 2)
    assert compare["items"] == {"type": "integer", "minimum": 0, "maximum": 2**53 - 1}
    for command in listed.values():
        for name, field in input_schema(command)["properties"].items():
            assert len(field["description"]) >= 8 and "A file path" not in field["description"], (
                command.name,
                name,
            )


def test_demo_campaign_same_decisions_and_objects_as_the_cli(db_url, other_url, tmp_path):
    cli = CliRunner(other_url)
    cli_decisions = []
    assert cli("plan", "--config", DEMO / "config.json").exit_code == 0
    for n in range(1, 6):
        rec = cli("record", "--run", RUN, "--result", DEMO / "rounds" / f"round-{n}.json", "--json")
        cli_decisions.append(rec.json())

    async def campaign():
        async with server(db_url, tmp_path) as call:
            await call.ok("plan", config=DEMO / "config.json")
            decisions = []
            for n in range(1, 6):
                if n == 2:
                    stale = DEMO / "rounds" / "round-2-stale-parent.json"
                    is_error, doc = await call("record", run=RUN, result=stale)
                    assert is_error and doc["error_class"] == "rejected input"
                    assert doc["error"].startswith("stale parent:")
                result = DEMO / "rounds" / f"round-{n}.json"
                decisions.append(await call.ok("record", run=RUN, result=result))
            analyzed = await call.ok("analyze", run=RUN, output_dir=tmp_path / "analysis")
            kernel = DEMO / "kernels" / "softmax_r5_gridstride.py"
            reads = {
                ("status",): await call.ok("status", run=RUN),
                ("history",): await call.ok("history", run=RUN),
                ("show",): await call.ok("show", run=RUN, round=3),
                ("compare",): await call.ok("compare", run=RUN, rounds=[0, 5]),
                ("verify",): await call.ok("verify"),
                ("check-merge",): await call.ok("check-merge", run=RUN, kernel=kernel),
            }
            out = tmp_path / "restored.py"
            restored = await call.ok("checkout", run=RUN, out=out)
            return decisions, analyzed, reads, restored

    decisions, analyzed, reads, restored = run_async(campaign)
    assert decisions == cli_decisions
    assert [d["decision"] for d in decisions] == ["KEEP", "DISCARD", "NOISE", "FAIL", "KEEP"]
    assert analyzed["status"] == "passed" and analyzed["target_met"] is True
    assert restored["sha256"] == decisions[-1]["best_kernel_sha256"]
    # the reads through MCP equal the CLI's --json objects on the same ledger
    same = CliRunner(db_url)
    kernel = DEMO / "kernels" / "softmax_r5_gridstride.py"
    argv = {
        ("status",): ["status", "--run", RUN],
        ("history",): ["history", "--run", RUN],
        ("show",): ["show", "--run", RUN, "--round", "3"],
        ("compare",): ["compare", "--run", RUN, "--round", "0", "--round", "5"],
        ("verify",): ["verify"],
        ("check-merge",): ["check-merge", "--run", RUN, "--kernel", kernel],
    }
    for key, args in argv.items():
        printed = same(*args, "--json")
        assert printed.exit_code == 0, printed.stderr
        assert reads[key] == printed.json(), key


def test_bad_input_is_a_tool_error_and_writes_nothing(db_url, tmp_path):
    cli = CliRunner(db_url)
    assert cli("plan", "--config", DEMO / "config.json").exit_code == 0
    before = cli.event_count()
    bad = [
        ("record", {"run": RUN}, "missing argument 'result'"),
        ("record", {"run": RUN, "result": "x.json", "extra": 1}, "unknown argument 'extra'"),
        ("show", {"run": RUN, "round": "1"}, None),
        ("compare", {"run": RUN, "rounds": [0]}, None),
        ("record", {"run": RUN, "result": str(tmp_path / "none.json")}, None),
        ("record", {"run": "nope", "result": str(DEMO / "rounds" / "round-1.json")}, None),
        ("record", {"run": RUN, "result": str(DEMO / "rounds" / "round-2.json")}, None),
        ("diagnose", {"run": RUN, "bottleneck": "nonsense", "evidence": "x"}, None),
        ("plan", {"config": str(DEMO / "config.json")}, "run 'softmax-demo-001' is already"),
        ("no-such-tool", {}, "no tool 'no-such-tool'"),
    ]

    async def calls():
        async with server(db_url, tmp_path) as call:
            answers = [await call(name, **arguments) for name, arguments, _ in bad]
            alive = await call.ok("status", run=RUN)
        return answers, alive

    answers, alive = run_async(calls)
    for (name, _, expected), (is_error, doc) in zip(bad, answers, strict=True):
        assert is_error, name
        assert doc["status"] == "error" and doc["exit_code"] == 2, doc
        assert doc["error_class"] == "rejected input"
        assert "\n" not in doc["error"] and "Traceback" not in doc["error"]
        if expected:
            assert doc["error"].startswith(expected), doc
    assert alive["run"]["rounds_recorded"] == 0
    assert cli.event_count() == before
    # the same one-line message as the command line
    unknown = cli("record", "--run", "nope", "--result", DEMO / "rounds" / "round-1.json", "--json")
    assert {k: v for k, v in answers[5][1].items() if k != "error_class"} == unknown.json()


def test_store_unavailable_and_check_failed(tmp_path):
    missing = f"sqlite:///{tmp_path / 'absent.sqlite3'}"

    async def calls():
        async with server(missing) as call:
            unavailable = await call("status")
            await call.ok("plan", config=DEMO / "config.json")  # plan creates the ledger
            wrong_kernel = DEMO / "kernels" / "softmax_v0.py"
            failed = await call("check-merge", run=RUN, kernel=wrong_kernel)
        return unavailable, failed

    unavailable, failed = run_async(calls)
    assert unavailable[0] and unavailable[1]["error_class"] == "store unavailable"
    assert unavailable[1]["exit_code"] == 4
    is_error, doc = failed
    assert is_error and doc["exit_code"] == 1 and doc["error_class"] == "check failed"
    assert doc["error"].startswith("check-merge failed: ")
    assert doc["checks"]  # the gate's own document comes with the error


def test_two_clients_one_round_and_a_restart(db_url, tmp_path):
    from campaign import write_json

    cli = CliRunner(db_url)
    assert cli("plan", "--config", DEMO / "config.json").exit_code == 0
    first = json.loads((DEMO / "rounds" / "round-1.json").read_text())
    first["candidate"]["path"] = str(DEMO / "kernels" / "softmax_r1_rows4.py")
    first["verification"]["manifest"] = str(DEMO / "validation" / "round-1" / "manifest.json")
    paths = []
    for i in range(4):  # four different results for round 1
        doc = {**first, "hypothesis": f"{first['hypothesis']} ({i})"}
        paths.append(write_json(tmp_path / f"race-{i}.json", doc))

    async def race():
        answers = []
        async with server(db_url, tmp_path) as a, server(db_url, tmp_path) as b:
            await a.ok("status")
            await b.ok("status")

            async def one(call, path):
                answers.append(await call("record", run=RUN, result=path))

            async with anyio.create_task_group() as group:
                for i, path in enumerate(paths):
                    group.start_soon(one, (a, b)[i % 2], path)
            after = [await a.ok("status", run=RUN), await b.ok("status", run=RUN)]
        return answers, after

    answers, after = run_async(race)
    wins = [doc for is_error, doc in answers if not is_error]
    assert len(wins) == 1 and wins[0]["round"] == 1
    for is_error, doc in answers:
        if is_error:
            assert doc["error_class"] in ("conflict", "rejected input"), doc
    assert [s["run"]["rounds_recorded"] for s in after] == [1, 1]

    async def restarted():
        async with server(db_url) as call:
            status = await call.ok("status", run=RUN)
            second = await call.ok("record", run=RUN, result=DEMO / "rounds" / "round-2.json")
            verified = await call.ok("verify")
        return status, second, verified

    status, second, verified = run_async(restarted)
    assert status["run"]["rounds_recorded"] == 1
    assert second["round"] == 2 and verified["status"] == "ok"


def test_the_client_declared_name_is_recorded_in_the_actor(db_url):
    """Events appended over MCP name the client beside the backend's principal; the same
    ledger's events from the command line name no client."""
    cli = CliRunner(db_url)
    assert cli("plan", "--config", DEMO / "config.json").exit_code == 0

    async def as_client():
        async with server(db_url, client="probe\x07agent") as call:
            await call.ok("record", run=RUN, result=DEMO / "rounds" / "round-1.json")
            return await call.ok("history", run=RUN), await call.ok("show", run=RUN, round=1)

    listed, shown = run_async(as_client)
    if db_url.startswith("sqlite"):
        principal = {"host": "test-host", "os_user": "tester"}
    else:
        principal = {"db_role": make_url(db_url).username}
    mine = {**principal, "client": "probe?agent", "label": "test-suite"}
    assert listed["rounds"][0]["actor"] == shown["actor"] == mine
    store = Store(db_url)
    with store.transaction() as conn:
        actors = [json.loads(e.actor) for e in store.read_stream(conn, RUN)]
    store.close()
    planned = {**principal, "label": "test-suite"}
    assert actors == [planned] * (len(actors) - 4) + [mine] * 4  # plan's, then the round's


def test_run_resources(sqlite_url):
    cli = CliRunner(sqlite_url)
    assert cli("plan", "--config", DEMO / "config.json").exit_code == 0

    async def read():
        async with server(sqlite_url) as call:
            session = call.session
            listed = await session.list_resources()
            templates = await session.list_resource_templates()
            status = await session.read_resource(f"kernel-ledger://runs/{RUN}/status")
            report = await session.read_resource(f"kernel-ledger://runs/{RUN}/report")
        return listed, templates, status, report

    listed, templates, status, report = run_async(read)
    uris = [str(r.uri) for r in listed.resources]
    assert uris[-1] == f"kernel-ledger://runs/{RUN}/status"
    assert uris[:2] == [
        "kernel-ledger://inputs/config/schema",
        "kernel-ledger://inputs/config/template",
    ]
    assert len(uris) == 13  # six kinds of input file, a schema and a template each
    assert len(templates.resource_templates) == 3
    assert json.loads(status.contents[0].text) == cli("status", "--run", RUN, "--json").json()
    assert report.contents[0].text.startswith("# softmax: run softmax-demo-001")


def test_input_schemas_and_templates_as_tools_and_resources(sqlite_url):
    from ledger.inputs.schemas import json_schema, template

    async def read():
        async with server(sqlite_url) as call:
            tool = await call.ok("template", kind="round")
            schema = await call.ok("schema", kind="manifest")
            bad = await call("template", kind="bogus")
            resource = await call.session.read_resource("kernel-ledger://inputs/config/template")
            as_schema = await call.session.read_resource("kernel-ledger://inputs/decide/schema")
        return tool, schema, bad, resource, as_schema

    tool, schema, bad, resource, as_schema = run_async(read)
    assert tool == {"status": "ok", "kind": "round", "template": template("round")}
    assert schema["schema"] == json_schema("manifest")
    assert bad == (
        True,
        {
            "status": "error",
            "error": "argument 'kind' must be one of config, round, manifest, case-matrix, "
            "measurements, decide, not 'bogus'",
            "exit_code": 2,
            "error_class": "rejected input",
        },
    )
    assert resource.contents[0].text == template("config")
    assert json.loads(as_schema.contents[0].text) == json_schema("decide")
    assert input_schema(tools()["template"])["properties"]["kind"]["enum"] == [
        "config",
        "round",
        "manifest",
        "case-matrix",
        "measurements",
        "decide",
    ]


def test_an_output_folder_that_is_the_ledger_or_no_folder_is_refused(sqlite_url, tmp_path):
    """analyze's `output_dir` and knowledge_export's `out` name folders: the ledger, a link
    to it, a FIFO or a file there is refused in one sentence, and nothing is written."""
    cli = CliRunner(sqlite_url)
    assert cli("plan", "--config", DEMO / "config.json").exit_code == 0
    ledger = tmp_path / "ledger.sqlite3"
    link = tmp_path / "link-to-ledger"
    link.symlink_to(ledger)
    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    plain = tmp_path / "plain.txt"
    plain.write_text("x\n")
    before = cli.event_count()
    destroy = "is the ledger or one of its files; writing there would destroy the ledger: "
    analysis = "to write analysis.json, report.md and manifest.json into"
    knowledge = "to write candidates/ and knowledge/ into"
    calls = [
        ("analyze", "output_dir", ledger, f"{ledger} {destroy}choose another path"),
        ("analyze", "output_dir", link, f"{link} {destroy}choose another path"),
        ("analyze", "output_dir", fifo, f"{fifo} is a FIFO, device or socket, not a folder: "
         f"name a folder (new or existing) {analysis}"),
        ("analyze", "output_dir", plain, f"{plain} is a file, not a folder: name a folder "
         f"(new or existing) {analysis}"),
        ("knowledge_export", "out", link, f"{link} {destroy}choose another path"),
        ("knowledge_export", "out", fifo, f"{fifo} is a FIFO, device or socket, not a "
         f"folder: name a folder (new or existing) {knowledge}"),
        ("knowledge_export", "out", plain, f"{plain} is a file, not a folder: name a folder "
         f"(new or existing) {knowledge}"),
    ]  # fmt: skip

    async def calls_over_mcp():
        async with server(sqlite_url, tmp_path) as call:
            answers = []
            for tool, argument, path, _ in calls:
                arguments = {argument: path, **({"run": RUN} if tool == "analyze" else {})}
                answers.append(await call(tool, **arguments))
            return answers

    answers = run_async(calls_over_mcp)
    for (_, argument, _, expected), (is_error, doc) in zip(calls, answers, strict=True):
        assert is_error and doc["exit_code"] == 2, doc
        assert doc["error"] == f"argument '{argument}' {expected}"
    assert cli.event_count() == before  # the SQLite file itself may move its WAL
    left = sorted(
        p.name for p in tmp_path.iterdir() if "-wal" not in p.name and "-shm" not in p.name
    )
    assert plain.read_text() == "x\n"
    assert left == ["fifo", "ledger.sqlite3", "link-to-ledger", "plain.txt"]


def test_an_unknown_argument_names_the_nearest_and_every_known_one():
    """A misspelt argument is named before a required one reads as missing, with the
    nearest known name and every argument the tool takes."""
    from cli.mcpserver import call_tool

    calls = [
        ("record", {"run_id": RUN, "result": "x.json"}, "unknown argument 'run_id' (did you "
         "mean 'run'?); record takes run, result, dry_run, strict"),
        ("record", {"run": RUN, "result": "x.json", "dry-run": True}, "unknown argument "
         "'dry-run' (did you mean 'dry_run'?); record takes run, result, dry_run, strict"),
        ("compare", {"run": RUN, "round": [0, 1]}, "unknown argument 'round' (did you mean "
         "'rounds'?); compare takes run, rounds"),
        ("status", {"verbose": True}, "unknown argument 'verbose'; status takes run"),
    ]  # fmt: skip
    for name, arguments, expected in calls:
        is_error, doc, text = call_tool(None, name, arguments)
        assert is_error and doc["exit_code"] == 2 and doc["error"] == expected, doc
        assert text == f"Error: {expected}"


def test_a_wrong_value_is_shown_as_json_and_a_huge_number_abridged():
    from cli.mcpserver import call_tool

    huge = 10**4000
    calls = [
        ({"round": True}, "argument 'round': true is not a whole number"),
        ({"round": "3"}, "argument 'round': \"3\" is not a whole number"),
        ({"round": 1.5}, "argument 'round': 1.5 is not a whole number"),
        ({"round": huge}, "argument 'round': a number over 80 digits long is not in the "
         "range x<=9007199254740991"),
        ({"round": -huge}, "argument 'round': a negative number over 80 digits long is not "
         "in the range x>=0"),
        ({"round": 2**53}, "argument 'round': 9007199254740992 is not in the range "
         "x<=9007199254740991"),
    ]  # fmt: skip
    for arguments, expected in calls:
        is_error, doc, _ = call_tool(None, "show", {"run": RUN, **arguments})
        assert is_error and doc["error"] == expected, doc
    is_error, doc, _ = call_tool(None, "compare", {"run": RUN, "rounds": "0,4"})
    assert doc["error"] == "argument 'rounds': \"0,4\" is not a list"


def test_descriptions_name_arguments_not_command_line_flags():
    """A tool's caller passes `dry_run`, not `--dry-run`: every description says so."""
    from cli.declare import flag_of
    from cli.mcpserver import tool_description

    listed = tools()
    assert tool_description(listed["plan"]) == (
        "Validate a run configuration and lock the run (baseline, cases, objective); with "
        '`dry_run`, only check it. Returns `status` "planned" (or "checked" with '
        "`dry_run`), `run_id`, `kernel_sha256`, `case_count`, `warnings`, `merge_rule` (the "
        "sentence saying what the target decides: check-merge passes only if the cumulative "
        "improvement reaches it)."
    )
    assert "(name exactly one of `baseline`, `round`, `kernel`, `candidate`)" in (
        tool_description(listed["profile"])
    )
    history = input_schema(listed["history"])["properties"]["kernel_name"]["description"]
    assert history == "With `like_profile`: which kernel's rows."
    for command in listed.values():
        texts = [tool_description(command)]
        texts += [f["description"] for f in input_schema(command)["properties"].values()]
        for name, option in command.options.items():
            assert not any(flag_of(name, option) in text for text in texts), (command.name, name)


def test_an_unreadable_line_is_answered_and_the_server_serves_on(sqlite_url):
    """The SDK drops a line it cannot read as a message; its sender would wait forever.
    The server answers it (its id where the line has one) and goes on serving."""
    import select
    import subprocess

    cli = CliRunner(sqlite_url)
    assert cli("plan", "--config", DEMO / "config.json").exit_code == 0
    before = cli.event_count()
    child = subprocess.Popen(
        [sys.executable, "-m", "cli", "--db", sqlite_url, "mcp"],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT,
        text=True,
    )  # fmt: skip

    def ask(line: str) -> dict:
        child.stdin.write(line + "\n")
        child.stdin.flush()
        ready, _, _ = select.select([child.stdout], [], [], 30)
        assert ready, f"no answer to {line[:80]!r}"
        return json.loads(child.stdout.readline())

    hello = {"protocolVersion": "2025-06-18", "capabilities": {},
             "clientInfo": {"name": "raw", "version": "0"}}  # fmt: skip
    try:
        ask(json.dumps({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": hello}))
        child.stdin.write('{"jsonrpc": "2.0", "method": "notifications/initialized"}\n')
        huge = "9" * 5000
        call = '{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": '
        answers = [
            ask(call + f'"record", "arguments": {{"run": "{RUN}", "result": {huge}}}}}}}'),
            ask("{not json"),
            ask('{"jsonrpc": "2.0", "id": "x", "params": {}}'),
            ask(call.replace('"id": 1', '"id": 2') + '"status", "arguments": {}}}'),
        ]
    finally:
        child.stdin.close()
        child.wait(timeout=30)
        stderr = child.stderr.read()
    unreadable = "unreadable message: "
    assert answers[:3] == [
        {"jsonrpc": "2.0", "id": 1, "error": {"code": -32700, "message": unreadable + "a "
         "number in it is too long to read (at most 4300 digits); nothing was done"}},
        {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": unreadable +
         "Invalid JSON: key must be a string at line 1 column 2; nothing was done"}},
        {"jsonrpc": "2.0", "id": "x", "error": {"code": -32600, "message": unreadable + "it "
         "is JSON but not a JSON-RPC 2.0 request, notification or response; nothing was "
         "done"}},
    ]  # fmt: skip
    assert answers[3]["id"] == 2 and answers[3]["result"]["isError"] is False
    assert "Traceback" not in stderr and cli.event_count() == before


def test_results_name_the_tools_arguments_not_its_flags(sqlite_url, tmp_path):
    """What the ledger says to a tool's caller (warnings, notes, reasons, errors) names the
    tool's arguments where the command line names its flags; a command line it quotes, and
    the command line's own output, stay as they were."""
    cli = CliRunner(sqlite_url)
    assert cli("plan", "--config", DEMO / "config.json").exit_code == 0
    shapes = tmp_path / "op_summary.csv"
    shapes.write_text(
        "Op Name,Task ID,Task Duration(us),Block Dim,Input Shapes\n"
        'k,1,5,8,"1,2"\nk,2,6,8,"3,4"\nk,3,7,8,"3,4"\nk,4,20,16,"1,2"\n'
    )
    note = (
        "'k' ran with 2 different shapes, never merged: attributed '1,2' (2 launch(es), the "
        "most total time); the others are reported each on their own: '3,4' (2 launch(es)); "
        "pass {} to choose"
    )
    kernel = DEMO / "kernels" / "softmax_r5_gridstride.py"

    async def calls():
        async with server(sqlite_url, tmp_path) as call:
            profiled = await call.ok("profile", run=RUN, path=shapes, baseline=True, dry_run=True)
            gate = await call("check-merge", run=RUN, kernel=kernel)
            return profiled, gate

    profiled, (is_error, gate) = run_async(calls)
    assert profiled["notes"] == [note.format("argument 'shape'")]
    assert profiled["attribution"]["notes"] == [note.format("argument 'shape'")]
    concluded = (
        f"Run {RUN} has not concluded; conclude it with kernel-ledger analyze --run {RUN} "
        "once its rounds are done."
    )
    assert is_error and gate["exit_code"] == 1 and concluded in gate["reasons"], gate
    # the command line says it as it always did
    printed = cli("profile", "--run", RUN, "--baseline", shapes, "--dry-run", "--json")
    assert printed.exit_code == 0 and printed.json()["notes"] == [note.format("--shape")]
    text = cli("profile", "--run", RUN, "--baseline", shapes, "--dry-run")
    assert f"\nnote: {note.format('--shape')}\n" in text.stdout


def test_tool_descriptions_speak_of_results_and_help_of_exit_codes():
    """A tool's caller sees a result object, never an exit code or stdout: its description
    and schema say `status` "failed" where `--help` says exit 1."""
    listed = tools()
    shell = re.compile(r"\bexit(?:s|ed)? (?:code|status|\d)|\bstdout\b|\bstderr\b|\bprint", re.I)
    for command in listed.values():
        texts = [tool_description(command)]
        texts += [f["description"] for f in input_schema(command)["properties"].values()]
        for text in texts:
            assert not shell.search(text), (command.name, text)
    assert tool_description(listed["verify"]).startswith(
        "Check hashes, chains, canonical payloads, decisions, projections and checkpoints; a "
        'failure is an error result, `status` "failed", with its `first_failure`. Returns '
    )
    assert tool_description(listed["check-merge"]).startswith(
        'The pre-merge gate: `status` "ok" only if the run concluded passed'
    )
    cli = CliRunner("sqlite:///unused.sqlite3")
    verify = cli("verify", "--help", db=False)
    assert verify.exit_code == 0
    assert "checkpoints; exit 1 on failure." in " ".join(verify.stdout.split())
    gate = " ".join(cli("check-merge", "--help", db=False).stdout.split())
    assert "The pre-merge gate: exit 0 only if the run concluded passed" in gate
    assert "--markdown Print a summary fit for a pull-request comment." in gate
