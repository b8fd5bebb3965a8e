"""Raw samples, noise-aware decisions, A/A remeasures and the dry-run `decide`."""

from __future__ import annotations

import json

import numpy as np

from ledger.core.events import RoundDecided
from ledger.integrity.verify import _numpy_drift_only

from campaign import Campaign, sha256, write_json


def _samples(median: float, cv: float, n: int, seed: int) -> list[float]:
    rng = np.random.default_rng(seed)
    values = median * np.exp(rng.normal(0.0, cv, size=n))
    return [float(v) for v in values]


def _plan_with_samples(cli, campaign: Campaign, cv: float = 0.05, n: int = 30) -> None:
    doc = campaign.config_doc()
    for i, row in enumerate(doc["baseline"]):
        row.pop("median_us")
        row["samples_us"] = _samples(campaign.baseline[i], cv, n, seed=i)
    result = cli("plan", "--config", write_json(campaign.root / "config.json", doc))
    assert result.exit_code == 0, result.stderr


def _round_with_samples(campaign: Campaign, factor: float, cv: float, n: int, seed: int):
    doc = campaign.round_doc([1.0, 1.0, 1.0])
    for i, row in enumerate(doc["measurements"]):
        row.pop("median_us")
        row["samples_us"] = _samples(campaign.baseline[i] * factor, cv, n, seed=seed + i)
    return write_json(campaign.root / "rounds" / f"round-{doc['round']}.json", doc)


def test_noisy_samples_turn_a_contract_keep_into_noise(cli, campaign):
    campaign.max_rounds = 40
    _plan_with_samples(cli, campaign, cv=0.08, n=12)
    # the candidate is the same kernel timed again: the medians may differ by chance
    for seed in range(100, 140):
        path = _round_with_samples(campaign, 0.985, cv=0.08, n=12, seed=seed)
        shown = cli("record", "--run", campaign.run_id, "--result", path, "--json")
        assert shown.exit_code == 0, shown.stderr
        body = shown.json()
        campaign.accepted(body["decision"], body["round"])
        decision = cli("show", "--run", campaign.run_id, "--round", body["round"], "--json").json()[
            "decision"
        ]
        stats = decision["statistics"]
        assert decision["evidence"] == "samples" and stats["kind"] == "samples"
        # plan recorded the bootstrap in force, and the decision used it
        assert stats["bootstrap"] == "smoothed" and stats["method"].endswith("smoothed/v2")
        assert stats["contract_decision"] in ("KEEP", "DISCARD", "NOISE")
        if stats["contract_decision"] == "KEEP" and body["decision"] != "KEEP":
            assert stats["changed_by"] in ("noise_floor", "case_regression")
            assert "drift_unestimated" in decision["flags"]
            break
    else:
        raise AssertionError("no contract KEEP was overturned in 40 noisy A/A rounds")
    verified = cli("verify", "--json")
    assert verified.exit_code == 0, verified.stdout
    assert verified.json()["warnings"] == []


def test_a_run_planned_with_the_plain_bootstrap_is_decided_and_replayed_with_it(cli, campaign):
    doc = campaign.config_doc()
    for i, row in enumerate(doc["baseline"]):
        row.pop("median_us")
        row["samples_us"] = _samples(campaign.baseline[i], 0.05, 12, seed=i)
    doc["statistics"] = {"bootstrap": "plain"}
    result = cli("plan", "--config", write_json(campaign.root / "config.json", doc))
    assert result.exit_code == 0, result.stderr
    path = _round_with_samples(campaign, 0.97, cv=0.05, n=12, seed=300)
    assert cli("record", "--run", campaign.run_id, "--result", path).exit_code == 0
    decision = cli("show", "--run", campaign.run_id, "--round", 1, "--json").json()["decision"]
    stats = decision["statistics"]
    # exactly the evidence of decisions recorded before the setting existed
    assert stats["method"] == "bootstrap-median-order-statistics/v1" and "bootstrap" not in stats
    verified = cli("verify", "--json")
    assert verified.exit_code == 0, verified.stdout
    assert verified.json()["warnings"] == []


def test_statistics_never_apply_with_too_few_samples(cli, campaign):
    _plan_with_samples(cli, campaign, n=5)  # below min_samples=10
    path = _round_with_samples(campaign, 0.9, cv=0.01, n=5, seed=7)
    body = cli("record", "--run", campaign.run_id, "--result", path, "--json").json()
    decision = cli("show", "--run", campaign.run_id, "--round", 1, "--json").json()["decision"]
    assert decision["evidence"] == "medians" and decision["statistics"] is None
    assert body["decision"] == "KEEP"


