"""`record` with sessions, a same-session reference and statistics.sequential, replayed by
`verify`, on SQLite and PostgreSQL. Samples are simulated (seeded lognormal): self-made."""

from __future__ import annotations

import re

import numpy as np

from campaign import Campaign, write_json

OBJECTIVE = {  # the H200 LayerNorm campaign's objective
    "target_relative_improvement": 0.1,
    "min_relative_improvement": 0.02,
    "noise_floor": 0.01,
    "max_case_regression": 0.02,
}
SEQUENTIAL = {"min_repeats": 10, "max_repeats": 100, "batch": 10}


def _samples(median: float, n: int, seed: int, cv: float = 0.01) -> list[float]:
    rng = np.random.default_rng(seed)
    return [float(v) for v in median * np.exp(rng.normal(0.0, cv, size=n))]


def _rows(campaign: Campaign, factor: float, n: int, seed: int) -> list[dict]:
    return [
        {"case_id": c, "samples_us": _samples(m * factor, n, seed + i)}
        for i, (c, m) in enumerate(zip(campaign.case_ids, campaign.baseline, strict=True))
    ]


def _plan(cli, campaign: Campaign, **statistics) -> None:
    doc = campaign.config_doc(objective=OBJECTIVE)
    doc["baseline"] = _rows(campaign, 1.0, 50, 1)
    doc["session"] = {"id": "s-plan", "device": "GPU-0"}
    if statistics:
        doc["statistics"] = statistics
    result = cli("plan", "--config", write_json(campaign.root / "config.json", doc))
    assert result.exit_code == 0, result.stderr


def _record(cli, campaign: Campaign, **fields):
    doc = campaign.round_doc([])
    doc.update(fields)
    path = write_json(campaign.root / "rounds" / f"round-{doc['round']}.json", doc)
    result = cli("record", "--run", campaign.run_id, "--result", path, "--json")
    assert result.exit_code == 0, result.stderr
    body = result.json()
    campaign.accepted(body["decision"], body["round"])
    shown = cli("show", "--run", campaign.run_id, "--round", body["round"], "--json").json()
    return body, shown["decision"]


def test_a_reference_decides_and_a_cross_session_keep_must_clear_the_drift(cli, campaign):
    _plan(cli, campaign)
    # round 1: +2.76% measured in another session than the best kernel's: NOISE, advised
    body, decided = _record(
        cli,
        campaign,
        measurements=_rows(campaign, 1 - 0.0276, 50, 11),
        session={"id": "s-round-1", "device": "GPU-1"},
    )
    assert body["decision"] == "NOISE"
    assert "remeasure-advised" in decided["flags"]
    assert decided["statistics"]["sides"] == "different-sessions"
    assert decided["statistics"]["drift_sigma"] == 0.02
    # round 2: the same gain with the parent measured beside it in its session: KEEP on it
    parent = campaign.round_doc([])["parent_kernel_sha256"]
    campaign.rounds_written = 1
    body, decided = _record(
        cli,
        campaign,
        measurements=_rows(campaign, 0.95, 50, 21),
        reference={"kernel_sha256": parent, "measurements": _rows(campaign, 1.0, 50, 31)},
        session={"id": "s-round-2", "device": "GPU-1"},
    )
    assert body["decision"] == "KEEP"
    assert decided["statistics"]["sides"] == "reference"
    assert abs(decided["relative_improvement"] - 0.05) < 0.01
    verified = cli("verify", "--json")
    assert verified.exit_code == 0, verified.stdout
    # show names the round's session and gives the reference beside the candidate
    shown = cli("show", "--run", campaign.run_id, "--round", "2", "--json").json()
    assert shown["measurements"]["role"] == "candidate"
    session = shown["measurements"]["session"]
    assert (session["id"], session["device"]) == ("s-round-2", "GPU-1")
    assert shown["reference"]["role"] == "reference"
    assert shown["reference"]["kernel_sha256"] == parent
    text = cli("show", "--run", campaign.run_id, "--round", "2").stdout
    assert "  session:    s-round-2 (device GPU-1)\n" in text
    assert "the parent kernel, measured beside the candidate in its session" in text
    assert "reference µs" in text
    assert "(no drift widened it: both sides were measured in one session)" in text
    assert "reference" not in cli("show", "--run", campaign.run_id, "--round", "1", "--json").json()
    # round 1's sides came from different sessions and the run has no A/A pairs: it says
    # the assumed drift widened it, not that nothing did
    text = cli("show", "--run", campaign.run_id, "--round", "1").stdout
    assert (
        "(the sides come from different sessions: the assumed drift sigma 2.00% widened it; "
        "0 A/A pairs usable, 5 needed to estimate it)"
    ) in text
    # history finds a round by the session its candidate was measured in
    found = cli("history", "--session", "s-round-2", "--json").json()
    assert [(r["run_id"], r["round"], r["session_id"]) for r in found["rounds"]] == [
        (campaign.run_id, 2, "s-round-2")
    ]
    assert cli("history", "--session", "s-other", "--json").json()["count"] == 0
    # compare says its medians come from two sessions and which round a reference decided
    compared = cli("compare", "--run", campaign.run_id, "--round", "1", "--round", "2")
    assert compared.exit_code == 0
    assert compared.stdout.endswith(
        "note: these are the medians each round recorded, in two sessions (s-round-1, "
        "s-round-2); no drift between them is accounted for\n"
        f"note: round 2 was decided against its parent measured in its own session "
        f"(kernel-ledger show --run {campaign.run_id} --round 2)\n"
    )
    body = cli("compare", "--run", campaign.run_id, "--round", "1", "--round", "2", "--json")
    assert body.json()["sessions"] == ["s-round-1", "s-round-2"]
    assert body.json()["decided_on_reference"] == [2]
    assert [f"note: {n}\n" for n in body.json()["notes"]] == compared.stdout.splitlines(True)[-2:]
    listed = cli("history", "--run", campaign.run_id).stdout
    assert "session" in listed.splitlines()[0] and "s-round-1" in listed


