"""What to try next on a run, from what worked and what failed on runs like it. Pure: the
runs come in as projections (`RunView`), the answer goes out as values; no store, no clock.

    target_of(view[, at_round])       the run as `suggest` compares it: its op, platform,
                                      cases, starting and current profiles, rounds tried
    suggest(target, history)          mechanism entries ranked by their evidence in similar
                                      runs, and the known failure signatures

How similar a past round is to the target (0 to 1, `similarity`): the same op (or op family),
the same platform (or family), shared case shapes, the same bottleneck class of the
starting profile and the distance between the signals (ledger/core/similar.py). A run with
a round at least `MIN_SIMILARITY` similar is a similar run; only its rounds make failure
signatures, while every round ranks, weighted by its nearness. An entry's score sums, over
its rounds, weight (exp((similarity - nearest) / SHARPNESS)) x recency x outcome (a KEEP
counts 1 plus its gain up to 0.5; a try that was not kept counts little, a FAIL against
it). docs/suggest.md says the same in prose.
"""

from __future__ import annotations

import json
import math
import re
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

from ledger.core import mechanisms
from ledger.core.projections import RoundRow, RunView
from ledger.core.similar import signal_distance

MIN_SIMILARITY = 0.25
"""A past round at least this similar to the target makes its run a similar run."""

WEIGHTS = {"op": 0.30, "platform": 0.15, "shapes": 0.15, "bottleneck": 0.20, "signals": 0.20}
"""The parts of a round's similarity to the target; they sum to 1."""

SHARPNESS = 0.1
"""How much more a more similar round counts: its weight is exp((similarity - nearest) /
SHARPNESS), where `nearest` is the similarity of the most similar round of all, so a round
0.1 more similar counts e times as much, and many rounds of unlike runs do not outvote the
few of a like one."""

OUTCOME = {"KEEP": 1.0, "NOISE": 0.1, "DISCARD": 0.05, "FAIL": -0.1}
"""What one round of an entry adds to its score, times its similarity and recency (a KEEP
adds its gain, up to 0.5, on top)."""

FAILED = ("FAIL", "DISCARD")
"""The decisions that make a round part of a failure signature."""

# (family, its class, the pattern of op names in it), most specific first
_OP_FAMILIES = (
    # first: vLLM's "reshape_and_cache_flash" writes a KV cache, it attends to nothing
    ("data-movement", "streaming", r"reshape"),
    ("attention", "contraction", r"attn|attention|flash|sdpa"),
    ("matmul", "contraction", r"matmul|gemm|gemv|matvec|mm\b|mv\b|linear|bmm|dot|moe"),
    ("convolution", "convolution", r"conv"),
    ("softmax", "row-wise", r"softmax|entropy|logsumexp|\blse\b"),
    ("normalization", "row-wise", r"norm|^(ln|gn|bn)([_-]|$)"),
    (
        "reduction",
        "row-wise",
        r"reduc|sum|mean|max|min|argmax|cumsum|scan|variance|\bvar\b|topk|sort",
    ),
    # before data movement: "rotary_embedding" applies a rotation, it gathers nothing
    ("elementwise", "streaming", r"rotary|rope|pos_emb|quant|cast"),
    (
        "data-movement",
        "streaming",
        r"transpose|permute|copy|gather|scatter|embed|index|concat|cache",
    ),
    (
        "elementwise",
        "streaming",
        r"add|mul|gelu|silu|relu|swiglu|geglu|sigmoid|tanh|elementwise|act|dropout"
        r"|adam|sgd|lamb|optim",
    ),
)


def op_family(op_name: str) -> str:
    """The family of an op by its name ("fused_rmsnorm" -> "normalization"); the name itself
    when no family matches.

    >>> op_family("rmsnorm"), op_family("softmax-online"), op_family("foo")
    ('normalization', 'softmax', 'foo')
    """
    name = op_name.lower()
    for family, _, pattern in _OP_FAMILIES:
        if re.search(pattern, name):
            return family
    return name


