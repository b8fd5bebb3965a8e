"""Profiles in the order agents work: a round result names its candidate's profiles (with
their case), `profile --candidate FILE` before `record` is joined to the round, the
mechanism check compares each case only with the same case, and `profile` refuses a
concluded run and records the same files once."""

from __future__ import annotations

from pathlib import Path

from campaign import record_round, sha256

REAL = Path(__file__).resolve().parents[1] / "fixtures" / "profiles" / "real"
NCU = REAL / "ncu-h200" / "metrics.csv"  # six real kernels, one launch each
# registers per thread in metrics.csv: kl_persistent_copy 48, kl_few_blocks_scale 24,
# kl_triton_matmul 108
EXPECT_FEWER_REGISTERS = {
    "metric": "registers_per_thread",
    "direction": "decrease",
    "min_change": 1,
}


def _plan(cli, campaign) -> None:
    result = cli("plan", "--config", campaign.config(), "--json")
    assert result.exit_code == 0, result.stderr


def _profile(cli, campaign, *args):
    return cli("profile", NCU, "--run", campaign.run_id, *args, "--json")


def test_profile_on_a_concluded_run_is_refused_and_nothing_written(cli, campaign, tmp_path):
    _plan(cli, campaign)
    assert cli("analyze", "--run", campaign.run_id, "--output-dir", tmp_path / "out").exit_code == 0
    refused = cli(
        "profile", NCU, "--run", campaign.run_id, "--baseline", "--kernel-name", "kl_saxpy"
    )
    assert refused.exit_code == 2
    assert refused.stdout == ""
    assert refused.stderr == (
        f"Error: run '{campaign.run_id}' has concluded (inconclusive); it takes no profiles\n"
    )
    detail = cli("show", "--run", campaign.run_id, "--round", 0, "--json").json()
    assert detail["profiles"] == []


def test_the_same_profile_file_for_the_same_target_is_recorded_once(cli, campaign):
    _plan(cli, campaign)
    args = ("--baseline", "--kernel-name", "kl_persistent_copy")
    first = _profile(cli, campaign, *args)
    assert first.exit_code == 0, first.stderr
    assert first.json()["already_recorded"] is False
    again = _profile(cli, campaign, *args)
    assert again.exit_code == 0, again.stderr
    assert again.json()["already_recorded"] is True
    assert again.json()["attribution"] == first.json()["attribution"]
    text = cli("profile", NCU, "--run", campaign.run_id, *args)
    assert "already recorded: these profile files were recorded for this kernel before" in (
        text.stdout
    )
    # another kernel's rows of the same file, or another case, is another profile
    other = _profile(cli, campaign, "--baseline", "--kernel-name", "kl_few_blocks_scale")
    assert other.json()["already_recorded"] is False
    case = _profile(cli, campaign, *args, "--case", campaign.case_ids[0])
    assert case.json()["already_recorded"] is False and case.json()["case_id"] == "fp16-128x257"
    detail = cli("show", "--run", campaign.run_id, "--round", 0, "--json").json()
    assert len(detail["profiles"]) == 3
    assert cli("verify").exit_code == 0


def test_profile_of_an_unknown_kernel_points_at_candidate(cli, campaign):
    _plan(cli, campaign)
    refused = _profile(cli, campaign, "--kernel", "a" * 64, "--kernel-name", "kl_saxpy")
    assert refused.exit_code == 2
    assert refused.json()["error"] == (
        f"kernel {'a' * 64} is not a kernel of run '{campaign.run_id}'; profile a candidate "
        "before its round with --candidate FILE"
    )
    unknown_case = _profile(
        cli, campaign, "--baseline", "--kernel-name", "kl_saxpy", "--case", "fp64-1x1"
    )
    assert unknown_case.exit_code == 2
    assert unknown_case.json()["error"] == (
        f"--case 'fp64-1x1' is not a planned case of run '{campaign.run_id}' "
        "(fp16-128x257, fp32-64x1024, bf16-8x8193)"
    )


