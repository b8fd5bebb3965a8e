"""Run the JSON-file controller itself (the reference copy in ../shared) on campaigns laid out
as an agent's workspace, to get the run folders it really writes.

A workspace holds the inputs under paths relative to its root (kernels/, validation/,
configs/, rounds/, raw/) and the run folders under optimization/<run>/; the controller runs
from the workspace root with relative paths, as its command recipes show. Standard library
only, so tests/fixtures/legacy/make_controller_runs.py can use it outside the test suite.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from campaign import OBJECTIVE, sha256

REPO = Path(__file__).resolve().parents[1]


def _reference() -> Path:
    """The reference controller's workspace: $KERNEL_LEDGER_REFERENCE, else
    shared/reference/vllm-ascend-workspace in the nearest folder above the repository
    (../shared beside a checkout, or further up where the checkout is nested)."""
    named = os.environ.get("KERNEL_LEDGER_REFERENCE")
    if named:
        return Path(named)
    for folder in REPO.parents:
        candidate = folder / "shared" / "reference" / "vllm-ascend-workspace"
        if candidate.is_dir():
            return candidate
    return REPO.parent / "shared" / "reference" / "vllm-ascend-workspace"


REFERENCE = _reference()
SCRIPT = ".agents/skills/ascend-triton-kernel-optimization/scripts/triton_optimization.py"
STAMP = "2026-11-20T09:00:00Z"


def reference_available() -> bool:
    return (REFERENCE / SCRIPT).is_file()


def write_json(path: Path, value: Any) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(value, indent=2) + "\n")
    return path


@dataclass
class Workspace:
    """A workspace root with the controller's scripts copied in (as `cp -r .agents`)."""

    root: Path
    log: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def create(cls, root: Path) -> Workspace:
        root.mkdir(parents=True, exist_ok=True)
        if not (root / ".agents").exists():
            shutil.copytree(REFERENCE / ".agents", root / ".agents")
        return cls(root)

    def controller(self, *args: str) -> dict[str, Any]:
        """Run the controller from the workspace root; its stdout JSON, with the command."""
        argv = [sys.executable, "-B", SCRIPT, *args]
        done = subprocess.run(
            argv, cwd=self.root, capture_output=True, text=True, check=False, timeout=60
        )
        try:
            out = json.loads(done.stdout)
        except json.JSONDecodeError:
            message = f"controller printed no JSON: {done.stdout!r} {done.stderr!r}"
            raise AssertionError(message) from None
        self.log.append(
            {"command": ["python3", "-B", SCRIPT, *args], "exit": done.returncode, "stdout": out}
        )
        return out

    def kernel(self, name: str, body: str) -> str:
        path = self.root / "kernels" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(body)
        return f"kernels/{name}"

    def manifest(
        self, name: str, kernel: str, case_ids: list[str], *, run_id: str, parent: str, status: str
    ) -> str:
        """A correctness Run Manifest v1 and its case matrix; URIs relative to its folder."""
        folder = self.root / "validation" / name
        digest = sha256(self.root / kernel)
        write_json(
            folder / "case-matrix.json",
            {
                "kernel": {"sha256": digest},
                "cases": [{"id": c, "status": status} for c in case_ids],
            },
        )
        write_json(
            folder / "manifest.json",
            {
                "schema_version": 1,
                "run_id": run_id,
                "parent_run_id": parent,
                "run_type": "correctness",
                "workspace_snapshot": {},
                "environment": {},
                "model": {},
                "topology": {},
                "command": ["pytest", "-q"],
                "environment_variables": {},
                "artifacts": [
                    {
                        "name": "kernel",
                        "kind": "triton-kernel",
                        "uri": os.path.relpath(self.root / kernel, folder),
                        "sha256": digest,
                    },
                    {
                        "name": "case-matrix",
                        "kind": "case-matrix",
                        "uri": "case-matrix.json",
                        "sha256": sha256(folder / "case-matrix.json"),
                    },
                ],
                "status": status,
                "created_at": STAMP,
                "updated_at": STAMP,
            },
        )
        return f"validation/{name}/manifest.json"


