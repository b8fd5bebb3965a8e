"""Hostile input: generated JSON for every input file kind, oversized files, deep nesting,
non-UTF-8 bytes, paths with newlines, symlinks, secret-like environment variables.

The rule for every command: it either accepts the input (exit 0, one JSON object) or
rejects it with exit 2 and one `Error:` line, writing nothing; never a traceback, never an
internal error. Generated examples: a few dozen per kind in `make test`, 10,000 per kind in
`make faults` (KERNEL_LEDGER_FAULTS_EXAMPLES=N overrides both).

A bundle (`import FILE`) is JSON Lines: its generated examples change the list of line
objects and write one JSON line per item (canonical where it can be), so that the checks
past the first line are reached too.
"""

from __future__ import annotations

import copy
import json
import os
import sqlite3
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
import rfc8785
from faultkit import (
    CASES,
    LONG,
    Files,
    cli,
    manifest_doc,
    one_line_error,
    record_figures,
    scale,
    sha256,
    write_json,
)
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

RUN = "hostile-001"
KINDS = ("config", "round", "measurements", "manifest", "case-matrix", "profile", "bundle")
EXAMPLES = int(os.environ.get("KERNEL_LEDGER_FAULTS_EXAMPLES") or scale(40, 10_000))
MiB = 1024 * 1024


# --- the ledger and the files under attack -----------------------------------------------


class Target:
    """A ledger holding one planned run, valid files for every kind, and a way to put a
    hostile file in the place of one of them and run the command that reads it."""

    def __init__(self, root: Path) -> None:
        self.root = root
        self.db = root / "ledger.sqlite3"
        self.url = f"sqlite:///{self.db}"
        self.files = Files(root / "files")
        assert cli("plan", "--config", self.files.config(RUN, root), db=self.url).code == 0
        self.template = self.db.read_bytes()
        self.candidate = self.files.passed[0][0]
        folder = root / "hostile-validation"
        self.manifest_path = folder / "manifest.json"
        self.matrix_path = folder / "case-matrix.json"
        self.base = {
            "config": self.files.config_doc("hostile-002"),
            "round": self.round_doc(),
            "measurements": self.round_doc()["measurements"],
            "manifest": manifest_doc("hostile-check", self.candidate, "passed"),
            "case-matrix": {
                "kernel": {"sha256": sha256(self.candidate)},
                "cases": [{"id": c} for c, _ in CASES],
            },
            "profile": {"aiv_scalar_ratio": 0.12, "aiv_vec_ratio": 0.54, "aiv_mte2_ratio": 0.3},
        }
        self.reset()

    def doc(self, kind: str) -> Any:
        """The valid document of a kind (a bundle is made on first use: it takes a while)."""
        if kind == "bundle" and kind not in self.base:
            self.base[kind] = self._bundle()
            self.reset()
        return self.base[kind]

    def _bundle(self) -> list[Any]:
        """The lines of a bundle of a run from another ledger (round 1 recorded)."""
        source = f"sqlite:///{self.root / 'source.sqlite3'}"
        config = self.files.config("bundle-src", self.root)
        assert cli("plan", "--config", config, db=source).code == 0
        write_json(self.manifest_path, manifest_doc("hostile-check", self.candidate, "passed"))
        write_json(
            self.matrix_path,
            {"kernel": {"sha256": sha256(self.candidate)}, "cases": [{"id": c} for c, _ in CASES]},
        )
        round_1 = write_json(self.root / "source-round-1.json", self.round_doc())
        assert cli("record", "--run", "bundle-src", "--result", round_1, db=source).code == 0
        path = self.root / "base.bundle.jsonl"
        assert cli("export", "--run", "bundle-src", "--out", path, db=source).code == 0
        return [json.loads(line) for line in path.read_bytes().splitlines()]

    def round_doc(self) -> dict[str, Any]:
        doc = self.files.round_doc(1, self.files.kernel_sha, candidate=0)
        doc["verification"] = {"manifest": str(self.manifest_path)}
        return doc

    def reset(self) -> None:
        """Back to the planned run, and valid files everywhere."""
        for leftover in (Path(f"{self.db}-wal"), Path(f"{self.db}-shm")):
            leftover.unlink(missing_ok=True)
        self.db.write_bytes(self.template)
        write_json(self.manifest_path, self.base["manifest"])
        write_json(self.matrix_path, self.base["case-matrix"])

    def events(self) -> int:
        with sqlite3.connect(self.db) as conn:
            count = conn.execute("SELECT count(*) FROM events").fetchone()[0]
        conn.close()
        return count

    def attack(self, kind: str, data: bytes):
        """Put `data` where a file of `kind` goes and run the command that reads it."""
        if kind == "config":
            path = self.root / "config.json"
            path.write_bytes(data)
            return cli("plan", "--config", path, "--json", db=self.url)
        if kind == "profile":
            path = self.root / "profile.json"
            path.write_bytes(data)
            return cli("profile", "--run", RUN, "--baseline", path, "--json", db=self.url)
        if kind == "bundle":
            path = self.root / "run.bundle.jsonl"
            path.write_bytes(data)
            return cli("import", path, "--json", db=self.url)
        result = self.root / "round.json"
        if kind == "round":
            result.write_bytes(data)
        elif kind == "measurements":  # the round result around hostile measurements
            doc = {**self.round_doc(), "measurements": "@@"}
            head, tail = json.dumps(doc).encode().split(b'"@@"')
            result.write_bytes(head + data + tail)
        else:
            write_json(result, self.round_doc())
            (self.manifest_path if kind == "manifest" else self.matrix_path).write_bytes(data)
        return cli("record", "--run", RUN, "--result", result, "--json", db=self.url)


