"""Nsight Compute ``--csv`` output, long (``--page details``, one metric per row) or wide
(``--page raw`` or ``--metrics``, one launch per row), with every unit the tool writes."""

from __future__ import annotations

import math
import re
from collections.abc import Sequence

from ledger.errors import InputError
from ledger.inputs.jsonio import plural
from ledger.inputs.profiles.common import (
    Format,
    ParsedProfile,
    ShapeProfile,
    _find_header,
    _finite_only,
    _number,
    _pick_shape,
    _sanitize,
    _select,
    _table,
    signal_names,
    signal_sources,
)
from ledger.inputs.profiles.msprof import merge_launches

_TIME_UNITS = {
    "nsecond": 1e-3,
    "ns": 1e-3,
    "usecond": 1.0,
    "us": 1.0,
    "\u00b5s": 1.0,
    "msecond": 1e3,
    "ms": 1e3,
    "second": 1e6,
    "s": 1e6,
}
_BYTE_UNITS = {
    "byte": 1.0,
    "kbyte": 1e3,
    "mbyte": 1e6,
    "gbyte": 1e9,
    "tbyte": 1e12,
    "kibyte": 1024.0,
    "mibyte": 1024.0**2,
    "gibyte": 1024.0**3,
}
_FREQ_UNITS = {
    "hz": 1e-6,
    "khz": 1e-3,
    "mhz": 1.0,
    "ghz": 1e3,
    "cycle/second": 1e-6,
    "cycle/usecond": 1.0,
    "cycle/nsecond": 1e3,
}
_NCU_KNOWN: dict[str, tuple[str, str]] = {
    # metric name (lower case) -> (signal, kind)
    "duration": ("duration_us", "time"),
    "gpu__time_duration.sum": ("duration_us", "time"),
    "gpu__time_duration.avg": ("duration_us", "time"),
    "dram throughput": ("dram_throughput", "pct"),
    "dram__throughput.avg.pct_of_peak_sustained_elapsed": ("dram_throughput", "pct"),
    "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed": ("dram_throughput", "pct"),
    "memory throughput": ("memory_throughput", "pct"),
    "memory [%]": ("memory_throughput", "pct"),
    "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed": (
        "memory_throughput",
        "pct",
    ),
    "compute (sm) throughput": ("sm_throughput", "pct"),
    "compute (sm) [%]": ("sm_throughput", "pct"),
    "sm [%]": ("sm_throughput", "pct"),
    "sm__throughput.avg.pct_of_peak_sustained_elapsed": ("sm_throughput", "pct"),
    "achieved occupancy": ("achieved_occupancy", "pct"),
    "sm__warps_active.avg.pct_of_peak_sustained_active": ("achieved_occupancy", "pct"),
    "theoretical occupancy": ("theoretical_occupancy", "pct"),
    "sm__maximum_warps_per_active_cycle_pct": ("theoretical_occupancy", "pct"),
    "block size": ("block_size", "count"),
    "launch__block_size": ("block_size", "count"),
    "grid size": ("grid_size", "count"),
    "launch__grid_size": ("grid_size", "count"),
    "registers per thread": ("registers_per_thread", "count"),
    "launch__registers_per_thread": ("registers_per_thread", "count"),
    "# sms": ("sm_count", "count"),
    "launch__sm_count": ("sm_count", "count"),
    "device__attribute_multiprocessor_count": ("sm_count", "count"),
    "waves per sm": ("waves_per_sm", "count"),
    "launch__waves_per_multiprocessor": ("waves_per_sm", "count"),
    "dram__bytes.sum": ("dram_bytes", "bytes"),
    "dram__bytes_read.sum": ("dram_bytes_read", "bytes"),
    "dram__bytes_write.sum": ("dram_bytes_write", "bytes"),
    "dram__bytes_op_read.sum": ("dram_bytes_read", "bytes"),
    "dram__bytes_op_write.sum": ("dram_bytes_write", "bytes"),
    "dram__bytes_op.sum": ("dram_bytes", "bytes"),
    "dram__sectors_read.sum": ("dram_sectors_read", "count"),
    "dram__sectors_write.sum": ("dram_sectors_write", "count"),
    "dram__bytes.sum.per_second": ("dram_bandwidth", "rate"),
    "dram__bytes_read.sum.per_second": ("dram_read_bandwidth", "rate"),
    "dram__bytes_write.sum.per_second": ("dram_write_bandwidth", "rate"),
    "l1/tex cache throughput": ("l1_throughput", "pct"),
    "l1tex__throughput.avg.pct_of_peak_sustained_active": ("l1_throughput", "pct"),
    "l1tex__throughput.avg.pct_of_peak_sustained_elapsed": ("l1_throughput", "pct"),
    "l2 cache throughput": ("l2_throughput", "pct"),
    "lts__throughput.avg.pct_of_peak_sustained_elapsed": ("l2_throughput", "pct"),
    "l2 hit rate": ("l2_hit_rate", "pct"),
    "lts__t_sector_hit_rate.pct": ("l2_hit_rate", "pct"),
    "lts__t_sectors_srcunit_tex_lookup_hit.sum.pct": ("l2_hit_rate", "pct"),
    "l1/tex hit rate": ("l1_hit_rate", "pct"),
    "l1tex__t_sector_hit_rate.pct": ("l1_hit_rate", "pct"),
    "mem busy": ("memory_busy", "pct"),
    "max bandwidth": ("memory_max_bandwidth", "pct"),
    "sm busy": ("sm_busy", "pct"),
    "issue slots busy": ("issue_slots_busy", "pct"),
    "sm__inst_issued.avg.pct_of_peak_sustained_active": ("issue_slots_busy", "pct"),
    "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active": (
        "tensor_pipe_active",
        "pct",
    ),
    "sm__pipe_tensor_op_gmma_cycles_active.avg.pct_of_peak_sustained_active": (
        "tensor_pipe_active",
        "pct",
    ),
    "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active": (
        "tensor_pipe_active",
        "pct",
    ),
    "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_elapsed": (
        "tensor_pipe_active",
        "pct",
    ),
    "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_elapsed": (
        "tensor_pipe_active",
        "pct",
    ),
    "sm__inst_executed_pipe_tensor_op_hmma.avg.pct_of_peak_sustained_active": (
        "tensor_pipe_active",
        "pct",
    ),
}
_NCU_ID_COLUMNS = frozenset(
    {
        "id",
        "process id",
        "process name",
        "host name",
        "kernel name",
        "kernel time",
        "context",
        "stream",
        "block size",
        "grid size",
        "device",
        "cc",
        "section name",
        "metric name",
        "metric unit",
        "metric value",
        "rule name",
        "rule type",
        "rule description",
        "estimated speedup type",
        "estimated speedup",
    }
)


