"""check-merge (the pre-merge gate), checkout, and verify's evidence-file check."""

from __future__ import annotations

import sqlite3

import audit_kit
import pytest
from audit_kit import copy_ledger, read_events

from campaign import Campaign
from conftest import CliRunner

built = audit_kit.built


def _run(cli, root, plan, *, conclude=True) -> Campaign:
    campaign = Campaign(root)
    assert cli("plan", "--config", campaign.config()).exit_code == 0
    for medians in plan:
        status = "failed" if medians is None else "passed"
        path = campaign.round(medians, status=status)
        result = cli("record", "--run", campaign.run_id, "--result", path, "--json")
        assert result.exit_code == 0, result.stderr
        campaign.accepted(result.json()["decision"], result.json()["round"])
    if conclude:
        assert cli("analyze", "--run", campaign.run_id, "--output-dir", root / "out").exit_code == 0
    return campaign


PASSING = ([16.0, 37.0, 23.0], [15.0, 37.0, 26.0], [14.0, 33.0, 21.0])  # KEEP, DISCARD, KEEP


def test_the_gate_passes_the_best_kernel_of_a_passed_run(cli, tmp_path):
    campaign = _run(cli, tmp_path / "c", PASSING)
    pinned = cli("checkpoint", "--json").json()["note"]
    result = cli(
        "check-merge", "--run", campaign.run_id, "--kernel", campaign.best_kernel,
        "--checkpoint", pinned, "--strict-artifacts", "--json",
    )  # fmt: skip
    assert result.exit_code == 0, result.stdout + result.stderr
    body = result.json()
    assert body["status"] == "ok" and body["reasons"] == [] and body["notes"] == []
    assert body["checks"] == {
        "concluded": "ok",
        "kernel": "ok",
        "verify": "ok",
        "checkpoint": "ok",
        "artifacts": "ok",
    }
    assert body["conclusion"] == "passed" and body["best_round"] == 3
    assert body["verification"]["status"] == "ok" and body["artifacts"]["checked"] > 10
    markdown = cli(
        "check-merge", "--run", campaign.run_id, "--kernel", campaign.best_kernel, "--markdown"
    )
    assert markdown.exit_code == 0
    assert markdown.stdout.startswith("### kernel-ledger check-merge: ✅ passed")
    assert "| run concluded `passed` | ✅ ok |" in markdown.stdout
    assert "| pinned checkpoint holds | not given | none given |" in markdown.stdout


def test_the_gate_fails_with_sentences(cli, tmp_path):
    campaign = _run(cli, tmp_path / "c", PASSING[:2], conclude=False)
    discarded = campaign.root / "kernels" / "r2.py"
    result = cli("check-merge", "--run", campaign.run_id, "--kernel", discarded, "--json")
    assert result.exit_code == 1
    body = result.json()
    assert body["status"] == "failed"
    assert body["checks"]["concluded"] == "failed" and body["checks"]["kernel"] == "failed"
    assert body["checks"]["verify"] == "ok"
    assert body["reasons"][0] == (
        f"Run {campaign.run_id} has not concluded; conclude it with kernel-ledger analyze "
        f"--run {campaign.run_id} once its rounds are done."
    )
    assert "it is the candidate of round 2, decided DISCARD" in body["reasons"][1]
    assert all(reason.endswith(".") for reason in body["reasons"])
    assert result.error.startswith(f"check-merge failed: Run {campaign.run_id} has not")
    assert result.error.endswith("(and 1 more)") and result.stderr == ""
    markdown = cli("check-merge", "--run", campaign.run_id, "--kernel", discarded, "--markdown")
    assert markdown.exit_code == 1
    assert "❌ failed" in markdown.stdout and "**Why it failed**" in markdown.stdout


def test_a_failed_run_does_not_pass_the_gate(cli, tmp_path):
    campaign = _run(cli, tmp_path / "c", [[18.0, 39.9, 24.9], None, None, None])
    result = cli(
        "check-merge", "--run", campaign.run_id, "--kernel", campaign.best_kernel, "--json"
    )
    assert result.exit_code == 1
    assert result.json()["reasons"] == [
        f"Run {campaign.run_id} concluded failed, not passed: its cumulative improvement "
        "+0.00% did not reach the target +10.00% (objective.target_relative_improvement), so "
        "no kernel of it may be merged. A concluded run takes no more rounds: to go on, plan a "
        f"new run from its best kernel (kernel-ledger checkout --run {campaign.run_id} --out "
        f'FILE) with parent_run_id "{campaign.run_id}" in its config and a target it can reach.'
    ]


