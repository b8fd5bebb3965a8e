"""record: record one round and return the controller's decision."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from cli.declare import (
    REQUIRED,
    Command,
    Env,
    Option,
    Outcome,
    dry_run_option,
    run_option,
    strict_option,
)
from cli.output import (
    diagnose_hint,
    not_found_keys,
    pct,
    plural,
    say,
    say_not_found,
    say_warnings,
)
from ledger.text import num


def record(env: Env, run: str, result: str, dry_run: bool, strict: bool) -> Outcome:
    service = env.service()
    r = service.record(run, Path(result), dry_run=dry_run, strict=strict)
    why = r.why
    if why is None:  # recorded before from this file: the stored decision's explanation
        why = service.explain_rounds([(r.run_id, r.round)]).get((r.run_id, r.round))
    r = replace(r, why=why)
    return Outcome(
        {
            "status": "checked" if dry_run and not r.already_recorded else "recorded",
            "run_id": r.run_id,
            "round": r.round,
            "decision": r.decision,
            "relative_improvement": r.relative_improvement,
            "worst_case_regression": r.worst_case_regression,
            "cumulative_improvement": r.cumulative_improvement,
            "target_met": r.target_met,
            "needs_diagnosis": r.needs_diagnosis,
            "remaining_rounds": r.remaining_rounds,
            "best_kernel_sha256": r.best_kernel_sha256,
            "why": why.as_dict() if why is not None else None,
            **({"flags": list(r.flags)} if r.flags else {}),
            **({"failed_cases": list(r.failed_cases)} if r.failed_cases else {}),
            **not_found_keys(r),
            **({"warnings": list(r.warnings)} if r.warnings else {}),
            "already_recorded": r.already_recorded,
            **(
                {}
                if r.already_recorded
                else {
                    "mechanism_entry": r.mechanism_entry,
                    "profiles": list(r.profiles),
                    "mechanism_check": r.mechanism_check,
                }
            ),
        },
        r,
    )


def say_mechanism(r) -> None:
    """Which vocabulary entry the round's mechanism mapped to, which of the candidate's
    profiles the decision read, and what the mechanism check said."""
    entry, check = r.mechanism_entry, r.mechanism_check
    words = []
    if entry is not None and entry["entry"] == "other":
        nearest = ", ".join(entry["nearest"]) or "none"
        words.append(f"mechanism other (no entry of references/mechanisms.md; nearest {nearest})")
    elif entry is not None:
        words.append(f"mechanism {entry['entry']} (named by its {entry['source']})")
    if not r.profiles:
        words.append("no profile of the candidate read")
    if check is None:
        words.append("no expected_signal")
    if words:
        say("  " + "; ".join(words))
    for p in r.profiles:
        where = ", ".join(p["files"]) or "profiler_signals"
        case = f", case {p['case_id']}" if p["case_id"] else ""
        say(
            f"  profile read {'with the round' if p['with'] == 'round' else 'before it'}: "
            f"{where} ({p['format']}{case}, {plural(len(p['signals']), 'signal')}, "
            f"bottleneck {p['bottleneck'] or 'not attributed'})"
        )
    if check is not None:
        verdict = {True: "confirmed", False: "refuted", None: "unknown"}[check["confirmed"]]
        say(
            f"  mechanism check: {check['metric']} {check['direction']} {verdict} "
            f"(best {num(check['best_value'])} -> candidate {num(check['candidate_value'])})"
        )


def say_record(out: Outcome, args) -> None:
    r = out.value
    say_warnings(r.warnings)
    if r.dry_run and not r.already_recorded:
        say(f"checked (nothing written): round {r.round} would be decided as follows")
    if r.already_recorded:
        say(f"round {r.round} is already recorded from this file; nothing was written")
    say(
        f"round {r.round}: {r.decision}  I {pct(r.relative_improvement)}  "
        f"R {pct(r.worst_case_regression)}  cumulative {pct(r.cumulative_improvement)}  "
        f"target {'met' if r.target_met else 'not met'}  "
        f"{plural(r.remaining_rounds, 'round')} left"
    )
    if r.why is not None:  # a FAIL's sentence names the cases its correctness gate failed on
        say(f"  why: {r.why.sentence}")
    elif r.failed_cases:
        say(f"  correctness gate failed on: {', '.join(r.failed_cases)}")
    if not r.already_recorded:
        say_mechanism(r)
    if r.needs_diagnosis:
        say(diagnose_hint(r.run_id))
    say_not_found(f"round {r.round}", r)


COMMAND = Command(
    "record",
    """Record one round (a round result file) and [[print||return]] the controller's decision.

    Example:

    \b
        kernel-ledger template round > round-1.json    # then fill it in
        kernel-ledger record --run softmax-001 --result round-1.json --dry-run
        kernel-ledger record --run softmax-001 --result round-1.json
    """,
    record,
    say_record,
    {
        "run": run_option("The run to record into."),
        "result": Option(
            "The round result (JSON, schema_version 1; `template round` [[prints||returns]] "
            "one): round, parent_kernel_sha256, candidate, hypothesis, change, verification and "
            "measurements.",
            default=REQUIRED,
            metavar="FILE",
            file=True,
        ),
        "dry_run": dry_run_option(
            "Check the round result against the run and say what would be decided"
        ),
        "strict": strict_option(),
    },
    returns='`status` "recorded" (or "checked" with --dry-run), '
    "`run_id`, `round`, `decision`, `relative_improvement`, "
    "`worst_case_regression`, `cumulative_improvement`, `target_met`, `needs_diagnosis`, "
    "`remaining_rounds`, `best_kernel_sha256`, `why` {rule, sentence, worst_case, flags "
    "{flag: meaning}} (the sentence `show` gives: which rule decided, with its numbers), "
    "`already_recorded`, `mechanism_entry` (`entry` "
    "of references/mechanisms.md, `source`, `nearest` for `other`), `profiles` (the "
    "candidate's profiles read: `with`, `files`, `format`, `case_id`, `signals`, "
    "`bottleneck`), `mechanism_check` (and `flags` when any, "
    "`failed_cases` when its correctness gate failed, `warnings` when a key looks like a "
    "typo)",
    tool=True,
    one_shot=True,
)
