"""Sequential decisions (statistics.sequential) against the fixed rule at n = 50, on a
simulated grid and on resampled real H200 sample pools. Run through
`benchmarks/decision_quality.py --sequential`; this module holds the study.

Every trial measures the candidate and the reference interleaved in one session (paired), up
to max_repeats samples per case; the sequential rule reads them in order and stops at its
first settled look, the fixed rule reads the first 50 of each side. Seeded: a rerun with the
same numpy gives the same rates.
"""

from __future__ import annotations

import itertools
import json
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from ledger.core.decide import Decision, Objective, contract_decision
from ledger.core.decide import weighted_improvement as improvement_of
from ledger.core.decide import worst_regression as regression_of
from ledger.core.sequential import SequentialConfig, sequential_decision
from ledger.core.stats import (
    StatisticsConfig,
    derive_seed,
    estimate_drift,
    noise_aware_decision,
)

ROOT = Path(__file__).resolve().parents[1]
SEQUENTIAL = {"min_repeats": 10, "max_repeats": 100, "batch": 10}
CONFIG = StatisticsConfig(sequential=SEQUENTIAL)
SEQ = SequentialConfig(**SEQUENTIAL)
FIXED_N = 50
OBJECTIVE = Objective(0.10, 0.01, 0.005, 0.02)  # as the rest of decision_quality.py
REAL_OBJECTIVE = Objective(0.10, 0.02, 0.01, 0.10)  # the H200 campaign's (softmax, rmsnorm)
CASE_TIMES_US = (12.0, 35.0, 80.0, 210.0)
GRID_GAINS = (-0.05, -0.02, 0.0, 0.02, 0.05, 0.15, 0.30)
GRID_CVS = (0.005, 0.02, 0.05)
CASE_COUNTS = (1, 4)
REAL_GAINS = (-0.03, 0.0, 0.05, 0.15, 0.30)
ASSUMED_DRIFT = CONFIG.drift_assumed

Draw = Callable[[np.random.Generator], tuple[list[np.ndarray], list[np.ndarray], list[float]]]


@dataclass
class Cell:
    label: dict[str, str]
    gain: float
    trials: int = 0
    seq_keep: int = 0
    fixed_keep: int = 0
    settled: int = 0
    repeats: list[int] = field(default_factory=list)
    replay_checked: int = 0
    replay_mismatch: int = 0
    counts: bool = True  # judged by the targets (False: a rule shown for comparison only)

    @property
    def false_keep_cell(self) -> bool:
        return self.gain <= 0.0 and self.counts

    def rate(self, k: int) -> float:
        return k / self.trials if self.trials else float("nan")


def _fixed(weights, best, cand, objective, seed, drift=0.0) -> Decision:
    b = [s[:FIXED_N] for s in best]
    c = [s[:FIXED_N] for s in cand]
    bm = [float(np.median(s)) for s in b]
    cm = [float(np.median(s)) for s in c]
    contract = contract_decision(improvement_of(weights, bm, cm), regression_of(bm, cm), objective)
    return noise_aware_decision(
        contract=contract,
        weights=weights,
        best_samples=b,
        cand_samples=c,
        objective=objective,
        config=StatisticsConfig(),
        seed=seed,
        drift_sigma=drift,
        drift_estimated=drift > 0.0,
        best_medians=bm,
        cand_medians=cm,
    ).decision


def _sequential(weights, best, cand, objective, paired=True, drift=0.0, config=CONFIG):
    return sequential_decision(
        weights=weights,
        best_samples=best,
        cand_samples=cand,
        paired=paired,
        objective=objective,
        config=config,
        sequential=config.sequential,
        context=b"benchmark",
        drift_sigma=drift,
    )


def run_cell(
    cell: Cell,
    draw: Draw,
    rng,
    trials: int,
    objective: Objective,
    replay_every: int,
    paired: bool = True,
    drift: float = 0.0,
):
    rounds = ((*draw(rng), drift) for _ in range(trials))
    run_rounds(cell, rounds, objective, replay_every, paired)


