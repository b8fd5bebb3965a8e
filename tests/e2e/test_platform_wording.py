"""A run on a CPU (a `target.soc` that is neither Ascend nor a GPU) is worded for no vendor:
its profile's attribution, and every view that shows it (status, show, suggest, report),
speaks of no ncu, GPU, SM, warp, MTE, UB or AI Core. A GPU run keeps the GPU's words. The
one place that chooses: `ledger.core.bottleneck.wording`."""

from __future__ import annotations

import html
import re

import pytest
from template_kit import from_template, put, validation

VENDOR_WORDS = re.compile(
    r"\bncu\b|GPU|\bSMs?\b|warp|Ascend|MTE|aic_|aiv_|\bUB\b|AI Core|msprof|CUDA|tensor core"
)


def _plan(cli, soc: str) -> None:
    put("kernels/kernel_v0.py", "import numpy as np\n\ndef softmax(x):\n    return np.exp(x)\n")
    config = from_template(cli, "config")
    config["target"]["soc"] = soc
    validation(cli, "validation/baseline", "kernels/kernel_v0.py", "softmax-001-baseline")
    put("config.json", config)
    assert cli("plan", "--config", "config.json").exit_code == 0


def test_a_cpu_run_is_worded_for_no_vendor(cli, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    _plan(cli, "x86_64 Xeon (numpy)")
    put("profiles/bare.json", {"duration_us": 52.0})
    bare = cli("profile", "profiles/bare.json", "--run", "softmax-001", "--baseline")
    missing = (
        "a memory and a compute share of the time (a signal map with memory_throughput and "
        "sm_throughput as fractions, or bytes_moved and flop_count with the target's "
        "peak_bandwidth_gbps and peak_tflops)"
    )
    assert (bare.exit_code, bare.stderr) == (0, "")
    assert bare.stdout.splitlines()[1:] == [
        "bottleneck: unknown",
        f"  - missing: {missing}",
        f"first experiment: collect {missing} before choosing a mechanism",
    ]
    put("profiles/shares.json", {"duration_us": 52.0, "memory_throughput": 0.85})
    shares = cli("profile", "profiles/shares.json", "--run", "softmax-001", "--baseline")
    assert (shares.exit_code, shares.stderr) == (0, "")
    assert shares.stdout.splitlines()[1:] == [
        "bottleneck: memory-transfer",
        "  - memory_throughput 0.85 ≥ 0.60",
        "  - read with the throughput rules (throughput or launch signals)",
        "first experiment: contiguous, cache-friendly accesses, fewer bytes moved (fusion, a "
        "narrower dtype), or blocking so each byte loaded is reused",
    ]
    assert cli("report", "--run", "softmax-001", "--html", "report.html").exit_code == 0
    page = (tmp_path / "report.html").read_text()
    page = re.sub(r"<(style|script)\b.*?</\1>", "", page, flags=re.DOTALL)
    texts = {"report": html.unescape(re.sub(r"<[^>]+>", " ", page))}
    for view in (["status", "--run", "softmax-001"], ["show", "--run", "softmax-001",
                 "--round", "0"], ["suggest", "--run", "softmax-001"]):  # fmt: skip
        shown = cli(*view)
        assert shown.exit_code == 0, shown.stderr
        texts[view[0]] = shown.stdout
    texts["profile"] = bare.stdout + shares.stdout
    for name, text in texts.items():
        assert not VENDOR_WORDS.search(text), (name, VENDOR_WORDS.search(text))


@pytest.mark.parametrize(
    ("soc", "first"),
    [
        ("NVIDIA H200", "coalesced, vectorized accesses (contiguous along the fastest axis of a"),
        ("Ascend910B2", "larger contiguous transfers, a tile change, or multibuffering so MTE2"),
    ],
)
def test_gpu_and_ascend_runs_keep_their_words(cli, tmp_path, monkeypatch, soc, first):
    monkeypatch.chdir(tmp_path)
    _plan(cli, soc)
    signals = {"duration_us": 52.0, "dram_throughput": 0.85}
    if soc.startswith("Ascend"):
        signals = {"task_duration_us": 52.0, "aiv_mte2_ratio": 0.85, "aiv_vec_ratio": 0.1}
    put("profiles/p.json", signals)
    shown = cli("profile", "profiles/p.json", "--run", "softmax-001", "--baseline")
    assert shown.exit_code == 0, shown.stderr
    assert "bottleneck: memory-transfer" in shown.stdout
    assert f"first experiment: {first}" in shown.stdout