def test_candidate_profiled_before_record_decides_the_mechanism_check(cli, campaign):
    _plan(cli, campaign)
    baseline = _profile(cli, campaign, "--baseline", "--kernel-name", "kl_persistent_copy")
    assert baseline.exit_code == 0, baseline.stderr
    doc = campaign.round_doc([16.0, 37.0, 23.0], expected_signal=EXPECT_FEWER_REGISTERS)
    candidate = Path(doc["candidate"]["path"])
    early = _profile(
        cli, campaign, "--candidate", candidate, "--kernel-name", "kl_few_blocks_scale"
    )
    assert early.exit_code == 0, early.stderr
    assert early.json()["subject"] == "candidate"
    assert early.json()["kernel_sha256"] == sha256(candidate)
    assert record_round(cli, campaign, [16.0, 37.0, 23.0], expected_signal=EXPECT_FEWER_REGISTERS)
    shown = cli("show", "--run", campaign.run_id, "--round", 1, "--json").json()
    assert [(p["subject"], p["round"]) for p in shown["profiles"]] == [("candidate", None)]
    decision = shown["decision"]
    assert decision["mechanism_check"] == {
        "metric": "registers_per_thread",
        "direction": "decrease",
        "min_change": 1.0,
        "best_value": 48.0,
        "candidate_value": 24.0,
        "confirmed": True,
    }
    assert cli("verify").exit_code == 0


def test_round_result_profiles_are_compared_case_by_case(cli, campaign, tmp_path):
    _plan(cli, campaign)
    a, b, c = campaign.case_ids
    # the best kernel: case a on kl_persistent_copy (48 registers), case b on
    # kl_few_blocks_scale (24); case c not profiled
    for case, kernel in ((a, "kl_persistent_copy"), (b, "kl_few_blocks_scale")):
        done = _profile(cli, campaign, "--baseline", "--kernel-name", kernel, "--case", case)
        assert done.exit_code == 0, done.stderr
    # the candidate, named in its round result (paths relative to the round file): case a
    # on 24 registers (fewer), case b on 108 (more), case c on 48 (no profile of the best)
    profiles = [
        {"file": str(NCU), "kernel": "kl_few_blocks_scale", "case": a},
        {"file": str(NCU), "kernel": "kl_triton_matmul", "case": b},
        {"file": str(NCU), "kernel": "kl_persistent_copy", "case": c},
    ]
    decision = record_round(
        cli,
        campaign,
        [16.0, 37.0, 23.0],
        expected_signal=EXPECT_FEWER_REGISTERS,
        profile=profiles,
    )
    assert decision == "KEEP"
    shown = cli("show", "--run", campaign.run_id, "--round", 1, "--json").json()
    check = shown["decision"]["mechanism_check"]
    assert check["cases"] == [
        {"case_id": a, "best_value": 48.0, "candidate_value": 24.0, "confirmed": True},
        {"case_id": b, "best_value": 24.0, "candidate_value": 108.0, "confirmed": False},
        {"case_id": c, "best_value": None, "candidate_value": 48.0, "confirmed": None},
    ]
    assert (check["confirmed"], check["case_id"], check["best_value"]) == (False, b, 24.0)
    assert "mechanism-refuted" in shown["decision"]["flags"]
    assert [p["case_id"] for p in shown["profiles"]] == [a, b, c]
    text = cli("show", "--run", campaign.run_id, "--round", 1)
    assert f"mechanism check: registers_per_thread decrease — refuted (case {b}: 24 -> 108)" in (
        text.stdout
    )
    assert cli("verify").exit_code == 0


def test_a_round_profile_of_an_unplanned_case_is_refused(cli, campaign):
    _plan(cli, campaign)
    path = campaign.round(
        [16.0, 37.0, 23.0], profile={"file": str(NCU), "kernel": "kl_saxpy", "case": "nope"}
    )
    refused = cli("record", "--run", campaign.run_id, "--result", path, "--json")
    assert refused.exit_code == 2
    assert refused.json()["error"] == (
        f"profile.case_id 'nope' is not a planned case of run '{campaign.run_id}' "
        "(fp16-128x257, fp32-64x1024, bf16-8x8193)"
    )
    status = cli("status", "--run", campaign.run_id, "--json").json()
    assert status["run"]["rounds_recorded"] == 0


