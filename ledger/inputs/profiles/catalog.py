"""What each profile format is and the signal names its reader gives, taken from the tables
the readers map columns and metrics with (not a copy of them): the skill's reference lists
them, and `profile` names them when a signal map holds none of them."""

from __future__ import annotations

from dataclasses import dataclass, field

from ledger.inputs.profiles import msprof, ncu, op_summary
from ledger.inputs.profiles.common import _ALIASES


@dataclass(frozen=True, slots=True)
class Format:
    name: str  # as ProfileRecorded.format records it
    platform: str  # "gpu", "ascend" or "any"
    what: str  # the file it reads
    named: tuple[str, ...]  # the signals its reader maps known columns or metrics to
    others: str  # what becomes of every other column or metric
    units: dict[str, str] = field(default_factory=dict)  # a named signal's unit, where known
    sources: dict[str, tuple[str, ...]] = field(default_factory=dict)  # metrics or columns


def _sources(table) -> dict[str, tuple[str, ...]]:
    """Each signal of a reader's table with the metrics or column headings it reads it from
    (lower-cased, as the reader matches them)."""
    out: dict[str, list[str]] = {}
    for key, value in table.items():
        out.setdefault(value[0] if isinstance(value, tuple) else value, []).append(key)
    return {name: tuple(keys) for name, keys in out.items()}


def _names(*groups) -> tuple[str, ...]:
    return tuple(sorted({name for group in groups for name in group}))


_UNITS = {"time": "us", "pct": "fraction", "bytes": "bytes", "rate": "GB/s", "count": "count"}
"""The unit of each kind of metric the ncu reader knows, as it scales them."""

_OTHER_HEADINGS = (
    "every other numeric column under its heading, lower-cased, non-alphanumerics as `_`, "
    "the unit as a suffix (`_us`, `_kb`, `_bytes`, `_gbps`, `_mhz`; a `%` column as a "
    "fraction without suffix): the pipe columns give `aic_*`/`aiv_*` ratios and times such "
    "as `aiv_vec_ratio`, `aiv_scalar_ratio`, `aiv_mte2_ratio`, `aiv_time_us`"
)

FORMAT_LIST: tuple[Format, ...] = (
    Format(
        "ncu-csv",
        "gpu",
        "Nsight Compute `--csv` output, long (`--page details` or `--metrics`) or wide "
        "(`--page raw`)",
        _names(
            (signal for signal, _ in ncu._NCU_KNOWN.values()),
            ("grid_size", "block_size", "dram_bytes"),
        ),
        "every other metric under its name, lower-cased, non-alphanumerics as `_`, a `%` as "
        "a fraction (`pct` in the name becomes `frac`), the unit as a suffix (`_us`, "
        "`_bytes`, `_gbps`, `_mhz`)",
        {signal: _UNITS[kind] for signal, kind in ncu._NCU_KNOWN.values()},
        _sources(ncu._NCU_KNOWN),
    ),
    Format(
        "msprof-op",
        "ascend",
        "an `msprof op` output folder (OpBasicInfo.csv with PipeUtilization, "
        "ResourceConflictRatio, Memory, ... beside it)",
        _names(
            msprof._OP_BASIC_SIGNALS.values(),
            _ALIASES.values(),
            (f"{p}_{s}" for p in ("aic", "aiv") for s in ("core_count", "time_mean_us")),
            (f"{p}_time_imbalance" for p in ("aic", "aiv")),
            ("launch_count",),
        ),
        _OTHER_HEADINGS,
        sources=_sources(msprof._OP_BASIC_SIGNALS),
    ),
    Format(
        "op-summary",
        "ascend",
        "`op_summary_*.csv` of a full-run profile",
        _names(op_summary._TASK_SIGNALS.values(), _ALIASES.values(), ("launch_count",)),
        _OTHER_HEADINGS,
        sources=_sources(op_summary._TASK_SIGNALS),
    ),
    Format(
        "kernel-details",
        "ascend",
        "torch_npu `kernel_details.csv`",
        _names(op_summary._TASK_SIGNALS.values(), _ALIASES.values(), ("launch_count",)),
        _OTHER_HEADINGS,
        sources=_sources(op_summary._TASK_SIGNALS),
    ),
    Format(
        "signals-json",
        "any",
        "a JSON object of signal name to number, for signals normalized elsewhere",
        (),
        "every name as given: write the names another format's reader gives (for a GPU the "
        "ncu-csv ones, for Ascend the msprof-op ones), or the attribution reads nothing",
    ),
)
BY_NAME = {f.name: f for f in FORMAT_LIST}
KNOWN = frozenset(name for f in FORMAT_LIST for name in f.named)
"""Every signal name a reader gives a column or metric it knows."""


def known_signal(name: str) -> bool:
    """Whether a reader gives this name: one it maps a known column or metric to, or an
    Ascend pipe column's (`aic_*`, `aiv_*`)."""
    return name in KNOWN or name.startswith(("aic_", "aiv_"))


def unread_map_note(signals: dict[str, float], platform: str, source: str) -> str | None:
    """For a signal map none of whose names a reader gives: what to write instead, in the
    target's platform's names (`platform` "gpu" or "ascend"; else both); None otherwise."""
    if any(known_signal(name) for name in signals):
        return None
    from ledger.inputs.models import nearest

    meant = []
    for name in sorted(signals):
        near = nearest(name, sorted(KNOWN))
        if near is not None:
            meant.append(f"{name} -> {near}")
    first = next((f for f in FORMAT_LIST if f.platform == platform), None)
    names = first.named if first is not None else tuple(sorted(KNOWN))
    where = f"the {first.name} names" if first is not None else "the readers' names"
    return (
        f"{source}: no signal of this map is one a profile reader gives, so the attribution "
        f"reads none of it; write {where}: {', '.join(names)}"
        + (f" (did you mean {'; '.join(meant)}?)" if meant else "")
        + " (the skill's references/inputs.md, Profiles)"
    )
