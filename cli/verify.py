"""verify: check hashes, chains, canonical payloads, decisions, projections and
checkpoints."""

from __future__ import annotations

from pathlib import Path

from cli.audit import CHECKPOINT, SINCE, VERIFIER_KEY, _progress, failed_at, key_arg, pinned_note
from cli.declare import Command, Env, Option, Outcome, run_option
from cli.output import plural, say


def verify(
    env: Env,
    run: str | None,
    checkpoint: str | None,
    verifier_key: str | None,
    artifacts: bool,
    bundle: str | None,
    chain: bool,
    since: str | None,
) -> Outcome:
    if since is not None:
        return _verify_since(env, since, run, checkpoint, verifier_key, artifacts, bundle, chain)
    on_progress, finish = _progress(env.as_json)
    try:
        return _verify(env, run, checkpoint, verifier_key, artifacts, bundle, chain, on_progress)
    finally:
        finish()


def _verify_since(env, since, run, checkpoint, verifier_key, artifacts, bundle, chain):
    from ledger.errors import InputError
    from ledger.integrity import audit

    if run is not None or artifacts or chain or checkpoint is not None or bundle is not None:
        raise InputError(
            "--since verifies the whole ledger from its note on; it takes no --run, "
            "--checkpoint, --artifacts, --bundle or --chain"
        )
    note = audit.read_note_arg(since, "--since")
    report = audit.verify_since(env.store(), note, key_arg(verifier_key, "--verifier-key"))
    failure = None if report.ok else failed_at(report.first_failure)
    return Outcome(report.as_dict(), ("ledger", report), failure)


def _verify(env, run, checkpoint, verifier_key, artifacts, bundle, chain, on_progress):
    from ledger.errors import InputError

    if chain:
        if artifacts or any(v is not None for v in (checkpoint, verifier_key, bundle)):
            raise InputError(
                "--chain checks the hash chain alone; it takes no --checkpoint, "
                "--verifier-key, --artifacts or --bundle"
            )
        from ledger.integrity.verify import verify_chain

        report = verify_chain(env.store(), run, on_progress=on_progress)
        failure = None if report.ok else failed_at(report.first_failure)
        return Outcome(report.as_dict(), ("chain", report), failure)
    key = key_arg(verifier_key, "--verifier-key")
    note = pinned_note(checkpoint)
    if key is not None and note is None:
        raise InputError("--verifier-key needs --checkpoint")
    if bundle is not None:
        from ledger.integrity.bundle import check_bundle

        if run is not None or artifacts:
            raise InputError("--bundle is checked on its own; it takes no --run or --artifacts")
        report, _ = check_bundle(Path(bundle), pinned_note=note, verifier_key=key)
        failure = None if report.ok else failed_at(report.first_failure, "bundle")
        return Outcome(report.as_dict(), ("bundle", report), failure)
    from ledger.integrity import audit

    report = audit.verify(
        env.store(),
        run,
        pinned_note=note,
        verifier_key=key,
        artifacts=artifacts,
        on_progress=on_progress,
    )
    failure = None
    if not report.ok:
        if report.first_failure is not None:
            failure = failed_at(report.first_failure)
        else:
            assert report.artifacts is not None
            count = len(report.artifacts.changed) + len(report.artifacts.missing)
            failure = (
                f"the ledger verifies, but {plural(count, 'evidence file')} changed or vanished"
            )
    return Outcome(report.as_dict(), ("ledger", report), failure)


def say_verify(out: Outcome, args) -> None:
    kind, report = out.value
    if kind == "chain" and report.ok:
        say(
            f"chain verified: {plural(report.events_checked, 'event')} in "
            f"{plural(report.runs_checked, 'run')}; "
            f"checks {', '.join(report.checks)} all ok"
        )
        _say_without_actor(report)
    elif kind == "bundle" and report.ok:
        say(
            f"bundle verified: run {report.run_id}, {plural(report.events_checked, 'event')} and "
            f"{plural(report.blobs_checked, 'file')}, all in the tree of "
            f"{plural(report.tree_size, 'event')} of "
            f"{report.origin} ({report.root})"
        )
        if report.pinned is not None:
            say(f"pinned checkpoint of {plural(report.pinned['size'], 'event')} holds")
    elif kind == "ledger":
        _say_verified(report)


def _say_verified(report) -> None:
    if report.chain_ok and report.first_failure is None:
        checks = report.checks()
        what = "verified" if report.since is None else "verified since the note"
        say(
            f"{what}: {plural(report.ledger.events_checked, 'event')} in "
            f"{plural(report.ledger.runs_checked, 'run')}; checks {', '.join(checks)} all ok"
        )
        _say_without_actor(report.ledger)
    if report.since is not None and report.since.status == "ok":
        say(
            f"the first {plural(report.since.size, 'event')} are those of the note "
            f"({report.since.root}), by Merkle consistency"
        )
    if report.pinned is not None and report.pinned.status == "ok":
        say(f"checkpoint of {plural(report.pinned.size, 'event')} holds ({report.pinned.root})")
    for warning in report.ledger.warnings:
        say(f"warning: {warning}")
    if report.artifacts is not None:
        art = report.artifacts
        say(
            f"evidence files: {art.checked} checked, {len(art.changed)} changed, "
            f"{len(art.missing)} missing"
        )
        for sentence in art.sentences():
            say(f"  {sentence}")


def _say_without_actor(report) -> None:
    if report.without_actor:
        say(
            f"{plural(report.without_actor, 'event')} from before actors were recorded "
            "(they name no actor)"
        )


COMMAND = Command(
    "verify",
    """Check hashes, chains, canonical payloads, decisions, projections and checkpoints;
    [[exit 1 on failure||a failure is an error result, `status` "failed", with its
    `first_failure`]].

    With --checkpoint, the root of the first N events must equal the pinned one. With
    --bundle, a bundle file is checked on its own, without opening any ledger. With --chain,
    only seq, hash and chain are checked (no replay), near the speed of reading the rows.
    With --since, verification starts from a checkpoint note: its N events are proven
    unchanged by Merkle consistency and only the runs with an event after N are replayed.

    Example: kernel-ledger verify --checkpoint checkpoint.txt --artifacts
    """,
    verify,
    say_verify,
    {
        "run": run_option("Only this run's events.", required=False),
        "checkpoint": CHECKPOINT,
        "verifier_key": VERIFIER_KEY,
        "artifacts": Option("Also hash the files the events name (reported apart).", bool, False),
        "bundle": Option(
            "Check an exported bundle file offline (no database).", metavar="FILE", file=True
        ),
        "chain": Option(
            "Only the fast seq, hash and chain checks over the stored rows.", bool, False
        ),
        "since": SINCE,
    },
    returns="`status` (ok or failed), `events_checked`, `runs_checked`, `events_without_actor` "
    "(events from before actors were recorded), `checks` {check: status}, `first_failure` "
    "{seq, stream_id, stream_version, check, reason}, `warnings`, `origin`, "
    "`checkpoints_checked`; with --checkpoint also `checkpoint`, with --artifacts `artifacts`",
    tool=True,
)
