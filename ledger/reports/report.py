"""The HTML report of one run: one self-contained page a person reads.

    gather(service, run_id) -> ReportData     reads the ledger (projection, events, verifier)
    render(data)            -> (str, names)   pure: the page, charts as inline SVG
    write_report(service, run_id, path)       gather, render, write atomically

The page needs nothing else: no network, no scripts, no external CSS or fonts; a
Content-Security-Policy forbids loading anything. The charts (ledger/reports/charts.py)
are inline SVG with fixed element ids, so rendering the same ledger twice gives the same
bytes.

Sections: the run's standing; (a) the round timeline (decision markers, cumulative
improvement against the original, the target line); the rounds table; (b) per-case
latency distributions of the original, the candidates and the best kernel from the raw
samples (medians where no samples were recorded); (c) profile signals where profiles
were recorded; (d) verification: the replay verifier's result for the run, its last event
hash and the tree head over the whole log (what a checkpoint pins).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ledger import files
from ledger.core import decide, looks
from ledger.core.actors import describe, parsed
from ledger.core.events import (
    DiagnosisRecorded,
    Event,
    Measurement,
    MeasurementsRecorded,
    ProfileRecorded,
    RoundDecided,
    RoundSubmitted,
    RunConcluded,
    RunPlanned,
    RunReopened,
)
from ledger.core.explain import NoiseSummary, explain, noise_summary
from ledger.core.projections import RunView
from ledger.errors import InputError
from ledger.reports.charts import MAX_CASE_PANELS, MAX_PROFILE_ROWS

# The page may load nothing at all: no scripts, images, fonts, frames or connections.
CONTENT_SECURITY_POLICY = "default-src 'none'; style-src 'unsafe-inline'"

_GPU = re.compile(
    r"\b(nvidia|geforce|quadro|tesla|rtx|gtx|titan|radeon|instinct|amd|gpu|cuda|"
    r"[ahblv]\d{2,3}[a-z]?|gh\d{3}|gb\d{3}|mi\d{3}[a-z]?|sm_?\d{2,3})\b",
    re.IGNORECASE,
)
_NPU = re.compile(r"ascend|\bnpu\b", re.IGNORECASE)


# --- what the report shows ----------------------------------------------------------------


@dataclass(frozen=True)
class RoundEntry:
    round: int
    decision: str | None
    hypothesis: str
    change: str
    mechanism: str | None
    evidence: str | None
    relative_improvement: float | None
    worst_case_regression: float | None
    cumulative_improvement: float | None
    vs_original: float | None
    flags: tuple[str, ...]
    mechanism_confirmed: bool | None
    candidate_sha256: str
    measurements: tuple[Measurement, ...] | None
    explanation: str = ""
    rule: str | None = None
    repeats_used: int | None = None  # sequential decisions: repeats per case at the look
    max_repeats: int | None = None
    device_time_saved_us: float | None = None
    recorded_by: str = "not recorded"  # who appended the decision (actors.describe)


@dataclass(frozen=True)
class ProfileEntry:
    label: str
    subject: str
    round: int | None
    kernel_sha256: str
    origin: str
    format: str
    kernel_name: str | None
    signals: dict[str, float]
    bottleneck: str | None
    evidence: tuple[str, ...]
    first_experiment: str | None
    flags: tuple[str, ...] = ()


@dataclass(frozen=True)
class Verification:
    status: str
    events_checked: int
    checks: dict[str, str]
    first_failure: dict[str, Any] | None
    last_event_hash: str
    stream_version: int
    tree_size: int
    tree_root: str

    @property
    def ok(self) -> bool:
        return self.status == "ok"


@dataclass(frozen=True)
class ReportData:
    view: RunView
    target: dict[str, Any]
    measurement_policy: dict[str, Any] | None
    baseline: tuple[Measurement, ...]
    rounds: tuple[RoundEntry, ...]
    profiles: tuple[ProfileEntry, ...]
    diagnoses: tuple[DiagnosisRecorded, ...]
    conclusion: RunConcluded | None
    verification: Verification
    unreadable_events: int
    noise: NoiseSummary
    # beside a chained cumulative improvement (contract 2): the best kernel's medians
    # against the original baseline, and whether those sides come from different sessions
    baseline_comparison: tuple[float, bool] | None = None

    @property
    def run_id(self) -> str:
        return self.view.run.run_id

    @property
    def target_text(self) -> str:
        return ", ".join(f"{k}={v}" for k, v in self.target.items())

    @property
    def policy_text(self) -> str:
        policy = self.measurement_policy
        return ", ".join(f"{k}={v}" for k, v in policy.items()) if policy else "not stated"

    @property
    def timing_label(self) -> str:
        return timing_label(self.target)

    @property
    def case_rows(self) -> list[CaseRow]:
        best = {c.case_id: c for c in self.view.cases}
        rows = []
        for m in self.baseline:
            case = best.get(m.case_id)
            best_us = case.best_median_us if case else None
            rows.append(
                CaseRow(
                    case_id=m.case_id,
                    weight=case.weight if case else None,
                    original=m.median_us,
                    best=best_us,
                    change=(m.median_us - best_us) / m.median_us if best_us is not None else None,
                    repeats=m.repeats,
                )
            )
        return rows

    @property
    def device_time_saved_us(self) -> float | None:
        """The device time the run's sequential decisions spared (None: none made)."""
        saved = [r.device_time_saved_us for r in self.rounds if r.device_time_saved_us is not None]
        return sum(saved) if saved else None

    @property
    def raw_samples(self) -> list[RawSamples]:
        """Every recorded sample, per case and kernel: the chart's data, on demand."""
        out = []
        columns = [("original", self.baseline)] + [
            (f"round {r.round}", r.measurements) for r in self.rounds if r.measurements
        ]
        for m in self.baseline:
            for label, rows in columns:
                row = next((x for x in rows or () if x.case_id == m.case_id), None)
                if row is None or not row.samples_us:
                    continue
                values = row.samples_us
                out.append(
                    RawSamples(
                        case_id=m.case_id,
                        label=label,
                        n=len(values),
                        median=row.median_us,
                        min=min(values),
                        max=max(values),
                        text=" ".join(f"{v:.4g}" for v in values),
                    )
                )
        return out

    @property
    def latency_caption(self) -> str:
        with_samples = any(m.samples_us for m in self.baseline) or any(
            m.samples_us for r in self.rounds for m in (r.measurements or ())
        )
        if with_samples:
            how = (
                "Boxes and dots are the raw per-repeat samples (box: quartiles and median; "
                "whiskers: 1.5 IQR); a diamond is a median recorded without samples. The axis "
                "spans every box's whiskers and the medians, and a sample beyond it is an "
                "outlier, drawn as a triangle at the edge and counted in the panel title."
            )
        else:
            how = "No raw samples were recorded: each diamond is the recorded median."
        shown = len(self.baseline)
        note = (
            f" The first {MAX_CASE_PANELS} of {shown} cases are drawn; the table lists all."
            if shown > MAX_CASE_PANELS
            else ""
        )
        missing = [m.case_id for m in self.baseline if m.source_not_found is not None]
        if missing:
            note += (
                " The baseline named samples files that were not found (samples-file-not-found: "
                f"{', '.join(missing)}); its medians stand as recorded."
            )
        return (
            f"{self.timing_label}, drawn relative to the original kernel's median of each case "
            "(0% = the original; below 0 is faster). orig is the original kernel, rN round "
            f"N's candidate (FAIL rounds are never measured); the best kernel (round "
            f"{self.view.run.best_round}) is outlined in black. {how}{note}"
        )

    @property
    def profile_caption(self) -> str:
        caption = (
            "Throughputs, occupancies and pipe ratios of each recorded profile, as "
            "fractions (1 = 100%); rows are labelled with the attributed bottleneck."
        )
        if len(self.profiles) > MAX_PROFILE_ROWS:
            caption += (
                f" The last {MAX_PROFILE_ROWS} of {len(self.profiles)} profiles are drawn; "
                "the table lists all."
            )
        return caption


