"""Full-run task tables: ``op_summary_*.csv`` of an msprof full-run profile and torch_npu's
``kernel_details.csv`` (the same task columns), one kernel's rows reduced to signals."""

from __future__ import annotations

import statistics
from collections.abc import Sequence

from ledger.errors import InputError
from ledger.inputs.jsonio import plural
from ledger.inputs.profiles.common import (
    _ALIASES,
    _NA_TOKENS,
    OTHER_HEADINGS,
    Format,
    ParsedProfile,
    ShapeProfile,
    _finite_only,
    _joined,
    _normalize_heading,
    _number,
    _pick_shape,
    _select,
    _Table,
    _table,
    signal_names,
    signal_sources,
)

_TASK_ATTRIBUTES = {
    "op name": "op_name",
    "name": "op_name",
    "op type": "op_type",
    "type": "op_type",
    "task type": "task_type",
    "accelerator core": "task_type",
    "op state": "op_state",
    "device_id": "device_id",
    "device id": "device_id",
    "model id": "model_id",
    "task id": "task_id",
    "stream id": "stream_id",
    "context id": "context_id",
    "step id": "step_id",
    "hf32 eligible": "hf32_eligible",
    "input shapes": "input_shapes",
    "input data types": "input_data_types",
    "input formats": "input_formats",
    "output shapes": "output_shapes",
    "output data types": "output_data_types",
    "output formats": "output_formats",
}
_TASK_SIGNALS = {
    "task duration(us)": "task_duration_us",
    "duration(us)": "task_duration_us",
    "task wait time(us)": "task_wait_time_us",
    "wait time(us)": "task_wait_time_us",
    "block dim": "block_dim",
    "block num": "block_dim",
    "mix block dim": "mix_block_dim",
    "mix block num": "mix_block_dim",
}
_TASK_SKIPPED = frozenset({"task start time(us)", "task start time", "start time(us)"})


def _task_signals(
    table: _Table, rows: Sequence[list[str]], notes: list[str]
) -> tuple[dict[str, float], dict[str, str]]:
    """Medians of every numeric column over `rows` (one kernel, one shape)."""
    signals: dict[str, float] = {}
    attributes: dict[str, str] = {}
    for col, heading in enumerate(table.header):
        key = heading.lower()
        if not heading or key in _TASK_SKIPPED:
            continue
        cells = [r[col] for r in rows]
        values = [v for v in (_number(c) for c in cells) if v is not None]
        if key in _TASK_ATTRIBUTES:
            attr = _TASK_ATTRIBUTES[key]
            text_value = _joined(c for c in cells if c.lower() not in _NA_TOKENS)
            if text_value and attr not in attributes:
                attributes[attr] = text_value
            continue
        if key in _TASK_SIGNALS:
            name, scale = _TASK_SIGNALS[key], 1.0
        else:
            name, scale = _normalize_heading(heading)
        if not name:
            continue
        if not values:
            non_na = [c for c in cells if c.lower() not in _NA_TOKENS]
            if non_na and name not in attributes:
                attributes[name] = _joined(non_na)
            continue
        if name not in signals:
            signals[name] = float(statistics.median(values)) * scale
    for name in ("block_dim", "mix_block_dim"):
        if signals.get(name) == 0.0:
            del signals[name]
            note = f"{name} 0 means not collected (level0 or a non-AI-Core task); dropped"
            if note not in notes:
                notes.append(note)
    return signals, attributes