def check(target: Target, kind: str, data: bytes, tally: Counter) -> None:
    before = target.events()
    result = target.attack(kind, data)
    assert "Traceback" not in result.said, result.stderr
    assert result.code in (0, 2), (result.code, result.stderr, data[:300])
    stdout = json.loads(result.stdout)  # exactly one JSON object, also for errors
    if result.code == 2:
        assert one_line_error(result.stderr, result.stdout), result.stderr
        assert stdout["exit_code"] == 2
        assert target.events() == before, "a rejected input wrote events"
        tally["rejected"] += 1
    else:
        assert result.stderr == ""
        assert target.events() > before
        tally["accepted"] += 1
        target.reset()


# --- generated JSON ----------------------------------------------------------------------

TEXT = st.text(max_size=12) | st.text(
    alphabet=st.characters(categories=["Cs", "Cc", "Zs", "Lu", "Nd", "So"]), max_size=6
)
SCALARS = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    TEXT,
    st.sampled_from(["", " ", "\n", "0" * 64, "../../etc/passwd", "/dev/zero", "passed", "1"]),
    st.sampled_from([[], {}]),
)
JSON_VALUES = st.recursive(
    SCALARS,
    lambda inner: (
        st.lists(inner, min_size=1, max_size=4)
        | st.dictionaries(TEXT, inner, min_size=1, max_size=4)
    ),
    max_leaves=10,
)


def _slots(value: Any, depth: int = 0) -> list[tuple[Any, Any]]:
    """Every (container, key-or-index) in a document, to pick one to mutate."""
    out: list[tuple[Any, Any]] = []
    if isinstance(value, dict):
        for key, item in value.items():
            out.append((value, key))
            out.extend(_slots(item, depth + 1))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            out.append((value, index))
            out.extend(_slots(item, depth + 1))
    return out


