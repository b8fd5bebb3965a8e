"""`record` reads what `decide_round` needs through the events-by-type index instead of
folding the whole run. Whatever a run holds (kept and discarded rounds, failed validations,
mechanisms, profiles of the best and of candidate kernels, raw samples, diagnoses), that
indexed read must give the same evidence as the full fold, on every backend."""

from __future__ import annotations

import json
import random
from dataclasses import fields
from pathlib import Path

import pytest

from ledger.core.bottleneck import Bottleneck
from ledger.core.evidence import DecisionScope, RunEvidence
from ledger.errors import InputError
from ledger.services.service import LedgerService
from ledger.store.eventstore import Store

from campaign import Campaign, sha256

MECHANISMS = ["tiling", "vectorize", "double buffering", None]


def _full_fold(service: LedgerService, run_id: str) -> RunEvidence:
    evidence = RunEvidence()
    for record in service.stream(run_id):
        evidence.apply(record.event())
    return evidence


def _assert_same_evidence(service: LedgerService, run_id: str, kernels: list[str]) -> None:
    view = service.view(run_id)
    plan, indexed = service.decision_evidence(view, kernels)
    full = _full_fold(service, run_id).within(DecisionScope.of(view, kernels))
    assert plan == service.planned_event(run_id)
    for name in (f.name for f in fields(RunEvidence)):
        assert getattr(indexed, name) == getattr(full, name), name


def _medians(rng: random.Random, best: list[float]) -> list[float]:
    factor = rng.choice([0.9, 0.97, 1.0, 1.01, 1.05])
    return [round(m * factor * rng.uniform(0.995, 1.005), 4) for m in best]


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_indexed_evidence_equals_the_full_fold(store: Store, tmp_path: Path, seed: int):
    rng = random.Random(seed)
    campaign = Campaign(tmp_path, max_rounds=40, max_consecutive_failures=2)
    service = LedgerService(store)
    service.plan(campaign.config())
    run_id = campaign.run_id
    best = list(campaign.baseline)
    kernels = [sha256(campaign.best_kernel)]
    for number in range(1, 19):
        view = service.view(run_id)
        if view.concluded:
            break
        if view.run.needs_diagnosis and rng.random() < 0.6:
            bottleneck = rng.choice([b.value for b in Bottleneck])
            service.diagnose(run_id, bottleneck, f"profile of round {number - 1}")
        if rng.random() < 0.3:  # a profile of the current best kernel
            signals = {"aiv_vec_ratio": rng.uniform(0.1, 0.9), "aiv_scalar_ratio": 0.1}
            profile = tmp_path / f"profile-{number}.json"
            profile.write_text(json.dumps(signals))
            service.profile(run_id, profile, kernel_sha256=view.run.best_kernel_sha256)
        medians = _medians(rng, best)
        extra: dict = {"mechanism": rng.choice(MECHANISMS)}
        if rng.random() < 0.4:
            extra["profiler_signals"] = {"aiv_vec_ratio": rng.uniform(0.1, 0.9)}
        doc = campaign.round_doc(
            medians, number=number, status=rng.choice(["passed"] * 4 + ["failed"]), **extra
        )
        if rng.random() < 0.5:  # raw samples on this round
            for row, median in zip(doc["measurements"], medians, strict=True):
                row.pop("median_us")
                row["samples_us"] = [median * rng.uniform(0.98, 1.02) for _ in range(11)]
        path = tmp_path / "rounds" / f"round-{number}.json"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps(doc))
        kernels.append(sha256(Path(doc["candidate"]["path"])))
        _assert_same_evidence(service, run_id, kernels)
        try:
            result = service.record(run_id, path)
        except InputError:
            break  # the run stopped (needs a diagnosis first, or its budget is spent)
        campaign.accepted(result.decision, result.round)
        if result.decision == "KEEP":
            best = medians
        _assert_same_evidence(service, run_id, kernels)
    assert service.view(run_id).run.rounds_recorded >= 3