def _parse_task_table(
    text: str,
    fmt: str,
    name_columns: tuple[str, ...],
    duration_columns: tuple[str, ...],
    kernel_name: str | None,
    source: str,
    shape: str | None = None,
) -> ParsedProfile:
    table = _table(text, source)
    name_idx = table.require(*name_columns)
    duration_idx = table.require(*duration_columns)
    rows = [r for r in table.rows if any(r)]
    if not rows:
        raise InputError(f"{source}: has a header but no data rows")
    chosen, notes = _select([r[name_idx] for r in rows], kernel_name, source)
    rows = [r for r in rows if r[name_idx] == chosen]
    notes = [*table.notes, *notes]
    shape_idx = table.index("Input Shapes")
    groups: dict[str, list[int]] = {}
    totals: dict[str, float] = {}
    for i, row in enumerate(rows):
        key = row[shape_idx] if shape_idx is not None else ""
        key = "" if key.lower() in _NA_TOKENS else key
        groups.setdefault(key, []).append(i)
        totals[key] = totals.get(key, 0.0) + (_number(row[duration_idx]) or 0.0)
    if shape is not None and shape_idx is None:
        raise InputError(f"{source}: has no 'Input Shapes' column to choose --shape from")
    picked, shape_notes = _pick_shape(groups, totals, shape, chosen, source)
    notes.extend(shape_notes)
    shapes: list[ShapeProfile] = []
    if len(groups) > 1:
        for key, members in groups.items():
            group_signals, _ = _task_signals(table, [rows[i] for i in members], [])
            shapes.append(ShapeProfile(key, len(members), totals[key], group_signals))
    selected = [rows[i] for i in groups[picked]]
    signals, attributes = _task_signals(table, selected, notes)
    if "task_duration_us" not in signals:
        raise InputError(f"{source}: no numeric duration for kernel {chosen!r}")
    signals["launch_count"] = float(len(selected))
    return ParsedProfile(
        format=fmt,
        signals=_finite_only(signals, notes),
        attributes=dict(sorted(attributes.items())),
        kernel_name=chosen,
        aggregation=f"median over {plural(len(selected), 'launch row')} of {chosen!r}"
        + (f" with input shapes {picked!r}" if picked else "")
        + " for every numeric column (NA cells skipped); percentages converted to fractions",
        notes=tuple(notes),
        shape=picked or None,
        shapes=tuple(shapes),
    )


def parse_op_summary(
    text: str,
    *,
    kernel_name: str | None = None,
    source: str = "op_summary.csv",
    shape: str | None = None,
) -> ParsedProfile:
    """Rows of ``op_summary_*.csv`` whose ``Op Name`` is the kernel, medians over launches."""
    return _parse_task_table(
        text,
        "op-summary",
        ("Op Name", "Name"),
        ("Task Duration(us)", "Duration(us)"),
        kernel_name,
        source,
        shape,
    )


def parse_kernel_details(
    text: str,
    *,
    kernel_name: str | None = None,
    source: str = "kernel_details.csv",
    shape: str | None = None,
) -> ParsedProfile:
    """Rows of torch_npu ``kernel_details.csv`` whose ``Name`` is the kernel (op_summary
    spellings accepted too), medians over launches and steps."""
    return _parse_task_table(
        text,
        "kernel-details",
        ("Name", "Op Name"),
        ("Duration(us)", "Task Duration(us)"),
        kernel_name,
        source,
        shape,
    )


_OP_SUMMARY_COLUMNS = {
    "task id",
    "stream id",
    "model id",
    "task type",
    "task start time(us)",
    "op state",
}
"""Columns of an op_summary table that an msprof op table does not have."""


def _is_kernel_details_header(cells: set[str]) -> bool:
    return "name" in cells and "duration(us)" in cells and "kernel name" not in cells


def _is_op_summary_header(cells: set[str]) -> bool:
    return (
        "op name" in cells
        and bool(_OP_SUMMARY_COLUMNS & cells)
        and not _is_kernel_details_header(cells)
        and "kernel name" not in cells
    )


_NAMED = signal_names(_TASK_SIGNALS.values(), _ALIASES.values(), ("launch_count",))

OP_SUMMARY = Format(
    "op-summary",
    "ascend",
    "`op_summary_*.csv` of a full-run profile",
    _NAMED,
    OTHER_HEADINGS,
    lambda text, kernel_name, display, shape: parse_op_summary(
        text, kernel_name=kernel_name, source=display, shape=shape
    ),
    _is_op_summary_header,
    sources=signal_sources(_TASK_SIGNALS),
)
KERNEL_DETAILS = Format(
    "kernel-details",
    "ascend",
    "torch_npu `kernel_details.csv`",
    _NAMED,
    OTHER_HEADINGS,
    lambda text, kernel_name, display, shape: parse_kernel_details(
        text, kernel_name=kernel_name, source=display, shape=shape
    ),
    _is_kernel_details_header,
    sources=signal_sources(_TASK_SIGNALS),
)
