"""triton-optimization, the drop-in for the JSON-file controller, side by side with the
controller itself: two workspaces laid out as the agents' (inputs under runs/, run folders
under .vaws-local/), one with the skill's controller, one with the three-line wrapper in its
place; the same commands from each workspace root; after every step the same exit code,
the same stdout JSON (or, for a rejection, both failed and naming the same condition) and
the same files in the run folder, timestamps and the workspace's own path aside.

Needs the controller (../shared/reference/vllm-ascend-workspace); skips without it. The
drop-in's own behaviour without the controller is tested in test_triton_optimization_ledger.
"""

from __future__ import annotations

import json
import random
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from controller_kit import REPO, RUNS, SCRIPT, SKILL, WRAPPER, Inputs, Workspace, reference

SOURCE = reference()
pytestmark = pytest.mark.skipif(SOURCE is None, reason="the reference controller is absent")

OBJECTIVE = {
    "target_relative_improvement": 0.1,
    "min_relative_improvement": 0.01,
    "noise_floor": 0.005,
    "max_case_regression": 0.02,
}
CASES = [{"id": "fp16-128x257", "weight": 1.0}, {"id": "fp32-64x1024", "weight": 2}]
IDS = [c["id"] for c in CASES]


def rows(*medians: float) -> list[dict]:
    return [
        {"case_id": c, "median_us": m, "repeats": 50, "warmup": 5}
        for c, m in zip(IDS, medians, strict=True)
    ]


class Pair:
    """The controller's workspace and the drop-in's, driven step by step."""

    def __init__(
        self,
        tmp_path: Path,
        run_id: str = "softmax-optimization-001",
        *,
        in_process: bool = True,
        switched: bool = True,
    ) -> None:
        assert SOURCE is not None
        self.controller = Workspace.make(tmp_path / "controller", SOURCE, dropin=False)
        self.dropin = Workspace.make(tmp_path / "dropin", SOURCE, dropin=switched)
        self.dropin.in_process = in_process and switched
        self.inputs = Inputs([self.controller.root, self.dropin.root], run_id)
        self.folder = RUNS / run_id

    def use_run(self, run_id: str) -> Inputs:
        """Further steps drive another run of the same workspaces (and the same ledger)."""
        self.inputs = Inputs([self.controller.root, self.dropin.root], run_id)
        self.folder = RUNS / run_id
        return self.inputs

    def either(self, *args: str) -> tuple[int, dict]:
        """Run one command in both workspaces, not knowing whether it should succeed: the
        same exit code, the same JSON when it succeeds, and the same folder either way."""
        a, b = self.controller.run(*args), self.dropin.run(*args)
        assert a.exit_code == b.exit_code, (a, b)
        if a.exit_code == 0:
            shown_a = self.controller.normalize(json.dumps(a.output, sort_keys=True))
            assert shown_a == self.dropin.normalize(json.dumps(b.output, sort_keys=True))
        else:
            assert a.output["status"] == b.output["status"] == "failed"
        assert self.controller.folder_files(self.folder) == self.dropin.folder_files(self.folder)
        return a.exit_code, a.output

    def step(self, *args: str, fails: tuple[str, ...] | None = None) -> dict:
        """Run one command in both workspaces and compare; `fails` are words the rejection
        must name in both (a regex each, any case)."""
        a, b = self.controller.run(*args), self.dropin.run(*args)
        assert (a.exit_code, b.exit_code) == ((1, 1) if fails is not None else (0, 0)), (a, b)
        if fails is None:
            shown_a = self.controller.normalize(json.dumps(a.output, sort_keys=True))
            shown_b = self.dropin.normalize(json.dumps(b.output, sort_keys=True))
            assert shown_a == shown_b
        else:
            assert a.output["status"] == b.output["status"] == "failed"
            assert set(a.output) == set(b.output) == {"status", "error"}
            for word in fails:
                for side in (a, b):
                    assert re.search(word, side.output["error"], re.IGNORECASE), (word, a, b)
        assert self.controller.folder_files(self.folder) == self.dropin.folder_files(self.folder)
        return b.output

    def plan(self, config: Path, **kwargs) -> dict:
        return self.step(
            "plan", "--output-dir", str(self.folder), "--config", str(config), **kwargs
        )

    def record(self, result: Path, **kwargs) -> dict:
        return self.step(
            "record", "--output-dir", str(self.folder), "--result", str(result), **kwargs
        )

    def analyze(self, **kwargs) -> dict:
        return self.step("analyze", "--output-dir", str(self.folder), **kwargs)

    def switch(self) -> None:
        """The second workspace replaces its controller with the wrapper, mid-campaign."""
        (self.dropin.root / SCRIPT).write_text(WRAPPER, encoding="utf-8")
        self.dropin.dropin = self.dropin.in_process = True

    def switch_back(self) -> None:
        """The second workspace puts the controller's own script back, mid-campaign."""
        shutil.copyfile(SOURCE / SCRIPT, self.dropin.root / SCRIPT)
        self.dropin.dropin = self.dropin.in_process = False

    def remove_folder(self) -> None:
        for side in (self.controller, self.dropin):
            shutil.rmtree(side.root / self.folder)

    def ledger(self, *args: str) -> subprocess.CompletedProcess:
        """kernel-ledger on the drop-in's ledger, beside the run folders."""
        db = f"sqlite:///{self.dropin.root / RUNS / 'ledger.sqlite3'}"
        return subprocess.run(
            [sys.executable, "-m", "cli", "--db", db, *args],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=120,
        )