@st.composite
def mutated(draw, base: Any) -> Any:
    """The valid document with one to four hostile changes."""
    doc = copy.deepcopy(base)
    for _ in range(draw(st.integers(1, 4))):
        slots = _slots(doc)
        if not slots or draw(st.integers(0, 40)) == 17:
            doc = draw(JSON_VALUES)  # now and then, something else entirely
            continue
        container, key = draw(st.sampled_from(slots))
        action = draw(st.sampled_from(["replace", "delete", "insert", "wrap", "retype"]))
        if action == "replace":
            container[key] = draw(JSON_VALUES)
        elif action == "delete":
            del container[key]
        elif action == "insert" and isinstance(container, dict):
            container[draw(TEXT)] = draw(JSON_VALUES)
        elif action == "insert":
            container.insert(key, draw(JSON_VALUES))
        elif action == "wrap":
            container[key] = [container[key]]
        else:
            value = container[key]
            container[key] = str(value) if not isinstance(value, str) else _number_or(value)
    return doc


def _number_or(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return len(text)


@st.composite
def encoded(draw, value: Any) -> bytes:
    """JSON text for `value` (NaN and Infinity included, as bare tokens), sometimes with
    its bytes damaged."""
    text = json.dumps(value, allow_nan=True, ensure_ascii=draw(st.booleans()))
    return draw(damaged(text.encode("utf-8", "surrogatepass")))


@st.composite
def encoded_lines(draw, value: Any) -> bytes:
    """JSON Lines for a list of values (one line each: canonical when RFC 8785 can encode
    the value, else plain JSON), sometimes with the bytes damaged as in `encoded`."""
    if not isinstance(value, list):
        return draw(encoded(value))
    lines = []
    for item in value:
        try:
            lines.append(rfc8785.dumps(item))
        except (rfc8785.CanonicalizationError, ValueError, TypeError, OverflowError):
            lines.append(json.dumps(item, allow_nan=True).encode("utf-8", "surrogatepass"))
    return draw(damaged(b"".join(line + b"\n" for line in lines)))


@st.composite
def damaged(draw, data: bytes) -> bytes:
    damage = draw(st.integers(0, 16))  # 0-12: none (the simplest), then one of four
    if damage == 13 and len(data) > 1:
        data = data[: draw(st.integers(1, len(data) - 1))]
    elif damage == 14:
        at = draw(st.integers(0, len(data)))
        data = data[:at] + draw(st.binary(min_size=1, max_size=4)) + data[at:]
    elif damage == 15:
        data = b"\xef\xbb\xbf" + data
    elif damage == 16 and data.startswith(b"{") and len(data) > 2:
        data = data[:-1] + b', "schema_version": 1, "schema_version": 1}'  # duplicate keys
    return data


@pytest.mark.parametrize("kind", KINDS)
def test_generated_json(kind: str, tmp_path: Path):
    target = Target(tmp_path)
    tally: Counter = Counter()
    encode = encoded_lines if kind == "bundle" else encoded

    @settings(
        max_examples=EXAMPLES,
        derandomize=not LONG,  # the quick run is the same every time; the long one explores
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
        database=None,
    )
    @given(data=mutated(target.doc(kind)).flatmap(encode))
    def attack(data: bytes) -> None:
        check(target, kind, data, tally)

    attack()
    assert tally["rejected"] > 0
    record_figures(f"hostile[{kind}]", examples=sum(tally.values()), **tally)


# --- the specific cases ------------------------------------------------------------------


@pytest.fixture
def target(tmp_path: Path) -> Target:
    return Target(tmp_path)


def rejected(target: Target, kind: str, data: bytes, fragment: str) -> None:
    before = target.events()
    result = target.attack(kind, data)
    assert result.code == 2, (result.code, result.stderr)
    assert one_line_error(result.stderr, result.stdout) and fragment in result.said, result.stderr
    assert target.events() == before


def _sparse(path: Path, size: int) -> Path:
    with path.open("wb") as handle:
        handle.truncate(size)
    return path


@pytest.mark.parametrize("kind", ["config", "round", "manifest", "case-matrix"])
def test_files_above_the_size_limit(target: Target, kind: str, monkeypatch):
    # the default limit, 64 MiB: a sparse file one byte larger is refused before reading
    path = _sparse(target.root / "big.json", 64 * MiB + 1)
    where = {
        "config": target.root / "config.json",
        "round": target.root / "round.json",
        "manifest": target.manifest_path,
        "case-matrix": target.matrix_path,
    }[kind]
    os.replace(path, where)
    command = (
        ["plan", "--config", where]
        if kind == "config"
        else ["record", "--run", RUN, "--result", target.root / "round.json"]
    )
    if kind != "round" and kind != "config":
        write_json(target.root / "round.json", target.round_doc())
    result = cli(*command, db=target.url)
    assert result.code == 2 and one_line_error(result.stderr, result.stdout), result.stderr
    assert f"is {64 * MiB + 1} bytes, over the {64 * MiB}-byte limit" in result.said
    # the limit is overridable: a document of 2,000 bytes against a 1,000-byte limit
    target.reset()
    monkeypatch.setenv("KERNEL_LEDGER_MAX_INPUT_BYTES", "1000")
    doc = copy.deepcopy(target.doc(kind))
    doc["padding"] = "x" * 2000
    rejected(target, kind, json.dumps(doc).encode(), "over the 1000-byte limit")


def test_profile_above_the_size_limit(target: Target, monkeypatch):
    path = _sparse(target.root / "profile.json", 64 * MiB + 1)
    result = cli("profile", "--run", RUN, "--baseline", path, db=target.url)
    assert result.code == 2 and one_line_error(result.stderr, result.stdout), result.stderr
    assert "over the 64 MiB limit" in result.said
    # the limit is overridable, as for every other input file
    data = json.dumps(target.doc("profile")).encode() + b" " * 2000  # 2,000+ bytes
    assert target.attack("profile", data).code == 0  # under the default limit
    target.reset()
    monkeypatch.setenv("KERNEL_LEDGER_MAX_INPUT_BYTES", "1000")
    rejected(target, "profile", data, "over the 1000-byte limit")
    monkeypatch.setenv("KERNEL_LEDGER_MAX_INPUT_BYTES", "4000")
    assert target.attack("profile", data).code == 0  # a larger limit lets it in


@pytest.mark.parametrize("kind", KINDS)
def test_deeply_nested_json(target: Target, kind: str):
    deep = b'{"a":' * 100_000 + b"1" + b"}" * 100_000
    fragment = {"profile": "too deeply", "bundle": "does not verify"}.get(
        kind, "nested deeper than 64 levels"
    )
    end = b"\n" if kind == "bundle" else b""
    rejected(target, kind, deep + end, fragment)
    rejected(target, kind, b"[" * 100_000 + b"]" * 100_000 + end, fragment)


@pytest.mark.parametrize("kind", KINDS)
def test_non_utf8_bytes(target: Target, kind: str):
    valid = json.dumps(target.doc(kind)).encode()
    latin1 = valid.replace(b'"', b'"\xe9', 1)  # an ISO-8859-1 é inside the first key
    utf16 = b"\xff\xfe" + "{}".encode("utf-16-le")
    if kind == "bundle":
        rejected(target, kind, latin1 + b"\n", "does not verify")
        rejected(target, kind, utf16 + b"\n", "does not verify")
        return
    rejected(target, kind, latin1, "not UTF-8")
    rejected(target, kind, utf16, "UTF-")


def test_lone_surrogates_are_refused(target: Target):
    for kind in ("config", "round", "manifest", "case-matrix"):
        doc = copy.deepcopy(target.doc(kind))
        doc["note\\udc00"] = "x"  # an escaped, unpaired surrogate in a key
        text = json.dumps(doc).replace("note\\\\udc00", "note\\udc00")
        rejected(target, kind, text.encode(), "unpaired surrogate")


def test_paths_with_newlines(target: Target):
    # a file name holding a newline: found, read and recorded; messages stay on one line
    odd = target.root / "odd\nname"
    odd.mkdir()
    config = write_json(odd / "con\nfig.json", target.files.config_doc("newline-001"))
    result = cli("plan", "--config", config, "--json", db=target.url)
    assert result.code == 0, result.stderr
    missing = cli("plan", "--config", odd / "no\nsuch.json", db=target.url)
    assert missing.code == 2 and one_line_error(missing.stderr, missing.stdout), missing.stderr
    doc = target.files.config_doc("newline-002")
    doc["kernel"]["path"] = "kernels/not\nthere.py"
    rejected(target, "config", json.dumps(doc).encode(), "does not exist")
    assert cli("verify", db=target.url).code == 0


def test_symlinked_artifacts(target: Target):
    """Symlinks in the paths a round names are followed: the content of the file they
    point at is hashed and checked. Dangling links and link loops are refused clearly."""
    link_dir = target.root / "links"
    link_dir.mkdir()
    kernel_link = link_dir / "candidate.py"
    kernel_link.symlink_to(target.candidate)
    matrix_link = link_dir / "matrix.json"
    matrix_link.symlink_to(target.matrix_path)
    manifest = copy.deepcopy(target.base["manifest"])
    manifest["artifacts"][1]["uri"] = str(matrix_link)
    doc = target.round_doc()
    doc["candidate"]["path"] = str(kernel_link)
    write_json(target.manifest_path, manifest)
    accepted = target.attack("round", json.dumps(doc).encode())
    assert accepted.code == 0, accepted.stderr
    assert cli("verify", db=target.url).code == 0
    target.reset()
    for name, problem in (("dangling", target.root / "nowhere.py"), ("loop", None)):
        link = link_dir / name
        link.symlink_to(problem if problem is not None else link)
        doc = target.round_doc()
        doc["candidate"]["path"] = str(link)
        rejected(target, "round", json.dumps(doc).encode(), "does not exist")


def test_symlink_resolution_is_recorded(target: Target):
    link = target.root / "candidate-link.py"
    link.symlink_to(target.candidate)
    doc = target.round_doc()
    doc["candidate"]["path"] = str(link)
    assert target.attack("round", json.dumps(doc).encode()).code == 0
    with sqlite3.connect(target.db) as conn:
        payloads = [bytes(r[0]) for r in conn.execute("SELECT payload FROM events")]
        submitted = json.loads(
            conn.execute(
                "SELECT payload FROM events WHERE event_type = 'RoundSubmitted'"
            ).fetchone()[0]
        )
    conn.close()
    assert any(str(target.candidate.resolve()).encode() in p for p in payloads)
    # the path as given, and where it led; a file reached without a symlink has no
    # resolved_path at all (so events recorded before the field existed keep their hashes)
    assert submitted["candidate"]["path"] == str(link)
    assert submitted["candidate"]["resolved_path"] == str(target.candidate.resolve())
    assert "resolved_path" not in submitted["result"]
    assert cli("verify", db=target.url).code == 0
    # the artifact check reads a symlinked reference like any other, through its path
    checked = cli("verify", "--artifacts", "--json", db=target.url)
    assert checked.code == 0, checked.stderr
    before = json.loads(checked.stdout)["artifacts"]["checked"]
    target.candidate.write_text(target.candidate.read_text() + "# edited after recording\n")
    changed = cli("verify", "--artifacts", "--json", db=target.url)
    assert changed.code == 1
    found = json.loads(changed.stdout)["artifacts"]["changed"]
    assert [item["path"] for item in found] == [str(link)]
    assert before >= 2


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ("{root}/missing/ledger.key", "--sign file {root}/missing/ledger.key does not exist"),
        ("{root}", "--sign file {root} is a directory, not a file"),
        ("~no-such-user-kl/ledger.key", "names a home folder that does not exist"),
    ],
)
def test_checkpoint_signer_key_file_that_is_not_there(target: Target, value, fragment):
    """A signer key is given as a file or as the key text; every key holds a '+', so a
    value without one names a file, and a missing one is said to be missing (exit 2), not
    reported as a malformed key. No checkpoint is stored."""
    value, fragment = value.format(root=target.root), fragment.format(root=target.root)
    with sqlite3.connect(target.db) as conn:
        before = conn.execute("SELECT count(*) FROM checkpoints").fetchone()[0]
    conn.close()
    result = cli("checkpoint", "--sign", value, "--json", db=target.url)
    assert result.code == 2 and one_line_error(result.stderr, result.stdout), result.stderr
    assert fragment in result.said and "malformed" not in result.said
    with sqlite3.connect(target.db) as conn:
        assert conn.execute("SELECT count(*) FROM checkpoints").fetchone()[0] == before
    conn.close()
    # the verifier key of `verify` is read the same way
    result = cli("verify", "--checkpoint", "x\n1\nAAAA\n", "--verifier-key", value, db=target.url)
    assert result.code == 2 and one_line_error(result.stderr, result.stdout), result.stderr
    assert fragment.replace("--sign", "--verifier-key") in result.said