def test_a_reference_of_another_kernel_is_refused(cli, campaign):
    _plan(cli, campaign)
    doc = campaign.round_doc([])
    doc["measurements"] = _rows(campaign, 0.9, 20, 3)
    doc["reference"] = {"kernel_sha256": "0" * 64, "measurements": _rows(campaign, 1.0, 20, 4)}
    path = write_json(campaign.root / "rounds" / "round-1.json", doc)
    before = cli.event_count()
    result = cli("record", "--run", campaign.run_id, "--result", path)
    assert result.exit_code == 2
    assert "reference.kernel_sha256 0000" in result.stderr
    assert "is not the round's parent_kernel_sha256" in result.stderr
    assert cli.event_count() == before


def test_sequential_rounds_store_their_look_and_replay(cli, campaign):
    _plan(cli, campaign, sequential=SEQUENTIAL)
    parent = campaign.round_doc([])["parent_kernel_sha256"]
    body, decided = _record(
        cli,
        campaign,
        measurements=_rows(campaign, 0.85, 100, 41),
        reference={"kernel_sha256": parent, "measurements": _rows(campaign, 1.0, 100, 51)},
        session={"id": "s-1"},
    )
    stats = decided["statistics"]
    assert body["decision"] == "KEEP"
    assert (stats["settled"], stats["repeats_used"]) == (True, 10)
    assert stats["sequential"] == {**SEQUENTIAL, "unpaired_best": "first-n"}
    assert stats["looks"][0]["settled_by"] == "keep"
    verified = cli("verify", "--json")
    assert verified.exit_code == 0, verified.stdout
    # the report shows the repeats used and the device time the look spared: 100 measured of
    # 100, so nothing was spared here
    html = campaign.root / "report.html"
    assert cli("report", "--run", campaign.run_id, "--html", html).exit_code == 0
    text = html.read_text()
    assert "repeats used 10 of 100, device time saved 0.0 ms" in text
    assert "Sequential decisions: device time saved 0.0 ms over the run" in text


