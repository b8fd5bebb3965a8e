"""Synthetic but realistic ledgers, written through the real append path.

A generated run looks like one an agent produced with `plan`, `record` and `analyze`: a
`RunPlanned` with its whole configuration document, the baseline's validation and
measurements, then rounds of `RoundSubmitted` (with the round-result document),
`ValidationLinked`, `MeasurementsRecorded` (when validation passed), `ProfileRecorded`
(when the round carried profiler signals) and a `RoundDecided`, all made by the very
function `record` uses (`round.round_events`), and finally `RunConcluded`. Every kernel
source goes into the blob table. The verifier's full replay accepts these ledgers.

Writing goes through `Store.append` (canonical payload, hashes, chain), the projection
fold (`projections.apply`) and `Store.save_view`, many runs per transaction, exactly as
`LedgerService.append` does for one run per transaction.
"""

from __future__ import annotations

import hashlib
import random
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

from ledger.core import projections
from ledger.core.controller import conclusion_event
from ledger.core.events import (
    CaseWeight,
    Event,
    FileRef,
    LimitFields,
    Measurement,
    MeasurementsRecorded,
    ObjectiveFields,
    RoundSubmitted,
    RunPlanned,
    ValidationLinked,
)
from ledger.core.evidence import RunEvidence
from ledger.core.projections import RunView
from ledger.core.round import admit, round_events
from ledger.store.eventstore import NewEvent, Store

OPS = (
    "softmax",
    "layernorm",
    "rmsnorm",
    "gelu",
    "silu",
    "matmul",
    "attention",
    "rope",
    "topk",
    "argmax",
    "cumsum",
    "scatter",
    "gather",
    "conv1d",
    "swiglu",
    "logsumexp",
)
SOCS = ("Ascend910B2", "Ascend910B3", "Ascend310P3")
CASE_SHAPES = (
    "fp16-128x257",
    "fp16-1024x1024",
    "fp32-4096x129",
    "bf16-64x8193",
    "fp16-8x65536",
    "fp32-1x1048576",
    "bf16-512x4096",
    "fp16-33x1025",
)
MECHANISMS = (
    ("ROWS_PER_ITER", "Batch {n} contiguous rows per program to amortize MTE instruction issue"),
    ("BLOCK_SIZE", "A {n}-element block fills the vector unit without spilling the UB"),
    ("NUM_STAGES", "{n}-stage double buffering hides the MTE2 load behind vector compute"),
    ("VEC_WIDTH", "Wider vectors ({n} lanes) cut the scalar loop overhead"),
    ("GRID_CORES", "Launching on {n} cores balances the tail of the row loop"),
    ("UNROLL", "Unrolling the reduction {n}x removes a scalar branch per element"),
)
SIGNALS = ("aiv_scalar_ratio", "aiv_vec_ratio", "aiv_mte2_ratio", "aiv_mte3_ratio")
EPOCH = datetime(2025, 1, 6, 8, 0, tzinfo=UTC)
RUN_SPACING_S = 1800  # run k starts k half-hours after EPOCH


@dataclass(frozen=True)
class Shape:
    """What one generated run looks like."""

    rounds: int = 20
    cases: int = 4
    fail_rate: float = 0.1
    profile_every: int = 3  # every Nth round carries profiler signals (0: never)
    samples_every: int = 0  # every Nth run carries raw samples (0: never)
    samples: int = 20
    seconds_per_event: int = 60  # synthetic clock: how far apart events are recorded

    @property
    def events_per_run(self) -> float:
        """Expected events of one run (plan 3 + rounds + conclusion)."""
        per_round = 3 + (1 - self.fail_rate) + (1 / self.profile_every if self.profile_every else 0)
        return 3 + self.rounds * per_round + 1


@dataclass
class GeneratedRun:
    """One run's events in append order, split into the transactions `service` would use
    (plan, each record, conclude), and the kernel sources it names."""

    run_id: str
    appends: list[list[Event]]
    times: list[str]
    blobs: list[bytes]
    view: RunView | None = None

    @property
    def event_count(self) -> int:
        return sum(len(a) for a in self.appends)


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _ref(path: str, content: bytes) -> FileRef:
    return FileRef(path=path, sha256=_sha(content), size=len(content))