@dataclass(frozen=True)
class CaseRow:
    case_id: str
    weight: float | None
    original: float
    best: float | None
    change: float | None
    repeats: int


@dataclass(frozen=True)
class RawSamples:
    case_id: str
    label: str
    n: int
    median: float
    min: float
    max: float
    text: str


@dataclass(frozen=True)
class ReportResult:
    run_id: str
    path: Path
    size: int
    charts: tuple[str, ...]
    rounds: int
    profiles: int
    verification: Verification


def timing_label(target: dict[str, Any]) -> str:
    """What the timings are: GPU timings when target.soc names a GPU.

    >>> timing_label({"soc": "NVIDIA H200"})
    'GPU timings on NVIDIA H200, µs'
    >>> timing_label({"soc": "Ascend910B2"})
    'NPU timings on Ascend910B2, µs'
    """
    soc = str(target.get("soc") or "").strip()
    if not soc:
        return "device timings, µs"
    kind = "GPU" if _GPU.search(soc) else "NPU" if _NPU.search(soc) else "device"
    return f"{kind} timings on {soc}, µs"


# --- gathering ----------------------------------------------------------------------------


def gather(service: Any, run_id: str, *, tree_head: bool = True) -> ReportData:
    """Everything the page shows, read from the ledger; nothing is written. Without
    `tree_head` the Merkle tree over the whole log is not built (the web view, where the
    checkpoints page does that on request): its size is the event count, its root empty."""
    from ledger.integrity.verify import verify_ledger

    view = service.full_view(run_id)  # an unknown run is refused here
    stored = service.stream(run_id)
    events: list[Event] = []
    unreadable = 0
    actors: dict[int, str] = {}  # who recorded each round's decision
    for record in stored:
        try:
            events.append(record.event())
        except ValueError:  # a damaged payload: the verification panel says which
            unreadable += 1
            continue
        if isinstance(events[-1], RoundDecided):
            actors[events[-1].round] = describe(parsed(record.actor))
    report = verify_ledger(service.store, run_id).as_dict()
    if tree_head:
        size, root = _tree_head(service.store)
    else:
        with service.store.transaction() as conn:
            size, root = service.store.event_count(conn), ""
    verification = Verification(
        status=report["status"],
        events_checked=report["events_checked"],
        checks=dict(report["checks"]),
        first_failure=report["first_failure"],
        last_event_hash=stored[-1].event_hash if stored else "",
        stream_version=stored[-1].stream_version if stored else 0,
        tree_size=size,
        tree_root=root,
    )
    from ledger.inputs.models import explain_inputs

    return _collect(view, events, verification, unreadable, explain_inputs(events), actors)