def test_a_round_measured_only_to_its_settled_look_shows_the_time_it_saved(cli, campaign):
    _plan(cli, campaign, sequential=SEQUENTIAL)
    parent = campaign.round_doc([])["parent_kernel_sha256"]
    _record(
        cli,
        campaign,
        measurements=_rows(campaign, 0.85, 10, 41),
        reference={"kernel_sha256": parent, "measurements": _rows(campaign, 1.0, 10, 51)},
        session={"id": "s-1"},
    )
    html = campaign.root / "report.html"
    assert cli("report", "--run", campaign.run_id, "--html", html).exit_code == 0
    # 90 samples per case not measured, each costing the candidate's and the reference's time
    medians = sum(campaign.baseline) * 0.85 + sum(campaign.baseline)
    expected = 90 * medians / 1000.0
    found = re.search(r"repeats used 10 of 100, device time saved ([0-9.]+) ms", html.read_text())
    assert found is not None and abs(float(found.group(1)) - expected) < 0.01 * expected


def test_assess_answers_the_next_look_and_writes_nothing(cli, campaign):
    _plan(cli, campaign, sequential=SEQUENTIAL)
    doc = campaign.round_doc([])
    parent = doc["parent_kernel_sha256"]
    # a 2.5% gain at 1% CV from 15 interleaved samples per case: one look, not yet settled
    candidate, reference = _rows(campaign, 0.975, 100, 61), _rows(campaign, 1.0, 100, 71)

    def first(rows, n):
        return [{**r, "samples_us": r["samples_us"][:n]} for r in rows]

    doc["reference"] = {"kernel_sha256": parent, "measurements": first(reference, 15)}
    doc["measurements"] = first(candidate, 15)
    doc["session"] = {"id": "s-9"}
    path = write_json(campaign.root / "rounds" / "round-1.json", doc)
    before = cli.event_count()
    result = cli("assess", "--run", campaign.run_id, "--result", path, "--json")
    assert result.exit_code == 0, result.stderr
    body = result.json()
    assert body["status"] == "ok" and body["sides"] == "reference"
    assert cli.event_count() == before
    if not body["settled"]:
        assert (body["repeats_used"], body["more_repeats"]) == (10, 10)
        assert body["decision"] != "KEEP"
    # all 100 samples: record stores the decision assess gives for them, at the same look
    doc["reference"]["measurements"], doc["measurements"] = reference, candidate
    write_json(path, doc)
    assessed = cli("assess", "--run", campaign.run_id, "--result", path, "--json").json()
    assert cli.event_count() == before
    recorded = cli("record", "--run", campaign.run_id, "--result", path, "--json").json()
    shown = cli("show", "--run", campaign.run_id, "--round", 1, "--json").json()["decision"]
    assert recorded["decision"] == assessed["decision"]
    assert shown["statistics"]["repeats_used"] == assessed["repeats_used"]
    human = cli("assess", "--run", campaign.run_id, "--result", path)
    assert human.exit_code == 2  # round 1 is recorded now: assess says what record would


def test_a_sequential_round_replays_under_the_rule_it_was_recorded_by(cli, tmp_path, monkeypatch):
    """tests/fixtures/ledgers/0008-sequential-all.sqlite3 was recorded by the code before
    `unpaired_best`: its round 1, an A/A pair whose sessions' first ten samples run 3% faster
    (self-made timings), has no reference, and its first look took the baseline's samples
    whole: KEEP at I = +2.93%. It verifies under that rule; the same inputs recorded now
    compare the first ten of both sides and are not kept."""
    import shutil
    from pathlib import Path

    from conftest import CliRunner

    root = Path(__file__).resolve().parents[2]
    fixture = root / "tests" / "fixtures" / "ledgers" / "0008-sequential-all"
    monkeypatch.chdir(root)
    old = tmp_path / "old.sqlite3"
    shutil.copyfile(fixture.with_suffix(".sqlite3"), old)
    before = CliRunner(f"sqlite:///{old}")
    assert before("db", "upgrade").exit_code == 0
    assert before("verify").exit_code == 0
    recorded = before("show", "--run", "softmax-demo-001", "--round", "1", "--json").json()
    assert recorded["decision"]["decision"] == "KEEP"
    assert "unpaired_best" not in recorded["decision"]["statistics"]["sequential"]

    assert cli("plan", "--config", fixture / "config.json").exit_code == 0
    now = cli("record", "--run", "softmax-demo-001", "--result", fixture / "round-1.json", "--json")
    assert now.exit_code == 0, now.stderr
    assert now.json()["decision"] != "KEEP"
    shown = cli("show", "--run", "softmax-demo-001", "--round", "1", "--json").json()
    assert shown["decision"]["statistics"]["sequential"]["unpaired_best"] == "first-n"
    assert cli("verify").exit_code == 0