def start(
    pair: Pair, *, max_rounds: int = 5, failures: int = 3, objective: dict = OBJECTIVE, **extra
) -> dict:
    """Kernel v0 planned with its passed validation; returns the kernels written."""
    i = pair.inputs
    kernels = {name: i.kernel(name) for name in ("v0", "v1", "v2", "v3", "v4")}
    manifest = i.manifest("v0", kernels["v0"], IDS, parent="triton-softmax-001")
    config = i.config(
        kernels["v0"],
        manifest,
        parent_run_id="triton-softmax-001",
        op_name="softmax",
        target={"soc": "Ascend910B2", "cann": "8.0.RC3"},
        cases=CASES,
        baseline=[
            {"case_id": IDS[0], "median_us": 18.0, "repeats": 50},
            {"case_id": IDS[1], "median_us": 40.5, "repeats": 50, "source": "raw/none.json"},
        ],
        objective=objective,
        max_rounds=max_rounds,
        max_consecutive_failures=failures,
        **extra,
    )
    out = pair.plan(config)
    assert out["status"] == "planned" and out["case_count"] == 2
    return kernels


def validated(pair: Pair, name: str, kernel: Path, **kwargs) -> Path:
    return pair.inputs.manifest(name, kernel, IDS, **kwargs)


def test_rounds_then_analyze_agree_step_by_step(tmp_path: Path) -> None:
    """Both scripts as separate processes, exactly as an agent runs them."""
    pair = Pair(tmp_path, in_process=False)
    k = start(pair)
    i = pair.inputs
    # DISCARD: faster on the weighted mean, one case regresses past the limit
    r1 = i.round(1, k["v0"], k["v1"], validated(pair, "r1", k["v1"]), rows(19.0, 36.0))
    assert pair.record(r1)["decision"] == "DISCARD"
    # NOISE: within the noise floor; profiler signals kept as given
    r2 = i.round(
        2,
        k["v0"],
        k["v2"],
        validated(pair, "r2", k["v2"]),
        rows(18.0, 40.4),
        profiler_signals={"aiv_scalar_ratio": 0.12, "aiv_vec_ratio": 0.5},
    )
    assert pair.record(r2)["decision"] == "NOISE"
    # FAIL: the candidate's validation failed; it carries no measurements
    r3 = i.round(3, k["v0"], k["v3"], validated(pair, "r3", k["v3"], status="failed"), None)
    assert pair.record(r3)["decision"] == "FAIL"
    # KEEP, meeting the target
    r4 = i.round(4, k["v0"], k["v4"], validated(pair, "r4", k["v4"]), rows(15.0, 35.0))
    out = pair.record(r4)
    assert out["decision"] == "KEEP" and out["target_met"] and out["remaining_rounds"] == 1
    assert pair.analyze()["status"] == "passed"
    verified = pair.ledger("verify", "--json")
    assert verified.returncode == 0, verified.stdout + verified.stderr


