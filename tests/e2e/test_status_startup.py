"""`status` starts light: it reads projection rows through the store and imports nothing a
read does not need (docs/benchmarks.md measures what that is worth; no time is asserted).
Its options are checked by their declaration (cli/declare.py), which needs no pydantic, and
the typer series pyproject.toml allows parses them without pydantic's `TypeAdapter`: no
pydantic module is imported at all."""

from __future__ import annotations

import json
import subprocess
import sys

HEAVY = (
    "ledger.services.service",
    "ledger.inputs.models",
    "ledger.core.controller",
    "ledger.core.stats",
    "alembic",
    "numpy",
    "rfc8785",
    "matplotlib",
    "typer._adapters",
    "pydantic",
)

PROBE = """
import json, sys
from cli.app import main
try:
    main(sys.argv[1:])
except SystemExit as exc:
    code = exc.code
heavy = json.loads(HEAVY)
loaded = [m for m in heavy if any(n == m or n.startswith(m + ".") for n in sys.modules)]
print(json.dumps({"code": code, "loaded": loaded}), file=sys.stderr)
"""


def _status_process(url: str, *args: str) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", PROBE.replace("HEAVY", repr(json.dumps(HEAVY))), "--db", url,
         "status", *args],
        capture_output=True,
        text=True,
        check=False,
    )  # fmt: skip
    return {**json.loads(done.stderr.strip().splitlines()[-1]), "stdout": done.stdout}


def test_status_imports_no_service_models_migrations_or_numpy(sqlite_url):
    from ledger.store.eventstore import Store

    Store(sqlite_url).close()  # an existing ledger: creating one would run the migrations
    listing = _status_process(sqlite_url, "--json")
    assert listing["code"] == 0 and json.loads(listing["stdout"]) == {"status": "ok", "runs": []}
    assert listing["loaded"] == []
    unknown = _status_process(sqlite_url, "--run", "nope", "--json")
    assert unknown["code"] == 2 and unknown["loaded"] == []
    assert json.loads(unknown["stdout"])["error"] == "run 'nope' is not in the ledger"


def test_status_of_a_run_still_answers_as_before(cli, campaign):
    plan = cli("plan", "--config", campaign.config(), "--json")
    assert plan.exit_code == 0, plan.stderr
    one = cli("status", "--run", campaign.run_id, "--json").json()
    assert one["run"]["run_id"] == campaign.run_id
    assert [c["case_id"] for c in one["cases"]] == campaign.case_ids
    unknown = cli("status", "--run", "nope", "--json")
    assert unknown.exit_code == 2
    assert unknown.stderr == ""  # with --json, the JSON object alone
    assert unknown.json() == {
        "status": "error",
        "error": "run 'nope' is not in the ledger",
        "exit_code": 2,
    }
