"""Profiles, bottleneck attribution, mechanism checks, diagnosis and cross-run history."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

from campaign import Campaign, write_json

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "profiles"
SCALAR_BOUND = {"task_duration_us": 40.0, "aiv_scalar_ratio": 0.45, "aiv_vec_ratio": 0.2}
MEMORY_BOUND = {"task_duration_us": 40.0, "aiv_mte2_ratio": 0.8, "aiv_vec_ratio": 0.3}


def _plan(cli, campaign: Campaign) -> None:
    result = cli("plan", "--config", campaign.config(), "--json")
    assert result.exit_code == 0, result.stderr


def _record(cli, campaign: Campaign, medians, **kwargs) -> dict:
    path = campaign.round(medians, **kwargs)
    result = cli("record", "--run", campaign.run_id, "--result", path, "--json")
    assert result.exit_code == 0, result.stderr
    body = result.json()
    campaign.accepted(body["decision"], body["round"])
    return body


def _signals(campaign: Campaign, name: str, signals: dict) -> Path:
    return write_json(campaign.root / "profiles" / name, signals)


def _decision(cli, campaign: Campaign, round_no: int) -> dict:
    shown = cli("show", "--run", campaign.run_id, "--round", round_no, "--json")
    assert shown.exit_code == 0, shown.stderr
    return shown.json()["decision"]


def test_profile_baseline_and_attribution(cli, campaign):
    _plan(cli, campaign)
    result = cli(
        "profile",
        _signals(campaign, "base.json", SCALAR_BOUND),
        "--run",
        campaign.run_id,
        "--baseline",
        "--json",
    )
    assert result.exit_code == 0, result.stderr
    body = result.json()
    assert body["attribution"]["bottleneck"] == "scalar-flow-control"
    assert body["signals"]["aiv_scalar_ratio"] == 0.45
    assert any("aiv_scalar_ratio" in line for line in body["attribution"]["evidence"])
    assert cli("verify").exit_code == 0


def test_profile_msprof_folder_is_hashed_and_kept(cli, campaign):
    _plan(cli, campaign)
    result = cli(
        "profile",
        FIXTURES / "msprof-op" / "single",
        "--run",
        campaign.run_id,
        "--baseline",
        "--json",
    )
    assert result.exit_code == 0, result.stderr
    assert result.json()["signals"]["task_duration_us"] > 0
    detail = cli("show", "--run", campaign.run_id, "--round", 0, "--json").json()
    files = detail["profiles"][0]["files"]
    assert {Path(f["path"]).name for f in files} >= {"OpBasicInfo.csv", "PipeUtilization.csv"}
    assert all(len(f["sha256"]) == 64 for f in files)
    assert cli("verify").exit_code == 0


def test_profile_rejections_write_nothing(cli, campaign):
    _plan(cli, campaign)
    before = cli.event_count()
    good = _signals(campaign, "ok.json", SCALAR_BOUND)
    for args, fragment in (
        (
            (good, "--run", campaign.run_id),
            "exactly one of --baseline, --round N, --kernel SHA256 or --candidate FILE",
        ),
        ((good, "--run", campaign.run_id, "--baseline", "--round", "1"), "exactly one of"),
        ((good, "--run", campaign.run_id, "--round", "3"), "has no round 3"),
        ((good, "--run", campaign.run_id, "--kernel", "0" * 64), "is not a kernel of run"),
        ((good, "--run", "ghost", "--baseline"), "is not in the ledger"),
        ((FIXTURES / "signals-json" / "nan.json", "--run", campaign.run_id, "--baseline"), ""),
        ((FIXTURES / "bad" / "unknown.csv", "--run", campaign.run_id, "--baseline"), ""),
        ((campaign.root / "none.json", "--run", campaign.run_id, "--baseline"), "no such file"),
    ):
        result = cli("profile", *args)
        assert result.exit_code == 2, (args, result.stderr)
        assert result.stderr.startswith("Error: ") and result.stderr.count("\n") == 1
        assert fragment in result.stderr
    assert cli.event_count() == before


def test_mechanism_confirmed_refuted_and_unknown(cli, campaign):
    _plan(cli, campaign)
    expected = {"metric": "aiv_scalar_ratio", "direction": "decrease", "min_change": 0.02}
    # no profile of the best kernel yet: unknown
    _record(
        cli,
        campaign,
        [18.0, 40.0, 25.0],
        expected_signal=expected,
        profiler_signals={"aiv_scalar_ratio": 0.3},
    )
    check = _decision(cli, campaign, 1)["mechanism_check"]
    assert check["confirmed"] is None and check["candidate_value"] == 0.3
    cli(
        "profile",
        _signals(campaign, "b.json", SCALAR_BOUND),
        "--run",
        campaign.run_id,
        "--baseline",
    )
    # confirmed: 0.45 -> 0.30
    body = _record(
        cli,
        campaign,
        [16.0, 37.0, 23.0],
        expected_signal=expected,
        profiler_signals={**SCALAR_BOUND, "aiv_scalar_ratio": 0.30},
    )
    decision = _decision(cli, campaign, 2)
    assert body["decision"] == "KEEP" and decision["mechanism_check"]["confirmed"] is True
    assert decision["start_profile"]["bottleneck"] == "scalar-flow-control"
    assert "mechanism-refuted" not in decision["flags"]
    # refuted although faster: the KEEP is flagged (the new best's profile is round 2's)
    body = _record(
        cli,
        campaign,
        [14.0, 33.0, 21.0],
        expected_signal=expected,
        profiler_signals={**SCALAR_BOUND, "aiv_scalar_ratio": 0.31},
    )
    decision = _decision(cli, campaign, 3)
    assert body["decision"] == "KEEP"
    assert decision["mechanism_check"]["confirmed"] is False
    assert decision["flags"] == ["mechanism-refuted"]
    history = cli("history", "--run", campaign.run_id, "--json").json()["rounds"]
    assert [r["mechanism_confirmed"] for r in history] == [None, True, False]
    assert cli("verify").exit_code == 0


def test_retried_mechanism_flagged_only_in_diagnosis(cli, campaign):
    campaign.max_consecutive_failures = 2
    _plan(cli, campaign)
    _record(cli, campaign, [18.1, 40.0, 25.0], change="ROWS_PER_ITER=1 -> 2")  # NOISE
    _record(cli, campaign, [18.3, 40.1, 25.0], change="ROWS_PER_ITER=1 -> 4")  # NOISE -> diagnosis
    body = _record(cli, campaign, None, status="failed", change="ROWS_PER_ITER=1 -> 8")
    decision = _decision(cli, campaign, 3)
    assert decision["retried_rounds"] == [1, 2] and decision["flags"] == ["retried-mechanism"]
    assert decision["mechanism"] == "ROWS_PER_ITER"
    assert _decision(cli, campaign, 2)["flags"] == []  # round 2 came before diagnosis was needed
    assert body["needs_diagnosis"] is True
    other = _record(cli, campaign, [18.2, 40.0, 25.0], mechanism="multibuffer", change="enable it")
    assert _decision(cli, campaign, 4)["flags"] == [] and other["needs_diagnosis"] is True

    diagnosed = cli(
        "diagnose",
        "--run",
        campaign.run_id,
        "--bottleneck",
        "memory-transfer",
        "--evidence",
        "MTE2 ratio 0.8 while vector idles",
        "--json",
    )
    assert diagnosed.exit_code == 0, diagnosed.stderr
    assert diagnosed.json()["consecutive_failures_before"] == 4
    status = cli("status", "--run", campaign.run_id, "--json").json()["run"]
    assert status["consecutive_failures"] == 0 and status["needs_diagnosis"] is False
    assert status["bottleneck_model"] == "memory-transfer"
    after = _record(cli, campaign, [18.2, 40.0, 25.0], change="ROWS_PER_ITER=1 -> 16")
    assert _decision(cli, campaign, 5)["flags"] == [] and after["needs_diagnosis"] is False
    assert cli("history", "--mechanism", "ROWS_PER_ITER", "--json").json()["count"] == 4
    assert cli("verify").exit_code == 0


def test_diagnose_rejections(cli, campaign):
    _plan(cli, campaign)
    before = cli.event_count()
    bad = cli("diagnose", "--run", campaign.run_id, "--bottleneck", "gremlins", "--evidence", "x")
    assert bad.exit_code == 2 and "--bottleneck must be one of" in bad.stderr
    empty = cli(
        "diagnose", "--run", campaign.run_id, "--bottleneck", "fixed-cost", "--evidence", " "
    )
    assert empty.exit_code == 2 and "--evidence" in empty.stderr
    assert cli.event_count() == before


def test_history_filters_ordering_show_and_compare(cli, campaign, tmp_path):
    _plan(cli, campaign)
    cli(
        "profile",
        _signals(campaign, "b.json", MEMORY_BOUND),
        "--run",
        campaign.run_id,
        "--baseline",
    )
    _record(cli, campaign, [16.0, 37.0, 23.0], hypothesis="Multibuffer the MTE2 loads")
    _record(cli, campaign, [15.0, 37.0, 26.0], hypothesis="Larger tiles for contiguous copies")
    _record(cli, campaign, None, status="failed")
    other = Campaign(tmp_path / "other", run_id="rmsnorm-t-001", parent_run_id=None)
    other_config = other.config_doc(op_name="rmsnorm", target={"soc": "Ascend310P"})
    assert cli("plan", "--config", write_json(other.root / "c.json", other_config)).exit_code == 0
    _record(cli, other, [16.0, 37.0, 23.0])

    def rounds(*args):
        result = cli("history", *args, "--json")
        assert result.exit_code == 0, result.stderr
        return [(r["run_id"], r["round"]) for r in result.json()["rounds"]]

    everything = rounds()
    assert len(everything) == 4 and everything[:3] == [(campaign.run_id, n) for n in (1, 2, 3)]
    assert rounds("--op", "rmsnorm") == [("rmsnorm-t-001", 1)]
    assert rounds("--soc", "Ascend910B2") == [(campaign.run_id, n) for n in (1, 2, 3)]
    assert rounds("--decision", "FAIL") == [(campaign.run_id, 3)]
    # round 1 was kept and its kernel was never profiled: only round 1 started from a profile
    assert rounds("--bottleneck", "memory-transfer") == [(campaign.run_id, 1)]
    assert rounds("--search", "multibuffer") == [(campaign.run_id, 1)]
    assert rounds("--search", "%") == []
    assert rounds("--limit", "2") == everything[:2]
    assert rounds("--since", "2000-01-01", "--until", "2999-01-01") == everything
    assert rounds("--until", "2000-01-01") == []
    compared = cli("compare", "--run", campaign.run_id, "--round", "0", "--round", "1", "--json")
    assert compared.exit_code == 0, compared.stderr
    cases = compared.json()["cases"]
    assert cases[0]["a_median_us"] == 18.2 and cases[0]["b_median_us"] == 16.0
    assert abs(cases[0]["relative_change"] - (16.0 - 18.2) / 18.2) < 1e-15
    failed = cli("compare", "--run", campaign.run_id, "--round", "0", "--round", "3")
    assert failed.exit_code == 2 and "a FAIL round" in failed.stderr
    one = cli("compare", "--run", campaign.run_id, "--round", "0")
    assert one.exit_code == 2 and "exactly two" in one.stderr
    shown = cli("show", "--run", campaign.run_id, "--round", "2")
    assert shown.exit_code == 0 and "Larger tiles" in shown.stdout
    assert cli("show", "--run", campaign.run_id, "--round", "9").exit_code == 2


def test_like_profile_finds_rounds_from_similar_profiles(cli, campaign):
    _plan(cli, campaign)
    cli(
        "profile",
        _signals(campaign, "b.json", MEMORY_BOUND),
        "--run",
        campaign.run_id,
        "--baseline",
    )
    _record(cli, campaign, [16.0, 37.0, 23.0], change="MULTIBUFFER=off -> on")
    probe = _signals(campaign, "probe.json", {**MEMORY_BOUND, "aiv_mte2_ratio": 0.78})
    result = cli("history", "--like-profile", probe, "--json")
    assert result.exit_code == 0, result.stderr
    body = result.json()
    assert body["bottleneck"] == "memory-transfer"
    assert [(r["round"], r["change"]) for r in body["rounds"]] == [(1, "MULTIBUFFER=off -> on")]
    assert body["rounds"][0]["distance"] < 0.05
    scalar = _signals(campaign, "scalar.json", SCALAR_BOUND)
    assert cli("history", "--like-profile", scalar, "--json").json()["rounds"] == []
    text = cli("history", "--like-profile", probe)
    assert "MULTIBUFFER" in text.stdout


def test_history_queries_use_indexes(sqlite_url):
    from ledger.store.eventstore import Store

    Store(sqlite_url).close()
    path = sqlite_url.removeprefix("sqlite:///")
    with sqlite3.connect(path) as conn:
        for where in (
            "op_name = 'x'",
            "decision = 'KEEP'",
            "bottleneck = 'memory-transfer'",
            "mechanism = 'BLOCK'",
            "soc = 'a'",
            "run_id = 'r'",
        ):
            plan = conn.execute(
                f"EXPLAIN QUERY PLAN SELECT * FROM rounds WHERE {where} ORDER BY recorded_at"
            ).fetchall()
            detail = " ".join(str(row[-1]) for row in plan)
            assert "USING INDEX" in detail or "USING PRIMARY KEY" in detail, (where, detail)
            assert "SCAN rounds" not in detail.replace("USING INDEX", ""), (where, detail)


def test_round_result_signals_become_a_profile_event(cli, campaign):
    _plan(cli, campaign)
    _record(cli, campaign, [16.0, 37.0, 23.0], profiler_signals=MEMORY_BOUND)
    detail = cli("show", "--run", campaign.run_id, "--round", 1, "--json").json()
    assert [p["origin"] for p in detail["profiles"]] == ["round-result"]
    assert detail["profiles"][0]["attribution"]["bottleneck"] == "memory-transfer"
    json.dumps(detail)
