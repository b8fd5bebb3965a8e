"""Input files written the way a user writes them: from `kernel-ledger template KIND`, its
`//` notes dropped, then the values only the user knows filled in."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

from ledger.inputs.schemas import strip_notes


def template(cli, kind: str) -> str:
    result = cli("template", kind, db=False)
    assert (result.exit_code, result.stderr) == (0, "")
    return result.stdout


def from_template(cli, kind: str) -> dict:
    return json.loads(strip_notes(template(cli, kind)))


def put(path: str, value) -> Path:
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_text(value if isinstance(value, str) else json.dumps(value, indent=1))
    return target


def digest(path: str) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def validation(
    cli,
    folder: str,
    kernel: str,
    run_id: str,
    *,
    cases: list[str] | None = None,
    parent: str | None = None,
) -> str:
    """A manifest and case matrix for `kernel`, from their templates (every case of
    `cases` passed, where given; `parent` the manifest's parent run, where given)."""
    matrix = from_template(cli, "case-matrix")
    matrix["kernel"]["sha256"] = digest(kernel)
    if cases is not None:
        matrix["cases"] = [{"id": case, "status": "passed"} for case in cases]
    put(f"{folder}/case-matrix.json", matrix)
    manifest = from_template(cli, "manifest")
    manifest["run_id"] = run_id
    if parent is not None:
        manifest["parent_run_id"] = parent
    manifest["artifacts"][0]["uri"] = "../../" + kernel
    manifest["artifacts"][0]["sha256"] = digest(kernel)
    put(f"{folder}/manifest.json", manifest)
    return f"{folder}/manifest.json"