def op_class(op_name: str) -> str:
    """The class of an op's family: "row-wise" (softmax, normalizations, reductions),
    "contraction" (matmul, attention), "streaming" (elementwise, data movement); the name
    itself when no family matches.

    >>> op_class("cross_entropy"), op_class("gemm"), op_class("transpose")
    ('row-wise', 'contraction', 'streaming')
    """
    family = op_family(op_name)
    return next((c for f, c, _ in _OP_FAMILIES if f == family), family)


def platform_family(soc: str) -> str:
    """ "ascend" for an Ascend SoC, "gpu" for an NVIDIA or AMD GPU, else the SoC itself."""
    name = soc.lower()
    if "ascend" in name or re.match(r"^(910|310)", name):
        return "ascend"
    if re.search(r"nvidia|geforce|\b[ahbl]\d{2,3}\b|^[ahbl]\d{2,3}|rtx|tesla|mi\d{3}|amd", name):
        return "gpu"
    return name


def _shape(case_id: str) -> str:
    """A case id without its dtype prefix ("fp16-4096x1024" -> "4096x1024")."""
    return re.sub(r"^(fp|bf|int|uint|f)\d+[-_]", "", case_id.lower())


@dataclass(frozen=True, slots=True)
class Profile:
    bottleneck: str | None
    signals: Mapping[str, float]


@dataclass(frozen=True, slots=True)
class Target:
    """A run as `suggest` sees it: at its latest round, or at the start of one round."""

    run_id: str
    op_name: str
    soc: str
    case_ids: tuple[str, ...]
    profiles: tuple[Profile, ...]  # the starting and the current profile (either may lack)
    tried: tuple[RoundRow, ...]  # the rounds it has decided (before `at_round`)


def _row_profile(row: RoundRow) -> Profile | None:
    if row.start_signals is None and row.bottleneck is None:
        return None
    return Profile(row.bottleneck, json.loads(row.start_signals) if row.start_signals else {})


def kernel_profiles(view: RunView, kernel_sha256: str) -> tuple[Profile, ...]:
    """Every profile the run holds of one kernel (one per case when a profiler wrote one per
    case), whenever it was recorded."""
    return tuple(
        Profile(p.bottleneck, json.loads(p.signals))
        for p in view.profiles
        if p.kernel_sha256 == kernel_sha256
    )


def start_profiles(view: RunView, row: RoundRow) -> tuple[Profile, ...]:
    """The profiles a round started from: the one its decision recorded, else those of its
    parent kernel recorded since (a campaign that profiles after measuring), else the run's
    baseline profiles."""
    recorded = _row_profile(row)
    if recorded is not None:
        return (recorded,)
    found = kernel_profiles(view, row.parent_kernel_sha256)
    if found:
        return found
    return tuple(
        Profile(p.bottleneck, json.loads(p.signals))
        for p in view.profiles
        if p.subject == "baseline"
    )


def target_of(view: RunView, at_round: int | None = None) -> Target:
    """The run as `suggest` compares it: with `at_round`, as it stood when that round
    started (the rounds before it, its starting profiles); else as it stands now (its
    baseline profiles and the best kernel's profiles, every round)."""
    rounds = tuple(r for r in view.rounds if at_round is None or r.round < at_round)
    if at_round is not None:
        row = next((r for r in view.rounds if r.round == at_round), None)
        profiles = start_profiles(view, row) if row is not None else ()
    else:
        run = view.run
        profiles = kernel_profiles(view, run.original_kernel_sha256)
        if run.best_kernel_sha256 != run.original_kernel_sha256:
            profiles = (*profiles, *kernel_profiles(view, run.best_kernel_sha256))
    return Target(
        run_id=view.run.run_id,
        op_name=view.run.op_name,
        soc=view.run.soc,
        case_ids=tuple(c.case_id for c in view.cases),
        profiles=tuple(profiles),
        tried=rounds,
    )


@dataclass(frozen=True, slots=True)
class Likeness:
    """How similar a past round is to the target, and why."""

    value: float
    reasons: tuple[str, ...]


