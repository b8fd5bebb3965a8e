"""Real input files for `plan` and `record`: kernels, Run Manifest v1 validation evidence with
its case matrix, a run configuration and round results, written as a user would write them."""

from __future__ import annotations

import hashlib
import json
import random
from pathlib import Path
from typing import Any

STAMP = "2026-11-02T09:00:00Z"


def _sha(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _write(path: Path, value: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, indent=1))
    return path


class FileCampaign:
    """One run's files under `root`; `next_round` writes the round after the last recorded."""

    def __init__(self, root: Path, run_id: str, *, cases: int = 8, max_rounds: int = 2000):
        self.root = root
        self.run_id = run_id
        self.case_ids = [f"case-{i:02d}-fp16-{128 << (i % 5)}x{257 + i}" for i in range(cases)]
        self.max_rounds = max_rounds
        self.rng = random.Random(run_id)
        self.best = [round(self.rng.uniform(10.0, 90.0), 2) for _ in self.case_ids]
        self.best_kernel = self._kernel("v0.py", "BLOCK = 128\n")
        self.rounds_written = 0

    def _kernel(self, name: str, body: str) -> Path:
        path = self.root / "kernels" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(f"# {self.run_id} {name}\n{body}")
        return path

    def _manifest(self, name: str, kernel: Path, parent: str) -> Path:
        folder = self.root / "validation" / name
        _write(
            folder / "case-matrix.json",
            {
                "kernel": {"sha256": _sha(kernel)},
                "cases": [{"id": c, "status": "passed"} for c in self.case_ids],
            },
        )
        return _write(
            folder / "manifest.json",
            {
                "schema_version": 1,
                "run_id": f"{self.run_id}-{name}",
                "parent_run_id": parent,
                "run_type": "correctness",
                "workspace_snapshot": {"git_commit": "4f2a9c1"},
                "environment": {"soc": "Ascend910B2"},
                "model": {},
                "topology": {},
                "command": ["pytest", "tests/test_kernel.py"],
                "environment_variables": {},
                "artifacts": [
                    {
                        "name": "kernel",
                        "kind": "source",
                        "uri": str(kernel),
                        "sha256": _sha(kernel),
                    },
                    {"name": "case-matrix", "kind": "json", "uri": "case-matrix.json"},
                ],
                "status": "passed",
                "created_at": STAMP,
                "updated_at": STAMP,
            },
        )

    def config(self) -> Path:
        return _write(
            self.root / "config.json",
            {
                "schema_version": 1,
                "run_id": self.run_id,
                "parent_run_id": "triton-softmax-000",
                "op_name": "softmax",
                "kernel": {"path": str(self.best_kernel)},
                "validation_manifest": str(
                    self._manifest("baseline", self.best_kernel, "triton-softmax-000")
                ),
                "target": {"soc": "Ascend910B2", "cann": "8.0.RC3", "triton_ascend": "3.2.0"},
                "cases": [{"id": c, "weight": 1.0} for c in self.case_ids],
                "baseline": [
                    {"case_id": c, "median_us": m, "repeats": 50}
                    for c, m in zip(self.case_ids, self.best, strict=True)
                ],
                "objective": {
                    "target_relative_improvement": 0.5,
                    "min_relative_improvement": 0.01,
                    "noise_floor": 0.005,
                    "max_case_regression": 0.02,
                },
                "max_rounds": self.max_rounds,
                "max_consecutive_failures": self.max_rounds,
                "measurement_policy": {"warmup": 10, "repeats": 50, "timer": "msprof op"},
            },
        )

    def next_round(self) -> tuple[Path, list[float]]:
        """The next round's result file and the medians it reports."""
        number = self.rounds_written + 1
        candidate = self._kernel(f"r{number}.py", f"BLOCK = {number}\n")
        manifest = self._manifest(f"round-{number}", candidate, self.run_id)
        medians = [round(b * (1 + self.rng.gauss(-0.01, 0.02)), 3) for b in self.best]
        path = _write(
            self.root / "rounds" / f"round-{number}.json",
            {
                "schema_version": 1,
                "round": number,
                "parent_kernel_sha256": _sha(self.best_kernel),
                "candidate": {"path": str(candidate)},
                "hypothesis": f"Block size {number} keeps the row in the unified buffer",
                "change": f"BLOCK={number - 1} -> {number}",
                "verification": {"manifest": str(manifest)},
                "measurements": [
                    {"case_id": c, "median_us": m, "repeats": 50}
                    for c, m in zip(self.case_ids, medians, strict=True)
                ],
            },
        )
        return path, medians

    def recorded(self, decision: str, medians: list[float]) -> None:
        """Tell the campaign what the ledger decided, so the next parent is right."""
        self.rounds_written += 1
        if decision == "KEEP":
            self.best_kernel = self.root / "kernels" / f"r{self.rounds_written}.py"
            self.best = medians