def test_source_files_in_every_unit_and_format(cli, campaign, monkeypatch):
    campaign.root.mkdir(parents=True, exist_ok=True)
    monkeypatch.chdir(campaign.root)  # `source` is relative to the working directory
    doc = campaign.config_doc()
    raw = campaign.root / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    (raw / "a.json").write_text(json.dumps([18.0, 18.2, 18.4]))
    (raw / "b.json").write_text(json.dumps({"unit": "ms", "samples": [0.0399, 0.04, 0.0401]}))
    (raw / "c.csv").write_text(
        "\ufeffStep Id,Name,Duration(us)\n0,k,24.9\t\n1,k,N/A\n2,k,25.0\n3,k,25.1\n"
    )
    for row, name in zip(doc["baseline"], ("a.json", "b.json", "c.csv"), strict=True):
        row.pop("median_us")
        row.pop("repeats")
        row["source"] = f"raw/{name}"
    result = cli("plan", "--config", write_json(campaign.root / "config.json", doc), "--json")
    assert result.exit_code == 0, result.stderr
    status = cli("status", "--run", campaign.run_id, "--json").json()
    assert [c["baseline_median_us"] for c in status["cases"]] == [18.2, 40.0, 25.0]
    detail = cli("show", "--run", campaign.run_id, "--round", 0, "--json").json()
    rows = detail["measurements"]["measurements"]
    assert rows[1]["samples_us"] == [39.9, 40.0, 40.1] and rows[1]["repeats"] == 3
    assert rows[2]["source"]["sha256"] == sha256(raw / "c.csv")


def test_bad_raw_files_are_refused(cli, campaign, monkeypatch):
    campaign.root.mkdir(parents=True, exist_ok=True)
    monkeypatch.chdir(campaign.root)  # `source` is relative to the working directory
    raw = campaign.root / "raw"
    raw.mkdir(parents=True, exist_ok=True)
    cases = {
        "nan.json": "[1.0, NaN]",
        "neg.json": "[1.0, -2.0]",
        "unit.json": '{"unit": "s", "samples": [1.0]}',
        "empty.json": "[]",
        "bool.json": "[true]",
        "nocol.csv": "Name,Time\nk,1.0\n",
    }
    for name, text in cases.items():
        (raw / name).write_text(text)
        doc = campaign.config_doc()
        doc["baseline"][0] = {"case_id": doc["baseline"][0]["case_id"], "source": f"raw/{name}"}
        result = cli("plan", "--config", write_json(campaign.root / "config.json", doc))
        assert result.exit_code == 2, (name, result.stderr)
        assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr
    disagree = campaign.config_doc()
    disagree["baseline"][0]["samples_us"] = [1.0, 2.0, 3.0]
    result = cli("plan", "--config", write_json(campaign.root / "config.json", disagree))
    assert result.exit_code == 2 and "disagrees with the median" in result.stderr
    assert cli.event_count() == 0


def test_noise_remeasures_estimate_drift(cli, campaign):
    _plan_with_samples(cli, campaign, cv=0.02, n=20)
    best = sha256(campaign.best_kernel)
    wrong = write_json(
        campaign.root / "aa-wrong.json", {"kernel_sha256": "0" * 64, "measurements": []}
    )
    refused = cli("noise", "--run", campaign.run_id, "--measurements", wrong)
    assert refused.exit_code == 2 and "not the current best kernel" in refused.stderr
    results = []
    for k in range(5):
        doc = {
            "kernel_sha256": best,
            "measurements": [
                {
                    "case_id": c,
                    "samples_us": _samples(m * (1 + 0.01 * (k % 2)), 0.02, 20, seed=50 + 3 * k + i),
                }
                for i, (c, m) in enumerate(zip(campaign.case_ids, campaign.baseline, strict=True))
            ],
        }
        result = cli(
            "noise",
            "--run",
            campaign.run_id,
            "--measurements",
            write_json(campaign.root / f"aa-{k}.json", doc),
            "--json",
        )
        assert result.exit_code == 0, result.stderr
        results.append(result.json())
    assert [r["pairs"] for r in results] == [1, 2, 3, 4, 5]
    assert [r["drift_estimated"] for r in results] == [False] * 4 + [True]
    assert results[-1]["drift_sigma"] >= 0.0
    path = _round_with_samples(campaign, 0.9, cv=0.02, n=20, seed=900)
    body = cli("record", "--run", campaign.run_id, "--result", path, "--json").json()
    decision = cli("show", "--run", campaign.run_id, "--round", 1, "--json").json()["decision"]
    assert decision["statistics"]["drift_estimated"] is True
    assert "drift_unestimated" not in decision["flags"] and body["decision"] == "KEEP"
    assert cli("verify").exit_code == 0