def test_rejections_agree(tmp_path: Path) -> None:
    pair = Pair(tmp_path)
    i = pair.inputs
    # nothing planned yet: a record or analyze finds no run folder files
    missing = Path("runs/none.json")
    pair.record(missing, fails=(r"optimization config", r"optimization-config\.json"))
    pair.analyze(fails=(r"optimization config",))
    k = start(pair, max_rounds=3, failures=3)
    # a second plan into the same folder
    pair.plan(i.dir / "optimization-config.json", fails=(r"not empty",))
    keep = i.round(1, k["v0"], k["v1"], validated(pair, "r1", k["v1"]), rows(16.0, 36.0))
    assert pair.record(keep)["decision"] == "KEEP"
    # stale parent: round 2 still names the starting kernel
    stale = i.round(
        2, k["v0"], k["v2"], validated(pair, "r2", k["v2"]), rows(15.0, 35.0), name="stale"
    )
    pair.record(stale, fails=(r"parent_kernel_sha256", r"current best"))
    # out of order
    skipped = i.round(
        3, k["v1"], k["v2"], validated(pair, "r2", k["v2"]), rows(15.0, 35.0), name="skip"
    )
    pair.record(skipped, fails=(r"round",))
    # the result file, the candidate, the verification manifest are missing
    pair.record(i.dir / "rounds" / "absent.json", fails=(r"round result", r"absent\.json"))
    gone = i.round(
        2, k["v1"], i.dir / "kernels" / "gone.py", validated(pair, "r2", k["v2"]), None, name="g"
    )
    pair.record(gone, fails=(r"candidate", r"gone\.py"))
    no_manifest = i.round(2, k["v1"], k["v2"], i.dir / "nowhere.json", None, name="nm")
    pair.record(no_manifest, fails=(r"manifest", r"nowhere\.json"))
    # bad validation manifests: wrong run type, foreign parent, another kernel, other cases
    for name, kwargs, words in (
        ("debug", {"run_type": "debug"}, (r"correctness",)),
        ("foreign", {"parent": "someone-else"}, (r"parent_run_id",)),
        ("other-kernel", {"kernel_sha": "0" * 64}, (r"kernel",)),
    ):
        manifest = validated(pair, name, k["v2"], **kwargs)
        bad = i.round(2, k["v1"], k["v2"], manifest, rows(15.0, 35.0), name=name)
        pair.record(bad, fails=words)
    fewer = i.manifest("fewer", k["v2"], IDS[:1])
    bad = i.round(2, k["v1"], k["v2"], fewer, rows(15.0, 35.0), name="fewer")
    pair.record(bad, fails=(r"case",))
    # measurements: a planned case missing, an unplanned case
    partial = i.round(2, k["v1"], k["v2"], validated(pair, "r2", k["v2"]), rows(15.0, 35.0)[:1])
    pair.record(partial, fails=(r"measurements", IDS[1]))
    extra = [*rows(15.0, 35.0), {"case_id": "bf16", "median_us": 1.0, "repeats": 5}]
    unplanned = i.round(
        2, k["v1"], k["v2"], validated(pair, "r2", k["v2"]), extra, name="unplanned"
    )
    pair.record(unplanned, fails=(r"measurements\[2\]", r"planned"))
    # the rounds that fit: two more, then the budget is spent
    for n in (2, 3):
        ok = i.round(n, k["v1"], k[f"v{n}"], validated(pair, f"ok{n}", k[f"v{n}"]), rows(16, 36))
        assert pair.record(ok)["decision"] == "NOISE"
    over = i.round(4, k["v1"], k["v4"], validated(pair, "r4", k["v4"]), rows(15.0, 30.0))
    pair.record(over, fails=(r"round budget exhausted",))
    assert pair.analyze()["status"] == "passed"