def test_ncu_profiles_get_gpu_wording_and_msprof_ones_ascend_wording(cli, campaign):
    _plan(cli, campaign)
    gpu = _profile(cli, campaign, "--baseline", "--kernel-name", "kl_persistent_copy").json()
    assert gpu["attribution"]["bottleneck"] == "memory-transfer"
    assert gpu["attribution"]["first_experiment"] == (
        "coalesced, vectorized accesses (contiguous along the fastest axis of a warp), fewer "
        "bytes moved (fusion, a narrower dtype), or a tile order that reuses L2"
    )
    few = _profile(cli, campaign, "--baseline", "--kernel-name", "kl_few_blocks_scale").json()
    assert few["attribution"]["bottleneck"] == "insufficient-parallelism"
    assert "SM count" in few["attribution"]["first_experiment"]
    folder = REAL / "msprof-op" / "tilelang-matmul-add-serial"
    npu = cli("profile", folder, "--run", campaign.run_id, "--baseline", "--json").json()
    assert npu["attribution"]["bottleneck"] == "memory-transfer"
    assert "MTE2/MTE3" in npu["attribution"]["first_experiment"]


def test_status_shows_the_attribution_per_case_and_where_the_headroom_is(cli, campaign):
    config = campaign.config(floors={"effective_bandwidth_gbps": 4000.0})
    assert cli("plan", "--config", config).exit_code == 0
    a, b, _ = campaign.case_ids
    for case, kernel in ((a, "kl_persistent_copy"), (b, "kl_few_blocks_scale")):
        done = _profile(cli, campaign, "--baseline", "--kernel-name", kernel, "--case", case)
        assert done.exit_code == 0, done.stderr
    body = cli("status", "--run", campaign.run_id, "--json").json()
    by_case = body["attribution_by_case"]
    assert [(c["case_id"], c["bottleneck"], c["format"]) for c in by_case] == [
        (a, "memory-transfer", "ncu-csv"),
        (b, "insufficient-parallelism", "ncu-csv"),
    ]
    assert body["headroom_case"] == max(by_case, key=lambda c: c["headroom"])["case_id"]
    text = cli("status", "--run", campaign.run_id)
    assert "the best kernel's profile by case:" in text.stdout
    assert f"the headroom is in case {body['headroom_case']} (" in text.stdout


def test_the_report_labels_each_profile_with_its_case(cli, campaign, tmp_path):
    _plan(cli, campaign)
    a = campaign.case_ids[0]
    done = _profile(cli, campaign, "--baseline", "--kernel-name", "kl_persistent_copy", "--case", a)
    assert done.exit_code == 0, done.stderr
    page = tmp_path / "report.html"
    assert cli("report", "--run", campaign.run_id, "--html", page).exit_code == 0
    assert f"original, case {a}" in page.read_text()


def test_a_profile_named_by_path_and_case_id_is_read_with_the_round(cli, campaign):
    """The names a real campaign's round results used (examples/gpu-campaign):
    {"path", "format", "case_id"}, the path against the working directory as candidate.path
    is; an entry that names no file is refused, naming the field."""
    _plan(cli, campaign)
    case = campaign.case_ids[0]
    entry = {
        "path": str(NCU),
        "kernel": "kl_few_blocks_scale",
        "format": "ncu-csv",
        "case_id": case,
    }
    assert record_round(cli, campaign, [16.0, 37.0, 23.0], profile=entry) == "KEEP"
    shown = cli("show", "--run", campaign.run_id, "--round", 1, "--json").json()
    assert [p["case_id"] for p in shown["profiles"]] == [case]
    refused = cli(
        "record",
        "--run",
        campaign.run_id,
        "--result",
        campaign.round([15.0, 36.0, 22.0], profile={"kernel": "kl_saxpy"}),
    )
    assert refused.exit_code == 2 and "profile.path is required" in refused.stderr, refused.stderr


def test_a_profile_of_the_wrong_shape_is_named_once(cli, campaign):
    """`profile` takes an object or a list of them: a problem is said of the shape given, not
    of both readings."""
    _plan(cli, campaign)
    for value, line in (
        ("p.csv", "  profile must be an object or an array of objects"),
        ([{"path": "p.csv"}, {"kernel": "k"}], "  profile[1].path is required"),
    ):
        result = cli(
            "record", "--run", campaign.run_id, "--result",
            campaign.round([15.0, 36.0, 22.0], profile=value),
        )  # fmt: skip
        assert result.exit_code == 2, result.stderr
        problems = [x for x in result.stderr.splitlines() if x.startswith("  ")]
        assert line.strip() in result.stderr and "ProfileRef" not in result.stderr, result.stderr
        assert len([x for x in problems if "profile" in x]) <= 1, problems
