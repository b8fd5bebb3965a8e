"""Hostile and broken input files: exit 2, one line, nothing written, never a traceback."""

from __future__ import annotations

import pytest

BAD_FILES = [
    (b"{", "is not valid JSON"),
    (b"[1, 2]", "must hold a JSON object, not a array"),
    (b"", "is empty"),
    (b"   \n", "is empty"),
    (b'{"schema_version": NaN}', "NaN is not a number JSON allows"),
    (b'{"schema_version": Infinity}', "Infinity is not a number JSON allows"),
    (b'{"schema_version": 1e400}', "number is not finite"),
    (b'{"schema_version": 123456789012345678901234567890}', "is beyond ±(2^53-1)"),
    (b'{"a": 1, "a": 2}', "duplicate key 'a'"),
    (b"\xff\xfe{}", "is not UTF-8 text"),
    (b"[" * 5000 + b"]" * 5000, "nested deeper than 64 levels"),
    (b'{"a":' * 100 + b"1" + b"}" * 100, "nested deeper than 64 levels"),
    (b'"just a string"', "must hold a JSON object, not a str"),
]


@pytest.mark.parametrize(("content", "fragment"), BAD_FILES)
@pytest.mark.parametrize("command", ["plan", "record"])
def test_broken_files(cli, tmp_path, content, fragment, command):
    path = tmp_path / "input.json"
    path.write_bytes(content)
    if command == "plan":
        result = cli("plan", "--config", path)
    else:
        result = cli("record", "--run", "any", "--result", path)
    assert result.exit_code == 2, result.stderr
    assert result.stderr.startswith("Error: ") and result.stderr.count("\n") == 1
    assert fragment in result.stderr
    assert "Traceback" not in result.stderr
    assert cli.event_count() == 0


def test_missing_and_directory_paths(cli, tmp_path):
    missing = cli("plan", "--config", tmp_path / "nope.json")
    assert (missing.exit_code, missing.stderr) == (
        2,
        f"Error: config file {tmp_path / 'nope.json'} does not exist\n",
    )
    directory = cli("plan", "--config", tmp_path)
    assert directory.exit_code == 2 and "is a directory, not a file" in directory.stderr


def test_oversized_file(cli, tmp_path, monkeypatch):
    monkeypatch.setenv("KERNEL_LEDGER_MAX_INPUT_BYTES", "100")
    path = tmp_path / "big.json"
    path.write_text('{"pad": "' + "x" * 200 + '"}')
    result = cli("plan", "--config", path)
    assert result.exit_code == 2 and "over the 100-byte limit" in result.stderr


def test_path_with_newline_is_shown_on_one_line(cli, tmp_path):
    result = cli("plan", "--config", tmp_path / "a\nb.json")
    assert result.exit_code == 2 and result.stderr.count("\n") == 1


def test_usage_errors_exit_2(cli):
    assert cli("record", "--run", "x").exit_code == 2
    assert cli("plan", "--nope").exit_code == 2
    result = cli("history", "--decision", "MAYBE")
    assert result.exit_code == 2 and "--decision must be one of" in result.stderr
    result = cli("history", "--limit", "0", "--json")
    assert result.exit_code == 2 and result.json()["exit_code"] == 2
    result = cli("history", "--since", "yesterday")
    assert result.exit_code == 2 and "--since must be a date" in result.stderr


def test_bad_database_url(cli, tmp_path):
    result = cli("--db", "mysql://x/y", "status", db=False)
    assert result.exit_code == 2 and "sqlite:// or postgresql+psycopg://" in result.stderr
    result = cli("--db", "not a url", "status", db=False)
    assert result.exit_code == 2


def test_garbage_database_file_exits_4(cli, tmp_path):
    db = tmp_path / "garbage.sqlite3"
    db.write_bytes(b"this is not a database" * 100)
    result = cli("--db", f"sqlite:///{db}", "status", db=False)
    assert result.exit_code == 4 and result.stderr.startswith("Error: ")
    assert "Traceback" not in result.stderr
