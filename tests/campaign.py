"""Build realistic campaign files (kernels, manifests, case matrices, configs, round
results) in a folder, for tests. Every file is written exactly as a user would write it."""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

STAMP = "2026-11-02T09:00:00Z"
OBJECTIVE = {
    "target_relative_improvement": 0.10,
    "min_relative_improvement": 0.01,
    "noise_floor": 0.005,
    "max_case_regression": 0.02,
}


def kernel_ledger(*args: str, db: str, cwd: Path) -> dict:
    """`python -m cli ARGS --db DB --json` in a process of its own (as the example drivers
    call it), run from `cwd`; exit 0 is required and its JSON returned."""
    import subprocess
    import sys

    proc = subprocess.run([sys.executable, "-m", "cli", *args, "--db", db, "--json"],
                          capture_output=True, text=True, cwd=cwd)  # fmt: skip
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def write_json(path: Path, value: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, indent=1))
    return path


@dataclass
class Campaign:
    root: Path
    run_id: str = "softmax-t-001"
    parent_run_id: str | None = "triton-softmax-000"
    cases: list[tuple[str, float]] = field(
        default_factory=lambda: [("fp16-128x257", 1.0), ("fp32-64x1024", 2.0), ("bf16-8x8193", 1.0)]
    )
    baseline: list[float] = field(default_factory=lambda: [18.2, 40.0, 25.0])
    objective: dict[str, float] = field(default_factory=lambda: dict(OBJECTIVE))
    max_rounds: int = 10
    max_consecutive_failures: int = 3
    best_kernel: Path | None = None
    rounds_written: int = 0

    @property
    def case_ids(self) -> list[str]:
        return [c for c, _ in self.cases]

    def kernel(self, name: str, body: str | None = None) -> Path:
        path = self.root / "kernels" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(body if body is not None else f"# kernel {name}\nBLOCK = 128\n")
        return path

    def manifest(
        self,
        name: str,
        kernel: Path,
        *,
        status: str = "passed",
        parent: str | None = None,
        case_ids: list[str] | None = None,
        matrix_sha: str | None = None,
        **overrides: Any,
    ) -> Path:
        folder = self.root / "validation" / name
        write_json(
            folder / "case-matrix.json",
            {
                "kernel": {"sha256": matrix_sha or sha256(kernel)},
                "cases": [{"id": c, "status": status} for c in (case_ids or self.case_ids)],
            },
        )
        doc = {
            "schema_version": 1,
            "run_id": f"{self.run_id}-{name}",
            "parent_run_id": parent if parent is not None else self.run_id,
            "run_type": "correctness",
            "workspace_snapshot": {},
            "environment": {},
            "model": {},
            "topology": {},
            "command": ["pytest"],
            "environment_variables": {},
            "artifacts": [
                {"name": "kernel", "kind": "source", "uri": str(kernel), "sha256": sha256(kernel)},
                {"name": "case-matrix", "kind": "json", "uri": "case-matrix.json"},
            ],
            "status": status,
            "created_at": STAMP,
            "updated_at": STAMP,
        }
        doc.update(overrides)
        return write_json(folder / "manifest.json", doc)

    def config_doc(self, **overrides: Any) -> dict[str, Any]:
        kernel = self.best_kernel or self.kernel("v0.py")
        self.best_kernel = kernel
        doc: dict[str, Any] = {
            "schema_version": 1,
            "run_id": self.run_id,
            "parent_run_id": self.parent_run_id,
            "op_name": "softmax",
            "kernel": {"path": str(kernel)},
            "validation_manifest": str(
                self.manifest("baseline", kernel, parent=self.parent_run_id or "x")
            ),
            "target": {"soc": "Ascend910B2"},
            "cases": [{"id": c, "weight": w} for c, w in self.cases],
            "baseline": [
                {"case_id": c, "median_us": m, "repeats": 50}
                for (c, _), m in zip(self.cases, self.baseline, strict=True)
            ],
            "objective": dict(self.objective),
            "max_rounds": self.max_rounds,
            "max_consecutive_failures": self.max_consecutive_failures,
        }
        doc.update(overrides)
        return doc

    def config(self, name: str = "config.json", **overrides: Any) -> Path:
        return write_json(self.root / name, self.config_doc(**overrides))

    def round_doc(
        self,
        medians: list[float] | None,
        *,
        number: int | None = None,
        status: str = "passed",
        parent_sha: str | None = None,
        body: str | None = None,
        **overrides: Any,
    ) -> dict[str, Any]:
        number = number if number is not None else self.rounds_written + 1
        assert self.best_kernel is not None, "write the config first"
        candidate = self.kernel(f"r{number}.py", body or f"# round {number}\nBLOCK = {number}\n")
        manifest = self.manifest(f"round-{number}", candidate, status=status)
        doc: dict[str, Any] = {
            "schema_version": 1,
            "round": number,
            "parent_kernel_sha256": parent_sha or sha256(self.best_kernel),
            "candidate": {"path": str(candidate)},
            "hypothesis": f"Hypothesis {number}",
            "change": f"BLOCK={number - 1} -> {number}",
            "verification": {"manifest": str(manifest)},
            "measurements": [
                {"case_id": c, "median_us": m, "repeats": 50}
                for c, m in zip(self.case_ids, medians or [], strict=False)
            ],
        }
        doc.update(overrides)
        return doc

    def round(self, medians: list[float] | None, **kwargs: Any) -> Path:
        doc = self.round_doc(medians, **kwargs)
        return write_json(self.root / "rounds" / f"round-{doc['round']}.json", doc)

    def accepted(self, decision: str, round_number: int) -> None:
        """Tell the builder a round was recorded, so the next parent is right."""
        self.rounds_written = round_number
        if decision == "KEEP":
            self.best_kernel = self.root / "kernels" / f"r{round_number}.py"


def record_round(cli, c: Campaign, medians: list[float] | None, **kwargs: Any) -> str:
    """Record the next round of `c` through the CLI runner; returns its decision."""
    result = cli("record", "--run", c.run_id, "--result", c.round(medians, **kwargs), "--json")
    assert result.exit_code == 0, result.stderr
    decision = result.json()["decision"]
    c.accepted(decision, c.rounds_written + 1)
    return decision


def late_profile(service: Any, run_id: str, signals: dict[str, float]) -> None:
    """Append a profile of the starting kernel to a run as a ledger written before `profile`
    refused concluded runs holds it (after the conclusion): through the service's append,
    so the projections follow as they did then."""
    from ledger.core.controller import attribution_settings, profile_event
    from ledger.core.events import RunPlanned

    view, stream = service.state(run_id)
    plan = stream[0].event()
    assert isinstance(plan, RunPlanned)
    event = profile_event(
        attribution_settings(plan),
        subject="baseline",
        round_no=0,
        kernel_sha256=plan.kernel.sha256,
        origin="file",
        fmt="signals-json",
        signals=signals,
    )
    service.append(run_id, view, [event], [])
