"""`kernel-ledger serve` in a real browser: Playwright for Python driving Debian's Chromium
(/usr/bin/chromium, installed by .ci/ensure-chromium; Playwright's own browser download is
not used) opens every page of a ledger built from the demo campaigns in examples/ (the
softmax demo and the H200 softmax campaign, as `make demo` replays them), checks what each
shows and that nothing overflows sideways at 800 and 1,400 px, and takes screenshots.

Screenshots go to the test's temporary folder; with KERNEL_LEDGER_SCREENSHOTS=DIR they are
also written to DIR (docs/images/audit-view holds the ones docs/audit-view.md shows).
"""

from __future__ import annotations

import os
import socket
import threading
import time
from pathlib import Path

import pytest

from conftest import CliRunner

ROOT = Path(__file__).resolve().parents[2]
DEMO = ROOT / "examples" / "softmax-demo"
GPU = ROOT / "examples" / "gpu-campaign" / "softmax"
WIDTHS = (800, 1400)
FLAGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
]


def chromium() -> str:
    explicit = os.environ.get("KERNEL_LEDGER_CHROMIUM") or "/usr/bin/chromium"
    if os.path.isfile(explicit) and os.access(explicit, os.X_OK):
        return explicit
    message = f"Chromium is missing ({explicit}); install it with .ci/ensure-chromium"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


def ok(cli: CliRunner, *args) -> None:
    result = cli(*args)
    assert result.exit_code == 0, (args, result.stderr)


@pytest.fixture(scope="module")
def demo_ledger(tmp_path_factory) -> str:
    """The softmax demo (every decision, validation failure included) and the H200 softmax
    campaign (raw samples, ncu profiles, A/A remeasures), concluded, with a checkpoint."""
    folder = tmp_path_factory.mktemp("demo")
    cli = CliRunner(f"sqlite:///{folder / 'ledger.sqlite3'}")
    ok(cli, "plan", "--config", DEMO / "config.json")
    for n in range(1, 6):
        ok(
            cli,
            "record",
            "--run",
            "softmax-demo-001",
            "--result",
            DEMO / "rounds" / f"round-{n}.json",
        )
    ok(cli, "analyze", "--run", "softmax-demo-001", "--output-dir", folder / "demo")
    ok(cli, "plan", "--config", GPU / "config.json")
    ok(
        cli,
        "profile",
        "--run",
        "gpu-softmax-001",
        "--baseline",
        GPU / "profiles" / "s0_base.fp16-4096x1024.ncu.csv",
    )
    rounds = sorted((GPU / "rounds").glob("round-*.json"), key=lambda p: int(p.stem.split("-")[1]))
    for path in rounds:
        ok(cli, "record", "--run", "gpu-softmax-001", "--result", path)
        if path.name == "round-1.json":
            for aa in sorted((GPU / "noise").glob("aa-*.json")):
                ok(cli, "noise", "--run", "gpu-softmax-001", "--measurements", aa)
    ok(cli, "checkpoint")
    return cli.db_url


def baseline_profile_version(db_url: str) -> int:
    from sqlalchemy import text

    from ledger.store.eventstore import Store

    store = Store(db_url, read_only=True)
    with store.transaction() as conn:
        version = conn.execute(
            text(
                "SELECT stream_version FROM profiles WHERE run_id = 'gpu-softmax-001' "
                "AND subject = 'baseline'"
            )
        ).scalar_one()
    store.close()
    return version