@dataclass
class Round:
    """One round of a scenario: medians per case (None: the validation failed), the cases
    whose `source` names a raw file (written unless listed in `absent`; a benchmark log, not
    samples, where listed in `logs`), and whether its rows carry widely spread raw
    `samples_us` (the controller ignores them)."""

    medians: list[float] | None
    sources: list[int] = field(default_factory=list)
    absent: list[int] = field(default_factory=list)
    samples: bool = False
    logs: list[int] = field(default_factory=list)


@dataclass
class Scenario:
    name: str
    cases: list[tuple[str, float]]
    baseline: list[float]
    rounds: list[Round]
    objective: dict[str, float] = field(default_factory=lambda: dict(OBJECTIVE))
    max_rounds: int = 8
    max_consecutive_failures: int = 3
    analyze_after: list[int] = field(default_factory=list)  # analyze after this many rounds
    baseline_sources: list[int] = field(default_factory=list)
    baseline_absent: list[int] = field(default_factory=list)
    baseline_samples: bool = False
    baseline_logs: list[int] = field(default_factory=list)

    @property
    def run_id(self) -> str:
        return f"{self.name}-001"

    @property
    def folder(self) -> str:
        return f"optimization/{self.name}"


SPREAD = (0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.1, 1.25, 1.4, 1.6, 1.9)  # median: the middle


def _row(
    ws: Workspace,
    case: str,
    median: float,
    raw: str | None,
    absent: bool,
    spread: bool,
    log: bool = False,
) -> dict:
    row: dict[str, Any] = {"case_id": case, "median_us": median, "repeats": 50}
    factors = SPREAD if spread else (0.99, 1.0, 1.01)
    samples = [median if f == 1.0 else round(median * f, 4) for f in factors]
    if spread:
        row["samples_us"] = samples
    if raw is not None:
        row["source"] = raw
        if log:
            (ws.root / raw).parent.mkdir(parents=True, exist_ok=True)
            (ws.root / raw).write_text(f"do_bench {case}: {median} us over 50 repeats\n")
        elif not absent:
            write_json(ws.root / raw, {"unit": "us", "samples": samples})
    return row


def run_scenario(
    ws: Workspace, sc: Scenario, *, start: int = 1, stop: int | None = None
) -> list[dict[str, Any]]:
    """Plan, record and analyze the scenario with the controller; its stdout per step. With
    `start` and `stop`, only its rounds from `start` to `stop` (the plan with round 1), so a
    campaign can go on after its folder was imported."""
    ids = [c for c, _ in sc.cases]
    stop = len(sc.rounds) if stop is None else stop
    if start > 1:
        return _record_rounds(ws, sc, ids, range(start, stop + 1))
    parent = f"{sc.name}-workflow"
    first = ws.kernel(f"{sc.name}/v0.py", f"# {sc.name} starting kernel\nBLOCK = 64\n")
    config = {
        "schema_version": 1,
        "run_id": sc.run_id,
        "parent_run_id": parent,
        "op_name": "softmax",
        "kernel": {"path": first},
        "validation_manifest": ws.manifest(
            f"{sc.name}/baseline",
            first,
            ids,
            run_id=f"{sc.name}-v0",
            parent=parent,
            status="passed",
        ),
        "target": {"soc": "Ascend910B2"},
        "cases": [{"id": c, "weight": w} for c, w in sc.cases],
        "baseline": [
            _row(
                ws,
                c,
                m,
                f"raw/{sc.name}/baseline-{c}.json" if i in sc.baseline_sources else None,
                i in sc.baseline_absent,
                sc.baseline_samples,
                i in sc.baseline_logs,
            )
            for i, (c, m) in enumerate(zip(ids, sc.baseline, strict=True))
        ],
        "objective": dict(sc.objective),
        "max_rounds": sc.max_rounds,
        "max_consecutive_failures": sc.max_consecutive_failures,
    }
    write_json(ws.root / "configs" / f"{sc.name}.json", config)
    steps = [
        ws.controller("plan", "--output-dir", sc.folder, "--config", f"configs/{sc.name}.json")
    ]
    return steps + _record_rounds(ws, sc, ids, range(1, stop + 1))