def _unit_kind(unit: str) -> tuple[str, float] | None:
    u = unit.strip().lower()
    if u.endswith("/s"):
        u = u[:-2] + "/second"
    if u.endswith("/second") and u[: -len("/second")] in _BYTE_UNITS:
        return "rate", _BYTE_UNITS[u[: -len("/second")]] / 1e9
    if u in _TIME_UNITS:
        return "time", _TIME_UNITS[u]
    if u in _BYTE_UNITS:
        return "bytes", _BYTE_UNITS[u]
    if u in _FREQ_UNITS:
        return "freq", _FREQ_UNITS[u]
    if u == "%":
        return "pct", 0.01
    return None


def _ncu_signal(metric: str, unit: str, value: float, notes: list[str]) -> tuple[str, float]:
    """Normalized (name, value) for one ncu metric, or ("", 0) when it cannot be used."""
    key = metric.strip().lower()
    kind = _unit_kind(unit)
    known = _NCU_KNOWN.get(key)
    if known is not None:
        name, expected = known
        if expected == "time":
            if kind is None and not unit and key.startswith("gpu__time_duration"):
                return name, value * 1e-3  # raw metric without a unit row: nanoseconds
            if kind is None or kind[0] != "time":
                notes.append(f"metric {metric!r} has unit {unit!r}, not a time; ignored")
                return "", 0.0
            return name, value * kind[1]
        if expected == "rate":
            if kind is None or kind[0] != "rate":
                notes.append(f"metric {metric!r} has unit {unit!r}, not bytes/second; ignored")
                return "", 0.0
            return f"{name}_gbps", value * kind[1]
        if expected == "pct":
            if kind is not None and kind[0] == "rate":
                return f"{name}_gbps", value * kind[1]
            if kind is None and unit:
                notes.append(f"metric {metric!r} has unit {unit!r}, not %; ignored")
                return "", 0.0
            return name, value * 0.01
        if expected == "bytes":
            return name, value * (kind[1] if kind and kind[0] == "bytes" else 1.0)
        return name, value
    name = _sanitize(metric)
    if not name:
        return "", 0.0
    if kind is None:
        return name, value
    category, scale = kind
    if category == "pct":
        # a percentage is stored as a fraction; its name must not say "pct"
        name = re.sub(r"(^|_)pct(?=_|$)", r"\1frac", name)
    suffix = {"time": "_us", "bytes": "_bytes", "rate": "_gbps", "freq": "_mhz", "pct": ""}
    if suffix[category] and not name.endswith(suffix[category]):
        name += suffix[category]
    return name, value * scale


