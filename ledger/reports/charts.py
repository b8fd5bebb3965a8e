"""The report's charts: matplotlib figures drawn to inline SVG, a pure function of the
gathered run (`report.ReportData`, which imports this module: not the other way round).

matplotlib's object API only (no pyplot, no GUI backend), text as paths and fixed element
ids, so the same run gives the same bytes. matplotlib comes with the optional `report`
extra and is imported only when a chart is drawn.

    charts(data) -> {"timeline": svg, "latency": svg | None, "profiles": svg | None}
"""

from __future__ import annotations

import html
import io
import math
import re
import warnings
from collections.abc import Sequence
from typing import Any

from ledger.core.events import (
    Measurement,
)
from ledger.errors import InputError

MAX_CASE_PANELS = 24
MAX_PROFILE_ROWS = 16

DECISION_COLORS = {
    "KEEP": "#2e7d32",
    "DISCARD": "#e65100",
    "NOISE": "#6d6d6d",
    "FAIL": "#c62828",
}
DECISION_MARKERS = {"KEEP": "o", "DISCARD": "s", "NOISE": "D", "FAIL": "X"}
ORIGINAL_COLOR = "#1565c0"
TARGET_COLOR = "#6a1b9a"
OUTLIER_COLOR = "#b71c1c"
MAX_STRIP_POINTS = 150
MAX_PROFILE_COLUMNS = 8
_FRACTION_SIGNAL = re.compile(r"(_ratio|_rate|throughput|occupancy|utilization)$")


def charts(data: Any) -> dict[str, Any]:
    """The page's charts as inline SVG markup, by name (None where a chart has no data)."""
    from markupsafe import Markup

    mpl = _matplotlib()
    out: dict[str, Any] = {"timeline": None, "latency": None, "profiles": None}
    rc = {"svg.fonttype": "path", "text.parse_math": False, "font.size": 9}
    with warnings.catch_warnings(), mpl.rc_context(rc):
        warnings.simplefilter("ignore")  # e.g. a glyph missing from the font: not the user's
        out["timeline"] = Markup(_svg(_timeline_figure(data), "timeline", "Round timeline"))
        if data.baseline:
            out["latency"] = Markup(_svg(_latency_figure(data), "latency", "Latency per case"))
        profile_fig = _profile_figure(data)
        if profile_fig is not None:
            out["profiles"] = Markup(_svg(profile_fig, "profiles", "Profile signals"))
    return out


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


def _timeline_figure(data: Any) -> Any:
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
    ax.set_title(f"{run.op_name}: improvement per round ({data.timing_label})")
    return figure


def robust_limits(
    sample_sets: Sequence[Sequence[float]], keep: Sequence[float] = ()
) -> tuple[float, float]:
    """Axis limits that span every box's whiskers (quartiles ± 1.5 IQR, as drawn) and every
    value of `keep` (the medians and 0), plus a margin: one slow repeat cannot squeeze the
    boxes flat. A sample beyond the limits is an outlier that the chart marks at the edge.

    >>> low, high = robust_limits([[0.0] * 97 + [1.0, 2.0, 50.0]], [0.0])
    >>> low < 0.0 < high < 5.0
    True
    """
    import numpy as np

    ends = [0.0, *keep]
    for values in sample_sets:
        arr = np.asarray(values, dtype=float)
        if arr.size == 0:
            continue
        q1, q3 = (float(x) for x in np.percentile(arr, [25, 75]))
        reach = 1.5 * (q3 - q1)
        ends.append(float(arr[arr >= q1 - reach].min()))
        ends.append(float(arr[arr <= q3 + reach].max()))
    lo, hi = min(ends), max(ends)
    pad = max((hi - lo) * 0.12, 0.5)
    return lo - pad, hi + pad


