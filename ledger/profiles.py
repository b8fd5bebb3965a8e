"""Profiler output in, normalized signals out.

`load_profile` reads one profile (a file or a folder) and returns a `ParsedProfile`: numeric
signals under normalized names with documented units (docs/profiles.md), categorical facts
as strings, and the size and sha256 of every raw file it read so the ledger can store them.
Each format also has a pure `parse_*` function that takes text and does no I/O.

Formats (PROFILE_FORMATS.md):

* ``msprof-op``: an ``msprof op`` output folder (OpBasicInfo, PipeUtilization,
  ResourceConflictRatio, Memory tables; optional ``_<timestamp>`` suffixes, ``device<id>/``
  and ``<OpName>/<launch#>/`` levels);
* ``op-summary``: ``op_summary_*.csv`` of a full-run profile;
* ``kernel-details``: torch_npu ``kernel_details.csv``;
* ``ncu-csv``: Nsight Compute ``--csv`` output, long (``--page details``) or wide
  (``--page raw``);
* ``signals-json``: a JSON object mapping signal names to numbers.

Every rejection is an `InputError` whose one-line message names the file and the problem.

>>> p = parse_signals_json('{"task_duration_us": 12.5, "aiv_vec_ratio": 0.7}')
>>> p.format, p.signals["task_duration_us"]
('signals-json', 12.5)
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
import math
import os
import re
import stat
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path, PurePosixPath

from ledger.errors import InputError
from ledger.jsonio import DEFAULT_MAX_INPUT_BYTES, check_json_value, max_input_bytes
from ledger.jsonio import reject_duplicate_keys as _reject_duplicate_keys

__all__ = [
    "FORMATS",
    "MAX_FILE_BYTES",
    "ParsedProfile",
    "SourceFile",
    "load_profile",
    "merge_launches",
    "parse_kernel_details",
    "parse_msprof_op",
    "parse_ncu_csv",
    "parse_op_summary",
    "parse_signals_json",
]

FORMATS = ("msprof-op", "op-summary", "kernel-details", "ncu-csv", "signals-json")
MAX_FILE_BYTES = DEFAULT_MAX_INPUT_BYTES
"""Largest raw profile file accepted by default (64 MiB); like every other input file,
`KERNEL_LEDGER_MAX_INPUT_BYTES` overrides it (`jsonio.max_input_bytes`)."""

_MAX_WALK_FILES = 20_000
_MAX_WALK_DEPTH = 8
_MAX_LISTED_NAMES = 10
_MAX_NAME_CHARS = 200
_MAX_PREAMBLE_LINES = 5_000


@dataclass(frozen=True, slots=True)
class SourceFile:
    """One raw file that was read: `path` is POSIX-style and relative to the loaded folder
    (or, for a single file, to the folder holding it)."""

    path: str
    sha256: str
    size: int


@dataclass(frozen=True, slots=True)
class ParsedProfile:
    """A profile reduced to normalized signals. `signals` values are always finite floats."""

    format: str
    signals: dict[str, float]
    attributes: dict[str, str] = field(default_factory=dict)
    files: tuple[SourceFile, ...] = ()
    kernel_name: str | None = None
    aggregation: str = ""
    notes: tuple[str, ...] = ()
    shape: str | None = None
    shapes: tuple[ShapeProfile, ...] = ()


@dataclass(frozen=True, slots=True)
class ShapeProfile:
    """One input shape (or launch configuration) of the kernel, never merged with another:
    `signals` are the medians over its `launches`, `total_us` their summed duration."""

    shape: str
    launches: int
    total_us: float
    signals: dict[str, float]


# --------------------------------------------------------------------------- values


_NA_TOKENS = frozenset({"", "na", "n/a", "nan", "none", "null", "-", "--", "inf", "-inf"})
_NUMBER = re.compile(r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?")
_GROUPED = re.compile(r"[+-]?\d{1,3}(?:,\d{3})+(?:\.\d*)?(?:[eE][+-]?\d+)?")


def _clean(cell: str) -> str:
    """Strip whitespace (tabs included), a BOM, and any layers of surrounding quotes."""
    text = cell.replace("\ufeff", "").strip()
    while len(text) >= 2 and text[0] == text[-1] and text[0] in "\"'":
        text = text[1:-1].strip()
    return text


def _number(cell: str) -> float | None:
    """A finite float, or None for NA-like, non-numeric or non-finite cells.

    >>> _number(' "1,234.5"\\t'), _number('N/A'), _number('1e999')
    (1234.5, None, None)
    """
    text = _clean(cell)
    if text.lower() in _NA_TOKENS:
        return None
    if _GROUPED.fullmatch(text):
        text = text.replace(",", "")
    elif not _NUMBER.fullmatch(text):
        return None
    value = float(text)
    return value if math.isfinite(value) else None


def _sanitize(name: str) -> str:
    """Lower-case snake_case: every run of other characters becomes one underscore."""
    text = re.sub(r"[^0-9a-z]+", "_", name.lower()).strip("_")
    if text and text[0].isdigit():
        text = "x_" + text
    return text[:_MAX_NAME_CHARS]


# Units written in a column heading, as "name(unit)": suffix of the signal and scale factor.
# A scale of 0.01 turns a percentage into a fraction and adds no suffix.
_HEADING_UNITS: dict[str, tuple[str, float]] = {
    "us": ("_us", 1.0),
    "ms": ("_us", 1e3),
    "ns": ("_us", 1e-3),
    "s": ("_us", 1e6),
    "gb/s": ("_gbps", 1.0),
    "mb/s": ("_gbps", 1e-3),
    "kb": ("_kb", 1.0),
    "mb": ("_kb", 1024.0),
    "b": ("_bytes", 1.0),
    "byte": ("_bytes", 1.0),
    "bytes": ("_bytes", 1.0),
    "%": ("", 0.01),
    "mhz": ("_mhz", 1.0),
}
_HEADING = re.compile(r"^(.*?)\s*\(([^()]*)\)\s*$")

# Signal names renamed after sanitizing (msprof tables and full-run CSVs).
_ALIASES = {
    "aic_mac_time_us": "aic_cube_time_us",
    "aic_mac_ratio": "aic_cube_ratio",
    "aicore_time_us": "aic_time_us",
    "aiv_gm_to_ub_bw_gbps": "gm_to_ub_bw_gbps",
    "aiv_ub_to_gm_bw_gbps": "ub_to_gm_bw_gbps",
    "gm_to_ub_datas_kb": "gm_to_ub_kb",
    "ub_to_gm_datas_kb": "ub_to_gm_kb",
    "aiv_gm_to_ub_datas_kb": "gm_to_ub_kb",
    "aiv_ub_to_gm_datas_kb": "ub_to_gm_kb",
}


def _normalize_heading(heading: str) -> tuple[str, float]:
    """Signal name and scale for a column heading such as 'aiv_mte2_active_bw(GB/s)'.

    >>> _normalize_heading("aiv_mte2_active_bw(GB/s)")
    ('aiv_mte2_bw_gbps', 1.0)
    >>> _normalize_heading("cube_utilization(%)")
    ('cube_utilization', 0.01)
    """
    base, suffix, scale = heading, "", 1.0
    match = _HEADING.match(heading)
    if match:
        unit = match.group(2).strip().lower()
        if unit in _HEADING_UNITS:
            base = match.group(1)
            suffix, scale = _HEADING_UNITS[unit]
        else:
            base = f"{match.group(1)}_{unit}"
    name = _sanitize(base)
    if not name:
        return "", scale
    if suffix and not name.endswith(suffix):
        name += suffix
    name = name.replace("_active_bw_", "_bw_")
    return _ALIASES.get(name, name), scale


def _finite_only(signals: Mapping[str, float], notes: list[str]) -> dict[str, float]:
    out: dict[str, float] = {}
    for key in sorted(signals):
        value = float(signals[key])
        if math.isfinite(value):
            out[key] = value
        else:
            notes.append(f"{key} dropped: its aggregate is not finite")
    return out


def _joined(values: Iterable[str]) -> str:
    distinct = sorted({v for v in values if v})
    if len(distinct) <= 8:
        return " | ".join(distinct)
    return f"{len(distinct)} distinct values"


# --------------------------------------------------------------------------- CSV tables


@dataclass(slots=True)
class _Table:
    source: str
    header: list[str]
    rows: list[list[str]]
    notes: list[str] = field(default_factory=list)

    def index(self, *spellings: str) -> int | None:
        wanted = [s.lower() for s in spellings]
        lowered = [h.lower() for h in self.header]
        for spelling in wanted:
            if spelling in lowered:
                return lowered.index(spelling)
        return None

    def require(self, *spellings: str) -> int:
        idx = self.index(*spellings)
        if idx is None:
            raise InputError(f"{self.source}: missing required column {spellings[0]!r}")
        return idx


def _csv_rows(text: str, source: str) -> list[list[str]]:
    try:
        return list(csv.reader(io.StringIO(text, newline="")))
    except csv.Error as exc:
        raise InputError(f"{source}: malformed CSV ({exc})") from None


def _table(text: str, source: str) -> _Table:
    """Parse CSV text into a header and rows of cleaned cells.

    Blank lines are skipped; trailing empty heading cells (a trailing comma) are dropped;
    short rows are padded and surplus cells ignored.
    """
    raw = _csv_rows(text, source)
    header: list[str] | None = None
    rows: list[list[str]] = []
    notes: list[str] = []
    surplus = 0
    for record in raw:
        cells = [_clean(c) for c in record]
        if not any(cells):
            continue
        if header is None:
            while cells and not cells[-1]:
                cells.pop()
            header = cells
            continue
        if len(cells) > len(header):
            if any(cells[len(header) :]):
                surplus += 1
            cells = cells[: len(header)]
        elif len(cells) < len(header):
            cells += [""] * (len(header) - len(cells))
        rows.append(cells)
    if header is None:
        raise InputError(f"{source}: no CSV header row found")
    if surplus:
        notes.append(f"{source}: {surplus} row(s) had more cells than the header; extra ignored")
    return _Table(source, header, rows, notes)


# --------------------------------------------------------------------------- selection


def _listing(names: Sequence[str]) -> str:
    shown = [repr(n[:80]) for n in names[:_MAX_LISTED_NAMES]]
    more = len(names) - len(shown)
    return ", ".join(shown) + (f" (and {more} more)" if more > 0 else "")


def _select(
    names: Sequence[str],
    kernel_name: str | None,
    source: str,
    *,
    also: Callable[[str], str] | None = None,
) -> tuple[str, list[str]]:
    """Choose one kernel among distinct `names`; returns (name, notes).

    An exact match wins, then a match of `also(name)` (for ncu: the name before its
    argument list), then a unique case-insensitive substring match.
    """
    distinct = list(dict.fromkeys(n for n in names if n))
    if not distinct:
        raise InputError(f"{source}: no kernel rows found")
    if kernel_name is None:
        if len(distinct) == 1:
            return distinct[0], []
        raise InputError(
            f"{source}: holds {len(distinct)} kernels; pass a kernel name, one of "
            f"{_listing(distinct)}"
        )
    if kernel_name in distinct:
        return kernel_name, []
    if also is not None:
        short = [n for n in distinct if also(n) == kernel_name]
        if len(short) == 1:
            return short[0], []
    needle = kernel_name.lower()
    hits = [n for n in distinct if needle in n.lower()]
    if len(hits) == 1:
        return hits[0], [f"kernel name {kernel_name!r} matched {hits[0]!r} by substring"]
    if hits:
        raise InputError(
            f"{source}: kernel name {kernel_name!r} is ambiguous; it matches {_listing(hits)}"
        )
    raise InputError(f"{source}: no kernel named {kernel_name!r}; available: {_listing(distinct)}")


def _shape_key(text: str) -> str:
    return re.sub(r"[\s\"']+", "", text).lower()


def _pick_shape(
    groups: Mapping[str, Sequence[int]],
    totals: Mapping[str, float],
    shape: str | None,
    kernel: str,
    source: str,
) -> tuple[str, list[str]]:
    """The shape to attribute among `groups` (shape -> row indices): the one asked for, or,
    when none is asked for and there are several, the one with the most total time."""
    names = list(groups)
    if shape is not None:
        wanted = _shape_key(shape)
        exact = [n for n in names if _shape_key(n) == wanted]
        hits = exact or [n for n in names if wanted in _shape_key(n)]
        if len(hits) == 1:
            return hits[0], []
        what = "is ambiguous; it matches" if hits else "matches none of"
        raise InputError(
            f"{source}: shape {shape!r} {what} the shapes of {kernel!r}: {_listing(hits or names)}"
        )
    if len(names) == 1:
        return names[0], []
    chosen = max(names, key=lambda n: (totals.get(n, 0.0), -names.index(n)))
    others = ", ".join(f"{n!r} ({len(groups[n])} launch(es))" for n in names if n != chosen)
    return chosen, [
        f"{kernel!r} ran with {len(names)} different shapes, never merged: attributed "
        f"{chosen!r} ({len(groups[chosen])} launch(es), the most total time); the others "
        f"are reported each on their own: {others}; pass --shape to choose"
    ]


# --------------------------------------------------------------------------- msprof op

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
_MSPROF_EXTRA = ("ArithmeticUtilization", "L2Cache", "MemoryL0", "MemoryUB")
_MSPROF_FILE = re.compile(
    r"^(OpBasicInfo|PipeUtilization|ResourceConflictRatio|Memory|ArithmeticUtilization|"
    r"L2Cache|MemoryL0|MemoryUB)(?:_[0-9][0-9_]*)?\.csv$",
    re.IGNORECASE,
)
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
        if name in signals:
            notes.append(f"{table.source}: column {heading!r} duplicates signal {name}; ignored")
            continue
        rule = _core_rule(heading, name, scale)
        values = [v for _, v in present]
        if rule == "weighted":
            w = weights.get(name[:3])
            pairs = [(v, w[i]) for i, v in present] if w else []
            if pairs and all(wt is not None and wt > 0 for _, wt in pairs):
                total = math.fsum(wt or 0.0 for _, wt in pairs)
                signals[name] = math.fsum(v * (wt or 0.0) for v, wt in pairs) / total
                used.add(f"{name[:3]}_time-weighted mean")
                continue
            rule = "mean"
        if rule == "max":
            signals[name] = max(values)
        elif rule == "sum":
            signals[name] = math.fsum(values)
        else:
            signals[name] = math.fsum(values) / len(values)
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


# --------------------------------------------------------------------------- op_summary


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
_TASK_SKIPPED = frozenset({"task start time(us)", "start time(us)"})


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
        aggregation=f"median over {len(selected)} launch row(s) of {chosen!r}"
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


# --------------------------------------------------------------------------- ncu


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
    selected kernel with the same grid and block size are folded by the median; launches
    of different sizes are shapes of their own (`_pick_shape`)."""

    offset, kind, skipped = _find_header(text)
    if kind != "ncu-csv":
        raise InputError(f"{source}: no ncu --csv header row (with 'Kernel Name') found")
    table = _table(text[offset:], source)
    notes = list(table.notes)
    if skipped:
        notes.append(
            f"{source}: skipped {skipped} line(s) before the ncu header (tool messages and "
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
    groups: dict[str, list[str]] = {}
    totals: dict[str, float] = {}
    for launch, signals in launches.items():
        grid_text, block_text = launch_shape[launch]
        key = f"grid {grid_text} block {block_text}" if grid_text or block_text else ""
        groups.setdefault(key, []).append(launch)
        totals[key] = totals.get(key, 0.0) + signals.get("duration_us", 0.0)
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


# --------------------------------------------------------------------------- JSON


def _reject_constant(token: str) -> float:
    raise ValueError(f"non-finite number {token}")


def parse_signals_json(text: str, *, source: str = "signals.json") -> ParsedProfile:
    """A JSON object of signal name -> finite number. Booleans, strings, nested values,
    NaN/Infinity, duplicate names and lone surrogates are rejected (the strict rules of
    ledger/jsonio.py that every input file follows)."""
    try:
        data = json.loads(
            text, parse_constant=_reject_constant, object_pairs_hook=_reject_duplicate_keys
        )
    except RecursionError:
        raise InputError(f"{source}: JSON is nested too deeply") from None
    except ValueError as exc:
        raise InputError(f"{source}: not valid JSON ({exc})") from None
    if not isinstance(data, dict):
        raise InputError(f"{source}: expected a JSON object of signal name to number")
    if not data:
        raise InputError(f"{source}: the JSON object holds no signals")
    signals: dict[str, float] = {}
    for key, value in data.items():
        label = repr(key[:80])
        if not key.strip() or len(key) > _MAX_NAME_CHARS:
            raise InputError(f"{source}: signal name {label} is empty or too long")
        if isinstance(value, bool) or not isinstance(value, int | float):
            raise InputError(
                f"{source}: signal {label} must be a number, not {type(value).__name__}"
            )
        try:
            number = float(value)
        except OverflowError:
            number = math.inf
        if not math.isfinite(number):
            raise InputError(f"{source}: signal {label} is not a finite number")
        signals[key] = number
    try:
        check_json_value(signals)
    except ValueError as exc:
        raise InputError(f"{source}: {exc}") from None
    return ParsedProfile(
        format="signals-json",
        signals=dict(sorted(signals.items())),
        aggregation="as given",
    )


# --------------------------------------------------------------------------- files


def _read(path: Path, display: str) -> tuple[str, SourceFile]:
    try:
        info = path.stat()
    except OSError as exc:
        raise InputError(f"{display}: cannot read ({exc.strerror or exc})") from None
    if not stat.S_ISREG(info.st_mode):
        raise InputError(f"{display}: not a regular file")
    limit = max_input_bytes()
    shown = f"{limit // 2**20} MiB" if limit % 2**20 == 0 else f"{limit}-byte"
    if info.st_size > limit:
        raise InputError(
            f"{display}: {info.st_size} bytes is over the {shown} limit for profile files"
        )
    try:
        with path.open("rb") as handle:
            data = handle.read(limit + 1)
    except OSError as exc:
        raise InputError(f"{display}: cannot read ({exc.strerror or exc})") from None
    if len(data) > limit:
        raise InputError(f"{display}: over the {shown} limit")
    record = SourceFile(display, hashlib.sha256(data).hexdigest(), len(data))
    if data.startswith((b"\xff\xfe", b"\xfe\xff")):
        raise InputError(f"{display}: is UTF-16 text; save it as UTF-8")
    if b"\x00" in data:
        raise InputError(f"{display}: is a binary file, not text")
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise InputError(
            f"{display}: is not UTF-8 text (byte 0x{data[exc.start]:02x} at offset {exc.start})"
        ) from None
    if not text.strip():
        raise InputError(f"{display}: is empty")
    return text, record


def _header_kind(cells: set[str]) -> str | None:
    """The format whose header row these (lower-cased) cells are, if any."""
    if "kernel name" in cells and ({"id", "metric name"} & cells or len(cells) > 2):
        return "ncu-csv"
    if "name" in cells and "duration(us)" in cells:
        return "kernel-details"
    if "op name" in cells and cells & {
        "task id",
        "stream id",
        "model id",
        "task type",
        "task start time(us)",
        "op state",
    }:
        return "op-summary"
    if "op name" in cells and "task duration(us)" in cells:
        return "msprof-op"
    return None


def _line_cells(line: str) -> list[str]:
    try:
        record = next(csv.reader([line]), [])
    except csv.Error:
        return []
    return [_clean(c) for c in record]


def _find_header(text: str, limit: int = _MAX_PREAMBLE_LINES) -> tuple[int, str | None, int]:
    """(offset of the header line, its format, preamble lines skipped). Lines before the
    header that are a tool's own (``==PROF==``, ``==WARNING==``) or the profiled program's
    output (commas and quotes included) are skipped one line at a time, so an unbalanced
    quote there cannot swallow the table."""
    offset = 0
    for number, line in enumerate(text.splitlines(keepends=True)):
        if number >= limit:
            break
        stripped = line.replace("\ufeff", "").strip()
        if stripped and not stripped.startswith("=="):
            cells = {c.lower() for c in _line_cells(stripped)} - {""}
            kind = _header_kind(cells) if len(cells) >= 2 else None
            if kind is not None:
                return offset, kind, number
            if {"block_id", "sub_block_id"} & cells or any(c.startswith("aiv_") for c in cells):
                return offset, "per-core", number
        offset += len(line)
    return 0, None, 0


def _sniff(text: str, display: str) -> tuple[str, int, int]:
    """The format of a CSV file from its header row, the offset of that row and the number
    of preamble lines before it."""
    offset, kind, skipped = _find_header(text)
    if kind == "per-core":
        raise InputError(
            f"{display}: is a per-core msprof op table; load its folder, which must hold "
            "OpBasicInfo.csv"
        )
    if kind is None:
        raise InputError(
            f"{display}: not a recognised profile (expected msprof op, op_summary, "
            "kernel_details or ncu --csv columns)"
        )
    return kind, offset, skipped


def _relative(path: Path, root: Path) -> str:
    try:
        return PurePosixPath(path.relative_to(root)).as_posix()
    except ValueError:
        return path.name


def _walk(root: Path) -> list[Path]:
    found: list[Path] = []
    root_depth = len(root.parts)
    for current, dirs, files in os.walk(root, onerror=None, followlinks=False):
        here = Path(current)
        dirs[:] = sorted(d for d in dirs if len(here.parts) - root_depth < _MAX_WALK_DEPTH)
        for name in sorted(files):
            found.append(here / name)
            if len(found) > _MAX_WALK_FILES:
                raise InputError(
                    f"{root}: holds more than {_MAX_WALK_FILES} files; point at the profile "
                    "folder itself"
                )
    return found


def _launch_dirs(files: Sequence[Path]) -> dict[Path, dict[str, list[Path]]]:
    by_dir: dict[Path, dict[str, list[Path]]] = {}
    for path in files:
        match = _MSPROF_FILE.match(path.name)
        if match:
            table = next(t for t in _MSPROF_TABLES if t.lower() == match.group(1).lower())
            by_dir.setdefault(path.parent, {}).setdefault(table, []).append(path)
    return by_dir


def _load_launch(
    directory: Path, tables: Mapping[str, list[Path]], root: Path, kernel_name: str | None
) -> ParsedProfile:
    texts: dict[str, str] = {}
    names: dict[str, str] = {}
    records: list[SourceFile] = []
    notes: list[str] = []
    for table, paths in tables.items():
        chosen = sorted(paths)[-1]
        display = _relative(chosen, root)
        if len(paths) > 1:
            notes.append(f"{len(paths)} {table} files in one folder; read the last, {display}")
        text, record = _read(chosen, display)
        texts[table], names[table] = text, display
        records.append(record)
    profile = parse_msprof_op(
        texts["OpBasicInfo"],
        texts.get("PipeUtilization"),
        texts.get("ResourceConflictRatio"),
        texts.get("Memory"),
        kernel_name=kernel_name,
        sources=names,
        extra={t: texts[t] for t in _MSPROF_EXTRA if t in texts},
    )
    op_name = profile.kernel_name
    if not op_name:
        parent = directory.parent if directory.name.isdigit() else directory
        op_name = parent.name
    return replace(
        profile,
        kernel_name=op_name,
        files=tuple(sorted(records, key=lambda r: r.path)),
        notes=(*notes, *profile.notes),
    )


def _load_msprof_folder(
    root: Path, by_dir: Mapping[Path, Mapping[str, list[Path]]], kernel_name: str | None
) -> ParsedProfile:
    launch_dirs = sorted(d for d, tables in by_dir.items() if "OpBasicInfo" in tables)
    if not launch_dirs:
        orphan = sorted(by_dir)[0]
        raise InputError(
            f"{_relative(orphan, root) if orphan != root else root}: msprof op tables found "
            "but no OpBasicInfo.csv beside them"
        )
    launches = [_load_launch(d, by_dir[d], root, None) for d in launch_dirs]
    names = [p.kernel_name or "" for p in launches]
    chosen, notes = _select(names, kernel_name, str(root))
    selected = [p for p in launches if p.kernel_name == chosen]
    merged = merge_launches(selected)
    signals = dict(merged.signals)
    signals.setdefault("launch_count", 1.0)
    return replace(
        merged,
        signals=dict(sorted(signals.items())),
        kernel_name=chosen,
        notes=(*notes, *merged.notes),
    )


def _parse_file_text(
    fmt: str, text: str, kernel_name: str | None, display: str, shape: str | None
) -> ParsedProfile:
    if fmt == "ncu-csv":
        return parse_ncu_csv(text, kernel_name=kernel_name, source=display, shape=shape)
    if fmt == "kernel-details":
        return parse_kernel_details(text, kernel_name=kernel_name, source=display, shape=shape)
    if fmt == "op-summary":
        return parse_op_summary(text, kernel_name=kernel_name, source=display, shape=shape)
    if shape is not None:
        raise InputError(f"{display}: a {fmt} profile holds one shape; --shape does not apply")
    if fmt == "msprof-op":
        return parse_msprof_op(text, kernel_name=kernel_name, sources={"OpBasicInfo": display})
    return parse_signals_json(text, source=display)


def _load_file(path: Path, kernel_name: str | None, shape: str | None = None) -> ParsedProfile:
    root = path.parent
    if _MSPROF_FILE.match(path.name):
        if shape is not None:
            raise InputError(
                f"{path.name}: an msprof op profile holds one shape; --shape does not apply"
            )
        try:
            siblings = sorted(p for p in root.iterdir() if p.is_file())
        except OSError as exc:
            raise InputError(f"{root}: cannot list ({exc.strerror or exc})") from None
        return _load_msprof_folder(root, _launch_dirs(siblings), kernel_name)
    display = path.name
    text, record = _read(path, display)
    if path.suffix.lower() == ".json":
        fmt, offset, skipped = "signals-json", 0, 0
    else:
        fmt, offset, skipped = _sniff(text, display)
    if skipped and fmt != "ncu-csv":  # ncu notes its own preamble
        text = text[offset:]
    profile = _parse_file_text(fmt, text, kernel_name, display, shape)
    if skipped and fmt != "ncu-csv":
        note = f"{display}: skipped {skipped} line(s) before the header"
        profile = replace(profile, notes=(note, *profile.notes))
    if fmt == "signals-json" and kernel_name is not None:
        profile = replace(profile, kernel_name=kernel_name)
    return replace(profile, files=(record,))


def _is_full_run_csv(path: Path) -> bool:
    name = path.name.lower()
    return name.endswith(".csv") and (
        name.startswith("op_summary") or name.startswith("kernel_details")
    )


def load_profile(
    path: Path, *, kernel_name: str | None = None, shape: str | None = None
) -> ParsedProfile:
    """Read a profile file or folder; see the module docstring for the formats.

    A folder is searched (not following links) for ``msprof op`` tables; when it holds
    none, for exactly one ``op_summary*.csv`` or ``kernel_details*.csv``. `shape` picks one
    input shape (``Input Shapes``) or ncu launch size (``grid (..) block (..)``) where the
    kernel ran with several; without it, each shape is reported and the one with the most
    total time is attributed.
    """
    path = Path(path)
    if kernel_name is not None and not kernel_name.strip():
        raise InputError(f"{path}: the kernel name is empty")
    if shape is not None and not shape.strip():
        raise InputError(f"{path}: the shape is empty")
    try:
        is_dir = path.is_dir()
        exists = is_dir or path.exists()
    except OSError as exc:
        raise InputError(f"{path}: cannot read ({exc.strerror or exc})") from None
    if not exists:
        raise InputError(f"{path}: no such file or folder")
    if not is_dir:
        return _load_file(path, kernel_name, shape)
    try:
        files = _walk(path)
    except OSError as exc:
        raise InputError(f"{path}: cannot list ({exc.strerror or exc})") from None
    by_dir = _launch_dirs(files)
    if by_dir:
        if shape is not None:
            raise InputError(
                f"{path}: an msprof op profile holds one shape; --shape does not apply"
            )
        return _load_msprof_folder(path, by_dir, kernel_name)
    full_run = [f for f in files if _is_full_run_csv(f)]
    if len(full_run) == 1:
        only = full_run[0]
        profile = _load_file(only, kernel_name, shape)
        record = profile.files[0]
        return replace(profile, files=(replace(record, path=_relative(only, path)),))
    if full_run:
        raise InputError(
            f"{path}: holds {len(full_run)} op_summary/kernel_details files; pass one of "
            f"{_listing([_relative(f, path) for f in full_run])}"
        )
    raise InputError(
        f"{path}: no profile files found (expected OpBasicInfo.csv, PipeUtilization.csv, "
        "op_summary_*.csv or kernel_details.csv)"
    )