def test_plan_rejections_agree(tmp_path: Path) -> None:
    pair = Pair(tmp_path)
    i = pair.inputs
    v0 = i.kernel("v0")
    good = validated(pair, "v0", v0, parent="p")
    base = {
        "parent_run_id": "p",
        "op_name": "softmax",
        "target": {"soc": "Ascend910B2"},
        "cases": CASES,
        "baseline": rows(18.0, 40.0),
        "objective": OBJECTIVE,
        "max_rounds": 3,
        "max_consecutive_failures": 2,
    }
    pair.plan(i.dir / "absent.json", fails=(r"config", r"absent\.json"))
    pair.plan(i.config(i.dir / "kernels/none.py", good, **base), fails=(r"kernel", r"none\.py"))
    pair.plan(i.config(v0, i.dir / "none.json", **base), fails=(r"none\.json",))
    failed = validated(pair, "failed", v0, parent="p", status="failed")
    pair.plan(i.config(v0, failed, **base), fails=(r"pass",))
    other = validated(pair, "other", v0, parent="p", kernel_sha="1" * 64)
    pair.plan(i.config(v0, other, **base), fails=(r"kernel",))
    pair.plan(i.config(v0, other, **base), fails=(r"not empty",))  # round-artifacts/ was left
    pair.remove_folder()
    short = {**base, "baseline": rows(18.0, 40.0)[:1]}
    pair.plan(i.config(v0, good, **short), fails=(r"baseline", IDS[1]))
    pair.plan(i.config(v0, good, **{**base, "max_rounds": 0}), fails=(r"max_rounds",))
    pair.plan(i.config(v0, good, **{**base, "cases": []}), fails=(r"cases",))
    out = pair.plan(i.config(v0, good, **base))
    assert out["kernel_sha256"] == i.sha(v0)


def test_record_after_analyze_agrees_and_reopens_the_run(tmp_path: Path) -> None:
    pair = Pair(tmp_path)
    k = start(pair, max_rounds=4, failures=2)
    i = pair.inputs
    r1 = i.round(1, k["v0"], k["v1"], validated(pair, "r1", k["v1"]), rows(18.0, 40.5))
    assert pair.record(r1)["decision"] == "NOISE"
    assert pair.analyze()["status"] == "inconclusive"
    # the controller takes another round after analyze; so does the drop-in
    r2 = i.round(2, k["v0"], k["v2"], validated(pair, "r2", k["v2"]), rows(14.0, 30.0))
    out = pair.record(r2)
    assert out["decision"] == "KEEP" and out["target_met"]
    # analyze again: analysis.json and report.md are rewritten, the manifest refuses
    pair.analyze(fails=(r"analysis",))
    history = json.loads(pair.ledger("history", "--json").stdout)
    assert [(r["round"], r["flags"]) for r in history["rounds"]] == [(1, []), (2, ["reopened"])]
    shown = json.loads(
        pair.ledger("show", "--run", "softmax-optimization-001", "--round", "2", "--json").stdout
    )
    assert shown["reopened"]["conclusion"] == "inconclusive"
    status = json.loads(pair.ledger("status", "--run", "softmax-optimization-001", "--json").stdout)
    assert status["run"]["status"] == "active" and status["run"]["conclusion"] is None
    verified = pair.ledger("verify", "--json")
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert json.loads(verified.stdout)["events_checked"] > 0


