"""`--dry-run` on every write: record, noise, profile and diagnose check their input against
the run and say what would be decided or recorded, and write nothing (same events, same
files); the real command then answers the same. On SQLite and PostgreSQL."""

from __future__ import annotations

import os
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "examples" / "softmax-demo"
RUN = "softmax-demo-001"
PROFILE = ROOT / "tests" / "fixtures" / "profiles" / "msprof-op" / "single"


def files_under(folder: Path) -> dict[str, int]:
    """Every file but the SQLite ledger's own (its rows are counted instead: opening it may
    checkpoint its WAL into the main file, which moves bytes and changes nothing)."""
    return {
        str(Path(root) / name): os.stat(Path(root) / name).st_size
        for root, _, names in os.walk(folder)
        for name in names
        if not name.startswith("ledger.sqlite3")
    }


def rows_in(db_url: str) -> dict[str, int]:
    """The row count of every table of the ledger: a dry run adds no event, blob or row."""
    from sqlalchemy import create_engine, inspect, text

    engine = create_engine(db_url)
    try:
        with engine.connect() as conn:
            return {
                t: conn.execute(text(f'SELECT count(*) FROM "{t}"')).scalar_one()
                for t in inspect(conn).get_table_names()
            }
    finally:
        engine.dispose()


def same_answer(checked: dict, done: dict) -> None:
    assert checked.pop("status") == "checked" and done.pop("status") == "recorded"
    assert checked == done


def test_each_write_dry_runs_then_runs_the_same(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(ROOT)
    assert cli("plan", "--config", DEMO / "config.json").exit_code == 0
    calls = [
        ["record", "--run", RUN, "--result", DEMO / "rounds" / "round-1.json"],
        ["profile", PROFILE, "--run", RUN, "--baseline"],
    ]
    for n in range(2, 6):
        calls.append(["record", "--run", RUN, "--result", DEMO / "rounds" / f"round-{n}.json"])
    calls += [
        ["noise", "--run", RUN, "--measurements", DEMO / "remeasures" / "aa-1.json"],
        ["diagnose", "--run", RUN, "--bottleneck", "memory-transfer", "--evidence", "MTE2 0.57"],
    ]
    for argv in calls:
        before, disk, rows = cli.event_count(), files_under(tmp_path), rows_in(cli.db_url)
        checked = cli(*argv, "--dry-run", "--json")
        assert checked.exit_code == 0, (argv, checked.stderr)
        assert cli.event_count() == before, argv
        assert files_under(tmp_path) == disk, argv
        assert rows_in(cli.db_url) == rows, argv
        done = cli(*argv, "--json")
        assert done.exit_code == 0, (argv, done.stderr)
        assert cli.event_count() > before, argv
        same_answer(checked.json(), done.json())
    assert cli("verify").exit_code == 0


def test_dry_run_text_says_nothing_was_written(cli, monkeypatch):
    monkeypatch.chdir(ROOT)
    assert cli("plan", "--config", DEMO / "config.json").exit_code == 0
    result = cli("record", "--run", RUN, "--result", DEMO / "rounds" / "round-1.json", "--dry-run")
    assert result.exit_code == 0, result.stderr
    assert result.stdout == (
        "checked (nothing written): round 1 would be decided as follows\n"
        "round 1: KEEP  I +8.27%  R -3.47%  cumulative +8.27%  target not met  7 rounds left\n"
        "  why: KEEP: I = +8.27% is at least the minimum 1.00% and above the noise floor 0.50%, "
        "and worst case R = -3.47% on bf16-64x8193 is within its limit 2.00% (medians only: no "
        "raw samples to test it against noise); the candidate became the best kernel.\n"
        "  mechanism rows-per-program (named by its mechanism); no profile of the candidate "
        "read; no expected_signal\n"
    )
    diag = cli(
        "diagnose", "--run", RUN, "--bottleneck", "latency-bound", "--evidence", "x", "--dry-run"
    )
    assert diag.exit_code == 0, diag.stderr
    assert diag.stdout.startswith("checked (nothing written): run softmax-demo-001: bottleneck")


def test_a_dry_run_refuses_what_the_write_refuses(cli, monkeypatch):
    monkeypatch.chdir(ROOT)
    assert cli("plan", "--config", DEMO / "config.json").exit_code == 0
    stale = DEMO / "rounds" / "round-2-stale-parent.json"
    both = [cli("record", "--run", RUN, "--result", stale, *extra) for extra in ([], ["--dry-run"])]
    assert both[0].exit_code == both[1].exit_code == 2
    assert both[0].stderr == both[1].stderr
    aa = DEMO / "remeasures" / "aa-1.json"  # of the round-5 kernel, not the current best
    noise = cli("noise", "--run", RUN, "--measurements", aa, "--dry-run")
    assert noise.exit_code == 2 and "not the current best kernel" in noise.stderr
