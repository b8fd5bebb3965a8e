"""suggest: which mechanisms to try next on a run, from the runs that resemble it."""

from __future__ import annotations

from typing import Any

from cli.declare import Command, Env, Option, Outcome, run_option
from cli.output import pct, say, table


def suggest(env: Env, run: str, limit: int) -> Outcome:
    found = env.service().suggest(run, limit=limit)
    return Outcome(suggestions_document(found), found)


def _behind(b) -> dict[str, Any]:
    doc = {
        "run_id": b.run_id,
        "round": b.round,
        "decision": b.decision,
        "relative_improvement": b.improvement,
        "similarity": b.similarity,
        "why_similar": list(b.why_similar),
        "mechanism": b.mechanism,
        "change": b.change,
    }
    if b.reason is not None:
        doc["reason"] = b.reason
        doc["cases"] = list(b.cases)
    return doc


def suggestions_document(found) -> dict[str, Any]:
    """`suggest --json`: the ranked entries and failure signatures with the rounds behind
    each (ledger/core/suggest.py)."""
    return {
        "status": "ok",
        "run_id": found.run_id,
        "note": found.note,
        "similar_runs": [{"run_id": r, "similarity": s} for r, s in found.similar_runs],
        "suggestions": [
            {
                "entry": r.entry,
                "title": r.title,
                "platform": r.platform,
                "score": r.score,
                "tries": r.tries,
                "keeps": r.keeps,
                "runs": r.runs,
                "gain_median": r.gain_median,
                "gain_low": r.gain_low,
                "gain_high": r.gain_high,
                "tried_here": [{"round": n, "decision": d} for n, d in r.tried_here],
                "why": r.why,
                "rounds": [_behind(b) for b in r.rounds],
            }
            for r in found.ranked
        ],
        "failure_signatures": [
            {
                "entry": s.entry,
                "title": s.title,
                "failed_runs": s.failed_runs,
                "why": s.why,
                "rounds": [_behind(b) for b in s.rounds],
            }
            for s in found.signatures
        ],
        "other_rounds": found.other_rounds,
        "tried_only_here": [
            {"round": n, "entry": e, "decision": d} for n, e, d in found.tried_elsewhere
        ],
    }


def say_suggest(out: Outcome, args) -> None:
    found = out.value
    say(f"run {found.run_id}: {found.note}")
    if not found.ranked:
        say("no mechanism to suggest: no other run has a decided round with a mechanism entry")
    else:
        say(
            table(
                ["#", "entry", "score", "keeps/tries", "runs", "median I", "tried here"],
                [
                    (
                        i,
                        r.entry,
                        f"{r.score:.3f}",
                        f"{r.keeps}/{r.tries}",
                        r.runs,
                        pct(r.gain_median),
                        ", ".join(f"r{n} {d}" for n, d in r.tried_here) or "no",
                    )
                    for i, r in enumerate(found.ranked, start=1)
                ],
            )
        )
        say("why:")
        for i, r in enumerate(found.ranked, start=1):
            say(f"  {i}. {r.entry} ({r.title}): {r.why}")
            for b in r.rounds[:5]:
                say(
                    f"     {b.run_id} round {b.round} {b.decision} I {pct(b.improvement)} "
                    f"(similarity {b.similarity:.2f}): {b.change}"
                )
    if found.signatures:
        say("known failure signatures:")
        for s in found.signatures:
            say(f"  {s.entry}: {s.why}")
            for b in s.rounds[:5]:
                cases = f" [{', '.join(b.cases)}]" if b.cases else ""
                say(f"     {b.run_id} round {b.round} {b.decision}{cases}: {b.reason or b.change}")
    else:
        say("known failure signatures: none in similar runs")
    if found.other_rounds:
        say(f"{found.other_rounds} similar rounds changed a mechanism outside the vocabulary")


COMMAND = Command(
    "suggest",
    """Which mechanisms to try next on a run: the vocabulary's entries ranked by what they
    did in the runs that resemble this one (op, platform, shapes, bottleneck, signals), each
    with the rounds behind it and what this run already tried, and the known failure
    signatures of those runs.

    Example: kernel-ledger suggest --run softmax-demo-001
    """,
    suggest,
    say_suggest,
    {
        "run": run_option(),
        "limit": Option("At most N suggestions.", int, 5, metavar="N", ge=1, le=50),
    },
    returns="`status`, `run_id`, `note`, `similar_runs`, `suggestions` (each `entry`, "
    "`title`, `platform`, `score`, `tries`, `keeps`, `runs`, `gain_median`, `gain_low`, "
    "`gain_high`, `tried_here`, `why`, `rounds`), `failure_signatures` (each `entry`, "
    "`title`, `failed_runs`, `why`, `rounds` with `reason` and `cases`), `other_rounds`, "
    "`tried_only_here`",
    tool=True,
)
