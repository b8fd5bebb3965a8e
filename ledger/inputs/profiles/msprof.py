"""``msprof op`` output folders: the OpBasicInfo, PipeUtilization, ResourceConflictRatio and
Memory tables of one launch (per core, reduced to the kernel), and launches merged."""

from __future__ import annotations

import math
import re
import statistics
from collections.abc import Mapping, Sequence

from ledger.errors import InputError
from ledger.inputs.profiles.common import (
    _ALIASES,
    _NA_TOKENS,
    OTHER_HEADINGS,
    Format,
    ParsedProfile,
    _finite_only,
    _joined,
    _normalize_heading,
    _number,
    _select,
    _Table,
    _table,
    one_shape,
    signal_names,
    signal_sources,
)
from ledger.inputs.profiles.op_summary import _is_kernel_details_header, _is_op_summary_header

_MSPROF_TABLES = (
    "OpBasicInfo",
    "PipeUtilization",
    "ResourceConflictRatio",
    "Memory",
    "ArithmeticUtilization",
    "L2Cache",
    "MemoryL0",
    "MemoryUB",
)
_MSPROF_EXTRA = _MSPROF_TABLES[4:]
_MSPROF_FILE = re.compile(rf"^({'|'.join(_MSPROF_TABLES)})(?:_[0-9][0-9_]*)?\.csv$", re.IGNORECASE)
_OP_BASIC_SIGNALS = {
    "task duration(us)": "task_duration_us",
    "block dim": "block_dim",
    "block num": "block_dim",
    "mix block dim": "mix_block_dim",
    "mix block num": "mix_block_dim",
    "current freq": "current_freq_mhz",
    "rated freq": "rated_freq_mhz",
}
_OP_BASIC_ATTRIBUTES = {
    "op name": "op_name",
    "op type": "op_type",
    "device id": "device_id",
    "pid": "pid",
}
_CORE_ID_COLUMNS = frozenset({"block_id", "sub_block_id", "core_id", "core_type", "sub_block"})


def _op_basic_info(
    table: _Table, kernel_name: str | None
) -> tuple[dict[str, float], dict[str, str], list[str], int]:
    name_idx = table.require("Op Name")
    table.require("Task Duration(us)")
    rows = [r for r in table.rows if any(r)]
    if not rows:
        raise InputError(f"{table.source}: has a header but no data rows")
    names = [r[name_idx] if r[name_idx].lower() not in _NA_TOKENS else "" for r in rows]
    notes: list[str] = []
    if any(names):
        chosen, notes = _select(names, kernel_name, table.source)
        rows = [r for r, n in zip(rows, names, strict=True) if n == chosen]
    signals: dict[str, float] = {}
    attributes: dict[str, str] = {}
    for col, heading in enumerate(table.header):
        key = heading.lower()
        if key in _OP_BASIC_ATTRIBUTES:
            text = _joined(r[col] for r in rows if r[col].lower() not in _NA_TOKENS)
            if text:
                attributes[_OP_BASIC_ATTRIBUTES[key]] = text
            continue
        values = [v for v in (_number(r[col]) for r in rows) if v is not None]
        if not values:
            continue
        if key in _OP_BASIC_SIGNALS:
            name, scale = _OP_BASIC_SIGNALS[key], 1.0
        else:
            name, scale = _normalize_heading(heading)
        if name and name not in signals:
            signals[name] = statistics.median(values) * scale
    if "task_duration_us" not in signals:
        raise InputError(f"{table.source}: no numeric 'Task Duration(us)' value")
    return signals, attributes, notes, len(rows)


def _core_rule(heading: str, name: str, scale: float) -> str:
    lowered = heading.lower()
    if scale == 0.01:
        return "mean"
    if name.endswith(("_ratio", "_rate")):
        return "weighted"
    if name.endswith(("_us", "_cycles")):
        return "max"
    if name.endswith("_gbps"):
        return "mean"
    if name.endswith(("_kb", "_bytes")) or "instr" in lowered:
        return "sum"
    return "mean"


def _aggregate_cores(
    table: _Table, signals: dict[str, float], notes: list[str]
) -> tuple[int, list[str]]:
    """Fold per-core rows of one msprof table into `signals`; returns (rows, rules used)."""
    weights: dict[str, list[float | None]] = {}
    for prefix in ("aic", "aiv"):
        idx = table.index(f"{prefix}_time(us)")
        if idx is not None:
            weights[prefix] = [_number(r[idx]) for r in table.rows]
    used: set[str] = set()
    rows_with_data = 0
    for row in table.rows:
        if any(_number(c) is not None for c in row):
            rows_with_data += 1
    for col, heading in enumerate(table.header):
        if not heading or heading.lower() in _CORE_ID_COLUMNS:
            continue
        name, scale = _normalize_heading(heading)
        if not name:
            continue
        cells = [_number(r[col]) for r in table.rows]
        present = [(i, v * scale) for i, v in enumerate(cells) if v is not None]
        if not present:
            continue
        rule = _core_rule(heading, name, scale)
        values = [v for _, v in present]
        value: float
        if rule == "weighted":
            w = weights.get(name[:3])
            pairs = [(v, w[i]) for i, v in present] if w else []
            if pairs and all(wt is not None and wt > 0 for _, wt in pairs):
                total = math.fsum(wt or 0.0 for _, wt in pairs)
                value = math.fsum(v * (wt or 0.0) for v, wt in pairs) / total
                rule = f"{name[:3]}_time-weighted mean"
            else:
                rule = "mean"
        if rule == "max":
            value = max(values)
        elif rule == "sum":
            value = math.fsum(values)
        elif rule == "mean":
            value = math.fsum(values) / len(values)
        if name in signals:
            # every msprof op table repeats the block columns (aic_time(us), ...) and
            # Memory repeats the MTE ratios: only a repeat that disagrees is worth a note
            if not math.isclose(value, signals[name], rel_tol=1e-9, abs_tol=1e-12):
                notes.append(
                    f"{table.source}: column {heading!r} gives {value:.6g} where an earlier "
                    f"table gave {name} {signals[name]:.6g}; the earlier value is kept"
                )
            continue
        signals[name] = value
        used.add(rule)
    for prefix, column in weights.items():
        times = [t for t in column if t is not None]
        if times and f"{prefix}_core_count" not in signals:
            mean = math.fsum(times) / len(times)
            signals[f"{prefix}_core_count"] = float(len(times))
            signals[f"{prefix}_time_mean_us"] = mean
            if mean > 0:
                signals[f"{prefix}_time_imbalance"] = max(times) / mean
    return rows_with_data, sorted(used)