def likeness(target: Target, run: RunView, row: RoundRow) -> Likeness:
    """The similarity of a past round (of `run`) to the target, with the parts that made it."""
    reasons: list[str] = []
    parts = dict.fromkeys(WEIGHTS, 0.0)
    if run.run.op_name == target.op_name:
        parts["op"] = 1.0
        reasons.append(f"same op {target.op_name}")
    elif op_family(run.run.op_name) == op_family(target.op_name):
        parts["op"] = 0.7
        reasons.append(f"same op family {op_family(target.op_name)}")
    elif op_class(run.run.op_name) == op_class(target.op_name):
        parts["op"] = 0.4
        reasons.append(f"same op class {op_class(target.op_name)}")
    if run.run.soc == target.soc:
        parts["platform"] = 1.0
        reasons.append(f"same platform {target.soc}")
    elif platform_family(run.run.soc) == platform_family(target.soc):
        parts["platform"] = 0.6
        reasons.append(f"same platform family {platform_family(target.soc)}")
    mine = {_shape(c) for c in target.case_ids}
    theirs = {_shape(c.case_id) for c in run.cases}
    if mine and theirs and mine & theirs:
        parts["shapes"] = len(mine & theirs) / len(mine | theirs)
        reasons.append(f"{len(mine & theirs)} shared shapes")
    starts = start_profiles(run, row)
    if starts and target.profiles:
        mine_b = {p.bottleneck for p in target.profiles if p.bottleneck}
        theirs_b = {p.bottleneck for p in starts if p.bottleneck}
        if mine_b and theirs_b and mine_b & theirs_b:
            # bottleneck classes per case: the share the two sets have in common
            parts["bottleneck"] = len(mine_b & theirs_b) / len(mine_b | theirs_b)
            reasons.append(f"bottleneck {', '.join(sorted(mine_b & theirs_b))} in common")
        nearest_each = []
        for mine_p in target.profiles:
            found = [signal_distance(mine_p.signals, t.signals) for t in starts]
            found = [d for d, n in found if n > 0]
            if found:
                nearest_each.append(min(found))
        if nearest_each:
            distance = statistics.fmean(nearest_each)
            parts["signals"] = math.exp(-distance)
            reasons.append(f"signal distance {distance:.2f}")
    value = round(math.fsum(WEIGHTS[k] * v for k, v in parts.items()), 6)
    return Likeness(value, tuple(reasons))


@dataclass(frozen=True, slots=True)
class Behind:
    """One round behind a suggestion or a failure signature."""

    run_id: str
    round: int
    decision: str
    improvement: float | None
    similarity: float
    why_similar: tuple[str, ...]
    mechanism: str | None
    change: str
    reason: str | None = None  # why it was so decided (the failure signatures' rounds)
    cases: tuple[str, ...] = ()  # the cases that failed validation, or regressed most


@dataclass(frozen=True, slots=True)
class Ranked:
    entry: str
    title: str
    platform: str
    score: float
    tries: int
    keeps: int
    runs: int
    gain_median: float | None  # of the measured rounds (every decision but FAIL)
    gain_low: float | None
    gain_high: float | None
    rounds: tuple[Behind, ...]  # most similar first
    tried_here: tuple[tuple[int, str], ...]  # this run's rounds of the entry: (round, decision)
    why: str


@dataclass(frozen=True, slots=True)
class Signature:
    entry: str
    title: str
    failed_runs: int
    rounds: tuple[Behind, ...]
    why: str


@dataclass(frozen=True, slots=True)
class Suggestions:
    run_id: str
    similar_runs: tuple[tuple[str, float], ...]  # (run, its most similar round's similarity)
    ranked: tuple[Ranked, ...]
    signatures: tuple[Signature, ...]
    other_rounds: int  # similar rounds whose mechanism is in no entry of the vocabulary
    note: str  # a sentence on what the answer rests on (or why it is empty)
    tried_elsewhere: tuple[tuple[int, str, str], ...] = field(default=())
    # this run's rounds of entries that no similar run tried: (round, entry, decision)


def entry_of(row: RoundRow) -> str:
    """The vocabulary entry of a round row: classified from its mechanism and change under
    the newest vocabulary version (the decision records the entry of its own time,
    `RoundDecided.mechanism_entry`; a newer version reads every round alike)."""
    return mechanisms.classify(row.mechanism, row.change).entry


