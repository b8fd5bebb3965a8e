"""`kernel-ledger report --run ID --html PATH`: one self-contained HTML page of a run.

The page is checked as text (self-contained, escaped, the right numbers) on SQLite and
PostgreSQL, and as a user sees it: opened in headless Chromium (Debian's `chromium`,
installed by .ci/ensure-chromium), driven over the DevTools protocol on a pipe
(--remote-debugging-pipe: fds 3 and 4, NUL-separated JSON, no extra dependency). The
browser test takes a full-page screenshot, collects console errors, exceptions, log
errors and every network request, and measures the rendered charts. In CI (env CI set) a
missing Chromium fails the test; elsewhere it skips with the command that installs it.
"""

from __future__ import annotations

import base64
import contextlib
import fcntl
import json
import math
import os
import re
import select
import shutil
import sqlite3
import struct
import subprocess
import time
import zlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from campaign import Campaign, write_json

HOSTILE = '<script>console.error("injected")</script> & "quoted" <b>bold</b>'
SOC = "NVIDIA H200"
CHROMIUM_FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
    "--disable-quic",
)
VIEWPORT_WIDTH = 1280


# --- a campaign with raw samples and profiles ----------------------------------------------


def _samples(median: float, seed: int, n: int = 30) -> list[float]:
    rng = np.random.default_rng(seed)
    return [round(float(v), 4) for v in median * (1 + 0.01 * rng.standard_normal(n))]


def _rows(case_ids: list[str], medians: list[float], seed: int) -> list[dict[str, Any]]:
    return [
        {"case_id": c, "samples_us": _samples(m, seed + i), "repeats": 30}
        for i, (c, m) in enumerate(zip(case_ids, medians, strict=True))
    ]


@dataclass
class Recorded:
    campaign: Campaign
    decisions: dict[int, str] = field(default_factory=dict)


def build_campaign(cli, root: Path) -> Recorded:
    """Plan a 3-case run on a GPU target with raw samples, record four rounds (one of
    them FAIL, one with medians only, one carrying ncu-style profiler signals) and ingest
    a profile of the original kernel."""
    c = Campaign(root, run_id="softmax-gpu-001")
    doc = c.config_doc(
        target={"soc": SOC, "triton": "3.6.0"},
        measurement_policy={"timer": "triton.testing.do_bench", "repeats": 30, "warmup": 25},
    )
    doc["baseline"] = _rows(c.case_ids, c.baseline, seed=100)
    assert cli("plan", "--config", write_json(root / "config.json", doc)).exit_code == 0
    recorded = Recorded(c)
    rounds = [
        # (medians or None for a failed validation, samples?, extra round-result keys)
        ([16.0, 35.0, 22.0], True, {"hypothesis": HOSTILE}),
        ([15.0, 37.0, 23.5], True, {}),
        (None, False, {}),
        (
            [15.9, 34.9, 21.9],
            False,
            {
                "profiler_signals": {
                    "duration_us": 14.2,
                    "dram_throughput": 0.83,
                    "sm_throughput": 0.31,
                    "achieved_occupancy": 0.62,
                }
            },
        ),
    ]
    for number, (medians, with_samples, extra) in enumerate(rounds, start=1):
        status = "passed" if medians is not None else "failed"
        rdoc = c.round_doc(medians, status=status, **extra)
        if medians is not None and with_samples:
            rdoc["measurements"] = _rows(c.case_ids, medians, seed=100 * (number + 1))
        path = write_json(root / "rounds" / f"round-{number}.json", rdoc)
        result = cli("record", "--run", c.run_id, "--result", path, "--json")
        assert result.exit_code == 0, result.stderr
        decision = result.json()["decision"]
        recorded.decisions[number] = decision
        c.accepted(decision, number)
    signals = write_json(
        root / "profiles" / "baseline.json",
        {"duration_us": 18.0, "dram_throughput": 0.55, "sm_throughput": 0.2},
    )
    result = cli("profile", "--run", c.run_id, "--baseline", signals, "--json")
    assert result.exit_code == 0, result.stderr
    return recorded


def _stream_hashes(db_url: str, run_id: str | None = None) -> list[str]:
    from ledger.store.eventstore import Store

    store = Store(db_url)
    with store.transaction() as conn:
        hashes = [e.event_hash for e in store.iter_events(conn, stream_id=run_id)]
    store.close()
    return hashes


# --- the page as text ----------------------------------------------------------------------


