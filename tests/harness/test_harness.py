"""The like-for-like harness (ledger/harness/measure.py) on real Triton kernels.

In CI the kernels run under Triton's interpreter (TRITON_INTERPRET=1) with the wall timer; on
the device machine the same tests run with CUDA events and the read flush:

    python3 -m pytest --noconftest -p no:cacheprovider tests/harness   # (on the GPU)

This folder has no conftest of its own and imports nothing from kernel-ledger but the
harness, so it runs where only torch and triton are installed."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import pytest

ON_GPU = os.environ.get("KERNEL_LEDGER_HARNESS_GPU") == "1"
if not ON_GPU:
    os.environ["TRITON_INTERPRET"] = "1"

torch = pytest.importorskip("torch")
triton = pytest.importorskip("triton")
import triton.language as tl  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "ledger" / "harness"))
from measure import Harness  # noqa: E402

DEVICE = "cuda" if ON_GPU else "cpu"


@triton.jit
def _scale(x_ptr, out_ptr, n, factor, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) * factor, mask=mask)


def _launcher(n: int, block: int):
    x = torch.randn(n, device=DEVICE)
    out = torch.empty_like(x)
    grid = (triton.cdiv(n, block),)

    def launch():
        _scale[grid](x, out, n, 2.0, BLOCK=block)

    return launch, x, out


def _harness() -> Harness:
    return Harness(timer="cuda" if ON_GPU else "wall", settle_seconds=0.0)


def test_interleaved_samples_for_every_case_and_kernel(tmp_path: Path):
    harness = _harness()
    cases = {"f32-1000": 1000, "f32-4097": 4097}
    for case_id, n in cases.items():
        cand, x, out = _launcher(n, 1024)
        ref, _, _ = _launcher(n, 256)
        harness.add_case(case_id, candidate=cand, reference=ref)
    result = harness.run(repeats=6, batch=4, warmup=1)
    cand()
    assert torch.allclose(out, 2 * x)
    assert result.repeats == 6 and result.batches == 2
    for role in ("candidate", "reference"):
        for case_id in cases:
            samples = result.samples[role][case_id]
            assert len(samples) == 6 and all(s > 0 for s in samples)
    session = result.session.as_dict()
    assert session["timer"] == ("cuda" if ON_GPU else "wall")
    assert session["flush"] == ("read" if ON_GPU else "none")
    assert session["id"].startswith("s-") and session["host"] and session["started_at"]

    fragment = result.write(tmp_path / "raw", reference_sha256="ab" * 32)
    assert fragment["session"] == session
    assert [m["case_id"] for m in fragment["measurements"]] == list(cases)
    assert fragment["reference"]["kernel_sha256"] == "ab" * 32
    row = fragment["reference"]["measurements"][1]
    written = json.loads(Path(row["source"]).read_text())
    assert written["unit"] == "us" and written["samples"] == row["samples_us"]
    assert written["session"] == session and written["role"] == "reference"


def test_batches_stop_when_the_rule_is_settled():
    harness = _harness()
    launch, _, _ = _launcher(512, 512)
    harness.add_case("c", candidate=launch, reference=launch)
    answers = iter([10, 5, 0])
    result = harness.run(min_repeats=10, max_repeats=100, batch=10, until=lambda r: next(answers))
    # looked at 10 (asks 10 more), at 20 (asks 5 more: one batch of 5), at 25 (settled)
    assert [look["repeats"] for look in result.looks] == [10, 20, 25]
    assert result.repeats == 25


def test_max_repeats_bounds_the_batches():
    harness = _harness()
    launch, _, _ = _launcher(256, 256)
    harness.add_case("c", candidate=launch)
    result = harness.run(min_repeats=4, max_repeats=12, batch=4, until=lambda r: 1000)
    assert result.repeats == 12 and "reference" not in result.samples
    assert "reference" not in result.fragment()


def test_bad_settings_are_refused():
    harness = _harness()
    with pytest.raises(ValueError, match="no case registered"):
        harness.run(repeats=3)
    launch, _, _ = _launcher(64, 64)
    harness.add_case("c", candidate=launch, reference=launch)
    with pytest.raises(ValueError, match="registered twice"):
        harness.add_case("c", candidate=launch)
    with pytest.raises(ValueError, match="same kernels"):
        harness.add_case("d", candidate=launch)
    with pytest.raises(ValueError, match="min_repeats <= max_repeats"):
        harness.run(min_repeats=20, max_repeats=10)
    with pytest.raises(ValueError, match="either repeats"):
        harness.run(repeats=5, until=lambda r: 0)
    with pytest.raises(ValueError, match="timer must be one of"):
        Harness(timer="sundial")


def test_a_wall_sample_is_the_mean_of_enough_calls(tmp_path: Path):
    """A host call of a few microseconds is timed in bursts long enough to outweigh the
    timer; a call slower than the burst length is timed alone; the files say which."""
    import time

    values = list(range(64))
    harness = Harness(timer="wall", settle_seconds=0.0)
    harness.add_case("fast", candidate=lambda: sum(values), reference=lambda: sum(values))
    harness.add_case("slow", candidate=lambda: time.sleep(0.003), reference=lambda: None)
    result = harness.run(repeats=3, warmup=1)
    fast, slow = result.calls_per_sample["fast"], result.calls_per_sample["slow"]
    assert fast >= 10 and str(fast).strip("0") in ("1", "2", "5")
    assert slow == 1  # its slowest kernel takes longer than a burst: timed alone
    fragment = result.write(tmp_path / "raw")
    rows = {m["case_id"]: m for m in fragment["measurements"]}
    assert rows["fast"]["calls_per_sample"] == fast
    written = json.loads(Path(rows["fast"]["source"]).read_text())
    assert written["calls_per_sample"] == fast
    assert all(s < 1000 for s in result.samples["candidate"]["fast"])  # a mean, in us


def test_a_fixed_number_of_calls_per_sample(tmp_path: Path):
    harness = Harness(timer="wall", settle_seconds=0.0, calls_per_sample=7)
    count = []
    harness.add_case("c", candidate=lambda: count.append(1))
    result = harness.run(repeats=4, warmup=2)
    # warm-up 2, the discarded first pass 7, then 4 samples of 7 calls
    assert len(count) == 2 + 7 + 4 * 7
    assert result.calls_per_sample == {"c": 7}
    assert result.fragment()["measurements"][0]["calls_per_sample"] == 7


def test_calls_per_sample_is_checked():
    for bad in (0, -1, 2.5, True, 10**9):
        with pytest.raises(ValueError, match="calls_per_sample"):
            Harness(timer="wall", calls_per_sample=bad)
    if ON_GPU:
        with pytest.raises(ValueError, match="for the wall timer"):
            Harness(timer="cuda", calls_per_sample=5)
