"""`knowledge export`: candidates valid under the workspace's Knowledge Candidate v1 schema
(copied into tests/fixtures/knowledge), accepted by the workspace's own capture and
validation scripts, and found by its knowledge_query.py once promoted."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from jsonschema import Draft202012Validator
from test_suggest import DISCARD, KEEP, _history, _run

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "knowledge"
REFERENCE = Path("/work/shared/reference/vllm-ascend-workspace/.agents")


def _decision_hash(cli, run: str) -> str:
    """The event hash of the run's first RoundDecided, as the store holds it."""
    from ledger.store.eventstore import Store

    store = Store(cli.db_url)
    with store.transaction() as conn:
        stream = store.read_stream(conn, run, types=("RoundDecided",))
    store.close()
    return stream[0].event_hash


def _schema(name: str) -> Draft202012Validator:
    return Draft202012Validator(json.loads((FIXTURES / name).read_text()))


def _export(cli, out: Path) -> dict:
    result = cli("knowledge", "export", "--out", out, "--json")
    assert result.exit_code == 0, result.stderr
    return result.json()


def _candidates(out: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted((out / "candidates").glob("*.json"))]


def test_export_is_valid_under_the_workspace_schemas(cli, tmp_path):
    _history(cli, tmp_path)
    _run(cli, tmp_path, "softmax-c-001", [("eviction hint", "EVICT=evict_last", DISCARD)])
    out = tmp_path / "knowledge-out"
    body = _export(cli, out)
    assert body["kinds"] == {"backend-constraints": 1, "known-failure-signatures": 2}
    found = _candidates(out)
    assert len(found) == body["candidates"] == 3
    candidate_schema = _schema("knowledge-candidate-v1.schema.json")
    for candidate in found:
        assert list(candidate_schema.iter_errors(candidate)) == []
    document_schema = _schema("knowledge-v1.schema.json")
    documents = sorted((out / "knowledge").glob("*.yaml"))
    assert len(documents) == 6
    for path in documents:
        assert list(document_schema.iter_errors(json.loads(path.read_text()))) == []

    works = next(c for c in found if c["kind"] == "backend-constraints")
    assert works["scope"]["mechanism_entry"] == "rows-per-program"
    assert works["source"]["run_ids"] == ["softmax-a-001", "softmax-b-001"]
    assert works["occurrence_count"] == 2
    assert "op softmax" in works["fingerprints"]
    assert "bottleneck memory-transfer" in works["fingerprints"]
    assert works["verification"]["status"] == "passed"
    # evidence: each round of the group, with its RoundDecided's event hash
    shown = cli("show", "--run", "softmax-a-001", "--round", 1, "--json").json()
    assert shown["decision"]["decision"] == "KEEP"
    uris = {e["uri"]: e for e in works["evidence"]}
    assert set(uris) == {"run:softmax-a-001/round-1", "run:softmax-b-001/round-1"}
    assert uris["run:softmax-a-001/round-1"]["sha256"] == _decision_hash(cli, "softmax-a-001")

    fails = {c["scope"]["mechanism_entry"]: c for c in found if c["kind"] != "backend-constraints"}
    assert set(fails) == {"warps-per-program", "cache-hints"}
    assert fails["warps-per-program"]["summary"].endswith("2 FAIL and 0 DISCARD rounds")
    assert "softmax-b-001 round 2 DISCARD on fp32-64x1024" in fails["cache-hints"]["symptom"]

    # the same ledger exports the same bytes
    again = tmp_path / "again"
    _export(cli, again)
    for path in (out / "candidates").iterdir():
        assert (again / "candidates" / path.name).read_bytes() == path.read_bytes()


def test_export_with_no_rounds_writes_empty_documents(cli, tmp_path):
    _run(cli, tmp_path, "softmax-a-001", [])
    out = tmp_path / "empty"
    body = _export(cli, out)
    assert body["candidates"] == 0 and body["kinds"] == {}
    assert not (out / "candidates").exists()
    assert len(list((out / "knowledge").glob("*.yaml"))) == 6
    text = cli("knowledge", "export", "--out", tmp_path / "empty2")
    assert text.stdout.startswith("no candidates: no run has a kept or repeatedly failed")


