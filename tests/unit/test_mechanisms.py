"""The mechanism vocabulary: free-text mechanisms and changes of real rounds map to their
entry, every entry is documented, and names resolve."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ledger.core import mechanisms
from ledger.core.mechanisms import OTHER, classify, resolve

ROOT = Path(__file__).resolve().parents[2]


def _rounds() -> list[dict]:
    found = sorted((ROOT / "examples" / "gpu-campaign").glob("*/rounds/round-*.json"))
    found += sorted((ROOT / "examples" / "softmax-demo").glob("**/round*.json"))
    return [json.loads(p.read_text()) for p in found]


# every round of the two H200 campaigns and the softmax demo, as written
EXPECTED = {
    "cache eviction hint": "cache-hints",
    "cache eviction hint (weight)": "cache-hints",
    "num_warps per row width": "warps-per-program",
    "reciprocal multiply": "arithmetic-rewrite",
    "rows per program": "rows-per-program",
    "masked-tail fill value": "masking",
    "persistent grid over the SMs": "persistent-grid",
    "online tiled reduction": "split-reduction",
    "tiled two-pass row": "split-reduction",
    "mean divisor": "arithmetic-rewrite",
    "reciprocal square root": "arithmetic-rewrite",
}


def test_real_rounds_map_to_their_entries():
    rounds = [r for r in _rounds() if r.get("mechanism")]
    assert len(rounds) >= 10
    for r in rounds:
        found = classify(r["mechanism"], r["change"])
        assert found.entry == EXPECTED[r["mechanism"]], r["mechanism"]
        assert found.source == "mechanism"


@pytest.mark.parametrize(
    ("mechanism", "change", "entry", "source"),
    [
        (None, "ROWS_PER_ITER=1 -> 4", "rows-per-program", "change"),
        ("ROWS_PER_ITER", "ROWS_PER_ITER=1 -> 4", "rows-per-program", "mechanism"),
        (None, "BLOCK_SIZE=next_pow2(n) -> 512", "block-shape", "change"),
        (None, "multibuffer=False -> True", "pipelining", "change"),
        (None, "num_stages=2 -> 4", "pipelining", "change"),
        (None, "GRID=cdiv(rows,4) -> 40 vector cores", "ascend-core-split", "change"),
        ("split-K", "SPLIT_K=1 -> 4", "split-reduction", "mechanism"),
        ("chunk size of the scan", "4096-wide chunks", "split-reduction", "mechanism"),
        ("tile order / swizzled grid", "groups of 8 tile-rows", "program-order", "mechanism"),
        ("special-function instruction", "exp -> exp2", "arithmetic-rewrite", "mechanism"),
        ("fuse the bias add", "two kernels -> one", "fusion", "mechanism"),
        ("accumulate in fp32", "ACC=fp16 -> fp32", "precision", "mechanism"),
        ("GROUP_SIZE_M swizzle", "GROUP_SIZE_M=1 -> 8", "program-order", "mechanism"),
        (None, "PASSES=3 -> 2", "recompute-vs-reuse", "change"),
        ("something new", "X=1 -> 2", OTHER, None),
        (None, "   ", OTHER, None),
    ],
)
def test_classify(mechanism, change, entry, source):
    assert classify(mechanism, change) == mechanisms.Classified(entry, source)


def test_resolve_takes_ids_and_phrases():
    assert resolve("rows-per-program").id == "rows-per-program"
    assert resolve("num_warps").id == "warps-per-program"
    assert resolve("other").id == OTHER
    assert resolve("nothing we know") is None


def test_every_entry_is_documented_in_order():
    text = (ROOT / "docs" / "mechanisms.md").read_text()
    rows = [line for line in text.splitlines() if line.startswith("| `")]
    assert all(len(re.split(r"(?<!\\)\|", row)) == 6 for row in rows)  # four cells each
    assert [row.split("`")[1] for row in rows] == [e.id for e in mechanisms.VOCABULARY]
    for row, entry in zip(rows, mechanisms.VOCABULARY, strict=True):
        assert entry.title in row and f"| {entry.platform} |" in row
        for phrase in entry.phrases:
            assert "`" + phrase.replace("|", "\\|") + "`" in row  # a table cell escapes |
    assert len({e.id for e in mechanisms.VOCABULARY}) == len(mechanisms.VOCABULARY)
