"""The mechanism vocabulary at record time, `history --mechanism ENTRY`, and `suggest`: what
worked and what failed on similar runs, on the command line and over MCP."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio
import pytest

from campaign import Campaign, record_round, write_json

ROOT = Path(__file__).resolve().parents[2]
MEMORY_BOUND = {"task_duration_us": 40.0, "aiv_mte2_ratio": 0.8, "aiv_vec_ratio": 0.3}
KEEP = [16.0, 36.0, 22.0]
DISCARD = [17.0, 41.5, 24.0]  # I +0.8%, but one case 3.75% slower


def _run(
    cli,
    tmp_path: Path,
    run_id: str,
    rounds: list[tuple[str | None, str, list | None]],
    *,
    op: str = "softmax",
    signals: dict | None = None,
):
    campaign = Campaign(tmp_path / run_id, run_id=run_id)
    assert cli("plan", "--config", campaign.config(op_name=op), "--json").exit_code == 0
    profile = write_json(campaign.root / "base.json", signals or MEMORY_BOUND)
    assert cli("profile", profile, "--run", run_id, "--baseline", "--json").exit_code == 0
    for mechanism, change, medians in rounds:
        extra = {"mechanism": mechanism} if mechanism else {}
        status = "passed" if medians is not None else "failed"
        record_round(cli, campaign, medians, change=change, status=status, **extra)
    return campaign


def _history(cli, tmp_path: Path) -> None:
    _run(
        cli,
        tmp_path,
        "softmax-a-001",
        [
            ("rows per program", "ROWS_PER_PROGRAM=1 -> 4", KEEP),
            ("num_warps", "NUM_WARPS=4 -> 8", None),
        ],
    )
    _run(
        cli,
        tmp_path,
        "softmax-b-001",
        [
            (None, "ROWS_PER_ITER=1 -> 4", KEEP),
            ("cache eviction hint", "EVICTION=default -> evict_first", DISCARD),
            (None, "NUM_WARPS=4 -> 16", None),
        ],
    )


def test_decision_records_the_vocabulary_entry(cli, tmp_path):
    _run(cli, tmp_path, "softmax-a-001", [("rows per program", "ROWS_PER_PROGRAM=1 -> 4", KEEP)])
    _run(cli, tmp_path, "softmax-c-001", [(None, "NUM_WARPS=4 -> 8", DISCARD)])
    decided = cli("show", "--run", "softmax-a-001", "--round", 1, "--json").json()["decision"]
    assert decided["mechanism_entry"] == {
        "entry": "rows-per-program",
        "vocabulary": 2,
        "source": "mechanism",
    }
    decided = cli("show", "--run", "softmax-c-001", "--round", 1, "--json").json()["decision"]
    assert decided["mechanism"] == "NUM_WARPS"
    assert decided["mechanism_entry"]["entry"] == "warps-per-program"
    assert cli("verify").exit_code == 0


def test_history_takes_a_vocabulary_entry(cli, tmp_path):
    _history(cli, tmp_path)
    body = cli("history", "--mechanism", "rows-per-program", "--json").json()
    assert [(r["run_id"], r["round"]) for r in body["rounds"]] == [
        ("softmax-a-001", 1),
        ("softmax-b-001", 1),
    ]
    one = cli("history", "--mechanism", "warps-per-program", "--limit", 1, "--json").json()
    assert [(r["run_id"], r["round"]) for r in one["rounds"]] == [("softmax-a-001", 2)]
    # a name that is no entry still matches the recorded mechanism exactly
    exact = cli("history", "--mechanism", "ROWS_PER_ITER", "--json").json()
    assert [(r["run_id"], r["round"]) for r in exact["rounds"]] == [("softmax-b-001", 1)]


def test_suggest_with_no_other_run_says_so(cli, tmp_path):
    _run(cli, tmp_path, "softmax-a-001", [])
    result = cli("suggest", "--run", "softmax-a-001", "--json")
    assert result.exit_code == 0, result.stderr
    body = result.json()
    assert body["suggestions"] == [] and body["failure_signatures"] == []
    assert body["note"] == "no other run in the ledger: no evidence to rank mechanisms by"
    text = cli("suggest", "--run", "softmax-a-001")
    assert "no other run in the ledger" in text.stdout
    assert "no mechanism to suggest" in text.stdout


def test_suggest_unknown_run_is_exit_2(cli, tmp_path):
    _run(cli, tmp_path, "softmax-a-001", [])
    result = cli("suggest", "--run", "nope-001", "--json")
    assert result.exit_code == 2
    assert result.json()["error"] == "run 'nope-001' is not in the ledger"


def test_suggest_ranks_what_worked_and_lists_what_failed(cli, tmp_path):
    _history(cli, tmp_path)
    _run(cli, tmp_path, "softmax-c-001", [("eviction hint", "EVICT=evict_last", DISCARD)])
    result = cli("suggest", "--run", "softmax-c-001", "--json")
    assert result.exit_code == 0, result.stderr
    body = result.json()
    assert [r["run_id"] for r in body["similar_runs"]] == ["softmax-a-001", "softmax-b-001"]
    first = body["suggestions"][0]
    assert (first["entry"], first["keeps"], first["tries"], first["runs"]) == (
        "rows-per-program",
        2,
        2,
        2,
    )
    assert {(b["run_id"], b["round"], b["decision"]) for b in first["rounds"]} == {
        ("softmax-a-001", 1, "KEEP"),
        ("softmax-b-001", 1, "KEEP"),
    }
    assert first["why"].startswith("kept in 2 of 2 tries across 2 runs")
    assert "same op softmax" in first["why"]
    assert "bottleneck memory-transfer in common" in first["why"]
    cache = next(s for s in body["suggestions"] if s["entry"] == "cache-hints")
    assert cache["tried_here"] == [{"round": 1, "decision": "DISCARD"}]
    assert "this run tried it already: round 1 DISCARD" in cache["why"]
    signatures = {s["entry"]: s for s in body["failure_signatures"]}
    warps = signatures["warps-per-program"]
    assert warps["failed_runs"] == 2
    assert warps["why"] == (
        "failed validation 2 and discarded 0 times in 2 similar runs (softmax-a-001, softmax-b-001)"
    )
    assert all(b["decision"] == "FAIL" and b["reason"].startswith("FAIL") for b in warps["rounds"])
    discarded = signatures["cache-hints"]["rounds"][0]
    assert (discarded["run_id"], discarded["round"], discarded["cases"]) == (
        "softmax-b-001",
        2,
        ["fp32-64x1024"],
    )
    text = cli("suggest", "--run", "softmax-c-001").stdout
    assert "1. rows-per-program" in text and "known failure signatures:" in text

    mcp = anyio.run(_mcp_suggest, cli.db_url, "softmax-c-001")
    assert mcp == body


async def _mcp_suggest(url: str, run: str):
    pytest.importorskip("mcp")
    from mcp.client.session import ClientSession
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(
        command=sys.executable, args=["-m", "cli", "--db", url, "mcp"], cwd=str(ROOT)
    )
    async with stdio_client(params) as streams, ClientSession(*streams) as session:
        await session.initialize()
        result = await session.call_tool("suggest", {"run": run})
        assert not result.is_error, result.content[0].text
        assert json.loads(result.content[0].text) == result.structured_content
        return result.structured_content


def test_suggest_ranks_what_this_run_tried_after_what_it_did_not(cli, tmp_path):
    _history(cli, tmp_path)
    # this run kept rows per program already: the best evidence of all, but known here
    _run(cli, tmp_path, "softmax-c-001", [("rows per program", "ROWS=1 -> 2", KEEP)])
    body = cli("suggest", "--run", "softmax-c-001", "--json").json()
    order = [s["entry"] for s in body["suggestions"]]
    assert order == ["cache-hints", "warps-per-program", "rows-per-program"]
    assert body["suggestions"][2]["tried_here"] == [{"round": 1, "decision": "KEEP"}]
    # tried without a KEEP ranks after tried and kept
    _run(cli, tmp_path, "softmax-d-001", [("rows per program", "ROWS=1 -> 2", KEEP),
                                          ("eviction hint", "EVICT=evict_last", DISCARD)])  # fmt: skip
    body = cli("suggest", "--run", "softmax-d-001", "--json").json()
    assert [s["entry"] for s in body["suggestions"]] == [
        "warps-per-program", "rows-per-program", "cache-hints"]  # fmt: skip


def test_suggest_lists_every_failure_of_a_similar_run(cli, tmp_path):
    """Seven entries failed in the other runs: all seven are failure signatures, those that
    failed in both runs first."""
    failing = ["rows per program", "num_warps", "eviction hint", "block shape", "num_stages"]
    failing.append("persistent grid")
    for name in ("a", "b"):
        _run(cli, tmp_path, f"softmax-{name}-001", [(m, f"{m} changed", None) for m in failing])
    _run(cli, tmp_path, "softmax-c-001", [("split reduction", "SPLIT=1 -> 4", None)])
    _run(cli, tmp_path, "softmax-d-001", [])
    body = cli("suggest", "--run", "softmax-d-001", "--json").json()
    found = [(s["entry"], s["failed_runs"]) for s in body["failure_signatures"]]
    assert sorted(found[:6]) == [
        ("block-shape", 2), ("cache-hints", 2), ("persistent-grid", 2), ("pipelining", 2),
        ("rows-per-program", 2), ("warps-per-program", 2)]  # fmt: skip
    assert found[6:] == [("split-reduction", 1)]
    text = cli("suggest", "--run", "softmax-d-001").stdout
    assert "  split-reduction: failed validation 1 and discarded 0 times in 1 similar run" in text


SCALAR_BOUND = {"task_duration_us": 4000.0, "aiv_scalar_ratio": 0.9}


def test_a_failure_signature_takes_every_round_of_a_similar_run(cli, tmp_path):
    """A matmul run resembles the softmax run by its starting profile only; its second round
    started from a kernel profiled as scalar-bound, unlike anything of the softmax run, and
    was discarded. The run is similar, so that round is among the failure signatures, with
    its own (low) similarity."""
    other = Campaign(tmp_path / "matmul-a-001", run_id="matmul-a-001")
    other.cases = [("fp16-512x512x512", 1.0), ("bf16-256x256x1024", 1.0), ("fp32-64x64x64", 1.0)]
    assert cli("plan", "--config", other.config(op_name="matmul"), "--json").exit_code == 0
    base = write_json(other.root / "base.json", MEMORY_BOUND)
    assert cli("profile", base, "--run", "matmul-a-001", "--baseline", "--json").exit_code == 0
    assert record_round(cli, other, KEEP, change="BLOCK_M=64 -> 128") == "KEEP"
    scalar = write_json(other.root / "r1.json", SCALAR_BOUND)
    done = cli("profile", scalar, "--run", "matmul-a-001", "--round", 1, "--json")
    assert done.exit_code == 0, done.stderr
    assert record_round(cli, other, DISCARD, change="NUM_WARPS=4 -> 8") == "DISCARD"
    _run(cli, tmp_path, "softmax-a-001", [])
    body = cli("suggest", "--run", "softmax-a-001", "--json").json()
    assert [r["run_id"] for r in body["similar_runs"]] == ["matmul-a-001"]
    warps = next(s for s in body["failure_signatures"] if s["entry"] == "warps-per-program")
    (behind,) = warps["rounds"]
    assert (behind["run_id"], behind["round"], behind["decision"]) == ("matmul-a-001", 2, "DISCARD")
    assert behind["similarity"] < 0.25 <= body["similar_runs"][0]["similarity"]


def test_old_ledgers_read_with_entries(tmp_path, monkeypatch):
    """Decisions recorded before the vocabulary hold no entry; readers classify them from
    the rounds row, so `history --mechanism ENTRY` and `suggest` see them too."""
    import shutil

    from conftest import CliRunner

    monkeypatch.delenv("KERNEL_LEDGER_DB", raising=False)
    path = tmp_path / "old.sqlite3"
    shutil.copyfile(ROOT / "tests" / "fixtures" / "ledgers" / "0001.sqlite3", path)
    old = CliRunner(f"sqlite:///{path}")
    assert old("db", "upgrade").exit_code == 0
    decided = old("show", "--run", "softmax-demo-001", "--round", 2, "--json").json()["decision"]
    assert "mechanism_entry" not in decided
    rows = old("history", "--mechanism", "warps-per-program", "--json").json()["rounds"]
    assert [(r["run_id"], r["round"], r["mechanism"]) for r in rows] == [
        ("softmax-demo-001", 3, "num_warps")
    ]
    rows = old("history", "--mechanism", "rows-per-program", "--json").json()["rounds"]
    # round 1 named no mechanism: its change, ROWS_PER_ITER=1 -> 4, names the entry
    assert [(r["round"], r["mechanism"]) for r in rows] == [(1, None), (2, "ROWS_PER_ITER")]
    assert old("verify").exit_code == 0


CORPUS = ROOT / "examples" / "kernel-corpus" / "corpus"


def test_the_h200_corpus_imports_verifies_and_answers(cli):
    """The committed corpus (43 runs captured on H200s, their bundles as exported there)
    imports into a fresh ledger on both backends and verifies (a numpy other than the
    device's may warn, never fail); suggest for a run of it finds the other run of the
    same op the most similar and warns of what was discarded there."""
    bundles = sorted(CORPUS.glob("capture-*/bundles/*.bundle.jsonl"))
    assert len(bundles) == 43
    assert cli("import", *bundles).exit_code == 0
    verified = cli("verify", "--json")
    assert verified.exit_code == 0, verified.stdout
    assert all("numpy" in w for w in verified.json()["warnings"])
    answer = cli("suggest", "--run", "corpus-argmax-002", "--json").json()
    assert answer["similar_runs"][0]["run_id"] == "corpus-argmax-001"
    assert all(not s["tried_here"] for s in answer["suggestions"])  # what it has not tried
    precision = next(s for s in answer["failure_signatures"] if s["entry"] == "precision")
    assert ("corpus-argmax-001", 4, "DISCARD") in {
        (r["run_id"], r["round"], r["decision"]) for r in precision["rounds"]
    }
