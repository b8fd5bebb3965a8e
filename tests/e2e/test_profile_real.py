"""`profile` on real profiler files: notes printed and stored, shapes reported apart,
`--shape` choosing one, and `show` / `--json` giving the notes back."""

from __future__ import annotations

from pathlib import Path

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "profiles" / "real"
NCU_METRICS = REAL / "ncu-h200" / "metrics.csv"
PIPEUTIL = REAL / "ascend" / "mstt-compute-advice-pipeutil.kernel_details.csv"


def _plan(cli, campaign) -> None:
    result = cli("plan", "--config", campaign.config(), "--json")
    assert result.exit_code == 0, result.stderr


def test_raw_ncu_stdout_is_read_and_its_notes_printed_and_stored(cli, campaign):
    _plan(cli, campaign)
    args = ("profile", NCU_METRICS, "--run", campaign.run_id, "--baseline")
    text = cli(*args, "--kernel-name", "kl_persistent_copy")
    assert text.exit_code == 0, text.stderr
    assert "bottleneck: memory-transfer" in text.stdout
    assert "note: metrics.csv: skipped 6 lines before the ncu header" in text.stdout
    body = cli(*args, "--kernel-name", "kl_few_blocks_scale", "--json").json()
    assert body["attribution"]["bottleneck"] == "insufficient-parallelism"
    assert body["attribution"]["rules"] == 3 and body["attribution"]["core"] == "gpu"
    assert any("skipped 6 lines" in n for n in body["notes"])
    shown = cli("show", "--run", campaign.run_id, "--round", 0)
    assert shown.exit_code == 0, shown.stderr
    assert "note: metrics.csv: skipped 6 lines" in shown.stdout
    detail = cli("show", "--run", campaign.run_id, "--round", 0, "--json").json()
    assert detail["profiles"][-1]["attribution"]["notes"] == body["notes"]
    assert cli("verify").exit_code == 0


def test_shapes_are_reported_apart_and_chosen_with_shape(cli, campaign):
    _plan(cli, campaign)
    args = ("profile", PIPEUTIL, "--run", campaign.run_id, "--baseline")
    args += ("--kernel-name", "aclnnAdd_AddAiCore_Add")
    text = cli(*args)
    assert text.exit_code == 0, text.stderr
    assert "bottleneck: memory-transfer" in text.stdout
    assert "shape 512,2,4096;512,2,4096: memory-transfer (4 launch(es)" in text.stdout
    assert "shape ;: fixed-cost (4 launch(es)" in text.stdout
    assert "never merged" in text.stdout and "--shape" in text.stdout
    body = cli(*args, "--shape", ";", "--json").json()
    assert body["attribution"]["bottleneck"] == "fixed-cost"
    assert body["signals"]["block_dim"] == 1
    wrong = cli(*args, "--shape", "9,9,9")
    assert wrong.exit_code == 2
    assert wrong.stderr.startswith("Error: ") and "matches none of the shapes" in wrong.stderr
    assert wrong.stderr.count("\n") == 1


def test_a_case_profile_of_a_file_with_several_shapes_needs_its_shape(cli, campaign):
    """A profile filed under one case is of one launch shape: attributing the shape with
    the most total time would file another case's launch under it, so the file is refused
    until --shape (or a round file's profile[i].shape) says which; nothing is written."""
    _plan(cli, campaign)
    case = campaign.case_ids[0]
    args = ("profile", PIPEUTIL, "--run", campaign.run_id, "--baseline", "--case", case)
    args += ("--kernel-name", "aclnnAdd_AddAiCore_Add")
    refused = cli(*args)
    assert refused.exit_code == 2
    assert refused.stderr == (
        f"Error: {PIPEUTIL}: 'aclnnAdd_AddAiCore_Add' ran with 2 launch shapes "
        "('512,2,4096;512,2,4096' (4 launch(es)), ';' (4 launch(es))), and a profile of case "
        f"'{case}' is of one: name the shape that case ran with in --shape, or profile that "
        "case alone\n"
    )
    assert cli("show", "--run", campaign.run_id, "--round", 0, "--json").json()["profiles"] == []
    chosen = cli(*args, "--shape", "512,2,4096;512,2,4096", "--json")
    assert chosen.exit_code == 0, chosen.stderr
    assert chosen.json()["attribution"]["bottleneck"] == "memory-transfer"


def test_real_msprof_op_folder_and_op_summary_are_profiled(cli, campaign):
    _plan(cli, campaign)
    folder = REAL / "msprof-op" / "tilelang-matmul-add-serial"
    text = cli("profile", folder, "--run", campaign.run_id, "--baseline")
    assert text.exit_code == 0, text.stderr
    assert "bottleneck: memory-transfer" in text.stdout
    assert "note:" not in text.stdout  # the tables' repeated block columns agree
    body = cli("profile", folder, "--run", campaign.run_id, "--baseline", "--json").json()
    assert body["signals"]["aic_core_count"] == 32 and body["signals"]["block_dim"] == 32
    assert body["format"] == "msprof-op" and body["notes"] == []
    summary = REAL / "op-summary" / "tilelang-matmul-add-serial"
    again = cli("profile", summary, "--run", campaign.run_id, "--baseline", "--json")
    assert again.exit_code == 0, again.stderr
    assert again.json()["attribution"]["bottleneck"] == "memory-transfer"
    assert cli("verify").exit_code == 0