def test_report_writes_one_self_contained_page(cli, tmp_path):
    recorded = build_campaign(cli, tmp_path / "campaign")
    run_id = recorded.campaign.run_id
    events_before = cli.event_count()
    out = tmp_path / "out" / "report.html"

    result = cli("report", "--run", run_id, "--html", out, "--json")

    assert result.exit_code == 0, result.stderr
    assert result.stderr == ""
    doc = result.json()
    assert doc["status"] == "ok" and doc["run_id"] == run_id
    assert doc["html"] == str(out.absolute())
    assert doc["charts"] == ["timeline", "latency", "profiles"]
    assert doc["rounds"] == 4 and doc["profiles"] == 2
    page = out.read_text(encoding="utf-8")
    assert doc["bytes"] == len(page.encode("utf-8"))
    assert cli.event_count() == events_before, "report must append nothing"

    # self-contained: no scripts, no external resources, nothing to fetch
    assert page.startswith("<!DOCTYPE html>")
    lowered = page.lower()
    for banned in ("<script", "<link", "<iframe", "<img", "<object", "<embed", "@import"):
        assert banned not in lowered, banned
    for ref in re.findall(r'(?:href|src)\s*=\s*["\']([^"\']*)', page):
        assert ref.startswith("#"), ref
    for ref in re.findall(r"url\(\s*([^)]*)\)", page):
        assert ref.strip("'\" ").startswith("#"), ref
    import html

    assert "default-src 'none'" in html.unescape(page)

    # three charts, each an inline SVG inside its figure
    for name in ("timeline", "latency", "profiles"):
        figure = re.search(
            rf'<figure class="chart" id="chart-{name}">\s*<svg (.*?)</figure>', page, re.S
        )
        assert figure, name
        assert "viewBox=" in figure.group(1)
    assert page.count("<svg ") == 3

    # user text is escaped wherever it appears
    assert HOSTILE not in page
    assert html_escape(HOSTILE) in page

    # the rounds table: every round with the decision the ledger recorded
    table = page[page.index('<table class="rounds">') :]
    table = table[: table.index("</table>")]
    rows = re.findall(
        r'<tr class="main" id="round-(\d+)"><td class="n">\d+</td><td><span class="badge d-(\w+)">(\w+)</span>',
        table,
    )
    assert [(int(n), d) for n, _, d in rows] == sorted(recorded.decisions.items())
    assert "validation" in table  # the FAIL round's evidence
    # every round says why, in one sentence that starts with its decision
    whys = re.findall(r'<span class="why-text">(\w+): ', table)
    assert whys == [recorded.decisions[n] for n in sorted(recorded.decisions)]
    assert "FAIL: validation failed on cases fp16-128x257, fp32-64x1024, bf16-8x8193" in table
    # the noise section and the glossary
    assert '<section id="noise">' in page and "No A/A remeasures were recorded" in page
    assert '<dt id="flag-drift_unestimated">drift_unestimated</dt>' in page

    # GPU timings with their unit, the target and the measurement policy
    assert "GPU timings on NVIDIA H200, µs" in page
    assert "timer=triton.testing.do_bench" in page
    assert "raw per-repeat samples" in page

    # profiles: the original's (file) and round 4's (round-result), with their bottleneck
    assert "dram_throughput=0.83" in page and "dram_throughput=0.55" in page
    assert "round-result" in page and "signals-json" in page
    assert page.index("<tr><td>original</td>") < page.index("<tr><td>round 4</td>")

    # verification panel: ok, this run's last event hash, the tree head of the whole log
    from ledger.integrity.merkle import root

    run_hashes = _stream_hashes(cli.db_url, run_id)
    all_hashes = _stream_hashes(cli.db_url)
    tree_root = base64.b64encode(root(bytes.fromhex(h) for h in all_hashes)).decode()
    assert doc["verification"]["status"] == "ok"
    assert doc["verification"]["events_checked"] == len(run_hashes)
    assert doc["verification"]["last_event_hash"] == run_hashes[-1]
    assert doc["verification"]["tree_size"] == len(all_hashes)
    assert doc["verification"]["tree_root"] == tree_root
    panel = page[page.index('<section id="verification">') :]
    assert "<strong>ok</strong>" in panel and run_hashes[-1] in panel and tree_root in panel

    # rendering the same ledger again gives the same bytes
    again = tmp_path / "again.html"
    assert cli("report", "--run", run_id, "--html", again).exit_code == 0
    assert again.read_bytes() == out.read_bytes()