def run_rounds(cell: Cell, rounds, objective: Objective, replay_every: int, paired: bool,
               config: StatisticsConfig = CONFIG):  # fmt: skip
    """Decide every (best, cand, weights, drift) of `rounds` with both rules into `cell`."""
    for trial, (best, cand, weights, drift) in enumerate(rounds):
        out = _sequential(weights, best, cand, objective, paired, drift, config)
        fixed = _fixed(
            weights, best, cand, objective, derive_seed(b"fixed", trial.to_bytes(8)), drift
        )
        cell.trials += 1
        cell.seq_keep += out.decision is Decision.KEEP
        cell.fixed_keep += fixed is Decision.KEEP
        cell.settled += out.settled
        cell.repeats.append(out.repeats_used)
        if out.settled and trial % replay_every == 0:
            n = out.repeats_used
            again = _sequential(
                weights,
                [s[:n] for s in best] if paired else best,
                [s[:n] for s in cand],
                objective,
                paired,
                drift,
                config,
            )
            cell.replay_checked += 1
            cell.replay_mismatch += (again.decision, again.settled, again.repeats_used) != (
                out.decision,
                True,
                n,
            )


def simulated(gain: float, cv: float, cases: int) -> Draw:
    sigma = math.sqrt(math.log1p(cv * cv))
    medians = np.array(CASE_TIMES_US[:cases])

    def draw(rng):
        n = SEQ.max_repeats
        best = medians[:, None] * np.exp(rng.normal(0.0, sigma, (cases, n)))
        cand = medians[:, None] * (1 - gain) * np.exp(rng.normal(0.0, sigma, (cases, n)))
        return list(best), list(cand), [1.0] * cases

    return draw


# --------------------------------------------------------------------- real pools


@dataclass
class Pool:
    """One kernel's samples per case, split by session (µs)."""

    op: str
    kernel: str
    sessions: list[list[np.ndarray]]  # session -> case -> samples


def load_pool(folder: Path, cases: list[str]) -> Pool:
    per_case = []
    for case in cases:
        doc = json.loads((folder / f"{case}.json").read_text())
        values = np.asarray(doc["samples_us"], dtype=float)
        bounds = np.cumsum([0, *doc["session_lengths"]])
        per_case.append([values[a:b] for a, b in itertools.pairwise(bounds)])
    sessions = [[per_case[c][s] for c in range(len(cases))] for s in range(len(per_case[0]))]
    return Pool(folder.parent.parent.name, folder.name, sessions)


def real_pools() -> dict[str, tuple[list[str], Pool, list[Pool]]]:
    """Per op: its cases, the best kernel's main pool and its A/A remeasure pools."""
    out = {}
    for op in ("softmax", "rmsnorm"):
        base = ROOT / "examples" / "gpu-campaign" / op
        config = json.loads((base / "config.json").read_text())
        cases = [c["id"] for c in config["cases"]]
        aa = sorted((base / "raw").glob("aa-*"))
        kernel = json.loads((aa[0] / f"{cases[0]}.json").read_text())["kernel"]
        out[op] = (
            cases,
            load_pool(base / "raw" / kernel, cases),
            [load_pool(p, cases) for p in aa],
        )
    return out


def resampled(
    reference: Pool, candidate: Pool, gain: float, same_session: bool = True, stored=False
) -> Draw:
    """Reference and candidate drawn (with replacement, n = max_repeats per case) from one
    session of each pool, the same session index (same_session) or two different ones; the
    candidate's samples scaled by (1 - gain). `stored`: the best side is that session's
    samples as measured (a best kernel's stored measurement), not a resample."""
    count = min(len(reference.sessions), len(candidate.sessions))

    def draw(rng):
        j = int(rng.integers(count))
        k = j if same_session else int((j + 1 + rng.integers(count - 1)) % count)
        n = SEQ.max_repeats
        best = [s if stored else rng.choice(s, n) for s in reference.sessions[j]]
        cand = [rng.choice(s, n) * (1 - gain) for s in candidate.sessions[k]]
        return best, cand, [1.0] * len(best)

    return draw


UNPAIRED_RULES = (("first-n", "its first n"), ("all", "whole (as first recorded)"))


def aa_pairs(aa: list[Pool]) -> list[tuple[list[np.ndarray], list[np.ndarray], list[float], float]]:
    """Every real A/A session pair of an op, as measured: for each ordered pair of two
    remeasures (i, m) of the best kernel and each session index j, session j of i as the
    best side (stored) and session j of m as the candidate, every sample in measurement
    order, nothing resampled. The drift is what the op's ring of A/A pairs (k, k + 1)
    estimates without either measurement of the pair, as a run's recorded pairs would."""
    ring = [(k, (k + 1) % len(aa)) for k in range(len(aa))]
    out = []
    for i, m in itertools.permutations(range(len(aa)), 2):
        others = [
            (aa[a].sessions[j], aa[b].sessions[j])
            for a, b in ring
            if not {a, b} & {i, m}
            for j in range(min(len(aa[a].sessions), len(aa[b].sessions)))
        ]
        drift = estimate_drift(others, config=StatisticsConfig()).sigma
        for best, cand in zip(aa[i].sessions, aa[m].sessions, strict=False):
            out.append((best, cand, [1.0] * len(best), drift))
    return out