def _decide_input(best, cand, **extra):
    return {
        "objective": {
            "target_relative_improvement": 0.1,
            "min_relative_improvement": 0.01,
            "noise_floor": 0.005,
            "max_case_regression": 0.02,
        },
        "cases": [{"id": "a", "weight": 1.0}, {"id": "b", "weight": 3.0}],
        "best": [{"case_id": "a", **best[0]}, {"case_id": "b", **best[1]}],
        "candidate": [{"case_id": "a", **cand[0]}, {"case_id": "b", **cand[1]}],
        **extra,
    }


def test_decide_dry_run_single_and_jsonl(cli, tmp_path):
    one = write_json(
        tmp_path / "one.json",
        _decide_input(
            [{"median_us": 10.0, "repeats": 5}, {"median_us": 20.0, "repeats": 5}],
            [{"median_us": 9.0, "repeats": 5}, {"median_us": 19.0, "repeats": 5}],
        ),
    )
    result = cli("decide", "--input", one, "--json", db=False)
    assert result.exit_code == 0, result.stderr
    body = result.json()
    assert body["decision"] == "KEEP" and body["evidence"] == "medians"
    assert abs(body["relative_improvement"] - (0.25 * 0.1 + 0.75 * 0.05)) < 1e-15
    noisy = _decide_input(
        [{"samples_us": _samples(10.0, 0.1, 20, 1)}, {"samples_us": _samples(20.0, 0.1, 20, 2)}],
        [{"samples_us": _samples(9.9, 0.1, 20, 3)}, {"samples_us": _samples(19.8, 0.1, 20, 4)}],
    )
    lines = [json.dumps(noisy)] * 3 + [json.dumps(json.load(one.open()))] * 1000
    path = tmp_path / "many.jsonl"
    path.write_text("\n".join(lines) + "\n")
    result = cli("decide", "--input", path, "--jsonl", db=False)
    assert result.exit_code == 0, result.stderr
    out = [json.loads(line) for line in result.stdout.splitlines()]
    assert len(out) == 1003
    assert out[0] == out[1] == out[2]  # seeded: identical inputs, identical statistics
    assert out[0]["statistics"]["kind"] == "samples" and out[3]["decision"] == "KEEP"
    bad = tmp_path / "bad.jsonl"
    bad.write_text(json.dumps(noisy) + "\n" + '{"objective": 1}\n')
    result = cli("decide", "--input", bad, "--jsonl", db=False)
    assert result.exit_code == 2 and "line 2" in result.stderr and result.stdout == ""


def test_numpy_version_drift_is_a_warning_unless_the_decision_flips():
    base = dict(
        round=1,
        decision="NOISE",
        evidence="samples",
        case_ids=["a"],
        weights=[1.0],
        objective={
            "target_relative_improvement": 0.1,
            "min_relative_improvement": 0.01,
            "noise_floor": 0.005,
            "max_case_regression": 0.02,
        },
        limits={"max_rounds": 3, "max_consecutive_failures": 2},
        best_before={"sha256": "a" * 64, "path": "/k", "round": 0, "medians_us": [1.0]},
        candidate_sha256="b" * 64,
        candidate_medians_us=[0.9],
        relative_improvement=0.1,
        worst_case_regression=-0.1,
        best_after={"sha256": "a" * 64, "path": "/k", "round": 0, "medians_us": [1.0]},
        consecutive_failures=1,
        cumulative_improvement=0.0,
        target_met=False,
        needs_diagnosis=False,
        remaining_rounds=2,
    )
    recorded = RoundDecided(
        **base, statistics={"numpy_version": "1.26.4", "improvement_lower": 0.001}
    )
    same = RoundDecided(**base, statistics={"numpy_version": "2.4.6", "improvement_lower": 0.0012})
    assert _numpy_drift_only(same, recorded)
    flipped = RoundDecided(**{**base, "decision": "KEEP"}, statistics={"numpy_version": "2.4.6"})
    assert not _numpy_drift_only(flipped, recorded)
    same_version = RoundDecided(
        **base, statistics={"numpy_version": "1.26.4", "improvement_lower": 0.5}
    )
    assert not _numpy_drift_only(same_version, recorded)