def test_diagnosis_and_failed_conclusion_agree(tmp_path: Path) -> None:
    pair = Pair(tmp_path)
    k = start(pair, max_rounds=5, failures=2)
    i = pair.inputs
    for n in (1, 2):
        failed = validated(pair, f"r{n}", k[f"v{n}"], status="failed")
        out = pair.record(i.round(n, k["v0"], k[f"v{n}"], failed, None))
        assert out["decision"] == "FAIL"
    assert out["needs_diagnosis"] is True
    assert pair.analyze()["status"] == "failed"


def generated_campaign(pair: Pair, seed: int) -> list[str]:
    """A campaign drawn from `seed`, driven through both workspaces step by step; the next
    round is prepared from the controller's own state.json, as an agent prepares it. Returns
    what each step did."""
    rng = random.Random(seed)
    i = pair.use_run(f"gen-{seed:03d}")
    ids = [f"case-{k}" for k in range(rng.randint(1, 3))]
    weights = [rng.choice([1, 1.0, 2, 0.5, 3.0]) for _ in ids]

    def median() -> float | int:
        return rng.choice([round(rng.uniform(5, 60), 2), float(rng.randint(5, 60)), 40])

    v0 = i.kernel("v0")
    config = i.config(
        v0,
        i.manifest("v0", v0, ids),
        op_name=rng.choice(["softmax", "rmsnorm"]),
        target={"soc": "Ascend910B2"},
        cases=[{"id": c, "weight": w} for c, w in zip(ids, weights, strict=True)],
        baseline=[{"case_id": c, "median_us": median(), "repeats": 20} for c in ids],
        objective={
            "target_relative_improvement": rng.choice([0.05, 0.1, 0.2]),
            "min_relative_improvement": rng.choice([0.01, 0.02]),
            "noise_floor": 0.005,
            "max_case_regression": rng.choice([0.0, 0.02, 0.05]),
        },
        max_rounds=rng.randint(2, 5),
        max_consecutive_failures=rng.randint(1, 3),
    )
    folder = str(pair.folder)
    assert pair.either("plan", "--output-dir", folder, "--config", str(config))[0] == 0
    done = ["plan"]
    for attempt in range(1, 9):
        state = json.loads((pair.controller.root / pair.folder / "state.json").read_text())
        number, parent = state["next_round"], state["current_best_sha256"]
        roll = rng.random()
        if roll < 0.1:
            number += rng.choice([-1, 1, 2])
        elif roll < 0.2:
            parent = i.sha(v0) if parent != i.sha(v0) else "f" * 64
        candidate = i.kernel(f"k{attempt}")
        passed = rng.random() > 0.15
        manifest = i.manifest(
            f"k{attempt}", candidate, ids, status="passed" if passed else "failed"
        )
        best = state["current_best_measurements"]
        spread = rng.choice([(0.85, 1.06), (0.85, 1.06), (0.998, 1.002)])  # or a NOISE round
        measured = [
            {
                "case_id": c,
                "median_us": round(best[c]["median_us"] * rng.uniform(*spread), 3),
                "repeats": 20,
            }
            for c in ids
        ]
        result = i.round(
            max(number, 1), v0, candidate, manifest, measured if passed else None,
            name=f"attempt-{attempt}", parent_sha=parent,
        )  # fmt: skip
        code, out = pair.either("record", "--output-dir", folder, "--result", str(result))
        done.append(out["decision"] if code == 0 else "refused")
        if rng.random() < 0.15:
            code, out = pair.either("analyze", "--output-dir", folder)
            done.append(out["status"] if code == 0 else "analyze refused")
    code, out = pair.either("analyze", "--output-dir", folder)
    done.append(out["status"] if code == 0 else "analyze refused")
    return done