def cross_session_keep_rate(pools, rng, trials: int) -> list[tuple[str, float, float, float]]:
    """The same kernel (A/A) and a small true gain, the two sides from different sessions and
    no reference: KEEP rates with no drift allowance, and with statistics.assumed_drift."""
    rows = []
    for op, (_cases, main, aa) in pools.items():
        for gain in (0.0, 0.0276):
            plain = assumed = 0
            for _ in range(trials):
                best, cand, w = resampled(main, aa[0], gain, same_session=False, stored=True)(rng)
                plain += _sequential(w, best, cand, REAL_OBJECTIVE, paired=False).decision is (
                    Decision.KEEP
                )
                assumed += (
                    _sequential(
                        w, best, cand, REAL_OBJECTIVE, paired=False, drift=ASSUMED_DRIFT
                    ).decision
                    is Decision.KEEP
                )
            rows.append((op, gain, plain / trials, assumed / trials))
    return rows


# ----------------------------------------------------------------------- report


def _pct(x: float) -> str:
    return f"{x * 100:.1f}%"


def table(cells: list[Cell], columns: list[str]) -> str:
    head = [*columns, "seq KEEP", f"fixed n={FIXED_N} KEEP", "settled", "mean rep.", "median rep."]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for c in cells:
        values = [c.label[k] for k in columns]
        values += [
            _pct(c.rate(c.seq_keep)),
            _pct(c.rate(c.fixed_keep)),
            _pct(c.rate(c.settled)),
            f"{np.mean(c.repeats):.1f}",
            f"{np.median(c.repeats):.0f}",
        ]
        lines.append("| " + " | ".join(values) + " |")
    return "\n".join(lines)