def test_export_refuses_to_overwrite_other_content(cli, tmp_path):
    _run(cli, tmp_path, "softmax-a-001", [("rows per program", "ROWS=1 -> 4", KEEP)])
    out = tmp_path / "out"
    _export(cli, out)
    target = next((out / "candidates").iterdir())
    target.write_text("{}")
    result = cli("knowledge", "export", "--out", out, "--json")
    assert result.exit_code == 2
    assert "exists with other content; pass --force" in result.json()["error"]
    assert cli("knowledge", "export", "--out", out, "--force", "--json").exit_code == 0
    assert json.loads(target.read_text())["kind"] == "backend-constraints"


def _script(name: str, *args) -> dict:
    done = subprocess.run(
        [sys.executable, str(REFERENCE / "scripts" / name), *map(str, args)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return json.loads(done.stdout)


@pytest.mark.skipif(not REFERENCE.is_dir(), reason="the workspace's reference copy is absent")
def test_workspace_scripts_accept_and_find_the_export(cli, tmp_path):
    _history(cli, tmp_path)
    out = tmp_path / "knowledge-out"
    _export(cli, out)
    assert _script("knowledge_validate.py", "--knowledge-dir", out / "knowledge")["status"] == (
        "passed"
    )
    queue = tmp_path / "queue"
    for candidate in _candidates(out):
        path = out / "candidates" / f"{candidate['candidate_id']}.json"
        captured = _script(
            "knowledge_capture.py",
            "--input",
            path,
            "--candidate-dir",
            queue,
            "--knowledge-dir",
            REFERENCE / "knowledge",  # the workspace's own (empty) store, only read
        )
        assert (captured["status"], captured["action"]) == ("passed", "created")
        assert json.loads(Path(captured["path"]).read_text()) == candidate
    found = _script(
        "knowledge_query.py",
        "--query",
        "softmax Ascend910B2 memory-transfer",
        "--knowledge-dir",
        out / "knowledge",
        "--kind",
        "backend-constraints",
    )
    works = next(c for c in _candidates(out) if c["kind"] == "backend-constraints")
    assert [m["id"] for m in found["matches"]] == [works["candidate_id"]]
    failures = _script(
        "knowledge_query.py",
        "--query",
        "num_warps warps-per-program softmax",
        "--knowledge-dir",
        out / "knowledge",
        "--kind",
        "known-failure-signatures",
    )
    assert [m["id"] for m in failures["matches"]][:1] == [
        c["candidate_id"] for c in _candidates(out) if "warps" in c["candidate_id"]
    ]


def test_the_export_is_an_mcp_tool_confined_to_its_folder(cli, tmp_path):
    """`knowledge_export` over MCP writes what the command line writes, only inside the
    folder the server serves; a folder outside it is a tool error and nothing is written."""
    from cli.declare import Env
    from cli.mcpserver import Confinement, call_tool

    _history(cli, tmp_path)
    by_cli = tmp_path / "by-cli"
    body = _export(cli, by_cli)
    served = tmp_path / "served"
    served.mkdir()
    env, confined = Env(cli.db_url, as_json=True), Confinement(served)
    is_error, doc, text = call_tool(
        env, "knowledge_export", {"out": str(served / "out")}, confinement=confined
    )
    assert not is_error, text
    assert (doc["candidates"], doc["kinds"]) == (body["candidates"], body["kinds"])
    assert _candidates(served / "out") == _candidates(by_cli)
    outside = tmp_path / "outside"
    is_error, doc, text = call_tool(
        env, "knowledge_export", {"out": str(outside)}, confinement=confined
    )
    assert is_error and doc["exit_code"] == 2 and text.startswith("Error: argument 'out'"), text
    assert not outside.exists()


def test_a_refused_export_writes_nothing(cli, tmp_path):
    """Every target is checked before the first file is written: with DIR/knowledge a file,
    the export is refused and no candidate is left behind."""
    _history(cli, tmp_path)
    out = tmp_path / "half"
    out.mkdir()
    (out / "knowledge").write_text("not a folder\n")
    result = cli("knowledge", "export", "--out", out)
    assert result.exit_code == 2 and "Not a directory" in result.stderr, result.stderr
    assert sorted(p.name for p in out.iterdir()) == ["knowledge"]