def test_generated_campaigns_agree_step_by_step(tmp_path: Path) -> None:
    """Generated campaigns, several runs in one workspace and one ledger: every step agrees,
    whatever it does, and the ledger verifies."""
    pair = Pair(tmp_path)
    seen: set[str] = set()
    for seed in range(8):
        seen.update(generated_campaign(pair, seed))
    # the campaigns went through every kind of step
    assert {"KEEP", "DISCARD", "NOISE", "FAIL", "refused"} <= seen, seen
    assert seen & {"passed", "failed", "inconclusive"} and "analyze refused" in seen, seen
    verified = pair.ledger("verify", "--json")
    assert verified.returncode == 0, verified.stdout + verified.stderr
    assert json.loads(verified.stdout)["runs_checked"] == 8


@pytest.mark.parametrize("after_analyze", [False, True])
def test_a_workspace_switches_controllers_between_two_rounds(tmp_path, after_analyze) -> None:
    """Rounds begun with the controller go on with the drop-in: the folder is imported into
    the ledger on the first step, and every later step agrees with the controller's."""
    pair = Pair(tmp_path, switched=False)
    k = start(pair, max_rounds=4)
    i = pair.inputs
    r1 = i.round(1, k["v0"], k["v1"], validated(pair, "r1", k["v1"]), rows(16.5, 38.0))
    assert pair.record(r1)["decision"] == "KEEP"
    if after_analyze:
        assert pair.analyze()["status"] == "inconclusive"
    pair.switch()
    r2 = i.round(2, k["v1"], k["v2"], validated(pair, "r2", k["v2"]), rows(14.0, 33.0))
    assert pair.record(r2)["decision"] == "KEEP"
    if after_analyze:
        pair.analyze(fails=(r"analysis",))
    else:
        assert pair.analyze()["status"] == "passed"
    verified = pair.ledger("verify", "--json")
    assert verified.returncode == 0, verified.stdout + verified.stderr


@pytest.mark.parametrize("analyzed", [False, True], ids=["running", "analyzed-by-the-controller"])
def test_a_workspace_switches_back_and_forth(tmp_path, analyzed) -> None:
    """The drop-in records two rounds, the controller's own script two more (and with
    `analyzed`, concludes the run), the drop-in the last: each step agrees with the
    controller's, and the drop-in's next step brings the controller's rounds into the
    ledger, after the events it recorded itself."""
    pair = Pair(tmp_path)
    k = start(pair, max_rounds=5)
    i = pair.inputs
    medians = [(16.5, 38.0), (17.0, 39.0), (14.0, 33.0), (13.5, 33.5), (12.0, 30.0)]
    decisions = []
    kept = "v0"
    for n, (fast, slow) in enumerate(medians, start=1):
        if n == 3:
            pair.switch_back()
        if n == 5:
            if analyzed:
                assert pair.analyze()["status"] == "passed"
            before = json.loads(pair.ledger("history", "--json").stdout)["rounds"]
            assert [h["round"] for h in before] == [1, 2]  # the controller's not yet
            pair.switch()
        name = f"v{min(n, 4)}"
        manifest = validated(pair, f"r{n}", k[name])
        result = i.round(n, k[kept], k[name], manifest, rows(fast, slow))
        decision = pair.record(result)["decision"]
        decisions.append(decision)
        if decision == "KEEP":
            kept = name
    assert decisions == ["KEEP", "DISCARD", "KEEP", "NOISE", "KEEP"]
    history = json.loads(pair.ledger("history", "--json").stdout)["rounds"]
    # oldest first, the rounds of one second in their order
    assert [(h["round"], h["decision"]) for h in history] == list(enumerate(decisions, 1))
    assert (["reopened"] in [h["flags"] for h in history]) is analyzed
    if analyzed:
        pair.analyze(fails=(r"analysis",))  # the controller analyzes a run once
    else:
        assert pair.analyze()["status"] == "passed"
    verified = pair.ledger("verify", "--json")
    assert verified.returncode == 0, verified.stdout + verified.stderr