def study(trials: int, log: Callable[[str], None]) -> tuple[str, list[str], bool]:
    """Run the study: (markdown section, summary lines, every target met)."""
    started = time.perf_counter()
    rng = np.random.Generator(np.random.PCG64(20261202))
    grid: list[Cell] = []
    for cases in CASE_COUNTS:
        for cv in GRID_CVS:
            for gain in GRID_GAINS:
                cell = Cell({"gain": f"{gain:+.0%}", "CV": _pct(cv), "cases": str(cases)}, gain)
                run_cell(cell, simulated(gain, cv, cases), rng, trials, OBJECTIVE, 4)
                grid.append(cell)
        log(f"sequential grid, {cases} case(s) done")
    pools = real_pools()
    real: list[Cell] = []
    for op, (_cases, main, aa) in pools.items():
        for gain in REAL_GAINS:
            # both sides from one session of one pool: the interleaved same-session case
            label = {"op": op, "gain": f"{gain:+.0%}", "pools": f"{main.kernel}, one session"}
            cell = Cell(label, gain)
            run_cell(cell, resampled(main, main, gain), rng, trials, REAL_OBJECTIVE, 4)
            real.append(cell)
        pairs = aa_pairs(aa)
        drifts = sorted({d for *_, d in pairs})
        for rule, name in UNPAIRED_RULES:
            label = {
                "op": op,
                "gain": "A/A",
                "pools": f"{len(pairs)} real session pairs, as measured, best side {name} "
                f"(drift {drifts[0]:.2%}-{drifts[-1]:.2%})",
            }
            cell = Cell(label, 0.0, counts=rule == "first-n")
            config = StatisticsConfig(sequential={**SEQUENTIAL, "unpaired_best": rule})
            run_rounds(cell, iter(pairs), REAL_OBJECTIVE, 4, paired=False, config=config)
            real.append(cell)
        log(f"real pools of {op} done")
    cross = cross_session_keep_rate(pools, rng, max(trials // 2, 20))
    elapsed = time.perf_counter() - started

    everything = grid + real
    mean_rep = float(np.mean([np.mean(c.repeats) for c in grid]))
    big = [r for c in grid if c.gain >= 0.15 for r in c.repeats]
    worst_false = max(
        (c for c in everything if c.false_keep_cell), key=lambda c: c.seq_keep / c.trials
    )
    power_gap = min(
        (c.seq_keep - c.fixed_keep) / c.trials for c in everything if c.gain > 0 and c.counts
    )
    checked = sum(c.replay_checked for c in everything)
    mismatched = sum(c.replay_mismatch for c in everything)
    cross_keep = max(row[3] for row in cross)
    false_rate = worst_false.seq_keep / worst_false.trials
    where = ", ".join(f"{k} {v}" for k, v in worst_false.label.items())
    targets = [
        (
            mean_rep <= 0.5 * FIXED_N,
            f"mean repeats per case over the grid {mean_rep:.1f} <= {0.5 * FIXED_N:.0f} "
            f"(0.5 x fixed n = {FIXED_N})",
        ),
        (float(np.median(big)) <= 20, f"median repeats for gains >= 15%: {np.median(big):.0f}"),
        (
            false_rate <= 0.05,
            "false KEEP <= 5% in every no-change/regression cell and real A/A pair: worst "
            f"{_pct(false_rate)} ({where})",
        ),
        (
            power_gap >= -0.02,
            "power at every true gain >= the fixed rule's - 2 points: worst difference "
            f"{power_gap * 100:+.1f} points",
        ),
        (
            mismatched == 0,
            "decide on only the first repeats_used samples gives the same settled decision: "
            f"{checked - mismatched} of {checked} settled trials re-decided",
        ),
        (
            cross_keep <= 0.05,
            "a cross-session A/A or +2.76% round without a reference is kept at most "
            f"{_pct(cross_keep)} with statistics.assumed_drift ({ASSUMED_DRIFT:.0%})",
        ),
    ]
    summary = [f"- {'PASS' if ok else 'FAIL'} — {text}" for ok, text in targets]
    cross_lines = [
        "| op | true gain | KEEP, no drift allowance | KEEP, assumed_drift |",
        "|---|---|---|---|",
    ]
    cross_lines += [f"| {op} | {g:+.2%} | {_pct(a)} | {_pct(b)} |" for op, g, a, b in cross]
    body = SECTION.format(
        trials=trials,
        elapsed=f"{elapsed:.0f}",
        sequential=json.dumps(SEQUENTIAL),
        levels=", ".join(f"{a:.4f}" for a in SEQ.levels(CONFIG.alpha)),
        summary="\n".join(summary),
        grid=table(grid, ["gain", "CV", "cases"]),
        real=table(real, ["op", "gain", "pools"]),
        cross="\n".join(cross_lines),
    )
    return body, summary, all(ok for ok, _ in targets)


SECTION = """## Sequential decisions (`statistics.sequential`)

- Command: `.venv/bin/python benchmarks/decision_quality.py --sequential` ({trials} trials per
  simulated or resampled cell, half that per cross-session cell, each real A/A session pair
  once; {elapsed} s on this machine)
- Settings: `{sequential}`, alpha 0.05; KEEP levels per look (Pocock-type spending):
  {levels}. The fixed rule: SPEC 4.2 (defaults) on the first 50 samples of each side.
- Each trial measures the reference and the candidate interleaved in one session, up to 100
  samples per case; the sequential rule stops at its first settled look.

### Targets

{summary}

### Simulated grid

Lognormal samples, true case medians 12, 35, 80, 210 µs; "gain" is the candidate's true
improvement on every case (negative: a regression, every KEEP false). Objective: noise floor
0.5%, minimum improvement 1%, case-regression limit 2%.

{grid}

### Resampled real H200 pools

The best kernel's samples of each campaign (`examples/gpu-campaign/<op>/raw/<kernel>`, eight
sessions of about 37 samples per case). Gain rows: both sides drawn with replacement from one
session of that pool, the candidate's scaled by (1 - gain): the same-session, interleaved
case a reference gives (the pools themselves were not measured interleaved, so two of them
are no same-session pair). "A/A" rows are real pairs, nothing resampled: every ordered pair
of the six remeasures of the best kernel (`raw/aa-<i>`, `raw/aa-<m>`) at every session index,
session j of aa-i as the stored best side, session j of aa-m as the candidate, each side's
samples in measurement order (about 36 per case). They are decided as sides of different
sessions, with the drift that the A/A pairs of the other remeasures estimate (the fixed
rule, on all samples, gets the same drift), under the rule (`unpaired_best` "first-n": a look
takes the best side's first n samples beside the candidate's first n) and, for comparison
(not a target), under the rule as first recorded ("all": the stored session whole at every
look). In these sessions the first ten samples of a small case ran 3-6% faster than the
session's median, so the first ten of one session against another session whole looked like
a gain (docs/statistics.md, "Like positions"). Objective: the campaign's (noise floor 1%,
minimum 2%, case-regression limit 10%).

{real}

### Sides from different sessions, no reference

The same pools, the candidate drawn from another session than the reference, decided without
a reference: with no drift allowance, and with the default `statistics.assumed_drift`.

{cross}
"""