def test_plan_says_what_the_target_decides_and_a_failed_run_names_the_way_on(cli, tmp_path):
    """plan says check-merge passes only at the target; the template says so beside the
    key; a run that missed it is refused with the way on, which plan then takes."""
    campaign = Campaign(
        tmp_path / "c",
        objective={**Campaign(tmp_path).objective, "target_relative_improvement": 0.5},
    )
    rule = (
        "check-merge will pass only if the cumulative improvement reaches +50.00% "
        "(objective.target_relative_improvement)"
    )
    checked = cli("plan", "--config", campaign.config(), "--dry-run")
    assert checked.stdout.splitlines()[1] == f"  {rule}"
    planned = cli("plan", "--config", campaign.config(), "--json")
    assert planned.exit_code == 0 and planned.json()["merge_rule"] == rule
    template = cli("template", "config").stdout
    assert (
        '    "target_relative_improvement": 0.1,\n'
        '    // "target_relative_improvement": check-merge passes only if the cumulative '
        "improvement reaches this (0.1 is +10%): set what this run must reach, not the "
        "example.\n"
    ) in template
    path = campaign.round([16.0, 36.0, 22.0])  # KEEP, +11%: short of +50%
    assert cli("record", "--run", campaign.run_id, "--result", path).exit_code == 0
    campaign.accepted("KEEP", 1)
    assert cli("analyze", "--run", campaign.run_id, "--output-dir", tmp_path / "out").exit_code == 0
    refused = cli("check-merge", "--run", campaign.run_id, "--kernel", campaign.best_kernel)
    assert refused.exit_code == 1
    assert "did not reach the target +50.00% (objective.target_relative_improvement)" in (
        refused.stdout
    )
    # the way on it names: the best kernel checked out, a new run naming this one as parent
    best = tmp_path / "next" / "kernel.py"
    out = cli("checkout", "--run", campaign.run_id, "--out", best)
    assert out.exit_code == 0, out.stderr
    follow = Campaign(tmp_path / "next", run_id="softmax-t-002", parent_run_id=campaign.run_id,
                      best_kernel=best, baseline=[16.0, 36.0, 22.0])  # fmt: skip
    assert cli("plan", "--config", follow.config()).exit_code == 0


def test_changed_evidence_is_a_note_unless_strict(cli, tmp_path):
    campaign = _run(cli, tmp_path / "c", PASSING)
    round_one = campaign.root / "kernels" / "r1.py"
    round_one.write_text("# overwritten by a later edit\n")
    (campaign.root / "validation" / "round-2" / "case-matrix.json").unlink()
    args = ("check-merge", "--run", campaign.run_id, "--kernel", campaign.best_kernel, "--json")
    lenient = cli(*args)
    assert lenient.exit_code == 0, lenient.stdout
    body = lenient.json()
    assert body["checks"]["artifacts"] == "changed"
    assert len(body["notes"]) == 2
    changed = next(n for n in body["notes"] if "r1.py" in n)
    assert "changed since it was recorded" in changed
    assert "its content is stored in the ledger (kernel-ledger checkout)" in changed
    assert any("case-matrix.json" in n and "no longer exists" in n for n in body["notes"])
    strict = cli(*args, "--strict-artifacts")
    assert strict.exit_code == 1
    assert strict.json()["checks"]["artifacts"] == "failed"
    assert len(strict.json()["reasons"]) == 2
    verified = cli("verify", "--artifacts", "--json")  # reported apart from the chain
    assert verified.exit_code == 1
    report = verified.json()
    assert report["first_failure"] is None and set(report["checks"].values()) == {"ok"}
    assert report["artifacts"]["status"] == "failed"
    assert {i["field"] for i in report["artifacts"]["changed"]} == {"candidate"}
    assert {i["field"] for i in report["artifacts"]["missing"]} == {"case_matrix"}
    assert "2 evidence files changed or vanished" in verified.error
    assert cli("verify", "--json").exit_code == 0  # without --artifacts, files are not read


