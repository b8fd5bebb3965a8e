"""The agent-style campaign (examples/gpu-campaign/run_campaign.py) end to end on the CPU.

One op, two rounds, under Triton's interpreter with the harness's wall timer (its numbers are
no evidence), through the real command line on a temporary SQLite ledger: the baseline is
measured and planned, round 1 is measured with its reference interleaved and assessed after
every batch until settled, round 2's candidate fails validation and is recorded unmeasured,
the run is analyzed and reported, and the ledger verifies."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from campaign import kernel_ledger

pytest.importorskip("torch")
pytest.importorskip("triton")

REPO = Path(__file__).resolve().parents[1]
DRIVER = REPO / "examples" / "gpu-campaign" / "run_campaign.py"
RUN = "gpu-softmax-001"


def kl(*args: str, db: str) -> dict:
    return kernel_ledger(*args, db=db, cwd=REPO)


def test_two_rounds_measured_assessed_and_recorded_like_an_agent(tmp_path: Path) -> None:
    out = tmp_path / "campaign"
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.run(
        [sys.executable, str(DRIVER), "--smoke", "--op", "softmax", "--rounds", "2",
         "--out", str(out)],
        capture_output=True, text=True, env=env, cwd=REPO, timeout=900,
    )  # fmt: skip
    assert proc.returncode == 0, proc.stdout + proc.stderr
    summary = json.loads((out / "summary.json").read_text())
    assert summary["verify"] == "ok" and summary["smoke"] is True
    info = summary["ops"]["softmax"]
    assert [r["round"] for r in info["rounds"]] == [1, 2] and info["skipped_rounds"] == []
    first, second = info["rounds"]
    db = f"sqlite:///{out / 'ledger.sqlite3'}"

    # round 1: measured with its parent interleaved, assessed after every batch, and
    # recorded as the last assess said, at the repeats it asked for
    assert (first["candidate"], first["parent"]) == ("s1_multirow", "s0_base")
    looks = first["assess"]
    assert looks and [a["repeats_used"] for a in looks] == list(range(10, 10 * len(looks) + 1, 10))
    assert all(not a["settled"] for a in looks[:-1])
    if looks[-1]["settled"]:
        assert first["repeats_measured"] == looks[-1]["repeats_used"] == first["repeats_used"]
        assert first["decision"] == looks[-1]["decision"]
    else:  # the harness measures on to max_repeats, where record decides
        assert first["repeats_measured"] == 100
    stats = kl("show", "--run", RUN, "--round", "1", db=db)["decision"]["statistics"]
    assert stats["sides"] == "reference" and stats["settled"] == first["settled"]
    assert stats["sequential"]["unpaired_best"] == "first-n"
    for role in ("candidate", "reference"):
        files = sorted((out / "softmax" / "round-1" / role).glob("*.json"))
        assert len(files) == 6
        raw = json.loads(files[0].read_text())
        assert (
            raw["session"] == first["session"] and len(raw["samples"]) == first["repeats_measured"]
        )
    recorded = json.loads((out / "softmax" / "round-1.json").read_text())
    assert recorded["session"]["timer"] == "wall"
    assert recorded["reference"]["kernel_sha256"] == recorded["parent_kernel_sha256"]

    # round 2: a candidate that fails validation is recorded, never measured
    assert (second["candidate"], second["decision"]) == ("s2_zero_tail_fill", "FAIL")
    assert "assess" not in second
    manifest = json.loads(
        (out / "softmax" / "validation" / "s2_zero_tail_fill" / "manifest.json").read_text()
    )
    assert manifest["status"] == "failed"

    # the run is concluded and reported, with the device time the looks saved
    status = kl("status", "--run", RUN, db=db)["run"]
    assert status["status"] == "concluded"
    assert (out / "softmax" / "analysis" / "analysis.json").exists()
    html = (out / "softmax" / "report.html").read_text()
    assert f"repeats used {first['repeats_used']} of 100" in html
    assert "device time saved" in html
    config = json.loads((out / "softmax" / "config.json").read_text())
    assert config["session"]["id"].startswith("s-") and config["statistics"]["sequential"]