def html_escape(text: str) -> str:
    from markupsafe import escape

    return str(escape(text))


def test_report_human_output_names_the_file(cli, campaign, tmp_path):
    assert cli("plan", "--config", campaign.config()).exit_code == 0
    out = tmp_path / "r.html"
    result = cli("report", "--run", campaign.run_id, "--html", out)
    assert result.exit_code == 0, result.stderr
    assert result.stdout.startswith(f"wrote {out.absolute()} (")
    assert "charts timeline, latency; verification ok" in result.stdout


def test_medians_only_run_without_profiles(cli, campaign, tmp_path):
    assert cli("plan", "--config", campaign.config()).exit_code == 0
    rec = cli(
        "record", "--run", campaign.run_id, "--result", campaign.round([16.0, 36.0, 22.0]), "--json"
    )
    assert rec.exit_code == 0
    out = tmp_path / "r.html"
    result = cli("report", "--run", campaign.run_id, "--html", out, "--json")
    assert result.exit_code == 0, result.stderr
    assert result.json()["charts"] == ["timeline", "latency"]
    page = out.read_text()
    assert "No raw samples were recorded: each diamond is the recorded median." in page
    assert "No profiles recorded for this run." in page
    assert 'id="chart-profiles"' not in page
    assert "NPU timings on Ascend910B2, µs" in page  # the Campaign's default target
    assert f">{rec.json()['decision']}</span>" in page


def test_counts_past_their_limit_read_as_such(cli, campaign, tmp_path):
    campaign.max_consecutive_failures = 1
    assert cli("plan", "--config", campaign.config()).exit_code == 0
    for _ in range(2):
        worse = [m * 1.5 for m in campaign.baseline]
        rec = cli("record", "--run", campaign.run_id, "--result", campaign.round(worse), "--json")
        assert rec.exit_code == 0 and rec.json()["decision"] == "DISCARD"
        campaign.accepted("DISCARD", rec.json()["round"])
    out = tmp_path / "r.html"
    assert cli("report", "--run", campaign.run_id, "--html", out).exit_code == 0
    page = " ".join(out.read_text().split())
    assert f"<dd> 2 of {campaign.max_rounds}, kept 0, consecutive failures 2 (limit 1) —" in page


@pytest.mark.parametrize(
    ("soc", "label"),
    [
        ("NVIDIA H200", "GPU timings on NVIDIA H200, µs"),
        ("H100", "GPU timings on H100, µs"),
        ("AMD Instinct MI300X", "GPU timings on AMD Instinct MI300X, µs"),
        ("Ascend910B2", "NPU timings on Ascend910B2, µs"),
        ("Ascend310P3", "NPU timings on Ascend310P3, µs"),
        ("xc7z020-fpga", "device timings on xc7z020-fpga, µs"),
        ("", "device timings, µs"),
    ],
)
def test_timing_label_names_gpus(soc, label):
    from ledger.reports.report import timing_label

    assert timing_label({"soc": soc}) == label


# --- refusals: exit 2, one line, nothing written -------------------------------------------