def test_a_tampered_ledger_or_a_rewritten_history_fails_the_gate(built, tmp_path):
    path = tmp_path / "copy.sqlite3"
    url = copy_ledger(built.path, path)
    cli = CliRunner(url)
    run = built.runs["softmax-a-001"]
    pinned = cli("checkpoint", "--json").json()["note"]
    args = ("check-merge", "--run", run.run_id, "--kernel", run.best_kernel)
    assert cli(*args, "--checkpoint", pinned).exit_code == 0
    events = read_events(path)
    audit_kit.consistent_rewrite(path, 5, lambda e: {"event_id": "rewritten"})
    rewritten = cli(*args, "--checkpoint", pinned, "--json")
    assert rewritten.exit_code == 1
    body = rewritten.json()
    assert body["checks"]["verify"] == "ok" and body["checks"]["checkpoint"] == "failed"
    assert body["reasons"][0].startswith("The pinned checkpoint (size 41) does not hold")
    victim = next(e for e in events if e.stream_id == run.run_id and e.stream_version == 9)
    with sqlite3.connect(path) as conn:
        conn.execute("UPDATE events SET recorded_at = 'x' WHERE seq = ?", (victim.seq,))
    tampered = cli(*args, "--json")
    assert tampered.exit_code == 1
    assert tampered.json()["checks"]["verify"] == "failed"
    assert tampered.json()["reasons"][0].startswith(
        f"The history of run {run.run_id} does not verify at seq {victim.seq} (hash)"
    )


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--run", "no-such-run", "--kernel", "KERNEL"), "run 'no-such-run' is not in the ledger"),
        (
            ("--run", "RUN", "--kernel", "/no/such/kernel.py"),
            "--kernel /no/such/kernel.py does not exist",
        ),
        (
            ("--run", "RUN", "--kernel", "KERNEL", "--checkpoint", "x\n1\n"),
            "checkpoint needs 3 lines",
        ),
    ],
)
def test_the_gate_rejects_bad_input(cli, tmp_path, args, message):
    campaign = _run(cli, tmp_path / "c", PASSING[:1], conclude=False)
    args = [
        str(campaign.best_kernel) if a == "KERNEL" else campaign.run_id if a == "RUN" else a
        for a in args
    ]
    result = cli("check-merge", *args, "--json")
    assert result.exit_code == 2
    assert message in result.json()["error"]


# --- checkout -------------------------------------------------------------------------------


def test_checkout_restores_bytes_even_after_the_file_changed(cli, tmp_path):
    campaign = _run(cli, tmp_path / "c", PASSING, conclude=False)
    best = campaign.best_kernel
    original = best.read_bytes()
    best.write_text("# someone edited the best kernel in place\n")
    out = tmp_path / "restored" / "softmax.py"
    result = cli("checkout", "--run", campaign.run_id, "--out", out, "--json")
    assert result.exit_code == 0, result.stderr
    body = result.json()
    assert out.read_bytes() == original
    assert body["round"] == 3 and body["recorded_path"] == str(best)
    assert body["bytes"] == len(original)
    start = cli("checkout", "--run", campaign.run_id, "--round", "0")
    assert start.exit_code == 0
    assert start.stdout == (campaign.root / "kernels" / "v0.py").read_text()
    second = cli("checkout", "--run", campaign.run_id, "--round", "2", "--out", tmp_path / "r2.py")
    assert second.exit_code == 0
    assert (tmp_path / "r2.py").read_bytes() == (campaign.root / "kernels" / "r2.py").read_bytes()
    clash = cli("checkout", "--run", campaign.run_id, "--out", tmp_path / "r2.py")
    assert clash.exit_code == 2 and "pass --force" in clash.stderr
    forced = cli("checkout", "--run", campaign.run_id, "--out", tmp_path / "r2.py", "--force")
    assert forced.exit_code == 0 and (tmp_path / "r2.py").read_bytes() == original


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (("--round", "9", "--out", "x.py"), "has no round 9"),
        (("--round", "-1", "--out", "x.py"), "'--round': -1 is not in the range x>=0"),
        (("--json",), "name the kernel file with --out"),
    ],
)
def test_checkout_rejects_bad_input(cli, tmp_path, args, message):
    campaign = _run(cli, tmp_path / "c", PASSING[:1], conclude=False)
    result = cli("checkout", "--run", campaign.run_id, *args)
    assert result.exit_code == 2
    assert message in result.error
    unknown = cli("checkout", "--run", "nope", "--out", tmp_path / "y.py")
    assert unknown.exit_code == 2 and not (tmp_path / "y.py").exists()