@pytest.mark.parametrize("kind", ["config", "round", "manifest"])
def test_unknown_home_directory_in_a_path(target: Target, kind: str):
    doc = copy.deepcopy(target.doc(kind))
    if kind == "config":
        doc["kernel"]["path"] = "~no-such-user-kl/kernel.py"
    elif kind == "round":
        doc["candidate"]["path"] = "~no-such-user-kl/candidate.py"
    else:
        doc["artifacts"][1]["uri"] = "~no-such-user-kl/case-matrix.json"
    rejected(target, kind, json.dumps(doc).encode(), "~no-such-user-kl")


def test_profile_signal_name_with_a_lone_surrogate(target: Target):
    rejected(target, "profile", b'{"aiv_vec_ratio\\ud800": 0.5}', "surrogate")


def test_profile_with_duplicate_signal_names(target: Target):
    rejected(target, "profile", b'{"aiv_vec_ratio": 0.1, "aiv_vec_ratio": 0.9}', "duplicate")


SECRET_SUFFIXES = ["TOKEN", "PASSWORD", "SECRET", "API_KEY", "APIKEY"]


@settings(max_examples=scale(15, 300), deadline=None, database=None)
@given(
    prefix=st.from_regex(r"[A-Za-z][A-Za-z0-9_]{0,12}", fullmatch=True),
    suffix=st.sampled_from(SECRET_SUFFIXES),
    bare=st.booleans(),
    lower=st.booleans(),
)
def test_secret_like_environment_variables_are_refused(
    tmp_path_factory, prefix, suffix, bare, lower
):
    """Run Manifest v1: environment_variables must hold no secret-like keys (*_TOKEN,
    *_PASSWORD, *_SECRET, *_API_KEY), whatever their case."""
    target = _shared_target(tmp_path_factory)
    key = suffix if bare else f"{prefix}_{suffix}"
    key = key.lower() if lower else key
    doc = copy.deepcopy(target.base["manifest"])
    doc["environment_variables"][key] = "value"
    rejected(target, "manifest", json.dumps(doc).encode(), "looks like a secret and is refused")


