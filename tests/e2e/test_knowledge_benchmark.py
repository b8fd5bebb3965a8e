"""benchmarks/knowledge.py on a small ledger whose answers are known: suggest finds the kept
mechanism from the op's other runs where a global KEEP count does not, and the failure
signatures list what failed in two similar runs."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from test_suggest import DISCARD, KEEP, _run

from conftest import CliRunner

ROOT = Path(__file__).resolve().parents[2]
SCALAR_BOUND = {"task_duration_us": 40.0, "aiv_scalar_ratio": 0.45, "aiv_vec_ratio": 0.2}


def test_leave_one_run_out_figures(sqlite_url, tmp_path, monkeypatch):
    monkeypatch.delenv("KERNEL_LEDGER_DB", raising=False)
    cli = CliRunner(sqlite_url)  # one backend: the script reads one ledger
    for name in ("a", "b"):
        _run(
            cli,
            tmp_path,
            f"softmax-{name}-001",
            [
                ("rows per program", "ROWS=1 -> 4", KEEP),
                ("num_warps", "NUM_WARPS=4 -> 8", None),
            ],
        )
    for name in ("a", "b", "c"):
        _run(
            cli,
            tmp_path,
            f"matmul-{name}-001",
            [
                ("block shape", "BLOCK_M=64 -> 128", KEEP),
                ("num_stages", "STAGES=2 -> 3", DISCARD),
            ],
            op="matmul",
            signals=SCALAR_BOUND,
        )
    out = tmp_path / "figures.json"
    done = subprocess.run(
        [sys.executable, "benchmarks/knowledge.py", "--db", sqlite_url, "--json", str(out)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    figures = json.loads(out.read_text())
    assert (figures["runs"], figures["keep_rounds"]) == (5, 5)
    cases = {c["run_id"]: c for c in figures["cases"]}
    # the softmax runs: the prior ranks block-shape first (3 KEEPs); suggest and the
    # workspace's query find rows-per-program from the other softmax run
    assert cases["softmax-a-001"]["prior"][0] == "block-shape"
    assert cases["softmax-a-001"]["suggest"][0] == "rows-per-program"
    assert cases["softmax-a-001"]["query"][0] == "rows-per-program"
    assert figures["top3"]["suggest"] == 1.0
    assert figures["top3"]["knowledge_query"] == 1.0
    # the prior's top three over softmax-a's history: block-shape, rows-per-program: a hit
    assert figures["top3"]["prior_keep_count"] == 1.0
    # every kept entry was kept in another run, and is in the prior's top three
    assert figures["kept_in_no_other_run"] == []
    assert figures["top3_by_prior"]["prior_names_it"]["rounds"] == 5
    assert figures["top3_by_prior"]["prior_does_not"] == {
        "rounds": 0, "suggest": None, "knowledge_query": None}  # fmt: skip
    signatures = figures["failure_signatures"]
    # each matmul run: pipelining discarded in its two other matmul runs
    assert signatures["expected"] == 3
    assert signatures["listed"] == 3 and signatures["missed"] == []
    assert "| every KEEP round | 100% | 100% | 100% | 100% |" in done.stdout