def _dims(cell: str) -> float | None:
    """Threads or blocks in a launch dimension such as '(256, 1, 1)'."""
    parts = re.findall(r"\d+", cell)
    if not parts or len(parts) > 3:
        return None
    return float(math.prod(int(p) for p in parts))


def _base_kernel_name(name: str) -> str:
    return name.split("(", 1)[0].strip()


def parse_ncu_csv(
    text: str,
    *,
    kernel_name: str | None = None,
    source: str = "ncu.csv",
    shape: str | None = None,
) -> ParsedProfile:
    """Nsight Compute ``--csv`` output, long (one metric per row: ``--metrics`` or
    ``--page details``) or wide (``--page raw``: one launch per row, optional unit row).
    Tool messages and program output before the header are skipped. Launches of the
    selected kernel with the same grid and block size and registers per thread are folded
    by the median; launches of different sizes, or of one size compiled with different
    registers (two cases' tiles), are shapes of their own (`_pick_shape`)."""

    offset, kind, skipped = _find_header(text, (FORMAT,))
    if kind != "ncu-csv":
        raise InputError(f"{source}: no ncu --csv header row (with 'Kernel Name') found")
    table = _table(text[offset:], source)
    notes = list(table.notes)
    if skipped:
        notes.append(
            f"{source}: skipped {plural(skipped, 'line')} before the ncu header (tool messages and "
            "the program's own output)"
        )
    kname = table.require("Kernel Name")
    id_idx = table.index("ID")
    metric_idx = table.index("Metric Name")
    value_idx = table.index("Metric Value")
    unit_idx = table.index("Metric Unit")
    long_form = metric_idx is not None and value_idx is not None
    rows = [r for r in table.rows if not r[0].startswith("==")]
    units: list[str] = [""] * len(table.header)
    if not long_form and rows and not rows[0][kname] and (id_idx is None or not rows[0][id_idx]):
        units = rows[0]
        rows = rows[1:]
    rows = [r for r in rows if r[kname]]
    if not rows:
        raise InputError(f"{source}: no kernel rows found")
    chosen, select_notes = _select(
        [r[kname] for r in rows], kernel_name, source, also=_base_kernel_name
    )
    notes.extend(select_notes)
    launches: dict[str, dict[str, float]] = {}
    launch_shape: dict[str, list[str]] = {}
    for position, row in enumerate(rows):
        if row[kname] != chosen:
            continue
        if id_idx is not None and row[id_idx]:
            launch = row[id_idx]
        else:  # no launch ID: long form is one launch, wide form one launch per row
            launch = "all" if long_form else f"row{position}"
        signals = launches.setdefault(launch, {})
        dims_text = launch_shape.setdefault(launch, ["", ""])
        for slot, (column, signal) in enumerate(
            (("grid size", "grid_size"), ("block size", "block_size"))
        ):
            idx = table.index(column)
            if idx is not None and signal not in signals:
                dims = _dims(row[idx])
                if dims is not None:
                    signals[signal] = dims
                    dims_text[slot] = row[idx]
        if long_form:
            assert metric_idx is not None and value_idx is not None
            value = _number(row[value_idx])
            if value is None:
                continue
            unit = row[unit_idx] if unit_idx is not None else ""
            name, scaled = _ncu_signal(row[metric_idx], unit, value, notes)
            if name and name not in signals:
                signals[name] = scaled
            continue
        for col, heading in enumerate(table.header):
            if not heading or heading.lower() in _NCU_ID_COLUMNS:
                continue
            value = _number(row[col])
            if value is None:
                continue
            name, scaled = _ncu_signal(heading, units[col], value, notes)
            if name and name not in signals:
                signals[name] = scaled
    for launch, signals in launches.items():
        if "dram_bytes" not in signals and {"dram_bytes_read", "dram_bytes_write"} <= set(signals):
            signals["dram_bytes"] = signals["dram_bytes_read"] + signals["dram_bytes_write"]
        grid_size = signals.get("grid_size", signals.get("launch_grid_size"))
        block_size = signals.get("block_size", signals.get("launch_block_size"))
        grid_text, block_text = launch_shape[launch]
        if not grid_text and grid_size is not None:
            grid_text = _fmt_count(grid_size)
        if not block_text and block_size is not None:
            block_text = _fmt_count(block_size)
        launch_shape[launch] = [grid_text, block_text]
    sizes: dict[str, list[str]] = {}
    for launch in launches:
        grid_text, block_text = launch_shape[launch]
        key = f"grid {grid_text} block {block_text}" if grid_text or block_text else ""
        sizes.setdefault(key, []).append(launch)
    groups: dict[str, list[str]] = {}
    totals: dict[str, float] = {}
    for size, members in sizes.items():
        for launch in members:
            key = size
            # one launch size, several compilations (a constexpr tile per case, say): the
            # registers tell them apart, and a median over them is no kernel's value
            if len({launches[m].get("registers_per_thread") for m in members}) > 1:
                registers = launches[launch].get("registers_per_thread")
                shown = _fmt_count(registers) if registers is not None else "unknown"
                key = f"{size} registers {shown}".strip()
            groups.setdefault(key, []).append(launch)
            totals[key] = totals.get(key, 0.0) + launches[launch].get("duration_us", 0.0)
    picked, shape_notes = _pick_shape(groups, totals, shape, chosen, source)
    notes.extend(shape_notes)

    def fold(members: Sequence[str]) -> dict[str, float]:
        profiles = [ParsedProfile("ncu-csv", launches[m]) for m in members]
        folded = dict(merge_launches(profiles).signals)
        folded.setdefault("launch_count", float(len(profiles)))
        return folded

    shapes = (
        tuple(ShapeProfile(k, len(m), totals[k], fold(m)) for k, m in groups.items())
        if len(groups) > 1
        else ()
    )
    merged_signals = fold(groups[picked])
    if "duration_us" not in merged_signals:
        notes.append("no Duration / gpu__time_duration metric for the selected kernel")
    notes = list(dict.fromkeys(notes))
    attributes = {"kernel_name": chosen}
    grid_text, block_text = launch_shape[groups[picked][0]]
    if grid_text:
        attributes["grid_shape"] = grid_text
    if block_text:
        attributes["block_shape"] = block_text
    attributes = dict(sorted(attributes.items()))
    count = len(groups[picked])
    return ParsedProfile(
        format="ncu-csv",
        signals=_finite_only(merged_signals, notes),
        attributes=attributes,
        kernel_name=chosen,
        aggregation=f"{'long' if long_form else 'wide'} form; median over {count} "
        f"launch(es) of {chosen!r}"
        + (f" with {picked}" if picked else "")
        + "; times in us, percentages as fractions, bytes as bytes",
        notes=tuple(notes),
        shape=picked or None,
        shapes=shapes,
    )