@settings(max_examples=scale(15, 300), deadline=None, database=None)
@given(
    before=st.lists(st.from_regex(r"[A-Za-z0-9]{1,8}", fullmatch=True), max_size=2),
    qualifier=st.sampled_from(["SECRET", "PRIVATE"]),
    between=st.lists(st.from_regex(r"[A-Za-z0-9]{1,8}", fullmatch=True), max_size=2),
    lower=st.booleans(),
)
def test_secret_keys_that_end_in_key_are_refused(
    tmp_path_factory, before, qualifier, between, lower
):
    """The spec's patterns are examples of secret-like keys ("such as"): a `*_KEY` with
    SECRET or PRIVATE before it (AWS_SECRET_ACCESS_KEY, DJANGO_SECRET_KEY, SSH_PRIVATE_KEY)
    is one too, though it does not end in _SECRET."""
    target = _shared_target(tmp_path_factory)
    key = "_".join([*before, qualifier, *between, "KEY"])
    key = key.lower() if lower else key
    doc = copy.deepcopy(target.base["manifest"])
    doc["environment_variables"][key] = "value"
    rejected(target, "manifest", json.dumps(doc).encode(), "looks like a secret and is refused")


@pytest.mark.parametrize(
    "key",
    [
        "AWS_SECRET_ACCESS_KEY",
        "aws_secret_access_key",
        "SECRET_KEY",
        "SSH_PRIVATE_KEY",
        "GITHUB_TOKEN",
        "MY_DB_PASSWORD",
        "OPENAI_API_KEY",
    ],
)
def test_well_known_secret_names_are_refused(target: Target, key: str):
    doc = copy.deepcopy(target.base["manifest"])
    doc["environment_variables"][key] = "value"
    rejected(target, "manifest", json.dumps(doc).encode(), f"{key} looks like a secret")


