"""Eight processes record the same round at once: exactly one wins, the others are told
(exit 2 or 3), nothing is half-written, and no traceback reaches anyone."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from campaign import Campaign

KL = [sys.executable, "-m", "cli"]


def test_eight_writers_one_round(db_url: str, campaign: Campaign, tmp_path: Path):
    env = {**os.environ, "KERNEL_LEDGER_DB": db_url, "KERNEL_LEDGER_BUSY_TIMEOUT": "20"}
    root = Path(__file__).resolve().parents[2]
    plan = subprocess.run(
        [*KL, "plan", "--config", str(campaign.config())],
        env=env,
        cwd=root,
        capture_output=True,
        text=True,
    )
    assert plan.returncode == 0, plan.stderr
    results = []
    paths = []
    for i in range(8):
        doc_path = campaign.root / "rounds" / f"w{i}.json"
        doc = campaign.round_doc([16.0 + i * 0.01, 37.0, 23.0], number=1)
        doc_path.parent.mkdir(parents=True, exist_ok=True)
        doc_path.write_text(json.dumps(doc))
        paths.append(doc_path)
    procs = [
        subprocess.Popen(
            [*KL, "record", "--run", campaign.run_id, "--result", str(p), "--json"],
            env=env,
            cwd=root,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for p in paths
    ]
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        results.append((proc.returncode, out, err))
    codes = sorted(code for code, _, _ in results)
    assert codes.count(0) == 1, results
    assert set(codes) <= {0, 2, 3}, results
    for code, out, err in results:
        assert "Traceback" not in err
        if code:  # --json: the error object alone, on stdout
            assert err == "" and out.count("\n") == 1 and json.loads(out)["exit_code"] == code
    status = subprocess.run(
        [*KL, "history", "--run", campaign.run_id, "--json"],
        env=env,
        cwd=root,
        capture_output=True,
        text=True,
    )
    rounds = json.loads(status.stdout)["rounds"]
    assert [r["round"] for r in rounds] == [1]
    verify = subprocess.run(
        [*KL, "verify", "--json"], env=env, cwd=root, capture_output=True, text=True
    )
    assert verify.returncode == 0, verify.stdout + verify.stderr
