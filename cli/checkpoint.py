"""checkpoint: verify the whole ledger, then print and store its checkpoint note."""

from __future__ import annotations

import os
import sys
from pathlib import Path

from cli.audit import _progress, key_arg
from cli.declare import Command, Env, Option, Outcome
from cli.output import say


def checkpoint(
    env: Env, sign: str | None, out: str | None, force: bool, generate_key: str | None
) -> Outcome:
    from ledger import files
    from ledger.errors import InputError
    from ledger.integrity import audit
    from ledger.services.session import utc_now
    from ledger.text import display

    if generate_key is not None:
        if sign is not None or out is not None:
            raise InputError("--generate-key makes a key and stops; it takes no --sign or --out")
        store = env.store()
        path = Path(generate_key)
        verifier = audit.generate_key(path, audit.ledger_origin(store), store.ledger_files())
        document = {"status": "ok", "signer_key_file": str(path), "verifier_key": verifier}
        return Outcome(document, ("key", path, verifier))
    signer = key_arg(sign, "--sign")
    out_path = Path(out) if out is not None else None
    store = env.store()
    if out_path is not None:  # refused before the ledger is verified and the note stored
        target = files.check_output(out_path, force=force, protected=store.ledger_files())

    def before_storing(note: str) -> None:
        """An existing --out that holds another note is refused before the note is stored."""
        if out_path is None or force or not os.path.lexists(target):
            return
        if not files.same_bytes(target, note.encode("utf-8")):
            raise InputError(
                f"--out {display(out_path)} exists with other content; pass --force to "
                "overwrite it; no checkpoint was stored"
            )

    on_progress, finish = _progress(env.as_json)
    made = audit.make_checkpoint(
        store,
        signer_key=signer,
        clock=utc_now,
        on_progress=on_progress,
        before_storing=before_storing,
    )
    finish()
    if out_path is not None:
        files.write_output(
            out_path, made.note.encode("utf-8"), force=force, protected=store.ledger_files()
        )
    return Outcome(
        {
            "status": "ok",
            "origin": made.checkpoint.origin,
            "size": made.checkpoint.size,
            "root": audit.b64(made.checkpoint.root),
            "note": made.note,
            "signed": made.signed,
            "verifier_key": made.verifier_key,
            "checkpoint_id": made.checkpoint_id,
            "stored": made.stored,
            "out": str(out_path) if out_path is not None else None,
        },
        ("note", made.note),
    )


def say_checkpoint(out: Outcome, args) -> None:
    if out.value[0] == "key":
        _, path, verifier = out.value
        say(f"signer key written to {path} (keep it secret); verifier key:\n{verifier}")
    else:
        sys.stdout.write(out.value[1])


COMMAND = Command(
    "checkpoint",
    """Verify the whole ledger, then print and store its checkpoint note (C2SP
    tlog-checkpoint: origin, size, base64 RFC 6962 root).

    Pin the note outside the database (a pull request, a git tag, CI configuration); verify
    --checkpoint then detects any rewrite of the history it covers.

    Example: kernel-ledger checkpoint --out checkpoint.txt
    """,
    checkpoint,
    say_checkpoint,
    {
        "sign": Option(
            "Sign the note with this Ed25519 signer key file.", metavar="KEYFILE", file=True
        ),
        "out": Option("Also write the note to FILE.", metavar="FILE", file=True),
        "force": Option("Overwrite an existing --out file.", bool, False),
        "generate_key": Option(
            "Write a new signer key to KEYFILE, print its verifier key, and stop.",
            metavar="KEYFILE",
            file=True,
        ),
    },
    returns='`status` "ok", `origin`, `size`, `root`, `note`, `signed`, `verifier_key`, '
    "`checkpoint_id`, `stored`, `out`; with --generate-key: `signer_key_file`, `verifier_key`",
)