def test_a_run_the_controller_analyzed_goes_on_with_the_drop_in(tmp_path) -> None:
    """The drop-in records two rounds, the controller's own script analyzes the run, the
    drop-in records a third: it brings the conclusion into the ledger first, so the round
    reopens the run there as in the folder."""
    pair = Pair(tmp_path)
    k = start(pair, max_rounds=4)
    i = pair.inputs
    r1 = i.round(1, k["v0"], k["v1"], validated(pair, "r1", k["v1"]), rows(16.5, 38.0))
    assert pair.record(r1)["decision"] == "KEEP"
    r2 = i.round(2, k["v1"], k["v2"], validated(pair, "r2", k["v2"]), rows(14.0, 33.0))
    assert pair.record(r2)["decision"] == "KEEP"
    pair.switch_back()
    assert pair.analyze()["status"] == "passed"
    pair.switch()
    r3 = i.round(3, k["v2"], k["v3"], validated(pair, "r3", k["v3"]), rows(12.0, 30.0))
    assert pair.record(r3)["decision"] == "KEEP"
    history = json.loads(pair.ledger("history", "--json").stdout)["rounds"]
    assert [(h["round"], h["flags"]) for h in history] == [
        (1, []),
        (2, []),
        (3, ["reopened"]),
    ]
    verified = pair.ledger("verify", "--json")
    assert verified.returncode == 0, verified.stdout + verified.stderr


def test_the_controllers_own_tests_pass_against_the_drop_in(tmp_path: Path) -> None:
    """The skill's test file, unchanged, in a workspace whose script is the wrapper."""
    assert SOURCE is not None
    workspace = Workspace.make(tmp_path / "ws", SOURCE, dropin=True)
    assert (workspace.root / SKILL / "scripts/triton_optimization.py").read_text() == WRAPPER
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(SKILL / "tests")],
        cwd=workspace.root,
        env={**workspace.env, "PYTEST_ADDOPTS": ""},
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert re.search(r"\b2 passed\b", done.stdout), done.stdout
    shutil.rmtree(workspace.root)


@pytest.mark.parametrize("rounds", [0, 1])
def test_a_target_of_zero_agrees(tmp_path: Path, rounds: int) -> None:
    """The controller sets target_met when a round is recorded, never at plan: with a target
    of 0, analyze straight after plan is inconclusive, and after any round (a FAIL too) it
    has passed."""
    pair = Pair(tmp_path)
    k = start(pair, objective={**OBJECTIVE, "target_relative_improvement": 0})
    i = pair.inputs
    if rounds:
        r1 = i.round(1, k["v0"], k["v1"], validated(pair, "r1", k["v1"], status="failed"), None)
        out = pair.record(r1)
        assert out["decision"] == "FAIL" and out["target_met"]
    assert pair.analyze()["status"] == ("passed" if rounds else "inconclusive")


def test_a_source_file_that_holds_no_samples_agrees(tmp_path: Path) -> None:
    """A measurement's `source` naming a benchmark log that is there: the controller never
    reads it; the drop-in records its sha256 and decides on the medians, as the controller."""
    pair = Pair(tmp_path)
    k = start(pair)
    i = pair.inputs
    log = i.each(i.dir / "raw" / "bench-r1.log", lambda _: "do_bench: 15.0 us, 36.0 us\n")
    dump = i.each(i.dir / "raw" / "bench-r1.json", lambda _: {IDS[1]: {"ms": [0.036, 0.0361]}})
    measured = rows(15.0, 36.0)
    measured[0]["source"] = str(log)
    measured[1]["source"] = str(dump)
    r1 = i.round(1, k["v0"], k["v1"], validated(pair, "r1", k["v1"]), measured)
    assert pair.record(r1)["decision"] == "KEEP"
    assert pair.analyze()["status"] == "passed"
    verified = pair.ledger("verify", "--json")
    assert verified.returncode == 0, verified.stdout + verified.stderr
    shown = json.loads(
        pair.ledger("show", "--run", pair.inputs.run_id, "--round", "1", "--json").stdout
    )
    assert [m["source_not_samples"] for m in shown["measurements"]["measurements"]] == [
        "has no Duration(us) or Task Duration(us) column",
        'has no "samples" list',
    ]