def _tree_head(store: Any) -> tuple[int, str]:
    from ledger.integrity.audit import b64, stored_tree

    with store.transaction() as conn:
        tree = stored_tree(store, conn)
    return tree.size, b64(tree.root())


def _collect(
    view: RunView,
    events: Sequence[Event],
    verification: Verification,
    unreadable: int,
    why_inputs: dict[int, dict[str, Any]] | None = None,
    actors: dict[int, str] | None = None,
) -> ReportData:
    plan = next((e for e in events if isinstance(e, RunPlanned)), None)
    target = dict(plan.target) if plan else {"soc": view.run.soc}
    weights = [c.weight for c in view.cases]
    baseline: tuple[Measurement, ...] = ()
    submitted: dict[int, RoundSubmitted] = {}
    measured: dict[int, tuple[Measurement, ...]] = {}
    references: dict[int, tuple[Measurement, ...]] = {}
    decided: dict[int, RoundDecided] = {}
    profiles: list[ProfileEntry] = []
    for event in events:
        if isinstance(event, MeasurementsRecorded):
            if event.role == "baseline":
                baseline = tuple(event.measurements)
            elif event.role == "reference":
                references[event.round] = tuple(event.measurements)
            else:
                measured[event.round] = tuple(event.measurements)
        elif isinstance(event, RoundSubmitted):
            submitted[event.round] = event
        elif isinstance(event, RoundDecided):
            decided[event.round] = event
        elif isinstance(event, ProfileRecorded):
            profiles.append(_profile_entry(event))
    base_medians = [m.median_us for m in baseline]
    rounds = []
    unreadable_text = "(its RoundSubmitted event could not be read)"
    for number in sorted(set(submitted) | set(decided)):
        s, d, m = submitted.get(number), decided.get(number), measured.get(number)
        why = explain(d, **(why_inputs or {}).get(number, {})) if d else None
        vs_original = None
        if m is not None and len(m) == len(base_medians) == len(weights) and weights:
            vs_original = decide.weighted_improvement(
                weights, base_medians, [x.median_us for x in m]
            )
        saved = looks.saving(
            d.statistics if d else None,
            [x.median_us for x in m] if m else None,
            [x.median_us for x in references[number]] if number in references else None,
        )
        rounds.append(
            RoundEntry(
                round=number,
                decision=d.decision if d else None,
                hypothesis=s.hypothesis if s else unreadable_text,
                change=s.change if s else "—",
                mechanism=(d.mechanism if d and d.mechanism else s.mechanism if s else None),
                evidence=d.evidence if d else None,
                relative_improvement=d.relative_improvement if d else None,
                worst_case_regression=d.worst_case_regression if d else None,
                cumulative_improvement=d.cumulative_improvement if d else None,
                vs_original=vs_original,
                flags=tuple(d.flags) if d else (),
                mechanism_confirmed=(
                    d.mechanism_check.confirmed if d and d.mechanism_check else None
                ),
                candidate_sha256=s.candidate.sha256 if s else d.candidate_sha256 if d else "",
                measurements=m,
                explanation=why.sentence if why else "No decision was recorded for this round.",
                rule=why.rule if why else None,
                repeats_used=saved.repeats_used if saved else None,
                max_repeats=saved.max_repeats if saved else None,
                device_time_saved_us=saved.device_time_saved_us if saved else None,
                recorded_by=(actors or {}).get(number, "not recorded"),
            )
        )
        # Ledgers written before profiles were ingested keep the round's signals only here.
        covered = any(p.round == number and p.origin == "round-result" for p in profiles)
        if s is not None and s.profiler_signals and not covered:
            profiles.append(
                ProfileEntry(
                    label=f"round {number}",
                    subject="round",
                    round=number,
                    kernel_sha256=s.candidate.sha256,
                    origin="round-result",
                    format="signals",
                    kernel_name=None,
                    signals=dict(s.profiler_signals),
                    bottleneck=None,
                    evidence=(),
                    first_experiment=None,
                )
            )
    # the original first, then rounds in order, then other kernels; recording order within
    order = {"baseline": 0, "round": 1, "kernel": 2}
    profiles = [
        p
        for _, p in sorted(
            enumerate(profiles),
            key=lambda ip: (order.get(ip[1].subject, 3), ip[1].round or 0, ip[0]),
        )
    ]
    return ReportData(
        view=view,
        target=target,
        measurement_policy=plan.measurement_policy if plan else None,
        baseline=baseline,
        rounds=tuple(rounds),
        profiles=tuple(profiles),
        diagnoses=tuple(e for e in events if isinstance(e, DiagnosisRecorded)),
        conclusion=_standing_conclusion(events),
        verification=verification,
        unreadable_events=unreadable,
        noise=noise_summary(events),
        baseline_comparison=_baseline_comparison(decided),
    )


