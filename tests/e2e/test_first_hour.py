"""An agent's first hour: every input it needs is discoverable from what `skill install`
writes, `--help`, the schemas and the tool's answers, and the answers say what happened
(the H200 softmax campaign of examples/gpu-campaign, real ncu profiles)."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path

import pytest

from cli.declare import every_command
from ledger.core.looks import SequentialConfig
from ledger.core.mechanisms import VOCABULARY
from ledger.core.stats import StatisticsConfig
from ledger.inputs.profiles.catalog import FORMAT_LIST

ROOT = Path(__file__).resolve().parents[2]
GPU = ROOT / "examples" / "gpu-campaign" / "softmax"
RUN = "gpu-softmax-001"
BASE_PROFILE = GPU / "profiles" / "s0_base.fp16-4096x1024.ncu.csv"


@pytest.fixture
def skill(tmp_path, cli) -> Path:
    done = cli("skill", "install", tmp_path, db=False)
    assert done.exit_code == 0, done.stderr
    return tmp_path / ".agents" / "skills" / "kernel-ledger"


def gpu_run(cli, monkeypatch, tmp_path, **config) -> None:
    """The H200 softmax run planned from its config (with `config` keys added)."""
    monkeypatch.chdir(ROOT)
    doc = json.loads((GPU / "config.json").read_text())
    doc.update(config)
    path = tmp_path / "config.json"
    path.write_text(json.dumps(doc))
    planned = cli("plan", "--config", path)
    assert planned.exit_code == 0, planned.stderr


# --- 1. statistics settings ----------------------------------------------------------------


def test_every_statistics_key_has_type_default_meaning_and_unit(cli, skill):
    schema = cli("schema", "config", "--json", db=False).json()["schema"]
    settings = schema["properties"]["statistics"]["anyOf"][0]["properties"]
    assert list(settings) == [f.name for f in dataclasses.fields(StatisticsConfig)]
    for name, prop in settings.items():
        assert prop["description"] and "default" in prop, name
    assert settings["min_samples"]["default"] == 10
    assert settings["min_samples"]["unit"] == "samples per case"
    assert settings["bootstrap"]["enum"] == ["plain", "smoothed"]
    looks = settings["sequential"]["anyOf"][0]["properties"]
    assert {k: v["default"] for k, v in looks.items()} == SequentialConfig().to_dict()
    template = cli("template", "config", db=False).stdout
    assert (
        '  //     "batch": (integer, in samples per case, default 10) Samples per case added '
        "between two looks, at least 1.\n" in template
    )
    reference = (skill / "references" / "inputs.md").read_text()
    for key in [*settings, *(f"sequential.{k}" for k in looks)]:
        assert f"| `statistics.{key}` |" in reference, key
    assert "docs/statistics.md" not in reference


@pytest.mark.parametrize(
    ("key", "value"),
    [
        ("min_samples", 2),
        ("resamples", 99),
        ("resamples", 100_001),
        ("alpha", 0),
        ("alpha", 0.5),
        ("regression_quantile", 0.5),
        ("regression_quantile", 1),
        ("assumed_drift", 0),
        ("assumed_drift", 1),
        ("sequential.min_repeats", 2),
        ("sequential.max_repeats", 100_001),
        ("sequential.batch", 0),
    ],
)
def test_a_value_past_a_bound_the_schema_states_is_refused(cli, monkeypatch, tmp_path, key, value):
    """The bounds the schema states are the ones plan enforces: just past one is exit 2."""
    schema = cli("schema", "config", "--json", db=False).json()["schema"]
    node = schema["properties"]["statistics"]["anyOf"][0]
    *outer, leaf = key.split(".")
    for part in outer:
        node = node["properties"][part]["anyOf"][0]
    prop = node["properties"][leaf]
    past = {prop.get("exclusiveMinimum"), prop.get("exclusiveMaximum")}
    past |= {prop["minimum"] - 1} if "minimum" in prop else set()
    past |= {prop["maximum"] + 1} if "maximum" in prop else set()
    assert value in past, (key, prop)
    statistics: dict = {}
    at = statistics
    for part in outer:
        at = at.setdefault(part, {})
    at[leaf] = value
    monkeypatch.chdir(ROOT)
    doc = json.loads((GPU / "config.json").read_text())
    doc["statistics"] = statistics
    path = tmp_path / "config.json"
    path.write_text(json.dumps(doc))
    refused = cli("plan", "--config", path, "--dry-run")
    assert refused.exit_code == 2 and f"statistics.{key} must be" in refused.stderr


def test_sequential_true_names_the_shape_in_the_template(cli, monkeypatch, tmp_path):
    """The agent's first guess, `"sequential": true`: the template says it is an object and
    lists its keys, so the guess is not needed; made anyway, the refusal lists them."""
    template = cli("template", "config", db=False).stdout
    assert '  //   "sequential": (object, default null) Decide at the first look' in template
    assert '"min_repeats": (integer, in samples per case, default 10)' in template
    monkeypatch.chdir(ROOT)
    doc = json.loads((GPU / "config.json").read_text())
    doc["statistics"] = {"sequential": True}
    path = tmp_path / "config.json"
    path.write_text(json.dumps(doc))
    refused = cli("plan", "--config", path, "--dry-run")
    assert (refused.exit_code, refused.stdout) == (2, "")
    assert refused.stderr == (
        "Error: statistics.sequential must be an object (keys, each optional: min_repeats, "
        "max_repeats, batch, unpaired_best; `template config` describes them)\n"
    )


# --- 2. profile signal names --------------------------------------------------------------


def test_the_reference_lists_each_format_and_its_signal_names(skill):
    reference = (skill / "references" / "inputs.md").read_text()
    for f in FORMAT_LIST:
        assert f"### {f.name} ({f.platform})" in reference
        for name in f.named:
            assert f"`{name}`" in reference, (f.name, name)
    assert (
        "| `dram_throughput` | fraction | `dram throughput`, "
        "`dram__throughput.avg.pct_of_peak_sustained_elapsed`, "
        "`gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed` |" in reference
    )
    assert "| `duration_us` | us | `duration`, `gpu__time_duration.sum`, " in reference
    assert "| `task_duration_us` |  | `task duration(us)`" in reference


def test_a_signal_map_of_unknown_names_is_told_the_gpu_names(cli, monkeypatch, tmp_path):
    gpu_run(cli, monkeypatch, tmp_path)
    signal_map = tmp_path / "base.json"
    signal_map.write_text('{"dram_throughput_pct": 0.71, "duration": 9.3}')
    result = cli("profile", "--run", RUN, "--baseline", signal_map, "--dry-run", "--json")
    assert result.exit_code == 0, result.stderr
    body = result.json()
    ncu = next(f for f in FORMAT_LIST if f.name == "ncu-csv")
    assert body["notes"] == [
        f"{signal_map}: no signal of this map is one a profile reader gives, so the "
        f"attribution reads none of it; write the ncu-csv names: {', '.join(ncu.named)} (did "
        "you mean dram_throughput_pct -> dram_throughput; duration -> duration_us?) (the "
        "skill's references/inputs.md, Profiles)"
    ]
    evidence = " ".join(body["attribution"]["evidence"])
    assert "aic_" not in evidence and "aiv_" not in evidence and "MTE" not in evidence
    assert "SM and DRAM throughput" in evidence
    known = tmp_path / "known.json"
    known.write_text('{"dram_throughput": 0.71, "duration_us": 9.3, "sm_throughput": 0.2}')
    fine = cli("profile", "--run", RUN, "--baseline", known, "--dry-run", "--json")
    assert fine.exit_code == 0 and fine.json()["notes"] == []


# --- 3. the mechanism vocabulary ----------------------------------------------------------


def test_the_vocabulary_is_installed_and_pointed_at(cli, skill):
    vocabulary = (skill / "references" / "mechanisms.md").read_text()
    for entry in VOCABULARY:
        assert f"| `{entry.id}` |" in vocabulary
    assert "(references/mechanisms.md)" in (skill / "SKILL.md").read_text()
    helped = " ".join(cli("history", "--help", db=False).stdout.split())
    assert "references/mechanisms.md" in helped and "docs/mechanisms.md" not in helped


def test_record_says_the_entry_and_the_nearest_for_other(cli, monkeypatch, tmp_path):
    gpu_run(cli, monkeypatch, tmp_path)
    doc = json.loads((GPU / "rounds" / "round-1.json").read_text())
    doc.update(mechanism="cheaper math", change="one exp per element")
    path = tmp_path / "round-1.json"
    path.write_text(json.dumps(doc))
    checked = cli("record", "--run", RUN, "--result", path, "--dry-run", "--json")
    assert checked.exit_code == 0, checked.stderr
    assert checked.json()["mechanism_entry"] == {
        "entry": "other",
        "source": None,
        "nearest": ["arithmetic-rewrite", "precision", "gpu-tensor-cores"],
    }
    text = cli("record", "--run", RUN, "--result", path, "--dry-run").stdout
    assert (
        "  mechanism other (no entry of references/mechanisms.md; nearest arithmetic-rewrite, "
        "precision, gpu-tensor-cores)\n" in text
    )
    named = cli("record", "--run", RUN, "--result", GPU / "rounds" / "round-1.json", "--json")
    assert named.json()["mechanism_entry"] == {"entry": "rows-per-program", "source": "mechanism"}


# --- 4. how many noise calls --------------------------------------------------------------


def test_noise_says_how_many_calls_give_five_pairs(cli, monkeypatch, tmp_path):
    helped = " ".join(cli("noise", "--help", db=False).stdout.split())
    assert "so 5 `noise` calls of one kernel give 5 pairs" in helped
    gpu_run(cli, monkeypatch, tmp_path)
    best = json.loads(cli("status", "--run", RUN, "--json").stdout)["best_kernel"]["sha256"]
    config = json.loads((GPU / "config.json").read_text())
    aa = tmp_path / "aa-1.json"
    aa.write_text(json.dumps({"kernel_sha256": best, "measurements": config["baseline"]}))
    once = cli("noise", "--run", RUN, "--measurements", aa)
    assert once.exit_code == 0, once.stderr
    assert once.stdout == (
        f"recorded A/A remeasure of {best[:12]}: drift unestimated (1 usable pair, 4 more "
        "`noise` calls of this kernel to go; a drift estimate needs 5 A/A pairs; each `noise` "
        "remeasure of a kernel pairs with that kernel's measurement before it (baseline, "
        "round or remeasure), so 5 `noise` calls of one kernel give 5 pairs, usable where "
        "both sides have min_samples samples per case)\n"
    )


# --- 5. the round profile's names ---------------------------------------------------------


def test_the_skill_writes_the_round_profile_with_its_canonical_names(skill):
    from ledger.inputs.models import ProfileRef

    text = (skill / "SKILL.md").read_text()
    written = re.search(r'"profile": \{([^}]*)\}', " ".join(text.split()))
    assert written is not None
    keys = re.findall(r'"([a-z_]+)"', written.group(1))
    assert keys == ["path", "kernel", "case_id"] and set(keys) <= set(ProfileRef.model_fields)


# --- 6. a section for every command -------------------------------------------------------


def test_commands_md_has_a_section_for_every_declared_command(skill):
    text = (skill / "references" / "commands.md").read_text()
    sections = set(re.findall(r"^### (.+)$", text, flags=re.MULTILINE))
    assert {c.tool_name if c.tool else c.name for c in every_command()} <= sections
    for name in ("decide", "report", "serve", "export", "import", "db upgrade", "mcp"):
        assert f"### {name}\n" in text
    assert "### serve\n\n`serve " in text and "Command line only: no MCP tool." in text


# --- 7. the A/A file's session ------------------------------------------------------------


def test_the_measurements_file_declares_its_session(cli, monkeypatch, tmp_path):
    template = cli("template", "measurements", db=False).stdout
    assert (
        '  // optional "session": (object or string, default null) Where and when the' in template
    )
    schema = cli("schema", "measurements", "--json", db=False).json()["schema"]
    assert "session" in schema["properties"]
    gpu_run(cli, monkeypatch, tmp_path)
    best = json.loads(cli("status", "--run", RUN, "--json").stdout)["best_kernel"]["sha256"]
    config = json.loads((GPU / "config.json").read_text())
    aa = tmp_path / "aa-1.json"
    doc = {"kernel_sha256": best, "measurements": config["baseline"], "sesion": {"id": "s-2"}}
    aa.write_text(json.dumps(doc))
    refused = cli("noise", "--run", RUN, "--measurements", aa, "--strict")
    assert refused.exit_code == 2
    assert "measurements file key sesion is not one the contract knows" in refused.stderr
    assert "did you mean session?" in refused.stderr
    doc["session"] = doc.pop("sesion")
    aa.write_text(json.dumps(doc))
    assert cli("noise", "--run", RUN, "--measurements", aa, "--strict").exit_code == 0
    assert last_remeasure_session(cli.db_url)["id"] == "s-2"
    doc["session"] = "aa-2"  # an id alone, as the H200 campaign's A/A files write it
    aa.write_text(json.dumps(doc))
    assert cli("noise", "--run", RUN, "--measurements", aa, "--strict").exit_code == 0
    assert last_remeasure_session(cli.db_url)["id"] == "aa-2"
    assert cli("verify").exit_code == 0


def last_remeasure_session(db_url: str) -> dict:
    from ledger.store.eventstore import Store

    store = Store(db_url)
    with store.transaction() as conn:
        stream = store.read_stream(conn, RUN, types=("NoiseMeasured",))
    store.close()
    return stream[-1].payload_value()["session"]


# --- 8. one channel with --json -----------------------------------------------------------


def test_an_error_with_json_is_the_json_object_alone(cli, tmp_path):
    refused = cli("record", "--run", "nope", "--result", tmp_path / "none.json", "--json")
    assert (refused.exit_code, refused.stderr) == (2, "")
    assert refused.json() == {
        "status": "error",
        "error": f"round result {tmp_path / 'none.json'} does not exist",
        "exit_code": 2,
    }
    plain = cli("record", "--run", "nope", "--result", tmp_path / "none.json")
    assert (plain.exit_code, plain.stdout) == (2, "")
    assert plain.stderr == f"Error: round result {tmp_path / 'none.json'} does not exist\n"


# --- 9. what a dry run read ---------------------------------------------------------------


def test_a_dry_run_says_which_profiles_it_read_and_the_check(cli, monkeypatch, tmp_path):
    gpu_run(cli, monkeypatch, tmp_path)
    profiled = cli("profile", "--run", RUN, "--baseline", "--case", "fp16-4096x1024", BASE_PROFILE)
    assert profiled.exit_code == 0, profiled.stderr
    doc = json.loads((GPU / "rounds" / "round-1.json").read_text())
    with_profile = tmp_path / "with.json"
    with_profile.write_text(json.dumps({k: v for k, v in doc.items() if k != "profiler_signals"}))
    without = tmp_path / "without.json"
    without.write_text(
        json.dumps({k: v for k, v in doc.items() if k not in ("profiler_signals", "profile")})
    )
    read = cli("record", "--run", RUN, "--result", with_profile, "--dry-run", "--json").json()
    assert [(p["with"], p["format"], p["case_id"]) for p in read["profiles"]] == [
        ("round", "ncu-csv", "fp16-4096x1024")
    ]
    assert read["profiles"][0]["files"] == [
        str(GPU / "profiles" / Path(doc["profile"]["path"]).name)
    ]
    check = read["mechanism_check"]
    assert (check["metric"], check["best_value"], check["candidate_value"]) == (
        "duration_us",
        6.368,
        6.4,
    )
    assert check["confirmed"] is False
    unread = cli("record", "--run", RUN, "--result", without, "--dry-run", "--json").json()
    assert unread["profiles"] == [] and unread["mechanism_check"]["candidate_value"] is None
    text = cli("record", "--run", RUN, "--result", without, "--dry-run").stdout
    assert text.endswith(
        "  mechanism rows-per-program (named by its mechanism); no profile of the candidate read\n"
        "  mechanism check: duration_us decrease unknown (best — -> candidate —)\n"
    )


# --- 10. why headroom is unknown ----------------------------------------------------------


def test_status_says_why_headroom_is_unknown_and_the_schema_what_it_needs(
    cli, monkeypatch, tmp_path
):
    schema = cli("schema", "config", "--json", db=False).json()["schema"]
    target = schema["properties"]["target"]["properties"]
    assert target["peak_bandwidth_gbps"]["unit"] == "GB/s" and target["sm_count"]["unit"] == "SMs"
    floors = schema["properties"]["floors"]["anyOf"][0]["properties"]
    assert floors["effective_bandwidth_gbps"]["unit"] == "GB/s"
    assert "headroom" in schema["properties"]["floors"]["description"]
    gpu_run(cli, monkeypatch, tmp_path)
    profiled = cli("profile", "--run", RUN, "--baseline", "--case", "fp16-4096x1024", BASE_PROFILE)
    assert profiled.exit_code == 0, profiled.stderr
    body = cli("status", "--run", RUN, "--json").json()
    [case] = body["attribution_by_case"]
    assert case["headroom"] is None and case["headroom_unknown"].startswith("no cost floor")
    text = cli("status", "--run", RUN).stdout
    assert text.endswith(
        "fp16-4096x1024  memory-transfer  —\n"
        "  headroom —: no cost floor: set the config's `floors` (effective_bandwidth_gbps in "
        "GB/s, with bytes_moved or the profile's bytes; or elements with "
        "vector_throughput_elems_per_us; or empty_kernel_us); target.sm_count and "
        "peak_bandwidth_gbps make no floor\n"
    )


def test_with_floors_status_shows_the_headroom(cli, monkeypatch, tmp_path):
    floors = {"effective_bandwidth_gbps": 4000.0, "bytes_moved": 2 * 2 * 4096 * 1024}
    gpu_run(cli, monkeypatch, tmp_path, floors=floors)
    profiled = cli("profile", "--run", RUN, "--baseline", "--case", "fp16-4096x1024", BASE_PROFILE)
    assert profiled.exit_code == 0, profiled.stderr
    [case] = cli("status", "--run", RUN, "--json").json()["attribution_by_case"]
    assert case["headroom"] == pytest.approx(1 - 16_777_216 / 4e6 / 6.368)
    assert "headroom_unknown" not in case
    assert "headroom —" not in cli("status", "--run", RUN).stdout


def test_the_round_schema_says_what_the_check_and_the_mechanism_read(cli):
    """min_change is absolute, in the signal's unit (as the check compares it); the
    mechanism's words point at the installed vocabulary."""
    schema = cli("schema", "round", "--json", db=False).json()["schema"]
    expected = schema["properties"]["expected_signal"]["anyOf"][0]
    if "$ref" in expected:
        expected = schema["$defs"][expected["$ref"].rsplit("/", 1)[-1]]
    min_change = expected["properties"]["min_change"]
    assert "absolute, in the signal's own unit" in min_change["description"]
    assert "unit" not in min_change
    mechanism = schema["properties"]["mechanism"]["description"]
    assert "references/mechanisms.md" in mechanism and "docs/" not in mechanism


def test_nothing_installed_points_at_pages_that_are_not_installed(skill):
    for path in skill.rglob("*.md"):
        assert "docs/" not in path.read_text(), path
