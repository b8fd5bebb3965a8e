"""`record` of a round with medians only starts light: it imports the modules of its own
command, the service and the store, and nothing of the statistics, the reports, the
verifier or the other commands; of the pydantic models it builds only those it validates
with (docs/benchmarks.md measures what that is worth against the import floor; no time is
asserted here). A round with raw samples still brings in numpy and the statistics."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from campaign import write_json
from conftest import CliRunner

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "examples" / "softmax-demo"
RUN = "softmax-demo-001"

NOT_IMPORTED = (
    "numpy",
    "ledger.core.stats",
    "ledger.core.bottleneck",  # explain (which says why) builds the profile flags' glossary
    "ledger.inputs.profiles",
    "ledger.inputs.samples",
    "ledger.services.analysis",
    "ledger.services.legacy",
    "ledger.reports",
    "ledger.integrity.verify",
    "ledger.integrity.audit",
    "ledger.integrity.bundle",
    "ledger.integrity.checkpoint",
    "alembic",
    "rfc8785",
    "matplotlib",
    "jinja2",
    "typer._adapters",
    "pydantic.type_adapter",
)

PROBE = """
import json, sys
from cli.app import main
try:
    main(sys.argv[1:])
except SystemExit as exc:
    code = exc.code
from pydantic import BaseModel

def models(cls):
    for sub in cls.__subclasses__():
        yield sub
        yield from models(sub)

built = sorted(
    m.__name__ for m in models(BaseModel)
    if m.__module__.startswith(("ledger.", "cli.")) and m.__dict__.get("__pydantic_complete__")
)
print(json.dumps({"code": code, "modules": sorted(sys.modules), "built": built}), file=sys.stderr)
"""


def _record(url: str, result: Path, run: str = RUN) -> dict:
    done = subprocess.run(
        [sys.executable, "-c", PROBE, "--db", url, "record", "--run", run, "--result",
         str(result), "--json"],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
    )  # fmt: skip
    return {**json.loads(done.stderr.strip().splitlines()[-1]), "stdout": done.stdout}


def _loaded(modules: list[str], names: tuple[str, ...]) -> list[str]:
    return [n for n in names if any(m == n or m.startswith(n + ".") for m in modules)]


def test_record_with_medians_imports_and_builds_only_what_it_uses(sqlite_url):
    cli = CliRunner(sqlite_url)
    assert cli("plan", "--config", DEMO / "config.json").exit_code == 0
    first = _record(sqlite_url, DEMO / "rounds" / "round-1.json")
    assert first["code"] == 0 and json.loads(first["stdout"])["decision"] == "KEEP"
    assert _loaded(first["modules"], NOT_IMPORTED) == []
    # of the command line, its own command's module alone
    assert [m for m in first["modules"] if m.split(".")[0] == "cli"] == [
        "cli",
        "cli.app",
        "cli.declare",
        "cli.output",
        "cli.record",
    ]
    # no model of an event it neither reads nor writes, nor of a run configuration
    built = set(first["built"])
    assert "RoundResult" in built and "RoundDecided" in built
    assert built.isdisjoint({"RunConfig", "NoiseMeasured"})
    assert built.isdisjoint({"DiagnosisRecorded", "RunConcluded", "RunReopened", "NoiseFile"})
    # a failed round, and the refusal of a round already recorded from another file
    failed = _record(sqlite_url, DEMO / "rounds" / "round-2-stale-parent.json")
    assert failed["code"] == 2 and _loaded(failed["modules"], NOT_IMPORTED) == []


def test_record_with_raw_samples_still_uses_the_statistics(sqlite_url, campaign):
    cli = CliRunner(sqlite_url)

    def samples(median: float) -> list[float]:
        return [round(median * (1 + (k - 6) / 1000), 4) for k in range(12)]

    config = campaign.config_doc()
    for row in config["baseline"]:
        row["samples_us"] = samples(row["median_us"])
        del row["median_us"]
    assert cli("plan", "--config", write_json(campaign.root / "c.json", config)).exit_code == 0
    doc = campaign.round_doc([m * 0.8 for m in campaign.baseline])
    for row in doc["measurements"]:
        row["samples_us"] = samples(row["median_us"])
        del row["median_us"]
    done = _record(sqlite_url, write_json(campaign.root / "r1.json", doc), campaign.run_id)
    assert done["code"] == 0, done
    assert json.loads(done["stdout"])["decision"] == "KEEP"
    assert _loaded(done["modules"], ("numpy", "ledger.core.stats")) == [
        "numpy",
        "ledger.core.stats",
    ]