def _latency_figure(data: Any) -> Any:
    import numpy as np

    run = data.view.run
    cases = [m.case_id for m in data.baseline][:MAX_CASE_PANELS]
    base = {m.case_id: m.median_us for m in data.baseline}
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
        reference = base[case_id]
        panel = []
        for position, (_, number, decision, rows) in enumerate(columns):
            row = next((m for m in rows if m.case_id == case_id), None)
            if row is None:
                continue
            samples = (
                (np.asarray(row.samples_us, dtype=float) / reference - 1) * 100
                if row.samples_us
                else None
            )
            panel.append(
                (position, number, decision, (row.median_us / reference - 1) * 100, samples)
            )
        low, high = robust_limits([p[4] for p in panel if p[4] is not None], [p[3] for p in panel])
        outliers = 0
        for position, number, decision, median, samples in panel:
            color = ORIGINAL_COLOR if number == 0 else DECISION_COLORS.get(decision or "", "#000")
            best = number == run.best_round
            if samples is not None:
                box = ax.boxplot(
                    [samples],
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
                inside = samples[(samples >= low) & (samples <= high)]
                shown = inside
                if len(inside) > MAX_STRIP_POINTS:
                    shown = inside[np.linspace(0, len(inside) - 1, MAX_STRIP_POINTS).astype(int)]
                jitter = np.random.default_rng(1000 * index + position).uniform(
                    -0.18, 0.18, len(shown)
                )
                ax.plot(position + jitter, shown, ".", ms=2.5, color=color, alpha=0.6, zorder=3)
                above = int(np.sum(samples > high))
                below = int(np.sum(samples < low))
                outliers += above + below
                edge = (high - low) * 0.03
                for count, y, marker in ((above, high - edge, "^"), (below, low + edge, "v")):
                    if count:
                        ax.plot(
                            [position], [y], marker=marker, ms=6, color=OUTLIER_COLOR, ls="none"
                        )
                        ax.text(
                            position + 0.22,
                            y,
                            str(count),
                            fontsize=6,
                            color=OUTLIER_COLOR,
                            va="center",
                        )
            else:
                ax.plot(
                    [position],
                    [median],
                    marker="D",
                    ms=7,
                    color=color,
                    markeredgecolor="black" if best else color,
                    markeredgewidth=1.6 if best else 0.5,
                    ls="none",
                    zorder=3,
                )
        ax.axhline(0, color="#999999", lw=0.8, zorder=1)
        ax.set_ylim(low, high)
        ax.set_xticks(range(len(columns)))
        labels = ax.set_xticklabels(
            [c[0] for c in columns], rotation=90 if len(columns) > 10 else 0, fontsize=8
        )
        for label, column in zip(labels, columns, strict=True):
            if column[1] == run.best_round:
                label.set_fontweight("bold")
                label.set_color("black")
        ax.set_xlim(-0.7, len(columns) - 0.3)
        title = f"{case_id} (orig {reference:.3g} µs)"
        if outliers:
            title += f", {outliers} outlier{'s' if outliers != 1 else ''}"
        ax.set_title(title, fontsize=8)
        ax.set_ylabel("vs original (%)")
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
    handles.append(
        Line2D([], [], marker="^", ls="none", color=OUTLIER_COLOR, label="outliers off axis")
    )
    figure.legend(handles=handles, loc="lower center", ncol=4, frameon=False)
    figure.suptitle(f"Latency per case relative to the original — {data.timing_label}", fontsize=10)
    figure.tight_layout(rect=(0, 0.09, 1, 0.97))
    return figure


def _fraction_columns(profiles: Sequence[Any]) -> list[str]:
    counts: dict[str, int] = {}
    for p in profiles:
        for key, value in p.signals.items():
            if _FRACTION_SIGNAL.search(key) and 0.0 <= value <= 2.0:
                counts[key] = counts.get(key, 0) + 1
    ranked = sorted(counts, key=lambda k: (-counts[k], k))
    return sorted(ranked[:MAX_PROFILE_COLUMNS])


def _profile_figure(data: Any) -> Any | None:
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