def _record_rounds(
    ws: Workspace, sc: Scenario, ids: list[str], numbers: range
) -> list[dict[str, Any]]:
    steps = []
    for n in numbers:
        rnd = sc.rounds[n - 1]
        if n - 1 in sc.analyze_after:
            steps.append(ws.controller("analyze", "--output-dir", sc.folder))
        if n > sc.max_rounds:
            break
        state = json.loads((ws.root / sc.folder / "state.json").read_text())
        cand = ws.kernel(f"{sc.name}/r{n}.py", f"# {sc.name} round {n}\nBLOCK = {64 + n}\n")
        status = "failed" if rnd.medians is None else "passed"
        doc = {
            "schema_version": 1,
            "round": n,
            "parent_kernel_sha256": state["current_best_sha256"],
            "candidate": {"path": cand},
            "hypothesis": f"Hypothesis {n}",
            "change": f"BLOCK={63 + n} -> {64 + n}",
            "verification": {
                "manifest": ws.manifest(
                    f"{sc.name}/round-{n}",
                    cand,
                    ids,
                    run_id=f"{sc.name}-r{n}",
                    parent=sc.run_id,
                    status=status,
                )
            },
            "measurements": [
                _row(
                    ws,
                    c,
                    m,
                    f"raw/{sc.name}/r{n}-{c}.json" if i in rnd.sources else None,
                    i in rnd.absent,
                    rnd.samples,
                    i in rnd.logs,
                )
                for i, (c, m) in enumerate(zip(ids, rnd.medians or [], strict=False))
            ],
        }
        write_json(ws.root / "rounds" / sc.name / f"round-{n}.json", doc)
        steps.append(
            ws.controller(
                "record", "--output-dir", sc.folder, "--result", f"rounds/{sc.name}/round-{n}.json"
            )
        )
    if numbers.stop - 1 == len(sc.rounds) and len(sc.rounds) in sc.analyze_after:
        steps.append(ws.controller("analyze", "--output-dir", sc.folder))
    return steps


def random_scenario(seed: int) -> Scenario:
    """A campaign drawn from `seed`: cases, weights, timings, failures, absent raw files,
    and analyze at random points (sometimes with rounds recorded after it)."""
    rng = random.Random(seed)
    count = rng.randint(1, 4)
    cases = [
        (f"case{i}-{rng.choice(['fp16', 'fp32', 'bf16'])}", rng.choice([1.0, 2.0, 0.5]))
        for i in range(count)
    ]
    baseline = [round(rng.uniform(5.0, 80.0), 3) for _ in cases]
    max_rounds = rng.randint(2, 7)
    best = list(baseline)
    rounds = []
    for _ in range(rng.randint(0, max_rounds)):
        if rng.random() < 0.2:
            rounds.append(Round(None))
            continue
        kind = rng.random()
        spread = 0.002 if kind < 0.2 else (0.06 if kind < 0.6 else 0.12)
        shift = -spread / 2 if kind >= 0.2 else 0.0
        medians = [round(b * (1 + shift + rng.uniform(-spread, spread)), 4) for b in best]
        sources = [i for i in range(count) if rng.random() < 0.3]
        absent = [i for i in sources if rng.random() < 0.5]
        rounds.append(Round(medians, sources, absent, samples=rng.random() < 0.3))
        best = medians if rng.random() < 0.5 else best  # the controller decides; drift a bit
    analyze_after = []
    if rng.random() < 0.6:
        analyze_after.append(rng.randint(0, len(rounds)))
    return Scenario(
        name=f"gen-{seed}",
        cases=cases,
        baseline=baseline,
        rounds=rounds,
        objective={
            "target_relative_improvement": rng.choice([0.03, 0.08, 0.15]),
            "min_relative_improvement": rng.choice([0.0, 0.01, 0.02]),
            "noise_floor": rng.choice([0.0, 0.005, 0.01]),
            "max_case_regression": rng.choice([0.0, 0.02, 0.05]),
        },
        max_rounds=max_rounds,
        max_consecutive_failures=rng.randint(1, 3),
        analyze_after=analyze_after,
        baseline_sources=[i for i in range(count) if rng.random() < 0.3],
        baseline_absent=[i for i in range(count) if rng.random() < 0.2],
        baseline_samples=rng.random() < 0.4,
    )