def _fmt_count(value: float) -> str:
    return str(int(value)) if value == int(value) else str(value)


def _is_header(cells: set[str]) -> bool:
    return "kernel name" in cells and bool({"id", "metric name"} & cells or len(cells) > 2)


_UNITS = {"time": "us", "pct": "fraction", "bytes": "bytes", "rate": "GB/s", "count": "count"}
"""The unit of each kind of metric this reader knows, as it scales them."""

FORMAT = Format(
    "ncu-csv",
    "gpu",
    "Nsight Compute `--csv` output, long (`--page details` or `--metrics`) or wide (`--page raw`)",
    signal_names(
        (signal for signal, _ in _NCU_KNOWN.values()),
        ("grid_size", "block_size", "dram_bytes"),
    ),
    "every other metric under its name, lower-cased, non-alphanumerics as `_`, a `%` as "
    "a fraction (`pct` in the name becomes `frac`), the unit as a suffix (`_us`, "
    "`_bytes`, `_gbps`, `_mhz`)",
    lambda text, kernel_name, display, shape: parse_ncu_csv(
        text, kernel_name=kernel_name, source=display, shape=shape
    ),
    _is_header,
    {signal: _UNITS[kind] for signal, kind in _NCU_KNOWN.values()},
    signal_sources(_NCU_KNOWN),
)
