"""One evidence read: what `record` reads through the events-by-type index
(`LedgerService.decision_evidence`) is the full fold of the run's events (`RunEvidence.apply`
over every event), cut to what a decision reads (`RunEvidence.within`), equal on every
field; and a round decided on either is the same round, event for event. Over random
campaigns: kept, discarded and failed rounds, resubmitted kernels, mechanisms, profiles of
any kernel of the run at any time, diagnoses, A/A remeasures and raw samples."""

from __future__ import annotations

import copy
import random
import shutil
import uuid
from dataclasses import fields
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ledger.core.bottleneck import Bottleneck
from ledger.core.controller import attribution_settings, profile_event
from ledger.core.events import (
    CaseWeight,
    DiagnosisRecorded,
    Event,
    FileRef,
    LimitFields,
    Measurement,
    MeasurementsRecorded,
    NoiseMeasured,
    ObjectiveFields,
    RoundSubmitted,
    RunPlanned,
    ValidationLinked,
)
from ledger.core.evidence import DecisionScope, RunEvidence
from ledger.core.round import admit, round_events
from ledger.services.service import LedgerService
from ledger.store.eventstore import Store

RUN = "evidence-run"
CASES = ("c1", "c2", "c3")
SIGNALS = ("aiv_scalar_ratio", "aiv_vec_ratio", "aiv_mte2_ratio", "aiv_mte3_ratio")
MECHANISMS = ("BLOCK", "UNROLL", "VEC", None)
AT = "2026-01-05T10:00:00.000000Z"


@pytest.fixture(scope="module")
def template(tmp_path_factory) -> Path:
    """An empty ledger at head, copied for each example (creating one runs the migrations)."""
    path = tmp_path_factory.mktemp("evidence") / "template.sqlite3"
    Store(f"sqlite:///{path}").close()
    return path


def _ref(name: str) -> FileRef:
    return FileRef(path=f"/k/{name}", sha256=uuid.uuid5(uuid.NAMESPACE_URL, name).hex * 2, size=1)


def _measured(rng: random.Random, medians: list[float], samples: bool) -> list[Measurement]:
    out = []
    for case, median in zip(CASES, medians, strict=True):
        raw = sorted(median * (1 + rng.gauss(0, 0.01)) for _ in range(9)) if samples else None
        out.append(
            Measurement(
                case_id=case, median_us=raw[4] if raw else median, repeats=9, samples_us=raw
            )
        )
    return out


def _plan(rng: random.Random, samples: bool) -> tuple[RunPlanned, list[Event]]:
    kernel = _ref("v0.py")
    plan = RunPlanned(
        run_id=RUN,
        parent_run_id=None,
        op_name="softmax",
        target={"soc": "Ascend910B2"},
        kernel=kernel,
        cases=[CaseWeight(id=c, weight=rng.choice([1.0, 2.0])) for c in CASES],
        objective=ObjectiveFields(
            target_relative_improvement=0.3,
            min_relative_improvement=0.01,
            noise_floor=0.005,
            max_case_regression=0.02,
        ),
        limits=LimitFields(max_rounds=14, max_consecutive_failures=rng.choice([1, 2, 3])),
        config=kernel,
        config_document={},
    )
    return plan, [
        plan,
        _validation(0, kernel.sha256, "passed"),
        MeasurementsRecorded(
            round=0,
            role="baseline",
            kernel_sha256=kernel.sha256,
            measurements=_measured(rng, [20.0, 40.0, 80.0], samples),
        ),
    ]


def _validation(number: int, sha: str, status: str) -> ValidationLinked:
    return ValidationLinked(
        round=number,
        kernel_sha256=sha,
        manifest=_ref(f"manifest-{number}"),
        manifest_run_id=f"v-{number}",
        manifest_parent_run_id=RUN,
        status=status,
        case_matrix=None,
        case_ids=list(CASES),
    )


def _full_fold(service: LedgerService) -> RunEvidence:
    evidence = RunEvidence()
    for record in service.stream(RUN):
        evidence.apply(record.event())
    return evidence


def _signals(rng: random.Random) -> dict[str, float]:
    return {name: round(rng.uniform(0.02, 0.6), 3) for name in SIGNALS}