@pytest.fixture(scope="module")
def server(demo_ledger):
    """uvicorn serving the ledger on a free loopback port, in a thread of this process."""
    import uvicorn

    from ledger.reports.web import create_app

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    config = uvicorn.Config(
        create_app(demo_ledger), host="127.0.0.1", port=port, log_level="warning"
    )
    srv = uvicorn.Server(config)
    thread = threading.Thread(target=srv.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not srv.started:
        assert time.monotonic() < deadline, "the server did not start"
        time.sleep(0.05)
    yield f"http://127.0.0.1:{port}"
    srv.should_exit = True
    thread.join(10)


@pytest.fixture(scope="module")
def browser():
    binary = chromium()
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        b = p.chromium.launch(executable_path=binary, args=FLAGS)
        yield b
        b.close()


def shots_dirs(tmp_path: Path) -> list[Path]:
    dirs = [tmp_path]
    extra = os.environ.get("KERNEL_LEDGER_SCREENSHOTS")
    if extra:
        dirs.append(Path(extra))
    for d in dirs:
        d.mkdir(parents=True, exist_ok=True)
    return dirs


OVERFLOW = """() => {
  const width = document.documentElement.clientWidth;
  const bad = [];
  for (const el of document.querySelectorAll('body *')) {
    const r = el.getBoundingClientRect();
    if (r.width === 0) continue;
    if (r.right > width + 1) bad.push(el.tagName + '.' + el.className + ' right=' + r.right);
    if (el.scrollWidth > el.clientWidth + 1 && getComputedStyle(el).overflowX !== 'visible')
      bad.push('scrolls: ' + el.tagName + '.' + el.className);
  }
  return {scrollWidth: document.documentElement.scrollWidth, width, bad: bad.slice(0, 5)};
}"""

# (name, path, texts the page must show)
PAGES = [
    ("runs", "/", ["gpu-softmax-001", "softmax-demo-001", "passed", "open"]),
    ("runs-open", "/?status=open", ["gpu-softmax-001"]),
    (
        "run-demo",
        "/run?id=softmax-demo-001",
        [
            "DISCARD: I = +0.57% is below the minimum improvement 1.00% and worst case R = +5.40% "
            "on bf16-64x8193 is over its limit 2.00%.",
            "FAIL: validation failed on cases fp16-128x257",
            "NOISE: |I| = 0.15% is below the noise floor 0.50%",
            "Glossary",
        ],
    ),
    (
        "run-gpu",
        "/run?id=gpu-softmax-001",
        ["A/A pair", "the bootstrap's 5% lower bound of I", "mechanism-refuted", "Raw samples"],
    ),
    ("events", "/events?run=gpu-softmax-001", ["RunPlanned", "hash ok", "chain ok"]),
    ("diff", "/diff?run=gpu-softmax-001&a=0&b=1", ["round 0", "round 1", "@@"]),
    ("history", "/history?op=softmax", ["why", "KEEP:", "DISCARD:"]),
    ("history-like", "/history?like=gpu-softmax-001&like_version={profile}", ["nearest first"]),
    ("checkpoints", "/checkpoints?verify=1", ["verified against its stored checkpoints: ok"]),
]


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize(("name", "path", "texts"), PAGES, ids=[p[0] for p in PAGES])
def test_every_page_shows_its_content_and_fits(
    demo_ledger, server, browser, tmp_path, name, path, texts, width
):
    page = browser.new_page(viewport={"width": width, "height": 1000})
    errors: list[str] = []
    requests: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    page.on("pageerror", lambda e: errors.append(str(e)))
    page.on("request", lambda r: requests.append(r.url))
    path = path.format(profile=baseline_profile_version(demo_ledger))
    response = page.goto(server + path)
    assert response is not None and response.status == 200, path
    text = page.inner_text("body")
    for expected in texts:
        assert expected in text, (path, expected)
    layout = page.evaluate(OVERFLOW)
    assert layout["scrollWidth"] <= width, (path, width, layout)
    assert layout["bad"] == [], (path, width, layout["bad"])
    assert errors == []
    assert all(r.startswith(server) for r in requests), requests
    for folder in shots_dirs(tmp_path):
        page.screenshot(path=str(folder / f"{name}-{width}.png"))
    page.close()


def test_the_rounds_of_a_run_say_why_and_the_chart_marks_outliers(server, browser, tmp_path):
    page = browser.new_page(viewport={"width": 800, "height": 1000})
    page.goto(server + "/run?id=gpu-softmax-001")
    whys = page.locator("#rounds .why-text").all_inner_texts()
    decisions = page.locator("#rounds tr.main .badge").all_inner_texts()
    assert len(whys) == len(decisions) == 7
    assert [w.split(":")[0] for w in whys] == decisions
    # the R and cumulative columns stay on screen at 800 px
    for header in ("R", "cumul."):
        box = page.locator("#rounds th", has_text=header).first.bounding_box()
        assert box is not None and box["x"] + box["width"] <= 800
    caption = page.inner_text("#chart-latency figcaption")
    assert "relative to the original" in caption and "outlier" in caption
    details = page.locator("details.raw")
    assert not details.locator("table").is_visible()
    details.locator("summary").click()
    assert details.locator("table").is_visible()
    for folder in shots_dirs(tmp_path):
        page.locator("#rounds").screenshot(path=str(folder / "run-gpu-rounds-800.png"))
    page.set_viewport_size({"width": 1400, "height": 1000})
    for folder in shots_dirs(tmp_path):
        page.locator("#chart-latency").screenshot(path=str(folder / "run-gpu-latency-1400.png"))
        page.locator("#noise").screenshot(path=str(folder / "run-gpu-noise-1400.png"))
    page.close()


@pytest.mark.parametrize("width", WIDTHS)
def test_the_html_report_fits_too(demo_ledger, browser, tmp_path, width):
    out = tmp_path / "report.html"
    ok(CliRunner(demo_ledger), "report", "--run", "gpu-softmax-001", "--html", out)
    page = browser.new_page(viewport={"width": width, "height": 1000})
    page.goto(out.as_uri())
    layout = page.evaluate(OVERFLOW)
    assert layout["scrollWidth"] <= width and layout["bad"] == [], layout
    assert page.locator("#rounds .why-text").count() == 7
    page.close()
