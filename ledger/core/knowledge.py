"""The ledger's history as knowledge candidates in the format of the workspace's curation
flow (Knowledge Candidate v1: `.agents/schemas/knowledge-candidate-v1.schema.json` of the
vllm-ascend workspace). Pure: runs in (projections, decision event hashes, which runs
verified), documents out; the timestamps are the rounds' own, so the same ledger exports the
same bytes.

One candidate per mechanism entry, op and platform (SoC):

- `backend-constraints`: the entry was kept at least once there: what worked, how often,
  by how much, from which starting bottleneck;
- `known-failure-signatures`: the entry failed validation or was discarded there two times
  or more: what failed, on which cases, why.

Fingerprints name the op and its family, the platform and its family, the mechanism entry
and the starting profiles' bottleneck classes and strongest signals, so the workspace's
`knowledge_query.py` finds a candidate by the words an agent queries with. Evidence points
at the ledger's decisions: `run:<run id>/round-<n>` with the RoundDecided's event hash.
"""

from __future__ import annotations

import hashlib
import json
import re
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from ledger.core import mechanisms
from ledger.core.projections import RoundRow, RunView
from ledger.core.similar import is_fraction
from ledger.core.suggest import (
    FAILED,
    Profile,
    entry_of,
    op_family,
    platform_family,
    start_profiles,
)

OWNER_SKILL = "kernel-ledger"
KINDS = ("backend-constraints", "known-failure-signatures")
FILES = {
    "version-compatibility": "version-compatibility.yaml",
    "model-capabilities": "model-capabilities.yaml",
    "parallelism-compatibility": "parallelism-compatibility.yaml",
    "backend-constraints": "backend-constraints.yaml",
    "validation-rules": "validation-rules.yaml",
    "known-failure-signatures": "known-failure-signatures.yaml",
}
"""The workspace's six formal knowledge documents, by kind."""


@dataclass(frozen=True, slots=True)
class Group:
    entry: str
    op_name: str
    soc: str
    rounds: tuple[tuple[RoundRow, RunView], ...]


def _groups(views: Sequence[RunView]) -> list[Group]:
    found: dict[tuple[str, str, str], list[tuple[RoundRow, RunView]]] = {}
    for view in views:
        for row in view.rounds:
            entry = entry_of(row)
            if entry == mechanisms.OTHER:
                continue
            found.setdefault((entry, view.run.op_name, view.run.soc), []).append((row, view))
    return [Group(*key, rounds=tuple(rows)) for key, rows in sorted(found.items())]


def _slug(text: str) -> str:
    return re.sub(r"[^a-z0-9]+", "-", text.lower()).strip("-")


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{value * 100:+.1f}%"


def strong_signals(profiles: Sequence[Profile], top: int = 3) -> list[str]:
    """The fraction signals (ratios, shares of peak) highest in these profiles."""
    best: dict[str, float] = {}
    for profile in profiles:
        for name, value in profile.signals.items():
            if is_fraction(name) and 0.0 <= value <= 1.0:
                best[name] = max(best.get(name, 0.0), value)
    ranked = sorted(best.items(), key=lambda kv: (-kv[1], kv[0]))
    return [name for name, value in ranked[:top] if value >= 0.3]


def _starts(group: Group, rows: Sequence[RoundRow]) -> list[Profile]:
    wanted = {(r.run_id, r.round) for r in rows}
    return [
        p
        for row, view in group.rounds
        if (row.run_id, row.round) in wanted
        for p in start_profiles(view, row)
    ]


def _fingerprints(group: Group, rows: Sequence[RoundRow]) -> list[str]:
    prints = [
        f"kernel-ledger mechanism {group.entry}",
        f"op {group.op_name}",
        f"op-family {op_family(group.op_name)}",
        f"platform {group.soc}",
        f"platform-family {platform_family(group.soc)}",
    ]
    starts = _starts(group, rows)
    prints += [f"bottleneck {b}" for b in sorted({p.bottleneck for p in starts if p.bottleneck})]
    prints += [f"high {name}" for name in strong_signals(starts)]
    return list(dict.fromkeys(p.lower() for p in prints))


