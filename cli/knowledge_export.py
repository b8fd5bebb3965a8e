"""knowledge export: the ledger's history as candidates for the workspace's knowledge flow."""

from __future__ import annotations

import json
from pathlib import Path

from cli.declare import REQUIRED, Command, Env, Option, Outcome
from cli.output import plural, say


def knowledge_export(env: Env, out: str, force: bool) -> Outcome:
    from ledger.files import check_output, check_output_folder, write_output

    found, documents = env.service().knowledge()
    folder = Path(out)
    check_output_folder(folder, names="candidates/ and knowledge/")
    files = [(folder / "candidates" / f"{c['candidate_id']}.json", _json(c)) for c in found]
    files += [(folder / "knowledge" / name, _json(d)) for name, d in documents.items()]
    for path, _ in files:  # every target checked before the first is written
        check_output(path, force=force)
    written = [write_output(path, data, force=force) for path, data in files]
    kinds = {
        kind: sum(c["kind"] == kind for c in found) for kind in sorted({c["kind"] for c in found})
    }
    return Outcome(
        {
            "status": "exported",
            "out": str(folder.absolute()),
            "candidates": len(found),
            "kinds": kinds,
            "files": [str(p) for p in written],
        },
        (folder, found, kinds),
    )


def _json(value) -> bytes:
    """As the workspace writes its knowledge files: sorted keys, two-space indent."""
    return (json.dumps(value, ensure_ascii=False, indent=2, sort_keys=True) + "\n").encode()


def say_knowledge_export(out: Outcome, args) -> None:
    folder, found, kinds = out.value
    if not found:
        say(
            f"no candidates: no run has a kept or repeatedly failed mechanism; wrote the "
            f"six empty knowledge documents to {folder / 'knowledge'}"
        )
        return
    say(
        f"exported {plural(len(found), 'candidate')} "
        f"({', '.join(f'{n} {k}' for k, n in kinds.items())}) to {folder / 'candidates'}, "
        f"and the knowledge documents their promotion gives to {folder / 'knowledge'}"
    )


COMMAND = Command(
    "knowledge export",
    """The ledger's history as candidates in the vllm-ascend workspace's knowledge format
    (Knowledge Candidate v1): what worked (a mechanism kept on an op and platform) and the
    known failure signatures (a mechanism that failed or was discarded there twice or more),
    each with the ledger's decisions as evidence. Writes DIR/candidates/*.json for the
    curation queue and DIR/knowledge/*.yaml, the six documents with every candidate promoted
    as an experimental entry, which the workspace's knowledge_query.py reads.

    Example: kernel-ledger knowledge export --out knowledge-out
    """,
    knowledge_export,
    say_knowledge_export,
    {
        "out": Option("The folder to write into.", default=REQUIRED, metavar="DIR", file=True),
        "force": Option("Overwrite files that exist with other content.", bool, False),
    },
    tool=True,
    returns='`status` "exported", `out`, `candidates` (how many), `kinds` (how many of '
    "each kind), `files` (every file written)",
)