def parse_msprof_op(
    op_basic_info: str,
    pipe_utilization: str | None = None,
    resource_conflict_ratio: str | None = None,
    memory: str | None = None,
    *,
    kernel_name: str | None = None,
    sources: Mapping[str, str] | None = None,
    extra: Mapping[str, str] | None = None,
) -> ParsedProfile:
    """One launch of an ``msprof op`` profile, from the text of its tables.

    `sources` maps a table name ("OpBasicInfo", "PipeUtilization", ...) to the file name
    used in messages; `extra` maps the other per-core tables (ArithmeticUtilization,
    L2Cache, MemoryL0, MemoryUB) to their text. Per-core rows are aggregated as documented
    in docs/profiles.md.
    """
    names = {t: f"{t}.csv" for t in _MSPROF_TABLES}
    names.update(sources or {})
    basic = _table(op_basic_info, names["OpBasicInfo"])
    signals, attributes, notes, basic_rows = _op_basic_info(basic, kernel_name)
    notes = [*basic.notes, *notes]
    parts = [
        "OpBasicInfo values as reported"
        + (f" (median of {basic_rows} rows)" if basic_rows > 1 else "")
    ]
    texts = {
        "PipeUtilization": pipe_utilization,
        "ResourceConflictRatio": resource_conflict_ratio,
        "Memory": memory,
        **{t: (extra or {}).get(t) for t in _MSPROF_EXTRA if (extra or {}).get(t) is not None},
    }
    for table_name, text in texts.items():
        if text is None:
            if table_name == "PipeUtilization":
                notes.append("no PipeUtilization table; pipe ratios unavailable")
            continue
        table = _table(text, names[table_name])
        notes.extend(table.notes)
        count, rules = _aggregate_cores(table, signals, notes)
        parts.append(f"{table_name} over {count} core rows ({', '.join(rules) or 'no values'})")
    if len(parts) > 1:
        parts.append(
            "per-core rules: *_ratio and *_rate weighted by each row's aic_time(us) or "
            "aiv_time(us) (plain mean where a table has no such column), *_time(us) and "
            "*_cycles max over cores (critical path), bandwidths mean, data volumes (KB) and "
            "instruction counts summed, percentages mean"
        )
    return ParsedProfile(
        format="msprof-op",
        signals=_finite_only(signals, notes),
        attributes=dict(sorted(attributes.items())),
        kernel_name=attributes.get("op_name") or kernel_name,
        aggregation="; ".join(parts),
        notes=tuple(notes),
    )


def merge_launches(profiles: Sequence[ParsedProfile], *, what: str = "launches") -> ParsedProfile:
    """Several profiles of one kernel (launches, devices) folded into one: the median of
    every signal over the profiles that have it; attributes joined; notes kept."""
    if not profiles:
        raise ValueError("merge_launches needs at least one profile")
    if len(profiles) == 1:
        return profiles[0]
    keys = sorted({k for p in profiles for k in p.signals})
    signals = {
        k: float(statistics.median([p.signals[k] for p in profiles if k in p.signals]))
        for k in keys
    }
    signals["launch_count"] = float(len(profiles))
    attr_keys = sorted({k for p in profiles for k in p.attributes})
    attributes = {k: _joined(p.attributes.get(k, "") for p in profiles) for k in attr_keys}
    notes = list(dict.fromkeys(n for p in profiles for n in p.notes))
    first = profiles[0]
    return ParsedProfile(
        format=first.format,
        signals=signals,
        attributes=attributes,
        files=tuple(sorted({f for p in profiles for f in p.files}, key=lambda f: f.path)),
        kernel_name=first.kernel_name,
        aggregation=f"median over {len(profiles)} {what} of: {first.aggregation}",
        notes=tuple(notes),
    )


def _is_header(cells: set[str]) -> bool:
    return (
        "op name" in cells
        and "task duration(us)" in cells
        and "kernel name" not in cells
        and not _is_op_summary_header(cells)
        and not _is_kernel_details_header(cells)
    )


def _read_op_basic_info(text: str, kernel_name: str | None, display: str, shape: str | None):
    one_shape("msprof-op", display, shape)
    return parse_msprof_op(text, kernel_name=kernel_name, sources={"OpBasicInfo": display})


FORMAT = Format(
    "msprof-op",
    "ascend",
    "an `msprof op` output folder (OpBasicInfo.csv with PipeUtilization, "
    "ResourceConflictRatio, Memory, ... beside it)",
    signal_names(
        _OP_BASIC_SIGNALS.values(),
        _ALIASES.values(),
        (f"{p}_{s}" for p in ("aic", "aiv") for s in ("core_count", "time_mean_us")),
        (f"{p}_time_imbalance" for p in ("aic", "aiv")),
        ("launch_count",),
    ),
    OTHER_HEADINGS,
    _read_op_basic_info,
    _is_header,
    sources=signal_sources(_OP_BASIC_SIGNALS),
)