def _pct(value: float | None) -> str:
    return "—" if value is None else f"{value * 100:+.1f}%"


def suggest(
    target: Target,
    history: Sequence[RunView],
    *,
    limit: int = 5,
    tried_last: bool = True,
) -> Suggestions:
    """Mechanism entries ranked by their evidence in the rounds of `history` that resemble
    the target (the target's own run is left out of `history`), at most `limit`; and the
    failure signatures: every entry that failed validation or was discarded in a similar
    run (any of its rounds), most failing runs first. With `tried_last`, an entry this run
    already tried ranks after every entry it has not tried, one it kept before one it did
    not (what to try next is first what has not been tried; the benchmark also measures the
    ranking without it)."""
    others = [v for v in history if v.run.run_id != target.run_id]
    newest = sorted({max((r.recorded_at for r in v.rounds), default="") for v in others})
    rank_of = {at: i for i, at in enumerate(newest)}
    evidence: dict[str, list[tuple[float, RoundRow, Likeness]]] = {}
    similar: dict[str, float] = {}
    other_rounds = 0
    for view in others:
        last = max((r.recorded_at for r in view.rounds), default="")
        recency = 1.0 - 0.3 * (1 - (rank_of[last] + 1) / len(newest)) if newest else 1.0
        for row in view.rounds:
            like = likeness(target, view, row)
            if like.value >= MIN_SIMILARITY:
                similar[view.run.run_id] = max(similar.get(view.run.run_id, 0.0), like.value)
            entry = entry_of(row)
            if entry == mechanisms.OTHER:
                other_rounds += like.value >= MIN_SIMILARITY
                continue
            # every round ranks, weighted by how near it is; only those of similar
            # runs make failure signatures
            evidence.setdefault(entry, []).append((recency, row, like))
    tried_here: dict[str, list[tuple[int, str]]] = {}
    for row in target.tried:
        tried_here.setdefault(entry_of(row), []).append((row.round, row.decision))
    nearest = max((like.value for items in evidence.values() for _, _, like in items), default=1)
    ranked = sorted(
        (
            _ranked(entry, items, tried_here.get(entry, []), nearest)
            for entry, items in evidence.items()
        ),
        key=lambda r: (_tried_rank(r) if tried_last else 0, -r.score, r.entry),
    )
    # the failure signatures come from every round of a similar run
    close = {e: [i for i in items if i[1].run_id in similar] for e, items in evidence.items()}
    signatures = sorted(
        (s for s in (_signature(e, items) for e, items in close.items()) if s is not None),
        key=lambda s: (-s.failed_runs, -sum(b.similarity for b in s.rounds), s.entry),
    )
    if not others:
        note = "no other run in the ledger: no evidence to rank mechanisms by"
    elif not evidence:
        note = (
            f"none of the {len(others)} other runs has a decided round that names a mechanism entry"
        )
    elif not similar:
        note = (
            f"none of the {len(others)} other runs has a round similar enough to this run "
            f"(similarity >= {MIN_SIMILARITY}: op, platform, shapes, bottleneck, signals); "
            f"ranked from the nearest rounds (similarity {nearest:.2f}), weak evidence"
        )
    else:
        note = (
            f"{len(similar)} of {len(others)} other runs resemble this run; "
            f"{sum(len(v) for v in close.values())} of their rounds name a mechanism entry"
        )
    elsewhere = tuple(
        (rnd, entry, decision)
        for entry, rounds in sorted(tried_here.items())
        if entry not in evidence
        for rnd, decision in rounds
    )
    return Suggestions(
        run_id=target.run_id,
        similar_runs=tuple(sorted(similar.items(), key=lambda kv: (-kv[1], kv[0]))),
        ranked=tuple(ranked[:limit]),
        signatures=tuple(signatures),
        other_rounds=other_rounds,
        note=note,
        tried_elsewhere=elsewhere,
    )


def _behind(row: RoundRow, like: Likeness) -> Behind:
    return Behind(
        run_id=row.run_id,
        round=row.round,
        decision=row.decision,
        improvement=row.relative_improvement,
        similarity=like.value,
        why_similar=like.reasons,
        mechanism=row.mechanism,
        change=row.change,
    )