def test_unknown_run_is_refused_and_nothing_is_written(cli, tmp_path):
    assert cli("db", "upgrade").exit_code == 0  # a ledger, without that run
    out = tmp_path / "r.html"
    result = cli("report", "--run", "nope", "--html", out, "--json")
    assert result.exit_code == 2
    assert result.stderr == ""  # with --json, the JSON object alone
    assert result.json() == {
        "status": "error",
        "error": "run 'nope' is not in the ledger",
        "exit_code": 2,
    }
    assert not out.exists()


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_unwritable_destinations_are_refused(cli, campaign, tmp_path):
    assert cli("plan", "--config", campaign.config()).exit_code == 0
    folder = tmp_path / "a-folder"
    folder.mkdir()
    result = cli("report", "--run", campaign.run_id, "--html", folder)
    assert result.exit_code == 2
    assert result.stderr == f"Error: --html {folder} is a folder; name the file to write\n"

    blocker = tmp_path / "plain-file"
    blocker.write_text("x")
    result = cli("report", "--run", campaign.run_id, "--html", blocker / "r.html")
    assert result.exit_code == 2
    assert result.stderr.startswith(f"Error: --html {blocker / 'r.html'} cannot be used: ")
    assert result.stderr.count("\n") == 1 and "Traceback" not in result.stderr

    result = cli("report", "--run", campaign.run_id, "--html", "  ")
    assert (result.exit_code, result.stderr) == (2, "Error: --html needs a file path\n")
    written = sorted(p.name for p in tmp_path.rglob("*") if not p.name.startswith("ledger.sqlite3"))
    assert [n for n in written if n.endswith(".html")] == []
    assert list(folder.iterdir()) == [] and blocker.read_text() == "x"


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_missing_matplotlib_is_one_line(cli, campaign, tmp_path, monkeypatch):
    assert cli("plan", "--config", campaign.config()).exit_code == 0
    monkeypatch.setitem(__import__("sys").modules, "matplotlib", None)
    out = tmp_path / "r.html"
    result = cli("report", "--run", campaign.run_id, "--html", out)
    assert result.exit_code == 2
    assert result.stderr == (
        "Error: the HTML report needs matplotlib: pip install 'kernel-ledger[report]'\n"
    )
    assert not out.exists()


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_a_damaged_ledger_is_reported_not_hidden(cli, campaign, tmp_path, db_url):
    assert cli("plan", "--config", campaign.config()).exit_code == 0
    for number, medians in ((1, [16.0, 36.0, 22.0]), (2, [15.0, 35.0, 21.0])):
        rec = cli("record", "--run", campaign.run_id, "--result", campaign.round(medians), "--json")
        assert rec.exit_code == 0
        campaign.accepted(rec.json()["decision"], number)
    path = db_url.removeprefix("sqlite:///")
    with sqlite3.connect(path) as db:
        db.execute("DROP TRIGGER events_refuse_update")
        seq = db.execute(
            "SELECT seq FROM events WHERE event_type = 'RoundSubmitted' ORDER BY seq LIMIT 1 OFFSET 1"
        ).fetchone()[0]
        db.execute("UPDATE events SET payload = ? WHERE seq = ?", (b'{"round":2}', seq))

    out = tmp_path / "r.html"
    result = cli("report", "--run", campaign.run_id, "--html", out, "--json")

    assert result.exit_code == 0, result.stderr
    verification = result.json()["verification"]
    assert verification["status"] == "failed"
    assert verification["first_failure"]["seq"] == seq
    assert verification["first_failure"]["check"] == "hash"
    page = out.read_text()
    assert "VERIFICATION FAILED" in page
    assert f"First failure at seq {seq} (version" in page
    assert "1 event of this run could not be read" in page
    # round 2 lost its submission, but its decision and measurements are still shown
    assert "(its RoundSubmitted event could not be read)" in page
    rounds = re.findall(r'<tr class="main" id="round-(\d+)">', page)
    assert rounds == ["1", "2"]
    assert '<div class="panel v-failed">' in page


# --- the page in a browser -----------------------------------------------------------------


def chromium_binary() -> str:
    explicit = os.environ.get("KERNEL_LEDGER_CHROMIUM")
    candidates = [explicit] if explicit else ["/usr/bin/chromium", shutil.which("chromium")]
    for candidate in candidates:
        if candidate and os.path.isfile(candidate) and os.access(candidate, os.X_OK):
            return candidate
    message = "Chromium is missing (/usr/bin/chromium); install it with .ci/ensure-chromium"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


