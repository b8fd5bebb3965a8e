"""The HTML report of one run: one self-contained page a person reads.

    gather(service, run_id) -> ReportData     reads the ledger (projection, events, verifier)
    render_html(data)       -> str            pure: the page, charts as inline SVG
    write_report(service, run_id, path)       gather, render, write atomically

The page needs nothing else: no network, no scripts, no external CSS or fonts; a
Content-Security-Policy forbids loading anything. Charts are drawn with matplotlib's
object API (no pyplot, no GUI backend) straight to SVG, with text as paths and fixed
element ids, so rendering the same ledger twice gives the same bytes. matplotlib comes
with the optional `report` extra and is imported only here, only when a page is rendered.

Sections: the run's standing; (a) the round timeline (decision markers, cumulative
improvement against the original, the target line); the rounds table; (b) per-case
latency distributions of the original, the candidates and the best kernel from the raw
samples (medians where no samples were recorded); (c) profile signals where profiles
were recorded; (d) verification: the replay verifier's result for the run, its last event
hash and the tree head over the whole log (what a checkpoint pins).
"""

from __future__ import annotations

import base64
import html
import io
import math
import re
import warnings
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ledger import decide, files, merkle
from ledger.errors import InputError
from ledger.events import (
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
from ledger.projections import RunView

DECISION_COLORS = {
    "KEEP": "#2e7d32",
    "DISCARD": "#e65100",
    "NOISE": "#6d6d6d",
    "FAIL": "#c62828",
}
DECISION_MARKERS = {"KEEP": "o", "DISCARD": "s", "NOISE": "D", "FAIL": "X"}
ORIGINAL_COLOR = "#1565c0"
TARGET_COLOR = "#6a1b9a"
MAX_CASE_PANELS = 24
MAX_STRIP_POINTS = 150
MAX_PROFILE_ROWS = 16
MAX_PROFILE_COLUMNS = 8
# The page may load nothing at all: no scripts, images, fonts, frames or connections.
CONTENT_SECURITY_POLICY = "default-src 'none'; style-src 'unsafe-inline'"

_GPU = re.compile(
    r"\b(nvidia|geforce|quadro|tesla|rtx|gtx|titan|radeon|instinct|amd|gpu|cuda|"
    r"[ahblv]\d{2,3}[a-z]?|gh\d{3}|gb\d{3}|mi\d{3}[a-z]?|sm_?\d{2,3})\b",
    re.IGNORECASE,
)
_NPU = re.compile(r"ascend|\bnpu\b", re.IGNORECASE)
_FRACTION_SIGNAL = re.compile(r"(_ratio|_rate|throughput|occupancy|utilization)$")


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

    @property
    def run_id(self) -> str:
        return self.view.run.run_id


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


def gather(service: Any, run_id: str) -> ReportData:
    """Everything the page shows, read from the ledger; nothing is written."""
    from ledger.verify import verify_ledger

    view = service.full_view(run_id)  # an unknown run is refused here
    stored = service.stream(run_id)
    events: list[Event] = []
    unreadable = 0
    for record in stored:
        try:
            events.append(record.event())
        except ValueError:  # a damaged payload: the verification panel says which
            unreadable += 1
    report = verify_ledger(service.store, run_id).as_dict()
    size, root = _tree_head(service.store)
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
    return _collect(view, events, verification, unreadable)


def _tree_head(store: Any) -> tuple[int, str]:
    builder = merkle.TreeBuilder()
    with store.transaction() as conn:
        for record in store.iter_events(conn):
            builder.append(bytes.fromhex(record.event_hash))
    return builder.size, base64.b64encode(builder.root()).decode("ascii")


def _collect(
    view: RunView, events: Sequence[Event], verification: Verification, unreadable: int
) -> ReportData:
    plan = next((e for e in events if isinstance(e, RunPlanned)), None)
    target = dict(plan.target) if plan else {"soc": view.run.soc}
    weights = [c.weight for c in view.cases]
    baseline: tuple[Measurement, ...] = ()
    submitted: dict[int, RoundSubmitted] = {}
    measured: dict[int, tuple[Measurement, ...]] = {}
    decided: dict[int, RoundDecided] = {}
    profiles: list[ProfileEntry] = []
    for event in events:
        if isinstance(event, MeasurementsRecorded):
            if event.role == "baseline":
                baseline = tuple(event.measurements)
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
        vs_original = None
        if m is not None and len(m) == len(base_medians) == len(weights) and weights:
            vs_original = decide.weighted_improvement(
                weights, base_medians, [x.median_us for x in m]
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
    )


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
    else:
        label = f"kernel {event.kernel_sha256[:10]}"
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


def render_html(data: ReportData) -> str:
    return render(data)[0]


def render(data: ReportData) -> tuple[str, tuple[str, ...]]:
    """The page, and the names of the charts it holds."""
    mpl = _matplotlib()
    charts: list[str] = []
    rc = {"svg.fonttype": "path", "text.parse_math": False, "font.size": 9}
    with warnings.catch_warnings(), mpl.rc_context(rc):
        warnings.simplefilter("ignore")  # e.g. a glyph missing from the font: not the user's
        timeline = _svg(_timeline_figure(data), "timeline", "Round timeline")
        charts.append("timeline")
        latency = None
        if data.baseline:
            latency = _svg(_latency_figure(data), "latency", "Latency per case")
            charts.append("latency")
        profile_fig = _profile_figure(data)
        profile = None
        if profile_fig is not None:
            profile = _svg(profile_fig, "profiles", "Profile signals")
            charts.append("profiles")
    body = "\n".join(
        [
            _header(data),
            _section_timeline(data, timeline),
            _section_rounds(data),
            _section_latency(data, latency),
            _section_profiles(data, profile),
            _section_verification(data),
            _footer(data),
        ]
    )
    title = f"{data.view.run.op_name} — run {data.run_id} — kernel-ledger report"
    page = _PAGE.format(csp=CONTENT_SECURITY_POLICY, title=_e(title), style=_STYLE, body=body)
    return page, tuple(charts)


def _matplotlib() -> Any:
    try:
        import matplotlib
    except ImportError:
        raise InputError(
            "the HTML report needs matplotlib: pip install 'kernel-ledger[report]'"
        ) from None
    return matplotlib


def _e(value: Any) -> str:
    return html.escape(str(value), quote=True)


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{value * 100:+.2f}%"


def _num(value: float | None) -> str:
    return "—" if value is None else f"{value:.4g}"


def _svg(figure: Any, name: str, label: str) -> str:
    """The figure as an inline <svg> element (no XML prolog, fixed ids, no date)."""
    import matplotlib

    buffer = io.BytesIO()
    with matplotlib.rc_context({"svg.hashsalt": f"kernel-ledger-{name}"}):
        figure.savefig(buffer, format="svg", metadata={"Date": None}, bbox_inches="tight")
    text = buffer.getvalue().decode("utf-8")
    start = text.index("<svg")
    svg = text[start:].strip()
    return svg.replace("<svg", f'<svg role="img" aria-label="{_e(label)}"', 1)


def _figure(width: float, height: float) -> Any:
    from matplotlib.figure import Figure

    figure = Figure(figsize=(width, height), dpi=96)
    figure.patch.set_facecolor("white")
    return figure


def _timeline_figure(data: ReportData) -> Any:
    run = data.view.run
    figure = _figure(9.5, 3.8)
    ax = figure.add_subplot()
    xs = [0] + [r.round for r in data.rounds if r.cumulative_improvement is not None]
    ys = [0.0] + [
        r.cumulative_improvement * 100 for r in data.rounds if r.cumulative_improvement is not None
    ]
    ax.step(xs, ys, where="post", color=ORIGINAL_COLOR, lw=2, label="best kernel vs original")
    ax.plot([0], [0], marker="o", ms=7, color=ORIGINAL_COLOR, ls="none")
    target = run.target_relative_improvement * 100
    ax.axhline(target, color=TARGET_COLOR, ls="--", lw=1.3, label=f"target {target:+.1f}%")
    ax.axhline(0, color="#999999", lw=0.8)
    standing = 0.0
    seen: set[str] = set()
    for r in data.rounds:
        decision = r.decision or "FAIL"
        y = r.vs_original * 100 if r.vs_original is not None else standing * 100
        label = None if decision in seen else f"{decision} (candidate vs original)"
        seen.add(decision)
        ax.plot(
            [r.round],
            [y],
            marker=DECISION_MARKERS.get(decision, "o"),
            ms=9,
            color=DECISION_COLORS.get(decision, "#000000"),
            markeredgecolor="white",
            markeredgewidth=0.8,
            ls="none",
            label=label,
            zorder=3,
        )
        if r.cumulative_improvement is not None:
            standing = r.cumulative_improvement
    last = max([0] + [r.round for r in data.rounds])
    ax.set_xlim(-0.5, max(last, 1) + 0.5)
    ax.set_xticks(range(0, max(last, 1) + 1, max(1, math.ceil((last + 1) / 25))))
    ax.set_xlabel("round (0 = original kernel)")
    ax.set_ylabel("weighted improvement vs original (%)")
    ax.grid(True, axis="y", color="#e0e0e0", lw=0.6)
    ax.set_axisbelow(True)
    for side in ("top", "right"):
        ax.spines[side].set_visible(False)
    ax.legend(loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False, fontsize=8)
    ax.set_title(f"{run.op_name}: improvement per round ({timing_label(data.target)})")
    return figure


def _latency_figure(data: ReportData) -> Any:
    import numpy as np

    run = data.view.run
    cases = [m.case_id for m in data.baseline][:MAX_CASE_PANELS]
    columns: list[tuple[str, int, str | None, tuple[Measurement, ...]]] = [
        ("orig", 0, None, data.baseline)
    ]
    for r in data.rounds:
        if r.measurements is not None:
            columns.append((f"r{r.round}", r.round, r.decision, r.measurements))
    ncols = min(3, len(cases))
    nrows = math.ceil(len(cases) / ncols)
    width_per_panel = max(3.2, 0.42 * len(columns) + 1.2)
    figure = _figure(min(16.0, width_per_panel * ncols), 2.9 * nrows + 0.7)
    axes = figure.subplots(nrows, ncols, squeeze=False)
    for index, case_id in enumerate(cases):
        ax = axes[index // ncols][index % ncols]
        for position, (_, number, decision, rows) in enumerate(columns):
            row = next((m for m in rows if m.case_id == case_id), None)
            if row is None:
                continue
            color = ORIGINAL_COLOR if number == 0 else DECISION_COLORS.get(decision or "", "#000")
            best = number == run.best_round
            if row.samples_us:
                values = np.asarray(row.samples_us, dtype=float)
                box = ax.boxplot(
                    [values],
                    positions=[position],
                    widths=0.6,
                    showfliers=False,
                    patch_artist=True,
                    medianprops={"color": "black", "lw": 1.6 if best else 1.0},
                )
                for patch in box["boxes"]:
                    patch.set_facecolor(color)
                    patch.set_alpha(0.35)
                    patch.set_edgecolor("black" if best else color)
                    patch.set_linewidth(2.0 if best else 1.0)
                shown = values
                if len(values) > MAX_STRIP_POINTS:
                    shown = values[np.linspace(0, len(values) - 1, MAX_STRIP_POINTS).astype(int)]
                jitter = np.random.default_rng(1000 * index + position).uniform(
                    -0.18, 0.18, len(shown)
                )
                ax.plot(position + jitter, shown, ".", ms=2.5, color=color, alpha=0.6, zorder=3)
            else:
                ax.plot(
                    [position],
                    [row.median_us],
                    marker="D",
                    ms=7,
                    color=color,
                    markeredgecolor="black" if best else color,
                    markeredgewidth=1.6 if best else 0.5,
                    ls="none",
                    zorder=3,
                )
        ax.set_xticks(range(len(columns)))
        labels = ax.set_xticklabels(
            [c[0] for c in columns], rotation=90 if len(columns) > 10 else 0, fontsize=8
        )
        for label, column in zip(labels, columns, strict=True):
            if column[1] == run.best_round:
                label.set_fontweight("bold")
                label.set_color("black")
        ax.set_xlim(-0.7, len(columns) - 0.3)
        ax.set_title(case_id, fontsize=9)
        ax.set_ylabel("µs")
        ax.grid(True, axis="y", color="#e8e8e8", lw=0.6)
        ax.set_axisbelow(True)
        for side in ("top", "right"):
            ax.spines[side].set_visible(False)
    for index in range(len(cases), nrows * ncols):
        axes[index // ncols][index % ncols].set_visible(False)
    from matplotlib.lines import Line2D

    handles = [Line2D([], [], marker="s", ls="none", color=ORIGINAL_COLOR, label="original")]
    handles += [
        Line2D([], [], marker="s", ls="none", color=color, label=decision)
        for decision, color in DECISION_COLORS.items()
        if decision != "FAIL"
    ]
    handles.append(
        Line2D([], [], marker="s", ls="none", mfc="white", mec="black", mew=2, label="best kernel")
    )
    figure.legend(handles=handles, loc="lower center", ncol=len(handles), frameon=False)
    figure.suptitle(f"Latency per case — {timing_label(data.target)}", fontsize=10)
    figure.tight_layout(rect=(0, 0.06, 1, 0.97))
    return figure


def _fraction_columns(profiles: Sequence[ProfileEntry]) -> list[str]:
    counts: dict[str, int] = {}
    for p in profiles:
        for key, value in p.signals.items():
            if _FRACTION_SIGNAL.search(key) and 0.0 <= value <= 2.0:
                counts[key] = counts.get(key, 0) + 1
    ranked = sorted(counts, key=lambda k: (-counts[k], k))
    return sorted(ranked[:MAX_PROFILE_COLUMNS])


def _profile_figure(data: ReportData) -> Any | None:
    profiles = list(data.profiles)[-MAX_PROFILE_ROWS:]
    columns = _fraction_columns(profiles)
    if not profiles or not columns:
        return None
    import numpy as np

    grid = np.full((len(profiles), len(columns)), np.nan)
    for i, p in enumerate(profiles):
        for j, key in enumerate(columns):
            if key in p.signals:
                grid[i, j] = p.signals[key]
    figure = _figure(max(6.0, 1.05 * len(columns) + 3.4), 0.42 * len(profiles) + 1.9)
    ax = figure.add_subplot()
    masked = np.ma.masked_invalid(grid)
    import matplotlib

    cmap = matplotlib.colormaps["viridis"].with_extremes(bad="#eeeeee")
    # pcolormesh, not imshow: cells stay vectors (imshow would embed a raster image)
    image = ax.pcolormesh(
        np.arange(len(columns) + 1) - 0.5,
        np.arange(len(profiles) + 1) - 0.5,
        masked,
        cmap=cmap,
        vmin=0.0,
        vmax=1.0,
        edgecolors="white",
        linewidth=1.0,
    )
    ax.set_ylim(len(profiles) - 0.5, -0.5)
    for i in range(len(profiles)):
        for j in range(len(columns)):
            if not np.isnan(grid[i, j]):
                value = grid[i, j]
                ax.text(
                    j,
                    i,
                    f"{value * 100:.0f}%",
                    ha="center",
                    va="center",
                    fontsize=8,
                    color="white" if value < 0.6 else "black",
                )
    ax.set_xticks(range(len(columns)))
    ax.set_xticklabels(columns, rotation=30, ha="right", fontsize=8)
    ax.set_yticks(range(len(profiles)))
    ax.set_yticklabels(
        [f"{p.label} · {p.bottleneck}" if p.bottleneck else p.label for p in profiles], fontsize=8
    )
    bar = figure.colorbar(image, ax=ax, fraction=0.04, pad=0.02, label="fraction of peak / time")
    if bar.solids is not None:
        bar.solids.set_rasterized(False)  # keep the page free of embedded raster images
    ax.set_title("Profile signals (fractions; grey: not reported)", fontsize=10)
    return figure


# --- HTML sections ------------------------------------------------------------------------


def _badge(decision: str | None) -> str:
    if decision is None:
        return '<span class="badge">—</span>'
    return f'<span class="badge d-{_e(decision.lower())}">{_e(decision)}</span>'


def _sha(digest: str) -> str:
    return f'<code title="{_e(digest)}">{_e(digest[:12])}</code>'


def _header(data: ReportData) -> str:
    run = data.view.run
    v = data.verification
    standing = run.conclusion or run.status
    target = ", ".join(f"{k}={v}" for k, v in data.target.items())
    policy = data.measurement_policy
    policy_text = ", ".join(f"{k}={v}" for k, v in policy.items()) if policy else "not stated"
    met = "met" if run.target_met else "not met"
    verified = "verified" if v.ok else "VERIFICATION FAILED"
    return f"""<header>
<h1>{_e(run.op_name)} <span class="muted">run</span> {_e(run.run_id)}</h1>
<p class="lead"><span class="status s-{_e(standing)}">{_e(standing)}</span>
 improvement vs original <strong>{_pct(run.cumulative_improvement)}</strong>
 (target {_pct(run.target_relative_improvement)}, {met})
 <span class="status {"v-ok" if v.ok else "v-failed"}">{verified}</span></p>
<dl class="facts">
<dt>Target</dt><dd>{_e(target)}</dd>
<dt>Timings</dt><dd>{_e(timing_label(data.target))}: medians as recorded, with the raw
per-repeat samples where they were given; measurement policy: {_e(policy_text)}</dd>
<dt>Best kernel</dt><dd>{_sha(run.best_kernel_sha256)} from round {run.best_round}
 <span class="path">{_e(run.best_kernel_path)}</span></dd>
<dt>Original kernel</dt><dd>{_sha(run.original_kernel_sha256)}</dd>
<dt>Rounds</dt><dd>{run.rounds_recorded} of {run.max_rounds}, kept {run.kept_rounds},
 consecutive failures {run.consecutive_failures} of {run.max_consecutive_failures}
 {"— <strong>needs diagnosis</strong>" if run.needs_diagnosis else ""}</dd>
<dt>Objective</dt><dd>min improvement {_pct(run.min_relative_improvement)}, noise floor
 {_pct(run.noise_floor)}, max case regression {_pct(run.max_case_regression)}</dd>
<dt>Parent run</dt><dd>{_e(run.parent_run_id or "—")}</dd>
<dt>Planned</dt><dd>{_e(run.planned_at)}; last event {_e(run.updated_at)}</dd>
</dl>
<nav><a href="#timeline">Timeline</a> · <a href="#rounds">Rounds</a> ·
<a href="#latency">Latency</a> · <a href="#profiles">Profiles</a> ·
<a href="#verification">Verification</a></nav>
</header>"""


def _figure_html(name: str, svg: str, caption: str) -> str:
    return (
        f'<figure class="chart" id="chart-{name}">\n{svg}\n'
        f"<figcaption>{caption}</figcaption>\n</figure>"
    )


def _section_timeline(data: ReportData, svg: str) -> str:
    if data.rounds:
        caption = (
            "The line is the best kernel's weighted improvement against the original after "
            "each round; markers are each round's candidate against the original, colored "
            "by the decision (a FAIL, never measured, sits on the line). The dashed line "
            "is the target."
        )
    else:
        caption = "No rounds recorded yet: only the original kernel and the target."
    diagnoses = ""
    if data.diagnoses:
        items = "".join(
            f"<li>after round {d.after_round}: {_e(d.bottleneck)} — {_e(d.evidence)}</li>"
            for d in data.diagnoses
        )
        diagnoses = f"<p>Diagnoses recorded:</p><ul>{items}</ul>"
    return (
        '<section id="timeline"><h2>Round timeline</h2>\n'
        f"{_figure_html('timeline', svg, caption)}\n{diagnoses}</section>"
    )


def _section_rounds(data: ReportData) -> str:
    if not data.rounds:
        return '<section id="rounds"><h2>Rounds</h2><p>No rounds recorded.</p></section>'
    rows = []
    for r in data.rounds:
        confirmed = {True: "confirmed", False: "not confirmed", None: ""}[r.mechanism_confirmed]
        mechanism = _e(r.mechanism or "—") + (
            f' <span class="muted">({confirmed})</span>' if confirmed else ""
        )
        rows.append(
            f"<tr><td class='n'>{r.round}</td><td>{_badge(r.decision)}</td>"
            f"<td class='text'>{_e(r.hypothesis)}</td><td class='text'>{_e(r.change)}</td>"
            f"<td>{mechanism}</td><td class='n'>{_pct(r.relative_improvement)}</td>"
            f"<td class='n'>{_pct(r.worst_case_regression)}</td>"
            f"<td class='n'>{_pct(r.cumulative_improvement)}</td>"
            f"<td>{_e(r.evidence or '—')}</td><td>{_e(', '.join(r.flags) or '—')}</td>"
            f"<td>{_sha(r.candidate_sha256)}</td></tr>"
        )
    return f"""<section id="rounds"><h2>Rounds</h2>
<p class="muted">I: weighted relative improvement over the best kernel of its time;
R: worst case regression; cumulative: the best kernel against the original after the
round.</p>
<div class="scroll"><table class="rounds">
<thead><tr><th>#</th><th>decision</th><th>hypothesis</th><th>change</th><th>mechanism</th>
<th>I</th><th>R</th><th>cumulative</th><th>evidence</th><th>flags</th><th>candidate</th></tr>
</thead>
<tbody>
{"".join(rows)}
</tbody></table></div></section>"""


def _section_latency(data: ReportData, svg: str | None) -> str:
    run = data.view.run
    if svg is None:
        return (
            '<section id="latency"><h2>Latency per case</h2>'
            "<p>No baseline measurements recorded.</p></section>"
        )
    with_samples = sum(1 for m in data.baseline if m.samples_us) + sum(
        1 for r in data.rounds for m in (r.measurements or ()) if m.samples_us
    )
    if with_samples:
        how = (
            "Boxes and dots are the raw per-repeat samples (box: quartiles and median; "
            "whiskers: 1.5 IQR); a diamond is a median recorded without samples."
        )
    else:
        how = "No raw samples were recorded: each diamond is the recorded median."
    shown = len(data.baseline)
    note = (
        f" The first {MAX_CASE_PANELS} of {shown} cases are drawn; the table lists all."
        if shown > MAX_CASE_PANELS
        else ""
    )
    missing = [m.case_id for m in data.baseline if m.source_not_found is not None]
    if missing:
        note += (
            f" The baseline named samples files that were not found (samples-file-not-found: "
            f"{', '.join(missing)}); its medians stand as recorded."
        )
    caption = (
        f"{_e(timing_label(data.target))}. orig is the original kernel, rN round N's "
        f"candidate (FAIL rounds are never measured); the best kernel (round "
        f"{run.best_round}) is outlined in black. {how}{note}"
    )
    best = {c.case_id: c for c in data.view.cases}
    rows = []
    for m in data.baseline:
        case = best.get(m.case_id)
        best_us = case.best_median_us if case else None
        change = (m.median_us - best_us) / m.median_us if best_us is not None else None
        rows.append(
            f"<tr><td>{_e(m.case_id)}</td><td class='n'>{_num(case.weight if case else None)}"
            f"</td><td class='n'>{m.median_us:.3f}</td><td class='n'>"
            f"{'—' if best_us is None else f'{best_us:.3f}'}</td>"
            f"<td class='n'>{_pct(change)}</td><td class='n'>{m.repeats}</td></tr>"
        )
    return f"""<section id="latency"><h2>Latency per case</h2>
{_figure_html("latency", svg, caption)}
<div class="scroll"><table>
<thead><tr><th>case</th><th>weight</th><th>original median µs</th><th>best median µs</th>
<th>improvement</th><th>original repeats</th></tr></thead>
<tbody>{"".join(rows)}</tbody></table></div></section>"""


def _signals_text(signals: dict[str, float]) -> str:
    parts = []
    for key in sorted(signals):
        value = signals[key]
        parts.append(f"{_e(key)}={value:.4g}")
    return "<br>".join(parts) if parts else "—"


def _section_profiles(data: ReportData, svg: str | None) -> str:
    if not data.profiles:
        return (
            '<section id="profiles"><h2>Profile signals</h2>'
            "<p>No profiles recorded for this run.</p></section>"
        )
    figure = ""
    if svg is not None:
        caption = (
            "Throughputs, occupancies and pipe ratios of each recorded profile, as "
            "fractions (1 = 100%); rows are labelled with the attributed bottleneck."
        )
        if len(data.profiles) > MAX_PROFILE_ROWS:
            caption += (
                f" The last {MAX_PROFILE_ROWS} of {len(data.profiles)} profiles are drawn; "
                "the table lists all."
            )
        figure = _figure_html("profiles", svg, caption)
    rows = []
    for p in data.profiles:
        evidence = "<br>".join(_e(x) for x in p.evidence) or "—"
        name = f"<br><span class='path'>{_e(p.kernel_name)}</span>" if p.kernel_name else ""
        rows.append(
            f"<tr><td>{_e(p.label)}</td><td>{_sha(p.kernel_sha256)}{name}</td>"
            f"<td>{_e(p.format)} <span class='muted'>({_e(p.origin)})</span></td>"
            f"<td>{_e(p.bottleneck or '—')}</td><td class='text'>{evidence}</td>"
            f"<td class='text'>{_e(p.first_experiment or '—')}</td>"
            f"<td class='signals'>{_signals_text(p.signals)}</td></tr>"
        )
    return f"""<section id="profiles"><h2>Profile signals</h2>
{figure}
<div class="scroll"><table>
<thead><tr><th>profile</th><th>kernel</th><th>format</th><th>bottleneck</th><th>evidence</th>
<th>first experiment</th><th>signals</th></tr></thead>
<tbody>{"".join(rows)}</tbody></table></div></section>"""


def _section_verification(data: ReportData) -> str:
    v = data.verification
    checks = "".join(
        f"<li class='c-{_e(state.replace(' ', '-'))}'>{_e(name)}: {_e(state)}</li>"
        for name, state in v.checks.items()
    )
    failure = ""
    if v.first_failure:
        f = v.first_failure
        where = f"seq {f['seq']} (version {f['stream_version']})" if f.get("seq") else "ledger"
        failure = (
            f"<p class='failure'>First failure at {_e(where)}: {_e(f['check'])}: "
            f"{_e(f['reason'])}</p>"
        )
    unreadable = (
        f"<p class='failure'>{data.unreadable_events} event(s) of this run could not be "
        "read and are missing from this report.</p>"
        if data.unreadable_events
        else ""
    )
    word = "ok" if v.ok else "failed"
    return f"""<section id="verification"><h2>Verification</h2>
<div class="panel {"v-ok" if v.ok else "v-failed"}">
<p class="verdict">Replay verification of this run: <strong>{word}</strong> —
{v.events_checked} events checked.</p>
{failure}{unreadable}
<ul class="checks">{checks}</ul>
<dl class="facts">
<dt>Events in this run</dt><dd>{v.stream_version}</dd>
<dt>Last event hash</dt><dd><code class="hash">{_e(v.last_event_hash)}</code></dd>
<dt>Ledger tree head</dt><dd>size {v.tree_size}, RFC 6962 root
<code class="hash">{_e(v.tree_root)}</code> (base64; what a checkpoint of the whole log pins)</dd>
</dl>
<p class="muted">Re-check at any time with
<code>kernel-ledger verify --run {_e(data.run_id)}</code>.</p>
</div></section>"""


def _footer(data: ReportData) -> str:
    return (
        "<footer>Written by kernel-ledger from the events of run "
        f"{_e(data.run_id)}; this page loads nothing from the network.</footer>"
    )


_PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta http-equiv="Content-Security-Policy" content="{csp}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<meta name="generator" content="kernel-ledger">
<title>{title}</title>
<style>{style}</style>
</head>
<body>
{body}
</body>
</html>
"""

_STYLE = """
:root { color-scheme: light; }
body { font-family: system-ui, -apple-system, "Segoe UI", "DejaVu Sans", Arial, sans-serif;
  margin: 0 auto; max-width: 1200px; padding: 24px 28px 48px; color: #1d1d1f;
  background: #ffffff; line-height: 1.45; font-size: 15px; }
h1 { font-size: 26px; margin: 0 0 6px; word-break: break-word; }
h2 { font-size: 19px; margin: 34px 0 10px; padding-bottom: 4px; border-bottom: 1px solid #ddd; }
.muted { color: #6b6b6b; font-weight: normal; }
.lead { font-size: 17px; margin: 6px 0 14px; }
.facts { display: grid; grid-template-columns: max-content 1fr; gap: 3px 16px; margin: 0; }
.facts dt { color: #555; }
.facts dd { margin: 0; word-break: break-word; }
nav { margin-top: 14px; font-size: 14px; }
nav a { color: #1565c0; }
.path { color: #555; font-size: 13px; word-break: break-all; }
code { font-family: "DejaVu Sans Mono", Menlo, Consolas, monospace; font-size: 13px; }
code.hash { word-break: break-all; }
.status { display: inline-block; padding: 1px 9px; border-radius: 10px; font-size: 14px;
  font-weight: 600; background: #e0e0e0; margin-right: 6px; }
.s-passed, .v-ok .verdict strong { color: #1b5e20; }
.status.s-passed { background: #c8e6c9; }
.status.s-failed, .status.v-failed { background: #ffcdd2; color: #b71c1c; }
.status.s-inconclusive { background: #fff3c4; }
.status.s-active { background: #bbdefb; }
.status.v-ok { background: #c8e6c9; color: #1b5e20; }
figure.chart { margin: 10px 0 16px; }
figure.chart svg { display: block; max-width: 100%; height: auto; }
figcaption { color: #555; font-size: 13px; margin-top: 4px; max-width: 900px; }
.scroll { overflow-x: auto; }
table { border-collapse: collapse; font-size: 13px; width: 100%; }
th, td { border-bottom: 1px solid #e3e3e3; padding: 5px 8px; text-align: left;
  vertical-align: top; }
th { background: #f5f5f5; font-weight: 600; }
tbody tr:nth-child(even) { background: #fafafa; }
td.n { text-align: right; font-variant-numeric: tabular-nums; white-space: nowrap; }
td.text { min-width: 180px; max-width: 380px; word-break: break-word; }
td.signals { font-family: "DejaVu Sans Mono", monospace; font-size: 12px;
  white-space: nowrap; }
.badge { display: inline-block; min-width: 62px; text-align: center; border-radius: 4px;
  padding: 1px 6px; font-size: 12px; font-weight: 700; color: #fff; background: #9e9e9e; }
.d-keep { background: #2e7d32; }
.d-discard { background: #e65100; }
.d-noise { background: #6d6d6d; }
.d-fail { background: #c62828; }
.panel { border-radius: 8px; padding: 12px 16px; border: 2px solid #a5d6a7;
  background: #f4fbf4; }
.panel.v-failed { border-color: #ef9a9a; background: #fff5f5; }
.verdict { font-size: 16px; margin: 0 0 8px; }
.v-failed .verdict strong, .failure { color: #b71c1c; }
.checks { list-style: none; padding: 0; margin: 0 0 10px; display: flex; flex-wrap: wrap;
  gap: 6px; }
.checks li { border-radius: 4px; padding: 1px 8px; font-size: 13px; background: #e8f5e9; }
.checks li.c-failed { background: #ffcdd2; }
.checks li.c-not-run { background: #eeeeee; color: #777; }
footer { margin-top: 40px; color: #777; font-size: 12px; }
"""