@pytest.mark.parametrize(
    "key",
    [
        "TOKENIZER_PATH",
        "SECRETARY_NAME",
        "TOKENIZERS_PARALLELISM",
        "PASSWORD_MIN_LENGTH",
        # the rule is on the name's ending (`*_TOKEN`, `*_PASSWORD`, …): a name that goes on
        # after the secret word is kept; *_FILE names a file holding a secret, not the secret
        "MY_PASSWORD_FILE",
        "PRIVATE_KEY_PATH",
        "AWS_ACCESS_KEY_ID",
        "KEYBOARD_SECRET_LAYOUT",
    ],
)
def test_near_miss_keys_are_kept(target: Target, key: str):
    doc = copy.deepcopy(target.base["manifest"])
    doc["environment_variables"][key] = "value"
    assert target.attack("manifest", json.dumps(doc).encode()).code == 0


_TARGETS: dict[str, Target] = {}


def _shared_target(factory) -> Target:
    if "secrets" not in _TARGETS:
        _TARGETS["secrets"] = Target(factory.mktemp("secrets"))
    return _TARGETS["secrets"]


# --- bundles, outputs and ledger creation (docs/reliability.md, section 6) ----------------


@pytest.mark.parametrize("command", [("import",), ("verify", "--bundle")])
def test_bundle_inputs_are_bounded(target: Target, command, monkeypatch):
    """A FIFO and /dev/zero are refused at once (never waited on, never read without end);
    a 2 GiB sparse file of zeros is refused after one bounded line; the bundle size limit
    holds (set low here with KERNEL_LEDGER_MAX_BUNDLE_BYTES)."""
    import resource

    fifo = target.root / "bundle.fifo"
    os.mkfifo(fifo)
    zeros = _sparse(target.root / "zeros.bundle.jsonl", 2 * 1024**3)
    bundle = target.root / "good.bundle.jsonl"
    bundle.write_bytes(b"".join(rfc8785.dumps(v) + b"\n" for v in target.doc("bundle")))
    before = target.events()
    cases = [
        (fifo, "is not a regular file"),
        (Path("/dev/zero"), "is not a regular file"),
        (zeros, "has a line over the"),
    ]
    for path, fragment in cases:
        result = cli(*command, path, db=target.url)
        assert result.code == 2 and one_line_error(result.stderr, result.stdout), result.stderr
        assert fragment in result.said, result.stderr
        assert result.seconds < 30
    peak_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    monkeypatch.setenv("KERNEL_LEDGER_MAX_BUNDLE_BYTES", "1000")
    result = cli(*command, bundle, db=target.url)
    assert result.code == 2 and "over the 1000-byte limit" in result.said, result.stderr
    assert target.events() == before
    record_figures("bundle_inputs_are_bounded", command=" ".join(command), peak_rss_mib=peak_mib)