def _baseline_comparison(decided: dict[int, RoundDecided]) -> tuple[float, bool] | None:
    """The latest decision's plain comparison with the original baseline, where its
    cumulative improvement is chained (contract 2, a kept round had a reference)."""
    last = decided[max(decided)] if decided else None
    if last is None or last.baseline_improvement is None:
        return None
    return last.baseline_improvement, bool(last.baseline_across_sessions)


def _standing_conclusion(events: Sequence[Event]) -> RunConcluded | None:
    """The run's latest conclusion, unless a RunReopened came after it."""
    for event in reversed(events):
        if isinstance(event, RunConcluded | RunReopened):
            return event if isinstance(event, RunConcluded) else None
    return None


def _profile_entry(event: ProfileRecorded) -> ProfileEntry:
    attribution = event.attribution or {}
    if event.subject == "baseline":
        label = "original"
    elif event.subject == "round":
        label = f"round {event.round}"
    elif event.subject == "candidate":
        label = f"candidate {event.kernel_sha256[:10]}"
    else:
        label = f"kernel {event.kernel_sha256[:10]}"
    if event.case_id is not None:  # a case profiled on its own is shown as that case's
        label += f", case {event.case_id}"
    evidence = attribution.get("evidence") or ()
    evidence = [*evidence, *_profile_notes(attribution)] if isinstance(evidence, list) else ()
    return ProfileEntry(
        label=label,
        subject=event.subject,
        round=event.round,
        kernel_sha256=event.kernel_sha256,
        origin=event.origin,
        format=event.format,
        kernel_name=event.kernel_name,
        signals=dict(event.signals),
        bottleneck=attribution.get("bottleneck"),
        evidence=tuple(str(x) for x in evidence) if isinstance(evidence, list) else (),
        first_experiment=attribution.get("first_experiment"),
        flags=tuple(str(f) for f in attribution.get("flags") or ()),
    )