def candidate_id(kind: str, group: Group) -> str:
    """A lowercase safe id, stable for the same kind, entry, op and platform."""
    key = json.dumps([kind, group.entry, group.op_name, group.soc])
    digest = hashlib.sha256(key.encode()).hexdigest()[:10]
    tag = "works" if kind == "backend-constraints" else "fails"
    return f"kl-{tag}-{group.entry}-{_slug(group.op_name)[:32]}-{_slug(group.soc)[:24]}-{digest}"


def _evidence(rows: Sequence[RoundRow], hashes: Mapping[tuple[str, int], str]) -> list[dict]:
    out = []
    for row in rows:
        item: dict[str, Any] = {
            "kind": f"kernel-ledger-decision-{row.decision.lower()}",
            "uri": f"run:{row.run_id}/round-{row.round}",
            "stable": True,
        }
        digest = hashes.get((row.run_id, row.round))
        if digest is not None:
            item["sha256"] = digest
        out.append(item)
    return out


def _verification(runs: Sequence[str], verified: Mapping[str, bool]) -> dict[str, Any]:
    ok = all(verified.get(r, False) for r in runs)
    return {
        "status": "passed" if ok else "inconclusive",
        "checks": [
            f"kernel-ledger verify --run {r}: {'ok' if verified.get(r) else 'not verified'}"
            for r in runs
        ],
    }


def _confidence(runs: int, rounds: int) -> str:
    return "high" if runs >= 3 else "medium" if runs >= 2 or rounds >= 3 else "low"


def _common(
    kind: str,
    group: Group,
    rows: Sequence[RoundRow],
    hashes: Mapping[tuple[str, int], str],
    verified: Mapping[str, bool],
) -> dict[str, Any]:
    runs = sorted({r.run_id for r in rows})
    times = sorted(r.recorded_at for r in rows)
    info = mechanisms.BY_ID[group.entry]
    return {
        "schema_version": 1,
        "candidate_id": candidate_id(kind, group),
        "kind": kind,
        "owner_skill": OWNER_SKILL,
        "scope": {
            "op_name": group.op_name,
            "op_family": op_family(group.op_name),
            "platform": group.soc,
            "platform_family": platform_family(group.soc),
            "mechanism_entry": group.entry,
            "mechanism_title": info.title,
            "mechanism_platform": info.platform,
            "vocabulary": mechanisms.VERSION,
        },
        "fingerprints": _fingerprints(group, rows),
        "applicable_versions": f"target.soc {group.soc}",
        "verification": _verification(runs, verified),
        "evidence": _evidence(rows, hashes),
        "confidence": _confidence(len(runs), len(rows)),
        "status": "candidate",
        "occurrence_count": len(runs),
        "source": {"run_ids": runs},
        "first_seen_at": _utc(times[0]),
        "last_seen_at": _utc(times[-1]),
        "created_at": _utc(times[-1]),
        "updated_at": _utc(times[-1]),
    }


def _utc(recorded_at: str) -> str:
    """A recorded time (RFC 3339 UTC) to the second, as the candidate format writes times."""
    return recorded_at[:19] + "Z"


def _worked(group, hashes, verified) -> dict[str, Any] | None:
    rows = [r for r, _ in group.rounds]
    kept = [r for r in rows if r.decision == "KEEP"]
    if not kept:
        return None
    gains = [r.relative_improvement for r in kept if r.relative_improvement is not None]
    bottlenecks = sorted({p.bottleneck for p in _starts(group, kept) if p.bottleneck}) or [
        "unknown"
    ]
    entry = mechanisms.BY_ID[group.entry]
    doc = _common("backend-constraints", group, rows, hashes, verified)
    median = statistics.median(gains) if gains else None
    doc.update(
        summary=(
            f"{group.entry} ({entry.title}) worked on {group.op_name} ({group.soc}): kept in "
            f"{len(kept)} of {len(rows)} rounds, median gain {_pct(median)}"
        ),
        symptom=(
            f"{group.op_name} on {group.soc} with a starting profile bound by "
            f"{', '.join(bottlenecks)}, looking for a faster kernel"
        ),
        root_cause=(
            f"the kept rounds changed {entry.title}; their gains were "
            + ", ".join(f"{r.run_id} round {r.round} {_pct(r.relative_improvement)}" for r in kept)
        ),
        resolution="try the change that was kept: "
        + "; ".join(f"{r.change} ({r.run_id} round {r.round})" for r in kept),
        avoidance="; ".join(
            f"{r.decision} {r.run_id} round {r.round}: {r.change}" for r in rows if r not in kept
        ),
    )
    return doc