class DevTools:
    """Chromium driven over --remote-debugging-pipe: it reads commands on fd 3 and writes
    replies and events on fd 4, each a JSON message ended by a NUL byte."""

    def __init__(self, binary: str, workdir: Path) -> None:
        workdir.mkdir(parents=True, exist_ok=True)
        self.log_path = workdir / "chromium.log"
        commands_r, commands_w = os.pipe()
        replies_r, replies_w = os.pipe()
        # High, close-on-exec copies, so moving them onto fds 3 and 4 cannot clobber one.
        child_in = fcntl.fcntl(commands_r, fcntl.F_DUPFD_CLOEXEC, 10)
        child_out = fcntl.fcntl(replies_w, fcntl.F_DUPFD_CLOEXEC, 10)
        os.close(commands_r)
        os.close(replies_w)

        def onto_3_and_4() -> None:
            os.dup2(child_in, 3)
            os.dup2(child_out, 4)

        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                [
                    binary,
                    *CHROMIUM_FLAGS,
                    f"--user-data-dir={workdir / 'profile'}",
                    "--remote-debugging-pipe",
                    "about:blank",
                ],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=log,
                close_fds=False,
                preexec_fn=onto_3_and_4,
            )
        os.close(child_in)
        os.close(child_out)
        self.writer, self.reader = commands_w, replies_r
        self.buffer = b""
        self.last_id = 0
        self.events: list[dict[str, Any]] = []

    def _read(self, deadline: float) -> dict[str, Any]:
        while b"\0" not in self.buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise TimeoutError(f"no reply from Chromium; log: {self._log_tail()}")
            ready, _, _ = select.select([self.reader], [], [], remaining)
            if ready:
                chunk = os.read(self.reader, 1 << 20)
                if not chunk:
                    raise RuntimeError(f"Chromium closed the pipe; log: {self._log_tail()}")
                self.buffer += chunk
        message, _, self.buffer = self.buffer.partition(b"\0")
        return json.loads(message)

    def call(
        self,
        method: str,
        params: dict | None = None,
        *,
        session: str | None = None,
        timeout: float = 30.0,
    ) -> dict[str, Any]:
        self.last_id += 1
        message: dict[str, Any] = {"id": self.last_id, "method": method, "params": params or {}}
        if session:
            message["sessionId"] = session
        data = json.dumps(message).encode() + b"\0"
        while data:
            data = data[os.write(self.writer, data) :]
        deadline = time.monotonic() + timeout
        while True:
            reply = self._read(deadline)
            if reply.get("id") == self.last_id:
                if "error" in reply:
                    raise RuntimeError(f"{method}: {reply['error']}")
                return reply.get("result", {})
            self.events.append(reply)

    def wait_for(self, method: str, session: str, timeout: float = 30.0) -> dict[str, Any]:
        seen = 0
        deadline = time.monotonic() + timeout
        while True:
            for event in self.events[seen:]:
                if event.get("method") == method and event.get("sessionId") == session:
                    return event
            seen = len(self.events)
            self.events.append(self._read(deadline))

    def settle(self, seconds: float) -> None:
        """Collect whatever arrives in the next `seconds` (late console messages)."""
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                self.events.append(self._read(deadline))
            except TimeoutError:
                return

    def close(self) -> None:
        with contextlib.suppress(RuntimeError, TimeoutError, OSError):
            self.call("Browser.close", timeout=5)
        try:
            self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
        os.close(self.writer)
        os.close(self.reader)

    def _log_tail(self) -> str:
        try:
            return " | ".join(self.log_path.read_text(errors="replace").splitlines()[-5:])
        except OSError:
            return "(none)"


LAYOUT_PROBE = """(() => {
  const charts = [...document.querySelectorAll('figure.chart')].map(f => {
    const svg = f.querySelector('svg');
    const box = svg ? svg.getBoundingClientRect() : {width: 0, height: 0};
    return {id: f.id, width: box.width, height: box.height,
            shapes: svg ? svg.querySelectorAll('path, use').length : 0};
  });
  return {title: document.title, charts, scripts: document.scripts.length,
          scrollWidth: document.documentElement.scrollWidth, innerWidth: window.innerWidth,
          text: document.body.innerText};
})()"""


@dataclass
class PageCheck:
    errors: list[str]
    requests: list[str]
    layout: dict[str, Any]
    screenshot: bytes


def open_in_chromium(page: Path, workdir: Path) -> PageCheck:
    """Load `page`, then return console/log errors, network requests, layout and a
    full-page screenshot."""
    browser = DevTools(chromium_binary(), workdir)
    try:
        target = browser.call("Target.createTarget", {"url": "about:blank"})["targetId"]
        session = browser.call("Target.attachToTarget", {"targetId": target, "flatten": True})[
            "sessionId"
        ]
        for domain in ("Page", "Runtime", "Log", "Network"):
            browser.call(f"{domain}.enable", session=session)
        browser.call(
            "Emulation.setDeviceMetricsOverride",
            {"width": VIEWPORT_WIDTH, "height": 900, "deviceScaleFactor": 1, "mobile": False},
            session=session,
        )
        browser.call("Page.navigate", {"url": page.absolute().as_uri()}, session=session)
        browser.wait_for("Page.loadEventFired", session)
        layout = browser.call(
            "Runtime.evaluate", {"expression": LAYOUT_PROBE, "returnByValue": True}, session=session
        )["result"]["value"]
        height = math.ceil(
            browser.call("Page.getLayoutMetrics", session=session)["cssContentSize"]["height"]
        )
        shot = browser.call(
            "Page.captureScreenshot",
            {
                "format": "png",
                "captureBeyondViewport": True,
                "clip": {"x": 0, "y": 0, "width": VIEWPORT_WIDTH, "height": height, "scale": 1},
            },
            session=session,
        )
        browser.settle(0.5)
    finally:
        browser.close()
    errors, requests = [], []
    for event in browser.events:
        method, params = event.get("method"), event.get("params", {})
        if method == "Runtime.consoleAPICalled" and params.get("type") in ("error", "assert"):
            args = params.get("args", [])
            errors.append(
                "console: " + " ".join(str(a.get("value", a.get("description"))) for a in args)
            )
        elif method == "Runtime.exceptionThrown":
            details = params.get("exceptionDetails", {})
            errors.append(
                "exception: "
                + str(details.get("exception", {}).get("description") or details.get("text"))
            )
        elif method == "Log.entryAdded" and params.get("entry", {}).get("level") == "error":
            errors.append("log: " + params["entry"].get("text", ""))
        elif method == "Network.requestWillBeSent":
            requests.append(params["request"]["url"])
    return PageCheck(errors, requests, layout, base64.b64decode(shot["data"]))