class _Campaign:
    """A random campaign appended through the service, one step at a time."""

    def __init__(self, rng: random.Random, store: Store) -> None:
        self.rng = rng
        ids = iter(range(1, 10**6))
        self.service = LedgerService(store, clock=lambda: AT, new_id=lambda: str(next(ids)))
        self.samples = rng.random() < 0.6
        self.plan, events = _plan(rng, self.samples)
        self.service.append(RUN, None, events, [])
        self.kernels = [self.plan.kernel.sha256]
        self.medians = {self.plan.kernel.sha256: [20.0, 40.0, 80.0]}

    def step(self) -> bool:
        """One random step; False once the run takes no more rounds."""
        rng, service = self.rng, self.service
        view = service.view(RUN)
        action = rng.choices(["round", "profile", "diagnose", "noise"], [8, 3, 1, 0.4])[0]
        if action == "profile":
            kernel = rng.choice(self.kernels)
            event = profile_event(
                attribution_settings(self.plan),
                subject="kernel",
                round_no=None,
                kernel_sha256=kernel,
                origin="file",
                fmt="signals-json",
                signals=_signals(rng),
                # some profiles name their case: the check then compares case with case
                case_id=rng.choice([None, None, *CASES]),
            )
            service.append(RUN, view, [event], [])
        elif action == "diagnose":
            event = DiagnosisRecorded(
                bottleneck=rng.choice(list(Bottleneck)).value,
                evidence="a new model",
                after_round=view.run.rounds_recorded,
                consecutive_failures_before=view.run.consecutive_failures,
            )
            service.append(RUN, view, [event], [])
        elif action == "noise":
            best = view.run.best_kernel_sha256
            event = NoiseMeasured(
                kernel_sha256=best,
                after_round=view.run.rounds_recorded,
                measurements=_measured(rng, self.medians[best], True),
                source=_ref("noise.json"),
            )
            service.append(RUN, view, [event], [])
        else:
            return self._round(view)
        return True

    def _round(self, view) -> bool:
        rng = self.rng
        number = view.run.rounds_recorded + 1
        best = view.run.best_kernel_sha256
        if admit(view, number, best):
            return False
        if rng.random() < 0.2 and len(self.kernels) > 1:  # a kernel the run saw before
            sha = rng.choice(self.kernels)
            candidate = FileRef(path=f"/k/again-{number}.py", sha256=sha, size=1)
        else:
            candidate = _ref(f"r{number}.py")
            self.kernels.append(candidate.sha256)
        factor = rng.choice([0.85, 0.97, 0.999, 1.0, 1.02, 1.1])
        medians = [round(m * factor * rng.uniform(0.995, 1.005), 4) for m in self.medians[best]]
        self.medians[candidate.sha256] = medians
        metric = rng.choice(SIGNALS)
        submitted = RoundSubmitted(
            round=number,
            parent_kernel_sha256=best,
            candidate=candidate,
            hypothesis="h",
            change=f"{rng.choice(['BLOCK', 'UNROLL'])}=1 -> 2",
            mechanism=rng.choice(MECHANISMS),
            profiler_signals=_signals(rng) if rng.random() < 0.4 else None,
            expected_signal=(
                {"metric": metric, "direction": rng.choice(["increase", "decrease"])}
                if rng.random() < 0.4
                else None
            ),
            result=_ref(f"round-{number}.json"),
            result_document={},
        )
        passed = rng.random() < 0.8
        validation = _validation(number, candidate.sha256, "passed" if passed else "failed")
        measured = _measured(rng, medians, self.samples) if passed else None
        kernels = [best, candidate.sha256]
        plan, indexed = self.service.decision_evidence(view, kernels)
        full = _full_fold(self.service)
        assert plan == self.plan
        scope = DecisionScope.of(view, kernels)
        cut = full.within(scope)
        for field in fields(RunEvidence):
            assert getattr(indexed, field.name) == getattr(cut, field.name), field.name
        inputs = {"view": view, "plan": plan, "submitted": submitted, "validation": validation}
        from_index = round_events(evidence=indexed, measurements=measured, **inputs)
        from_cut = round_events(evidence=cut, measurements=copy.deepcopy(measured), **inputs)
        from_full = round_events(evidence=full, measurements=copy.deepcopy(measured), **inputs)
        assert from_index.events == from_full.events == from_cut.events
        self.service.append(RUN, view, from_index.events, [])
        return True


@settings(
    max_examples=20,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(seed=st.integers(0, 2**32 - 1), steps=st.integers(4, 24))
def test_the_indexed_read_is_the_full_fold_cut_to_the_decision(
    template: Path, tmp_path: Path, seed: int, steps: int
):
    rng = random.Random(seed)
    path = tmp_path / f"{uuid.uuid4().hex}.sqlite3"
    shutil.copyfile(template, path)
    store = Store(f"sqlite:///{path}")
    try:
        campaign = _Campaign(rng, store)
        for _ in range(steps):
            if not campaign.step():
                break
    finally:
        store.close()
        path.unlink()