@dataclass
class Generator:
    """Deterministic run generator: run `k` of a given seed is always the same run."""

    shape: Shape = field(default_factory=Shape)
    seed: int = 7
    prefix: str = "bench"
    distinct: int = 0  # >0: run k replays the history of run k % distinct under its own id
    _pool: dict[int, GeneratedRun] = field(default_factory=dict, repr=False)

    def run(self, k: int) -> GeneratedRun:
        if not self.distinct or k < self.distinct:
            return self._new_run(k)
        base = self._pool.get(k % self.distinct)
        if base is None:
            base = self._pool[k % self.distinct] = self._new_run(k % self.distinct)
        if self._with_samples(k % self.distinct):
            return self._new_run(k)  # the bootstrap's seed derives from the run id
        return self._replay(base, k)

    def _with_samples(self, k: int) -> bool:
        return bool(self.shape.samples_every) and k % self.shape.samples_every == 0

    def _replay(self, base: GeneratedRun, k: int) -> GeneratedRun:
        """Run `k` with the events of `base`: only the events that name the run change."""
        plan = base.appends[0][0]
        assert isinstance(plan, RunPlanned)
        run_id = self._run_id(k, plan.op_name)
        appends = []
        for items in base.appends:
            renamed: list[Event] = []
            for item in items:
                if isinstance(item, RunPlanned):
                    item = item.model_copy(
                        update={
                            "run_id": run_id,
                            "config_document": {**item.config_document, "run_id": run_id},
                        }
                    )
                elif isinstance(item, ValidationLinked):
                    item = item.model_copy(
                        update={
                            "manifest_run_id": f"{run_id}-validation-{item.round}",
                            "manifest_parent_run_id": run_id,
                        }
                    )
                renamed.append(item)
            appends.append(renamed)
        clock = _Clock(EPOCH + timedelta(seconds=k * RUN_SPACING_S), self.shape.seconds_per_event)
        times = [clock.next(len(items)) for items in appends]
        return GeneratedRun(run_id, appends, times, base.blobs, base.view)

    def _run_id(self, k: int, op: str) -> str:
        return f"{op}-{self.prefix}-{k:07d}"

    def _new_run(self, k: int) -> GeneratedRun:
        rng = random.Random(f"{self.seed}:{self.prefix}:{k}")
        shape = self.shape
        op = OPS[k % len(OPS)]
        soc = SOCS[(k // len(OPS)) % len(SOCS)]
        run_id = self._run_id(k, op)
        root = f"/runs/{op}/{run_id}"
        with_samples = self._with_samples(k)
        cases = [CASE_SHAPES[(k + i) % len(CASE_SHAPES)] for i in range(shape.cases)]
        weights = [1.0 if i % 3 else 2.0 for i in range(shape.cases)]
        baseline = [round(rng.uniform(8.0, 120.0), 2) for _ in cases]
        kernel = f"# {op} kernel for {soc}\nBLOCK_SIZE = 128\nROWS_PER_ITER = 1\n".encode()
        clock = _Clock(EPOCH + timedelta(seconds=k * RUN_SPACING_S), shape.seconds_per_event)

        config_doc = {
            "schema_version": 1,
            "run_id": run_id,
            "parent_run_id": f"triton-{op}-{k // 97:05d}",
            "op_name": op,
            "kernel": {"path": f"{root}/kernels/{op}_v0.py"},
            "validation_manifest": f"{root}/validation/baseline/manifest.json",
            "target": {"soc": soc, "cann": "8.0.RC3", "triton_ascend": "3.2.0"},
            "cases": [{"id": c, "weight": w} for c, w in zip(cases, weights, strict=True)],
            "baseline": [
                {"case_id": c, "median_us": m, "repeats": 50}
                for c, m in zip(cases, baseline, strict=True)
            ],
            "objective": {
                "target_relative_improvement": 0.1,
                "min_relative_improvement": 0.01,
                "noise_floor": 0.005,
                "max_case_regression": 0.02,
            },
            "max_rounds": shape.rounds,
            "max_consecutive_failures": 3,
            "measurement_policy": {"warmup": 10, "repeats": 50, "timer": "msprof op"},
            "workspace_snapshot": {"git_commit": f"{rng.getrandbits(28):07x}"},
        }
        plan = RunPlanned(
            run_id=run_id,
            parent_run_id=config_doc["parent_run_id"],
            op_name=op,
            target=config_doc["target"],
            kernel=_ref(config_doc["kernel"]["path"], kernel),
            cases=[CaseWeight(id=c, weight=w) for c, w in zip(cases, weights, strict=True)],
            objective=ObjectiveFields(**config_doc["objective"]),
            limits=LimitFields(max_rounds=shape.rounds, max_consecutive_failures=3),
            statistics=None,
            measurement_policy=config_doc["measurement_policy"],
            config=_ref(f"{root}/config.json", repr(config_doc).encode()),
            config_document=config_doc,
        )
        kernel_sha = plan.kernel.sha256
        plan_events: list[Event] = [
            plan,
            self._validation(rng, 0, kernel_sha, run_id, cases, "passed", root),
            MeasurementsRecorded(
                round=0,
                role="baseline",
                kernel_sha256=kernel_sha,
                measurements=self._measured(rng, cases, baseline, with_samples),
            ),
        ]
        out = GeneratedRun(run_id, [], [], [kernel])
        view = self._fold(None, plan_events, clock, out)
        evidence = RunEvidence()
        for item in plan_events:
            evidence.apply(item)
        best = list(baseline)
        for number in range(1, shape.rounds + 1):
            param, text = MECHANISMS[rng.randrange(len(MECHANISMS))]
            value = 2 ** rng.randrange(1, 8)
            source = f"# {op} round {number}\n{param} = {value}\n# variant {k % 64}\n".encode()
            out.blobs.append(source)
            candidate = _ref(f"{root}/kernels/{op}_r{number}.py", source)
            passed = rng.random() >= shape.fail_rate
            medians = [round(b * (1 + rng.gauss(-0.012, 0.02)), 3) for b in best]
            signals = None
            if shape.profile_every and number % shape.profile_every == 0:
                signals = {name: round(rng.uniform(0.02, 0.6), 4) for name in SIGNALS}
            result_doc = {
                "schema_version": 1,
                "round": number,
                "parent_kernel_sha256": view.run.best_kernel_sha256,
                "candidate": {"path": candidate.path},
                "hypothesis": text.format(n=value),
                "change": f"{param}={value // 2} -> {value}",
                "verification": {"manifest": f"{root}/validation/round-{number}/manifest.json"},
                "measurements": [
                    {"case_id": c, "median_us": m, "repeats": 50}
                    for c, m in zip(cases, medians, strict=True)
                ],
            }
            if signals is not None:
                result_doc["profiler_signals"] = signals
            submitted = RoundSubmitted(
                round=number,
                parent_kernel_sha256=view.run.best_kernel_sha256,
                candidate=candidate,
                hypothesis=result_doc["hypothesis"],
                change=result_doc["change"],
                mechanism=None,
                profiler_signals=signals,
                expected_signal=None,
                result=_ref(f"{root}/rounds/round-{number}.json", repr(result_doc).encode()),
                result_document=result_doc,
            )
            status = "passed" if passed else "failed"
            validation = self._validation(
                rng, number, candidate.sha256, run_id, cases, status, root
            )
            measured = self._measured(rng, cases, medians, with_samples) if passed else None
            assert not admit(view, number, submitted.parent_kernel_sha256)
            outcome = round_events(
                view=view,
                evidence=evidence,
                plan=plan,
                submitted=submitted,
                validation=validation,
                measurements=measured,
            )
            decided = outcome.decided
            items = outcome.events
            view = self._fold(view, items, clock, out)
            best = list(decided.best_after.medians_us)
        full = projections.RunView(run=view.run, cases=view.cases, rounds=view.rounds)
        self._fold(view, [conclusion_event(full)], clock, out)
        return out

    def _fold(
        self, view: RunView | None, items: list[Event], clock: _Clock, out: GeneratedRun
    ) -> RunView:
        """Remember one append (with its time) and return the view after it."""
        at = clock.next(len(items))
        version = view.run.stream_version if view else 0
        for item in items:
            version += 1
            view = projections.apply(view, version, at, item)
        out.appends.append(items)
        out.times.append(at)
        out.view = view
        assert view is not None
        return view

    def _validation(
        self,
        rng: random.Random,
        number: int,
        kernel_sha: str,
        run_id: str,
        cases: list[str],
        status: str,
        root: str,
    ) -> ValidationLinked:
        folder = f"{root}/validation/{'baseline' if number == 0 else f'round-{number}'}"
        return ValidationLinked(
            round=number,
            kernel_sha256=kernel_sha,
            manifest=FileRef(
                path=f"{folder}/manifest.json",
                sha256=f"{rng.getrandbits(256):064x}",
                size=900 + rng.randrange(200),
            ),
            manifest_run_id=f"{run_id}-validation-{number}",
            manifest_parent_run_id=run_id,
            status=status,
            case_matrix=FileRef(
                path=f"{folder}/case-matrix.json",
                sha256=f"{rng.getrandbits(256):064x}",
                size=200 + rng.randrange(100),
            ),
            case_ids=list(cases),
        )

    def _measured(
        self, rng: random.Random, cases: list[str], medians: list[float], with_samples: bool
    ) -> list[Measurement]:
        out = []
        for case, median in zip(cases, medians, strict=True):
            samples = None
            value = median
            if with_samples:
                samples = sorted(
                    round(median * (1 + rng.gauss(0, 0.01)), 3) for _ in range(self.shape.samples)
                )
                mid = len(samples) // 2
                value = samples[mid] if len(samples) % 2 else (samples[mid - 1] + samples[mid]) / 2
            out.append(
                Measurement(
                    case_id=case,
                    median_us=value,
                    repeats=self.shape.samples if with_samples else 50,
                    samples_us=samples,
                )
            )
        return out


class _Clock:
    """Synthetic recorded_at times: one append every `step` seconds per event."""

    def __init__(self, start: datetime, step: int) -> None:
        self.now = start
        self.step = step

    def next(self, events: int) -> str:
        self.now += timedelta(seconds=self.step * events)
        return self.now.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def event_ids(rng: random.Random) -> Iterator[str]:
    while True:
        yield str(uuid.UUID(int=rng.getrandbits(128), version=4))


class BulkWriter:
    """Append generated runs through `Store.append` + the projection fold + `save_view`,
    packing whole appends into transactions of about `batch` events."""

    def __init__(self, store: Store, *, batch: int = 1000, seed: int = 11) -> None:
        self.store = store
        self.batch = batch
        self.ids = event_ids(random.Random(seed))
        self.pending: list[GeneratedRun] = []
        self.pending_events = 0
        self.events_written = 0
        self.sizes: list[int] = []  # events per transaction, in order

    def add(self, run: GeneratedRun) -> None:
        self.pending.append(run)
        self.pending_events += run.event_count
        if self.pending_events >= self.batch:
            self.flush()

    def flush(self) -> None:
        if not self.pending:
            return
        store = self.store
        with store.transaction(write=True) as conn:
            for run in self.pending:
                batch = [
                    NewEvent(next(self.ids), item, at)
                    for items, at in zip(run.appends, run.times, strict=True)
                    for item in items
                ]
                stored = store.append(conn, run.run_id, 0, batch)
                # one fold per run: the rows are built once, not once per event
                view = projections.fold_into(
                    None,
                    [
                        (record.stream_version, record.recorded_at, new.event)
                        for record, new in zip(stored, batch, strict=True)
                    ],
                )
                if hasattr(store, "put_blobs"):
                    store.put_blobs(conn, run.blobs)
                else:  # a Store from before put_blobs (to measure an older tree)
                    for blob in run.blobs:
                        store.put_blob(conn, blob)
                store.save_view(conn, None, view)
        self.events_written += self.pending_events
        self.sizes.append(self.pending_events)
        self.pending = []
        self.pending_events = 0
