"""show: one round in full."""

from __future__ import annotations

from cli.declare import Command, Env, Outcome, round_option, run_option
from cli.output import pct, say, say_profile_notes, table


def show(env: Env, run: str, round: int) -> Outcome:
    detail = env.service().round_detail(run, round)
    return Outcome({"status": "ok", **detail}, detail)


def say_show(out: Outcome, args) -> None:
    detail = out.value
    submitted = detail.get("submitted", {})
    decision = detail.get("decision", {})
    say(f"run {args.run}, round {args.round}")
    if submitted:
        say(f"  hypothesis: {submitted['hypothesis']}")
        say(f"  change:     {submitted['change']}")
        say(f"  candidate:  {submitted['candidate']['sha256']}  {submitted['candidate']['path']}")
    if "validation" in detail:
        validation = detail["validation"]
        say(f"  validation: {validation['status']} ({validation['manifest']['path']})")
    if "measurements" in detail:
        session = detail["measurements"].get("session")
        if session:
            say(f"  session:    {session_text(session)}")
        reference = {
            m["case_id"]: m["median_us"]
            for m in (detail.get("reference") or {}).get("measurements", [])
        }
        if reference:
            say("  reference:  the parent kernel, measured beside the candidate in its session")
        say(
            table(
                ["case", "median µs", *(["reference µs"] if reference else []), "repeats",
                 "samples"],
                [
                    (
                        m["case_id"],
                        m["median_us"],
                        *([reference.get(m["case_id"])] if reference else []),
                        m["repeats"],
                        "file not found"
                        if m.get("source_not_found")
                        else "not a samples file"
                        if m.get("source_not_samples")
                        else len(m.get("samples_us") or []),
                    )
                    for m in detail["measurements"]["measurements"]
                ],
            )
        )  # fmt: skip
    for p in detail["profiles"]:
        attribution = p.get("attribution") or {}
        case = f" of case {p['case_id']}" if p.get("case_id") else ""
        say(f"  profile{case} ({p['format']}): bottleneck {attribution.get('bottleneck')}")
        say_profile_notes(attribution, "    ")
    if decision:
        from ledger.core.actors import describe

        say(
            f"  decision: {decision['decision']}  I {pct(decision['relative_improvement'])}  "
            f"R {pct(decision['worst_case_regression'])}"
        )
        say(f"  recorded by: {describe(detail.get('actor'))}")
        check = decision.get("mechanism_check")
        if check:
            say(f"  mechanism check: {check['metric']} {check['direction']} — {_verdict(check)}")
            for each in check.get("cases") or []:
                say(f"    case {each['case_id']}: {_verdict(each)}")
        if decision.get("flags"):
            say(f"  flags: {', '.join(decision['flags'])}")
        if decision.get("retried_rounds"):
            say(f"  retries the mechanism of failed rounds {decision['retried_rounds']}")
    why = detail.get("explanation")
    if why:
        say(f"  why: {why['sentence']}")
        for flag, meaning in why["flags"].items():
            say(f"  flag {flag}: {meaning}")
    if detail.get("resubmission"):
        say(f"  resubmitted: {detail['resubmission']['sentence']}")


def session_text(session: dict) -> str:
    """A measurement session in one line: its id, then device, host, start and timer where
    it names them."""
    named = [f"{k} {session[k]}" for k in ("device", "host", "started_at", "timer")
             if session.get(k)]  # fmt: skip
    return session["id"] + (f" ({', '.join(named)})" if named else "")


def _verdict(check: dict) -> str:
    """confirmed / refuted / unknown, with the values compared and, where the check was
    made case by case, the case they are of."""
    verdict = {True: "confirmed", False: "refuted", None: "unknown"}[check["confirmed"]]
    best, cand = check.get("best_value"), check.get("candidate_value")
    if best is None and cand is None:
        return verdict
    case = f"case {check['case_id']}: " if check.get("case_id") and "cases" in check else ""
    shown = f"{case}{_value(best)} -> {_value(cand)}"
    if best is None:
        shown += ", the best kernel has no profile of this case"
    return f"{verdict} ({shown})"


def _value(value: float | None) -> str:
    if value is None:
        return "none"
    return f"{value:g}"


COMMAND = Command(
    "show",
    """One round in full: inputs, validation, measurements, profiles, decision and flags.

    Example: kernel-ledger show --run softmax-demo-001 --round 2
    """,
    show,
    say_show,
    {"run": run_option(), "round": round_option("The round (0: baseline).", required=True)},
    returns="`status`, `run_id`, `round`, `submitted`, `validation`, `measurements` (with "
    "its `session`), `reference` (where the round carried one), `profiles`, `decision` (the "
    "stored events' payloads), `actor` (who recorded the decision, or null), `explanation` "
    "{rule, sentence, worst_case, flags {flag: meaning}}; `resubmission` {rounds, decisions, "
    "sentence} where the same candidate file (sha256) was the candidate of earlier rounds",
    tool=True,
    one_shot=True,
)
