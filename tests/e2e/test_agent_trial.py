"""What a fresh agent met in a trial campaign (a row-wise L2-normalize kernel under
TRITON_INTERPRET=1, from the skill, `--help` and the error messages alone), through the CLI
with its exact exit codes and output, on SQLite and PostgreSQL:

* the baseline measured as the skill says (scripts/measure.py, the starting kernel alone)
  and handed to `plan` as the harness wrote it;
* a median that disagrees with its samples: every row's problem listed at once, and the
  way on (median_us may be left out) said, for a config, a round result, an A/A remeasure
  and a decide input; exit 2, nothing written;
* a file that kept the template's `//` notes: refused naming their lines, not a bare JSON
  parse error; exit 2, nothing written;
* the template marks the keys it writes that may be left out, and a file written from it
  with those keys left out is accepted.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import template_kit
from template_kit import digest, from_template, put, template

from ledger.harness.measure import Harness

SKILL = Path(__file__).resolve().parents[2] / "cli" / "skilldata" / "SKILL.md"
CASES = ["fp32-64x128", "fp32-512x1024", "fp16-4096x4096"]
RUN = "l2norm-001"
HINT = (
    "median_us may be left out of a row with samples_us or source: the ledger then takes "
    "the median of the samples itself, so there is no need to compute it"
)


def validation(cli, folder: str, kernel: str, run_id: str) -> str:
    """A passed manifest and case matrix for `kernel` on every case, from their templates."""
    return template_kit.validation(cli, folder, kernel, run_id, cases=CASES, parent=RUN)


def measured(raw_dir: str, kernels: dict[str, float], reference: float | None = None) -> dict:
    """The harness's fragment for stand-in kernels (a busy loop of `n` steps per case), as
    scripts/measure.py writes it; a wall clock, as under TRITON_INTERPRET=1."""
    harness = Harness(timer="wall", settle_seconds=0.0)
    for case, steps in kernels.items():
        harness.add_case(
            case,
            candidate=lambda n=int(steps): sum(range(n)),
            reference=None if reference is None else (lambda n=int(reference): sum(range(n))),
        )
    return harness.run(repeats=12, warmup=1).write(raw_dir)


def plan_from_the_harness(cli) -> dict:
    """The skill's recipe: the starting kernel measured alone; the fragment's measurements
    and session are the config's baseline and session."""
    put("kernels/l2norm_v0.py", "# v0\nBLOCK = 128\n")
    config = from_template(cli, "config")
    config.update(run_id=RUN, op_name="l2norm", kernel={"path": "kernels/l2norm_v0.py"})
    config["validation_manifest"] = validation(
        cli, "validation/baseline", "kernels/l2norm_v0.py", f"{RUN}-baseline"
    )
    config["cases"] = [{"id": case} for case in CASES]
    fragment = measured("runs/baseline/raw", {case: 2000 for case in CASES})
    config["baseline"], config["session"] = fragment["measurements"], fragment["session"]
    put("config.json", config)
    return config


def test_the_skill_says_how_to_measure_the_baseline_and_plan_takes_it(cli, tmp_path, monkeypatch):
    text = SKILL.read_text()
    assert "Measure the baseline with\n   `scripts/measure.py` (below)" in text
    assert "[Measuring](references/measuring.md) shows how,\nfor the baseline too" in text
    measuring = " ".join((SKILL.parent / "references" / "measuring.md").read_text().split())
    assert "## The baseline Add each case with only the starting kernel, as `candidate`" in (
        measuring
    )
    assert "needs no `median_us` or `repeats`: the ledger computes them" in measuring
    monkeypatch.chdir(tmp_path)
    config = plan_from_the_harness(cli)
    assert all("median_us" not in row for row in config["baseline"])
    planned = cli("plan", "--config", "config.json", "--json")
    assert planned.exit_code == 0, planned.stderr
    assert planned.json()["warnings"] == []
    status = cli("status", "--run", RUN, "--json").json()
    assert [c["case_id"] for c in status["cases"]] == CASES


