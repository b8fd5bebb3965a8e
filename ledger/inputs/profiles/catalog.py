"""What each profile format is and the signal names its reader gives, taken from the tables
the readers map columns and metrics with (not a copy of them): the skill's reference lists
them, and `profile` names them when a signal map holds none of them."""

from __future__ import annotations

from ledger.inputs.profiles.common import Format
from ledger.inputs.profiles.msprof import FORMAT as MSPROF_OP
from ledger.inputs.profiles.ncu import FORMAT as NCU_CSV
from ledger.inputs.profiles.op_summary import KERNEL_DETAILS, OP_SUMMARY
from ledger.inputs.profiles.signals_json import FORMAT as SIGNALS_JSON

FORMAT_LIST: tuple[Format, ...] = (NCU_CSV, MSPROF_OP, OP_SUMMARY, KERNEL_DETAILS, SIGNALS_JSON)
"""Every profile format, each declared in its reader's module: the loader recognises and
reads files by it, the skill's reference lists it in this order."""
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
