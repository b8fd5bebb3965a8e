"""`kernel-ledger skill install`: a fresh install parses, names only real commands, and every
command line in it runs, in order, as the softmax demo campaign on a fresh ledger."""

from __future__ import annotations

import json
import re
import shlex
import sys
from pathlib import Path

import pytest
import typer.main

from cli.app import app
from cli.skill_install import FILES

from conftest import CliRunner

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "examples" / "softmax-demo"
RUN = "softmax-demo-001"
PROFILE = ROOT / "tests" / "fixtures" / "profiles" / "msprof-op" / "single"


def commands() -> set[str]:
    group = typer.main.get_command(app)
    names = set()
    for name, command in group.commands.items():
        names.add(name)
        for sub in getattr(command, "commands", {}):
            names.add(f"{name} {sub}")
    return names


def installed(tmp_path: Path) -> Path:
    cli = CliRunner("sqlite:///unused")
    done = cli("skill", "install", tmp_path, "--json", db=False)
    assert done.exit_code == 0, done.stderr
    assert done.json()["written"] == list(FILES)
    return tmp_path / ".agents" / "skills" / "kernel-ledger"


def command_lines(text: str) -> list[str]:
    """The lines of fenced code blocks that run kernel-ledger."""
    lines, fenced = [], False
    for raw in text.splitlines():
        line = raw.strip()
        if line.startswith("```"):
            fenced = not fenced
        elif fenced and line.startswith("kernel-ledger "):
            lines.append(line)
    return lines


def test_fresh_install_parses_and_names_only_real_commands(tmp_path):
    skill = installed(tmp_path)
    text = (skill / "SKILL.md").read_text()
    head, _, body = text.removeprefix("---\n").partition("\n---\n")
    front = dict(line.split(": ", 1) for line in head.splitlines())
    assert set(front) == {"name", "description"} and front["name"] == "kernel-ledger"
    assert len(front["description"]) > 100 and body.lstrip().startswith("# kernel-ledger")
    for section in ("## Workflow", "## Entry points", "## Rules"):
        assert section in body
    for link in re.findall(r"\]\(([^)]+)\)", body):
        assert (skill / link).is_file(), link
    known = commands()
    named = set()
    for name in FILES:
        if name.endswith(".md"):
            content = (skill / name).read_text()
            named |= set(re.findall(r"kernel-ledger ((?:db |skill )?[a-z-]+)", content))
            if name not in ("references/inputs.md", "references/mechanisms.md"):  # fields
                named |= set(
                    re.findall(r"^(?:\| `|### )([a-z][a-z-]*)", content, flags=re.MULTILINE)
                )
    assert named and named <= known, named - known
    entry = json.loads((skill / "mcp.json").read_text())["mcpServers"]["kernel-ledger"]
    # the kernel-ledger beside the interpreter that installed it: a client's PATH lacks it
    assert entry["command"] == str(Path(sys.executable).with_name("kernel-ledger"))
    assert Path(entry["command"]).is_file() and entry["args"] == ["mcp"]


def test_check_tells_whether_the_copy_is_current(tmp_path):
    cli = CliRunner("sqlite:///unused")
    missing = cli("skill", "install", tmp_path, "--check", db=False)
    assert missing.exit_code == 1 and "SKILL.md missing" in missing.stderr
    skill = installed(tmp_path)
    current = cli("skill", "install", tmp_path, "--check", "--json", db=False)
    assert current.exit_code == 0 and current.json()["status"] == "current"
    (skill / "references" / "commands.md").write_text("old\n")
    stale = cli("skill", "install", tmp_path, "--check", "--json", db=False)
    assert stale.exit_code == 1 and stale.json()["files"]["references/commands.md"] == "changed"
    assert stale.json()["error"].startswith("the skill in ") and stale.stderr == ""
    again = cli("skill", "install", tmp_path, "--json", db=False)
    assert again.json()["written"] == ["references/commands.md"]
    nowhere = cli("skill", "install", tmp_path / "absent", db=False)
    assert nowhere.exit_code == 2


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_every_command_line_runs_as_the_demo_campaign(tmp_path, db_url):
    (tmp_path / "workspace").mkdir()
    skill = installed(tmp_path / "workspace")
    lines = []
    for name in FILES:
        if name.endswith(".md"):
            lines += command_lines((skill / name).read_text())
    assert len(lines) >= 15
    cli = CliRunner(db_url)
    kernel = tmp_path / "softmax.py"
    kernel.write_bytes((DEMO / "kernels" / "softmax_r5_gridstride.py").read_bytes())
    best = {}
    aa = tmp_path / "aa-1.json"  # self-made A/A remeasure of the best kernel
    first = json.loads((DEMO / "rounds" / "round-1.json").read_text())
    values = {
        "<candidate>": str(ROOT / first["candidate"]["path"]),
        "<config>": str(DEMO / "config.json"),
        "<run>": RUN,
        "<profile>": str(PROFILE),
        "<class>": "memory-transfer",
        "<what supports it>": "aiv_mte2_ratio 0.57",
        "<aa>": str(aa),
        "<dir>": str(tmp_path / "analysis"),
        "<kernel>": str(kernel),
    }
    ran = []
    for line in lines:
        rounds = range(1, 6) if " record " in f" {line} " else [None]
        for n in rounds:
            text = line
            if n is not None:
                text = text.replace("<result>", str(DEMO / "rounds" / f"round-{n}.json"))
            elif " assess " in f" {line} ":  # before any record: round 1 is the next round
                text = text.replace("<result>", str(DEMO / "rounds" / "round-1.json"))
            for key, value in {**values, "<n>": str(best.get("round", 1))}.items():
                text = text.replace(key, shlex.quote(value) if " " in value else value)
            assert "<" not in text, text
            if "noise" in text.split():
                aa.write_text(json.dumps(best["aa"]))
            done = cli(*shlex.split(text)[1:])
            assert done.exit_code == 0, (text, done.stderr)
            ran.append(shlex.split(text)[1])
            if n is not None:
                status = cli("status", "--run", RUN, "--json").json()
                best = {
                    "round": n,
                    "aa": {
                        "kernel_sha256": status["best_kernel"]["sha256"],
                        "measurements": [
                            {"case_id": c["case_id"], "median_us": c["best_median_us"],
                             "repeats": 50}
                            for c in status["cases"]
                        ],
                    },
                }  # fmt: skip
    assert {"plan", "record", "analyze", "verify", "check-merge", "checkout"} <= set(ran)
    assert cli("status", "--run", RUN, "--json").json()["run"]["conclusion"] == "passed"