def test_outputs_never_replace_the_ledger(target: Target):
    """Every writer, every alias of the ledger file: refused, every event kept."""
    before = target.events()
    ledger = target.db
    link = ledger.parent / "note-alias.txt"
    link.symlink_to(ledger.name)
    commands = [
        ("checkpoint", "--out"),
        ("export", "--run", RUN, "--out"),
        ("checkout", "--run", RUN, "--out"),
        ("report", "--run", RUN, "--html"),
        ("analyze", "--run", RUN, "--output-dir"),
    ]
    tried = 0
    for command in commands:
        for path in (ledger, Path(f"{ledger}-wal"), Path(f"{ledger}-shm"), link):
            out = ledger.parent if command[0] == "analyze" else path
            if command[0] == "analyze":
                (ledger.parent / "analysis.json").unlink(missing_ok=True)
                (ledger.parent / "analysis.json").symlink_to(path)
            for force in ((), ("--force",)):
                result = cli(*command, out, *force, db=target.url)
                tried += 1
                assert result.code == 2 and one_line_error(result.stderr, result.stdout), (
                    result.stderr
                )
                assert "is the ledger or one of its files" in result.said, result.stderr
    assert target.events() == before
    assert cli("verify", db=target.url).code == 0
    record_figures("outputs_never_replace_the_ledger", refused=tried)