def _failed(group, hashes, verified, details) -> dict[str, Any] | None:
    rows = [r for r, _ in group.rounds if r.decision in FAILED]
    if len(rows) < 2:
        return None
    entry = mechanisms.BY_ID[group.entry]
    doc = _common("known-failure-signatures", group, rows, hashes, verified)
    fails = sum(r.decision == "FAIL" for r in rows)

    def detail(r: RoundRow) -> str:
        reason, cases = details.get((r.run_id, r.round), (None, ()))
        where = f" on {', '.join(cases)}" if cases else ""
        return f"{r.run_id} round {r.round} {r.decision}{where}: {reason or r.change}"

    doc.update(
        summary=(
            f"{group.entry} ({entry.title}) failed on {group.op_name} ({group.soc}): "
            f"{fails} FAIL and {len(rows) - fails} DISCARD rounds"
        ),
        symptom="; ".join(detail(r) for r in rows),
        root_cause=f"changes of {entry.title} on {group.op_name}: "
        + "; ".join(r.change for r in rows),
        resolution=(
            f"avoid {group.entry} on {group.op_name} unless the hypothesis explains how it "
            "avoids the failures above; check the failing cases first"
        ),
        avoidance=f"do not retry {group.entry} on {group.op_name} ({group.soc}) unchanged",
    )
    return doc


def candidates(
    views: Sequence[RunView],
    hashes: Mapping[tuple[str, int], str],
    verified: Mapping[str, bool],
    details: Mapping[tuple[str, int], tuple[str, tuple[str, ...]]] = {},
) -> list[dict[str, Any]]:
    """Every candidate the runs support, in (kind, id) order. `hashes`: each decided round's
    RoundDecided event hash; `verified`: which runs `verify` passed; `details`: each failed
    round's reason and failing cases."""
    out = []
    for group in _groups(views):
        worked = _worked(group, hashes, verified)
        failed = _failed(group, hashes, verified, details)
        out += [c for c in (worked, failed) if c is not None]
    return sorted(out, key=lambda c: (c["kind"], c["candidate_id"]))


def promoted(found: Sequence[Mapping[str, Any]]) -> dict[str, dict[str, Any]]:
    """The six formal documents of the workspace's knowledge store as its curation's
    `promote` leaves them: each candidate an `experimental` entry of its kind's document,
    its `rule` holding the candidate's text, fingerprints, scope and evidence. File name ->
    document."""
    day = max((c["updated_at"][:10] for c in found), default="1970-01-01")
    documents = {
        name: {"schema_version": 1, "kind": kind, "updated_at": day, "entries": []}
        for kind, name in FILES.items()
    }
    for c in found:
        rule = {
            key: c[key]
            for key in (
                "candidate_id",
                "summary",
                "fingerprints",
                "symptom",
                "root_cause",
                "resolution",
                "avoidance",
                "scope",
                "evidence",
            )
        }
        documents[FILES[c["kind"]]]["entries"].append(
            {
                "id": c["candidate_id"],
                "source": "kernel-ledger knowledge export: " + ", ".join(c["source"]["run_ids"]),
                "applicable_versions": c["applicable_versions"],
                "updated_at": c["updated_at"][:10],
                "status": "experimental",
                "rule": rule,
            }
        )
    return documents