def png_size(data: bytes) -> tuple[int, int]:
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    return struct.unpack(">II", data[16:24])


def png_pixels(data: bytes) -> bytes:
    """The decompressed image data (filter bytes included), enough to tell blank from drawn."""
    pos, idat = 8, b""
    while pos < len(data):
        length, kind = struct.unpack(">I4s", data[pos : pos + 8])
        if kind == b"IDAT":
            idat += data[pos + 8 : pos + 8 + length]
        pos += 12 + length
    return zlib.decompress(idat)


@pytest.mark.parametrize("db_url", ["sqlite"], indirect=True)
def test_report_renders_in_chromium_without_errors(cli, tmp_path):
    recorded = build_campaign(cli, tmp_path / "campaign")
    out = tmp_path / "report.html"
    assert cli("report", "--run", recorded.campaign.run_id, "--html", out).exit_code == 0

    check = open_in_chromium(out, tmp_path / "browser")
    (tmp_path / "report.png").write_bytes(check.screenshot)

    assert check.errors == []
    assert check.requests == [out.absolute().as_uri()], "the page must load nothing else"
    layout = check.layout
    assert layout["scripts"] == 0
    assert layout["title"] == "softmax — run softmax-gpu-001 — kernel-ledger report"
    assert layout["scrollWidth"] <= layout["innerWidth"], "the page scrolls sideways"
    charts = {c["id"]: c for c in layout["charts"]}
    assert sorted(charts) == ["chart-latency", "chart-profiles", "chart-timeline"]
    for chart in charts.values():
        assert chart["width"] >= 400 and chart["height"] >= 150, chart
        assert chart["shapes"] >= 20, chart
    # the hostile hypothesis is shown as text, not run
    assert HOSTILE in layout["text"]
    assert "GPU timings on NVIDIA H200, µs" in layout["text"]

    width, height = png_size(check.screenshot)
    assert width == VIEWPORT_WIDTH
    assert height >= sum(c["height"] for c in charts.values()) + 500
    pixels = png_pixels(check.screenshot)
    assert len(set(pixels[:: max(1, len(pixels) // 20000)])) > 30, "the screenshot is blank"


def test_the_browser_check_catches_errors_and_requests(tmp_path):
    """The harness itself: a page with a console error, an uncaught exception and an
    external image must not pass."""
    page = tmp_path / "bad.html"
    page.write_text(
        "<!DOCTYPE html><html><head><title>bad</title></head><body>"
        "<script>console.error('deliberate'); undefinedFunction();</script>"
        '<img src="http://192.0.2.1/x.png"><figure class="chart" id="chart-x"></figure>'
        "</body></html>"
    )
    check = open_in_chromium(page, tmp_path / "browser")
    assert "console: deliberate" in check.errors
    assert any(e.startswith("exception: ReferenceError: undefinedFunction") for e in check.errors)
    assert "http://192.0.2.1/x.png" in check.requests
    assert check.layout["charts"] == [{"id": "chart-x", "width": 0, "height": 0, "shapes": 0}]
    assert check.layout["scripts"] == 1


def test_missing_chromium_fails_in_ci_and_skips_elsewhere(monkeypatch, tmp_path):
    monkeypatch.setenv("KERNEL_LEDGER_CHROMIUM", str(tmp_path / "no-such-chromium"))
    monkeypatch.setenv("CI", "1")
    with pytest.raises(pytest.fail.Exception, match="ensure-chromium"):
        chromium_binary()
    monkeypatch.delenv("CI")
    with pytest.raises(pytest.skip.Exception, match="ensure-chromium"):
        chromium_binary()