def _tried_rank(r: Ranked) -> int:
    """0 for an entry this run has not tried, 1 for one it tried and kept, 2 for one it
    tried without a KEEP."""
    if not r.tried_here:
        return 0
    return 1 if any(d == "KEEP" for _, d in r.tried_here) else 2


def weight(similarity: float, nearest: float) -> float:
    """What one round of that similarity counts in an entry's score, when the most similar
    round of all is `nearest` similar (`SHARPNESS`)."""
    return math.exp((similarity - nearest) / SHARPNESS)


def _ranked(
    entry: str,
    items: list[tuple[float, RoundRow, Likeness]],
    tried_here: list[tuple[int, str]],
    nearest: float,
) -> Ranked:
    info = mechanisms.BY_ID[entry]
    score = 0.0
    for recency, row, like in items:
        outcome = OUTCOME[row.decision]
        if row.decision == "KEEP":
            outcome += min(max(row.relative_improvement or 0.0, 0.0), 0.5)
        score += weight(like.value, nearest) * recency * outcome
    gains = [r.relative_improvement for _, r, _ in items if r.relative_improvement is not None]
    keeps = sum(r.decision == "KEEP" for _, r, _ in items)
    runs = len({r.run_id for _, r, _ in items})
    behind = tuple(
        _behind(row, like)
        for _, row, like in sorted(items, key=lambda i: (-i[2].value, i[1].run_id, i[1].round))
    )
    median = statistics.median(gains) if gains else None
    top = behind[0]
    why = (
        f"kept in {keeps} of {len(items)} tries across {runs} run"
        f"{'s' if runs != 1 else ''}"
        + (
            f" (median gain {_pct(median)}, range {_pct(min(gains))} to {_pct(max(gains))})"
            if gains
            else " (never measured)"
        )
        + f"; most similar: {top.run_id} round {top.round} ({top.similarity:.2f}: "
        + ", ".join(top.why_similar)
        + ")"
    )
    if tried_here:
        why += "; this run tried it already: " + ", ".join(f"round {n} {d}" for n, d in tried_here)
    return Ranked(
        entry=entry,
        title=info.title,
        platform=info.platform,
        score=round(score, 6),
        tries=len(items),
        keeps=keeps,
        runs=runs,
        gain_median=median,
        gain_low=min(gains) if gains else None,
        gain_high=max(gains) if gains else None,
        rounds=behind,
        tried_here=tuple(tried_here),
        why=why,
    )


def _signature(entry: str, items: list[tuple[float, RoundRow, Likeness]]) -> Signature | None:
    failed = [(row, like) for _, row, like in items if row.decision in FAILED]
    if not failed:
        return None
    info = mechanisms.BY_ID[entry]
    runs = sorted({row.run_id for row, _ in failed})
    fails = sum(row.decision == "FAIL" for row, _ in failed)
    why = (
        f"failed validation {fails} and discarded {len(failed) - fails} times in "
        f"{len(runs)} similar run{'s' if len(runs) != 1 else ''} ({', '.join(runs)})"
    )
    return Signature(
        entry=entry,
        title=info.title,
        failed_runs=len(runs),
        rounds=tuple(
            _behind(row, like)
            for row, like in sorted(failed, key=lambda i: (-i[1].value, i[0].run_id, i[0].round))
        ),
        why=why,
    )


def with_failure_details(
    found: Suggestions, details: Mapping[tuple[str, int], tuple[str, tuple[str, ...]]]
) -> Suggestions:
    """The suggestions with each failure signature's rounds given their reason and failing
    cases, (run, round) -> (reason, cases), as the services read them from the events."""
    from dataclasses import replace

    def detailed(b: Behind) -> Behind:
        reason, cases = details.get((b.run_id, b.round), (None, ()))
        return replace(b, reason=reason, cases=cases)

    return replace(
        found,
        signatures=tuple(
            replace(s, rounds=tuple(detailed(b) for b in s.rounds)) for s in found.signatures
        ),
    )
