"""A real H200 session of run_rounds.py, recorded through the CLI, decides as the session did.

examples/gpu-campaign/harness-sessions/session-3 holds every round's candidate and reference
samples, measured interleaved on the device with the sequential looks; recording them (with
the run's statistics.sequential) must give each round the session's decision, store the
repeats the rule used, replay in verify, and show the device time saved in the report.
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from conftest import CliRunner

ROOT = Path(__file__).resolve().parents[2]
SESSION = ROOT / "examples" / "gpu-campaign" / "harness-sessions" / "session-3"


def test_a_device_session_records_with_its_decisions_repeats_and_time_saved(tmp_path):
    url = f"sqlite:///{tmp_path / 'ledger.sqlite3'}"
    done = subprocess.run(
        [sys.executable, "examples/gpu-campaign/record_sessions.py", str(SESSION), "--db", url],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    rounds = json.loads(done.stdout)["rounds"]
    assert len(rounds) == 14
    assert [r["recorded"] for r in rounds] == [r["session_decision"] for r in rounds]
    summary = json.loads((SESSION / "summary.json").read_text())
    cli = CliRunner(url)
    for op, data in summary["ops"].items():
        run = json.loads((ROOT / "examples" / "gpu-campaign" / op / "config.json").read_text())
        for entry in data["rounds"]:
            shown = cli("show", "--run", run["run_id"], "--round", entry["round"], "--json").json()
            if entry["decision"] != "FAIL":  # decided on the reference, at the session's look
                statistics = shown["decision"]["statistics"]
                assert statistics["sides"] == "reference", (op, entry["round"])
                assert statistics["repeats_used"] == entry["repeats_used"], (op, entry["round"])
    assert cli("verify").exit_code == 0
    page = tmp_path / "report.html"
    assert cli("report", "--run", "gpu-rmsnorm-001", "--html", page).exit_code == 0
    text = page.read_text()
    assert "device time saved" in text and "repeats used 10 of 100" in text