def _options(name: str) -> set[str]:
    group = typer.main.get_command(app)
    command = group
    for part in name.split():
        command = command.commands[part]
    return {opt for param in command.params for opt in getattr(param, "opts", [])}


def test_the_skill_teaches_the_loop_within_its_size(tmp_path):
    from ledger.core.bottleneck import Bottleneck
    from ledger.core.explain import GLOSSARY

    skill = installed(tmp_path)
    text = (skill / "SKILL.md").read_text()
    assert len(text) < 8000, len(text)
    steps = re.findall(r"^\s*\d+\. \*\*([A-Z][a-z]+)", text, flags=re.MULTILINE)
    assert steps == [
        "Config", "Plan", "Profile", "Round", "Measure", "Record", "Noise", "Diagnose",
        "Analyze", "Verify",
    ]  # fmt: skip
    for decision in ("KEEP", "DISCARD", "NOISE", "FAIL"):
        assert f"- **{decision}**: " in text, decision
    for name in Bottleneck:
        assert f"`{name.value}`" in text, name
    for flag in GLOSSARY:  # the also-<class> flags are named once, as `also-<class>`
        assert f"`{flag}`" in text or flag.startswith("also-"), flag
    assert "`also-<class>`" in text and "`target.soc`" in text
    # every flag a command line of the skill passes is an option of that command
    known = commands()
    for line in re.findall(r"kernel-ledger ([^`\n]+)", text):
        words = line.split()
        name = " ".join(words[:2]) if " ".join(words[:2]) in known else words[0]
        if name not in known:
            continue
        for word in words:
            if word.startswith("--"):
                assert word in _options(name) | {"--json", "--db"}, (name, word)


def test_the_harness_is_installed_from_the_package_module(tmp_path):
    from ledger.harness import measure

    skill = installed(tmp_path)
    assert (skill / "scripts" / "measure.py").read_bytes() == Path(measure.__file__).read_bytes()
    assert "scripts/measure.py" in (skill / "SKILL.md").read_text()


def test_the_measuring_examples_run_from_the_installed_script(tmp_path):
    """references/measuring.md's round and baseline examples, run as written with the
    installed scripts/measure.py (no GPU here: the harness falls back to its wall timer
    and says so, each sample the mean of enough calls); the sequential one compiles."""
    import subprocess

    skill = installed(tmp_path)
    assert "references/measuring.md" in (skill / "SKILL.md").read_text()
    text = (skill / "references" / "measuring.md").read_text()
    round_example, baseline, sequential = re.findall(r"```python\n(.*?)```", text, re.DOTALL)
    compile(sequential, "measuring.md", "exec")
    program = (
        "import json, sys\n"
        f"sys.path.insert(0, {str(skill / 'scripts')!r})\n"
        "def run_candidate(): return sum(range(200))\n"
        "def run_best(): return sum(range(400))\n"
        "cases = {'fp16-4096': (run_candidate, run_best)}\n"
        "best_sha = 'a' * 64\n" + round_example + "print(json.dumps(fragment))\n"
        "cases = {'fp16-4096': run_best}\n" + baseline + "print(json.dumps(fragment))\n"
    )
    done = subprocess.run(
        [sys.executable, "-I", "-c", program],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    fragment, base = (json.loads(line) for line in done.stdout.splitlines())
    assert set(fragment) >= {"session", "measurements", "reference"}
    assert [m["case_id"] for m in fragment["measurements"]] == ["fp16-4096"]
    assert fragment["session"]["timer"] == "wall"
    assert fragment["measurements"][0]["calls_per_sample"] > 1  # a call of microseconds
    assert (tmp_path / "runs" / "r1" / "raw").is_dir()
    assert "reference" not in base and (tmp_path / "runs" / "baseline" / "raw").is_dir()