def test_every_median_that_disagrees_is_listed_with_the_way_on(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    plan_from_the_harness(cli)
    config = json.loads(Path("config.json").read_text())
    config["baseline"] = [
        {"case_id": CASES[0], "median_us": 10.5, "samples_us": [10.0, 11.0, 12.0]},
        {"case_id": "fp64-1x1", "median_us": 3.0, "repeats": 3},
        {"case_id": CASES[1], "median_us": 20.0, "repeats": 4, "samples_us": [20.0, 21.0, 23.0]},
        {"case_id": CASES[2], "median_us": 30.0, "samples_us": [30.0, 30.0, 31.0]},
    ]
    put("config.json", config)
    result = cli("plan", "--config", "config.json")
    assert (result.exit_code, result.stdout) == (2, "")
    problems = [
        "baseline[0].median_us 10.5 disagrees with the median of its 3 samples (11.0) by more "
        "than a relative 1e-09",
        "baseline[1].case_id 'fp64-1x1' is not a planned case",
        "baseline[2].median_us 20.0 disagrees with the median of its 3 samples (21.0) by more "
        "than a relative 1e-09",
    ]
    assert result.stderr == "Error: 3 problems:\n" + "".join(f"  {p}\n" for p in problems) + (
        HINT + "\n"
    )
    as_json = cli("plan", "--config", "config.json", "--json")
    assert as_json.exit_code == 2
    assert as_json.json() == {
        "status": "error",
        "error": "3 problems: " + "; ".join(problems) + ". " + HINT,
        "exit_code": 2,
        "problems": problems,
        "hint": HINT,
    }
    assert cli.event_count() == 0

    # the way on works: median_us left out, the ledger takes the median of the samples
    for row in config["baseline"]:
        row.pop("median_us")
    config["baseline"][1] = {"case_id": CASES[2], "samples_us": [30.0, 30.0, 31.0]}
    config["baseline"].pop()
    put("config.json", config)
    planned = cli("plan", "--config", "config.json", "--json")
    assert planned.exit_code == 0, planned.stderr
    cases = cli("status", "--run", RUN, "--json").json()["cases"]
    assert [c["baseline_median_us"] for c in cases] == [11.0, 21.0, 30.0]


def test_round_remeasure_and_decide_rows_list_every_problem(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    plan_from_the_harness(cli)
    assert cli("plan", "--config", "config.json").exit_code == 0
    before = cli.event_count()

    put("kernels/l2norm_r1.py", "# r1\nBLOCK = 256\n")
    result = from_template(cli, "round")
    result["parent_kernel_sha256"] = digest("kernels/l2norm_v0.py")
    result["candidate"]["path"] = "kernels/l2norm_r1.py"
    result["verification"]["manifest"] = validation(
        cli, "validation/round-1", "kernels/l2norm_r1.py", f"{RUN}-round-1"
    )
    result["measurements"] = [
        {"case_id": CASES[0], "median_us": 9.0, "repeats": 3, "samples_us": [8.0, 8.5, 9.5]},
        {"case_id": CASES[1], "median_us": 19.0, "samples_us": [18.0, 19.0, 20.0]},
        {"case_id": CASES[2], "median_us": 29.0, "samples_us": [28.0, 28.5, 30.0]},
    ]
    put("round-1.json", result)
    recorded = cli("record", "--run", RUN, "--result", "round-1.json")
    assert recorded.exit_code == 2
    assert recorded.stderr == (
        "Error: 2 problems:\n"
        "  measurements[0].median_us 9.0 disagrees with the median of its 3 samples (8.5) by "
        "more than a relative 1e-09\n"
        "  measurements[2].median_us 29.0 disagrees with the median of its 3 samples (28.5) by "
        "more than a relative 1e-09\n" + HINT + "\n"
    )

    aa = from_template(cli, "measurements")
    aa["kernel_sha256"] = digest("kernels/l2norm_v0.py")
    aa["measurements"] = [
        {"case_id": CASES[0], "median_us": 10.0, "samples_us": [10.0, 11.0, 12.0]},
        {"case_id": CASES[2], "source": "raw/missing.json"},
    ]
    put("aa.json", aa)
    noise = cli("noise", "--run", RUN, "--measurements", "aa.json")
    assert (noise.exit_code, noise.stdout) == (2, "")
    assert noise.stderr == (
        "Error: 3 problems:\n"
        "  measurements[0].median_us 10.0 disagrees with the median of its 3 samples (11.0) by "
        "more than a relative 1e-09\n"
        f"  measurements[1].median_us is required: the samples file measurements[1].source "
        f"{tmp_path / 'raw' / 'missing.json'} does not exist\n"
        f"  measurements has no row for planned case '{CASES[1]}'\n" + HINT + "\n"
    )
    assert cli.event_count() == before

    decide = from_template(cli, "decide")
    decide["best"] = [
        {"case_id": "fp16-1024x1024", "median_us": 5.0, "samples_us": [4.0, 6.0, 7.0]}
    ]
    decide["candidate"] = [
        {"case_id": "fp16-1024x1024", "median_us": 4.0, "samples_us": [3.0, 5.0, 6.0]},
        {"case_id": "fp16-1024x1024", "median_us": 4.0, "repeats": 3},
    ]
    put("decide.json", decide)
    decided = cli("decide", "--input", "decide.json", db=False)
    assert (decided.exit_code, decided.stdout) == (2, "")
    assert decided.stderr == (
        "Error: decide.json: 3 problems:\n"
        "  best[0].median_us 5.0 disagrees with the median of its 3 samples (6.0) by more than "
        "a relative 1e-09\n"
        "  candidate[0].median_us 4.0 disagrees with the median of its 3 samples (5.0) by more "
        "than a relative 1e-09\n"
        "  candidate[1].case_id 'fp16-1024x1024' appears more than once\n"
        + HINT.replace("samples_us or source", "samples_us")  # decide takes samples inline
        + "\n"
    )


def _notes_error(what: str, path: str, lines: str) -> str:
    return (
        f"Error: {what} {path} holds // notes on {lines}: drop those lines (a template's // "
        "notes document the format; the file itself is read as JSON, which has no comments)\n"
    )


def _note_lines(text: str) -> list[int]:
    return [n for n, line in enumerate(text.splitlines(), 1) if line.lstrip().startswith("//")]


def _spans(numbers: list[int]) -> str:
    runs: list[list[int]] = []
    for n in numbers:
        if runs and n == runs[-1][-1] + 1:
            runs[-1].append(n)
        else:
            runs.append([n])
    return ", ".join(str(r[0]) if len(r) == 1 else f"{r[0]}-{r[-1]}" for r in runs)


@pytest.mark.parametrize("kind", ["config", "round", "measurements", "decide"])
def test_a_file_that_kept_the_template_notes_is_refused_naming_their_lines(
    cli, tmp_path, monkeypatch, kind
):
    monkeypatch.chdir(tmp_path)
    if kind in ("round", "measurements"):
        plan_from_the_harness(cli)
        assert cli("plan", "--config", "config.json").exit_code == 0
    before = cli.event_count() if kind != "decide" else 0
    text = template(cli, kind)
    assert text.startswith(f"// {kind}: ") and "notes on the format, not JSON: drop them" in text
    put("kept.json", text)
    lines = "lines " + _spans(_note_lines(text))
    command = {
        "config": ("plan", "--config", "kept.json"),
        "round": ("record", "--run", RUN, "--result", "kept.json"),
        "measurements": ("noise", "--run", RUN, "--measurements", "kept.json"),
        "decide": ("decide", "--input", "kept.json"),
    }[kind]
    what = {
        "config": "config file",
        "round": "round result",
        "measurements": "measurements file",
        "decide": "decide input",
    }[kind]
    shown = "kept.json" if kind == "decide" else str(tmp_path / "kept.json")
    result = cli(*command, db=kind != "decide")
    assert (result.exit_code, result.stdout) == (2, "")
    assert result.stderr == _notes_error(what, shown, lines)
    if kind != "decide":
        assert cli.event_count() == before


def test_notes_are_named_by_line_in_a_small_file_and_in_jsonl(cli, tmp_path):
    path = put(
        str(tmp_path / "c.json"),
        '{\n  "schema_version": 1,\n  // my note\n  "run_id": "x"\n  // another\n}\n',
    )
    result = cli("plan", "--config", path)
    assert (result.exit_code, result.stderr) == (
        2,
        _notes_error("config file", str(path), "lines 3, 5"),
    )
    one = put(str(tmp_path / "one.json"), '{"schema_version": 1,\n// note\n"run_id": "x"}\n')
    result = cli("plan", "--config", one)
    assert (result.exit_code, result.stderr) == (2, _notes_error("config file", str(one), "line 2"))
    jsonl = put(str(tmp_path / "d.jsonl"), '// inputs\n{"a": 1}\n')
    result = cli("decide", "--input", jsonl, "--jsonl", db=False)
    assert (result.exit_code, result.stderr) == (
        2,
        _notes_error("decide input", str(jsonl), "line 1"),
    )
    assert cli.event_count() == 0


def test_the_template_marks_what_may_be_left_out_and_reads_it_so(cli, tmp_path, monkeypatch):
    median = (
        '// "median_us" may be left out: the ledger then takes the median of the samples in '
        "samples_us or source (give one of them)."
    )
    repeats = (
        '// "repeats" may be left out: the ledger then counts the samples in samples_us or '
        "source (give one of them)."
    )
    for kind in ("config", "measurements", "decide"):
        lines = [line.strip() for line in template(cli, kind).splitlines()]
        assert median in lines and repeats in lines, kind
        assert lines.index(median) == lines.index('"median_us": 52.0,') + 1, kind
    assert (
        '// "measurements" may be left out: a candidate that failed its correctness gate is '
        "recorded as FAIL without them."
    ) in [line.strip() for line in template(cli, "round").splitlines()]
    assert "may be left out … required unless" not in template(cli, "config")

    # written from the template, notes dropped, both keys left out, samples given: accepted
    monkeypatch.chdir(tmp_path)
    plan_from_the_harness(cli)
    config = json.loads(Path("config.json").read_text())
    config["baseline"] = [{"case_id": case, "samples_us": [5.0, 6.0, 7.0]} for case in CASES]
    del config["session"]
    put("config.json", config)
    planned = cli("plan", "--config", "config.json", "--json")
    assert planned.exit_code == 0, planned.stderr
    # left out with nothing to compute them from: refused, every row named
    aa = from_template(cli, "measurements")
    aa["kernel_sha256"] = digest("kernels/l2norm_v0.py")
    aa["measurements"] = [{"case_id": case} for case in CASES]
    put("aa.json", aa)
    noise = cli("noise", "--run", RUN, "--measurements", "aa.json", "--json")
    assert noise.exit_code == 2
    assert noise.json()["problems"] == [
        f"measurements[{i}] median_us is required (or samples_us or source to compute it from)"
        for i in range(3)
    ]


def test_a_mistyped_run_id_names_the_run_it_likely_meant(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    plan_from_the_harness(cli)
    assert cli("plan", "--config", "config.json").exit_code == 0
    result = from_template(cli, "round")
    result["parent_kernel_sha256"] = digest("kernels/l2norm_v0.py")
    put("round-1.json", result)
    aa = from_template(cli, "measurements")
    aa["kernel_sha256"] = digest("kernels/l2norm_v0.py")
    put("aa.json", aa)
    meant = f"; did you mean '{RUN}'? (`status` lists the runs)"
    for args in (
        ("status", "--run", "l2norm-01"),
        ("show", "--run", "l2norm-01", "--round", "0"),
        ("record", "--run", "l2norm", "--result", "round-1.json"),
        ("noise", "--run", "l2norm-0001", "--measurements", "aa.json"),
    ):
        result = cli(*args)
        assert (result.exit_code, result.stdout) == (2, ""), args
        assert result.stderr == f"Error: run {args[2]!r} is not in the ledger{meant}\n", args
    unrelated = cli("status", "--run", "softmax-001", "--json")
    assert unrelated.json() == {
        "status": "error",
        "error": "run 'softmax-001' is not in the ledger",
        "exit_code": 2,
    }


def test_a_missing_kind_says_which_kinds_there_are(cli):
    kinds = "config, round, manifest, case-matrix, measurements, decide"
    result = cli("template", db=False)
    assert (result.exit_code, result.stdout, result.stderr) == (
        2,
        "",
        f"Error: Missing argument 'KIND'. Which input file: {kinds}; `schema KIND` prints its "
        "JSON Schema.\n",
    )
    result = cli("schema", "--json", db=False)
    assert result.exit_code == 2
    assert result.json()["error"] == (
        f"Missing argument 'KIND'. Which input file: {kinds}; `template KIND` prints a ready "
        "example."
    )