def _profile_notes(attribution: dict) -> list[str]:
    """Each shape's own class and the reader's notes, as the event stores them."""
    shapes = attribution.get("shapes") or []
    notes = attribution.get("notes") or []
    lines = [
        f"shape {s.get('shape') or '(none)'}: {s.get('bottleneck')} ({s.get('launches')} "
        f"launch(es))"
        for s in shapes
        if isinstance(s, dict)
    ]
    return lines + [f"note: {n}" for n in notes if isinstance(n, str)]


# --- writing ------------------------------------------------------------------------------


def write_report(service: Any, run_id: str, path: Path, *, force: bool = False) -> ReportResult:
    """Gather, render and write the page atomically (`ledger.files.write_output`)."""
    path = Path(path).absolute()
    files.check_output(path, what="--html", force=force, protected=service.store.ledger_files())
    data = gather(service, run_id)
    page, charts = render(data)
    encoded = page.encode("utf-8")
    files.write_output(
        path, encoded, what="--html", force=force, protected=service.store.ledger_files()
    )
    return ReportResult(
        run_id=run_id,
        path=path,
        size=len(encoded),
        charts=charts,
        rounds=len(data.rounds),
        profiles=len(data.profiles),
        verification=data.verification,
    )


# --- rendering ----------------------------------------------------------------------------


def render(data: ReportData) -> tuple[str, tuple[str, ...]]:
    """The page, and the names of the charts it holds."""
    from ledger.reports.charts import charts

    drawn = charts(data)
    title = f"{data.view.run.op_name} — run {data.run_id} — kernel-ledger report"
    page = _templates().render(
        "report.html", csp=CONTENT_SECURITY_POLICY, title=title, data=data, charts=drawn
    )
    return page, tuple(name for name, svg in drawn.items() if svg is not None)


def _templates() -> Any:
    try:
        import jinja2  # noqa: F401
    except ImportError:
        raise InputError(
            "the HTML report needs jinja2: pip install 'kernel-ledger[report]'"
        ) from None
    from ledger.reports import rendering as templates

    return templates