def test_killed_ledger_creation_leaves_nothing_behind(tmp_path: Path):
    """kill -9 at random moments of `db upgrade` creating a ledger; the next command makes
    (or uses) the ledger and no `.NAME.new-PID-*` file is left."""
    import random
    import signal
    import subprocess
    import sys
    import time

    from faultkit import ROOT

    kills = scale(6, 60)
    rng = random.Random(19)
    leftovers_seen = 0
    for n in range(kills):
        folder = tmp_path / f"k{n}"
        folder.mkdir()
        url = f"sqlite:///{folder / 'ledger.sqlite3'}"
        proc = subprocess.Popen(
            [sys.executable, "-m", "cli", "--db", url, "db", "upgrade"],
            cwd=ROOT,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        time.sleep(rng.uniform(0.2, 1.2))
        proc.send_signal(signal.SIGKILL)
        proc.wait()
        leftovers_seen += sum(".new-" in p.name for p in folder.iterdir())
        result = cli("db", "upgrade", db=url)
        assert result.code == 0, result.stderr
        assert [p.name for p in folder.iterdir() if ".new-" in p.name] == []
        assert cli("verify", db=url).code == 0
    record_figures("killed_ledger_creation", kills=kills, leftovers_removed=leftovers_seen)


TIMES_IN_RANGE = [1e-6, 1e-6 * (1 + 1e-15), 1.0, 12.5, 1e12 * (1 - 1e-15), 1e12]
TIMES_OUT_OF_RANGE = [5e-324, 1e-300, 1e-7, 1.0000001e12, 1e308]


def test_numeric_edges_of_round_measurements(target: Target):
    """Medians and samples at, inside and outside the time range, recorded for real: each
    round is accepted (exit 0, every figure finite) or refused (exit 2, nothing written);
    never exit 70, never a numpy warning on stderr, and the run stays usable after."""
    import random

    rng = random.Random(19)

    def time() -> float:
        return rng.choice(TIMES_OUT_OF_RANGE if rng.random() < 0.1 else TIMES_IN_RANGE)

    examples = scale(30, 600)
    tally: Counter = Counter()
    for _ in range(examples):
        doc = target.round_doc()
        for row in doc["measurements"]:
            if rng.random() < 0.5:
                row["median_us"] = time()
            else:
                row.pop("median_us", None)
                row["samples_us"] = [time() for _ in range(rng.randint(1, 5))]
                row.pop("repeats", None)
        check(target, "round", json.dumps(doc).encode(), tally)
        assert cli("status", "--run", RUN, "--json", db=target.url).code == 0
    assert tally["accepted"] and tally["rejected"]
    record_figures("numeric_edges_of_round_measurements", **tally)