def _median_gain(weights, before, after) -> float:
    total = sum(weights)
    return sum(w / total * (b - a) / b for w, b, a in zip(weights, before, after, strict=True))


def _medians(rows: list[dict]) -> list[float]:
    return [float(np.median(r["samples_us"])) for r in rows]


def test_cumulative_improvement_chains_the_same_session_ratios_of_kept_rounds(
    cli, campaign, tmp_path
):
    """Round 1 is measured in a session where the parent runs 5% slower than in the
    baseline's: against the baseline the candidate's medians gain 8%, against the parent
    measured beside it 12.4%. The cumulative improvement chains the same-session ratio (the
    10% target is met, and the run passes); the plain comparison is shown beside it, marked
    as sides of different sessions. Round 2 chains on."""
    _plan(cli, campaign)  # baseline measured in session s-plan on GPU-0
    weights = [w for _, w in campaign.cases]
    parent = campaign.round_doc([])["parent_kernel_sha256"]
    reference = _rows(campaign, 1.05, 50, 51)
    body, decided = _record(
        cli,
        campaign,
        measurements=_rows(campaign, 0.92, 50, 41),
        reference={"kernel_sha256": parent, "measurements": reference},
        session={"id": "s-1", "device": "GPU-1"},
    )
    assert (body["decision"], decided["statistics"]["sides"]) == ("KEEP", "reference")
    assert decided["contract"] == 2
    cases = cli("status", "--run", campaign.run_id, "--json").json()["cases"]
    baseline = [c["baseline_median_us"] for c in cases]
    candidate = decided["candidate_medians_us"]
    # each case's chain factor is best / reference, the best being the baseline here
    factors = [b / r for b, r in zip(baseline, _medians(reference), strict=True)]
    assert decided["chain_factors"] == factors
    chained = [c * f for c, f in zip(candidate, factors, strict=True)]
    assert decided["cumulative_improvement"] == _median_gain(weights, baseline, chained)
    assert abs(decided["cumulative_improvement"] - decided["relative_improvement"]) < 1e-12
    assert decided["baseline_improvement"] == _median_gain(weights, baseline, candidate)
    assert 0.07 < decided["baseline_improvement"] < 0.09
    assert decided["cumulative_improvement"] > 0.10  # the target: met on the chain alone
    assert decided["baseline_across_sessions"] is True and decided["target_met"] is True

    status = cli("status", "--run", campaign.run_id, "--json").json()
    assert status["run"]["cumulative_improvement"] == decided["cumulative_improvement"]
    assert status["baseline_comparison"] == {
        "improvement": decided["baseline_improvement"],
        "across_sessions": True,
    }
    text = cli("status", "--run", campaign.run_id).stdout
    assert "chained over the kept rounds' same-session references" in text
    assert "sides from different sessions" in text

    # round 2: 4% faster than round 1's kernel measured beside it, in another session
    parent = campaign.round_doc([])["parent_kernel_sha256"]
    reference = _rows(campaign, 0.90, 50, 71)
    body, second = _record(
        cli,
        campaign,
        measurements=_rows(campaign, 0.90 * 0.96, 50, 61),
        reference={"kernel_sha256": parent, "measurements": reference},
        session={"id": "s-2", "device": "GPU-1"},
    )
    assert body["decision"] == "KEEP"
    best = second["best_before"]["medians_us"]
    assert best == candidate
    assert second["chain_factors"] == [
        f * b / r for f, b, r in zip(factors, best, _medians(reference), strict=True)
    ]
    chained = [c * f for c, f in zip(second["candidate_medians_us"], second["chain_factors"],
                                     strict=True)]  # fmt: skip
    assert second["cumulative_improvement"] == _median_gain(weights, baseline, chained)

    html = tmp_path / "report.html"
    assert cli("report", "--run", campaign.run_id, "--html", html).exit_code == 0
    assert "medians against the original baseline" in html.read_text()
    analyzed = cli("analyze", "--run", campaign.run_id, "--output-dir", tmp_path / "out", "--json")
    assert analyzed.json()["status"] == "passed"
    verified = cli("verify", "--json")
    assert verified.exit_code == 0, verified.stdout


def test_a_reference_keep_recorded_under_contract_1_replays_unchained(cli, tmp_path, monkeypatch):
    """tests/fixtures/ledgers/0008-reference-keep.sqlite3 was recorded under contract 1: its
    KEEP on a same-session reference left the cumulative improvement at the best kernel's
    medians against the original baseline (+8.0%, the 10% target not met) and the run
    concluded inconclusive. It verifies as recorded; the same inputs recorded now chain the
    reference's ratio (+12.4%) and meet the target."""
    import shutil
    from pathlib import Path

    from conftest import CliRunner

    root = Path(__file__).resolve().parents[2]
    fixture = root / "tests" / "fixtures" / "ledgers" / "0008-reference-keep"
    monkeypatch.chdir(root)
    old = tmp_path / "old.sqlite3"
    shutil.copyfile(fixture.with_suffix(".sqlite3"), old)
    before = CliRunner(f"sqlite:///{old}")
    assert before("db", "upgrade").exit_code == 0
    assert before("verify").exit_code == 0
    status = before("status", "--run", "softmax-demo-001", "--json").json()
    assert (status["run"]["conclusion"], status["run"]["target_met"]) == ("inconclusive", False)
    assert 0.079 < status["run"]["cumulative_improvement"] < 0.081
    assert status["baseline_comparison"] is None
    # made before 0010: the upgrade filled the round's session from its stored events
    assert before("db", "upgrade").exit_code == 0
    found = before("history", "--session", "s-1", "--json").json()["rounds"]
    assert [(r["round"], r["session_id"]) for r in found] == [(1, "s-1")]
    assert before("verify").exit_code == 0

    assert cli("plan", "--config", fixture / "config.json").exit_code == 0
    now = cli("record", "--run", "softmax-demo-001", "--result", fixture / "round-1.json", "--json")
    assert now.exit_code == 0, now.stderr
    assert (now.json()["decision"], now.json()["target_met"]) == ("KEEP", True)
    status = cli("status", "--run", "softmax-demo-001", "--json").json()
    assert 0.123 < status["run"]["cumulative_improvement"] < 0.125
    assert status["baseline_comparison"]["across_sessions"] is True
    assert 0.079 < status["baseline_comparison"]["improvement"] < 0.081


def test_decide_says_its_seed_is_not_records_and_assess_reproduces_record(cli, campaign):
    """The same samples through decide and record: decide's bootstrap is seeded from its
    input, record's from the run id and round, so decide says so; assess says what record
    then records, bound for bound."""
    _plan(cli, campaign)
    parent = campaign.round_doc([])["parent_kernel_sha256"]
    candidate = _rows(campaign, 0.97, 50, 41)
    reference = _rows(campaign, 1.0, 50, 51)
    doc = campaign.round_doc([])
    doc.update(
        measurements=candidate, reference={"kernel_sha256": parent, "measurements": reference}
    )
    path = write_json(campaign.root / "rounds" / "round-1.json", doc)
    assessed = cli("assess", "--run", campaign.run_id, "--result", path, "--json")
    assert assessed.exit_code == 0, assessed.stderr
    recorded = cli("record", "--run", campaign.run_id, "--result", path, "--json")
    assert recorded.exit_code == 0, recorded.stderr
    assert assessed.json()["why"] == recorded.json()["why"]
    assert "bootstrap" in recorded.json()["why"]["sentence"]
    one = {
        "objective": OBJECTIVE,
        "cases": [{"id": c, "weight": w} for c, w in campaign.cases],
        "best": _rows(campaign, 1.0, 50, 1),
        "reference": reference,
        "candidate": candidate,
    }
    decided = cli("decide", "--input", write_json(campaign.root / "one.json", one), "--json")
    assert decided.exit_code == 0, decided.stderr
    note = (
        "decide seeds its bootstrap from its whole input, record from the run id, round, "
        "weights and samples, so bootstrap bounds can differ slightly from record's for the "
        "same samples; `kernel-ledger assess` reproduces record exactly"
    )
    assert decided.json()["note"] == note
    text = cli("decide", "--input", campaign.root / "one.json").stdout
    assert text.splitlines()[-1] == f"  note: {note}"
    assert "`assess` reproduces record exactly" in cli("decide", "--help").stdout
