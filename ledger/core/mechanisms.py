"""The mechanism vocabulary: a small taxonomy of what an optimization round changes, so that
rounds written in free text ("rows per program", "ROWS_PER_ITER=1 -> 4", "pack 4 rows into
one program") count as one mechanism across runs.

Pure. Each entry is declared once, here, with the phrases that name it; `classify` maps a
round's `mechanism` and `change` to an entry (or `other`), and `resolve` reads a name a user
typed (an entry's id or one of its phrases). The vocabulary has a version, recorded with
every decision that carries an entry (`RoundDecided.mechanism_entry`), so a later change of
the phrases is a new version and old decisions replay under the one they record.
docs/mechanisms.md lists the entries.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass

VERSION = 2
"""The vocabulary's newest version. Version 1 is the entries with their plain phrases;
version 2 adds the phrases marked `since(2, ...)`. A decision records the version it was
classified under and is re-derived under it; readers classify every round with the newest."""

VERSIONS = (1, 2)

OTHER = "other"
"""The entry of a round whose mechanism and change name no entry's phrase."""


@dataclass(frozen=True, slots=True)
class Entry:
    id: str
    title: str
    platform: str  # "any", "gpu" or "ascend": where the mechanism exists
    versioned: tuple[tuple[int, str], ...]  # (since version, regular expression), in order

    @property
    def phrases(self) -> tuple[str, ...]:
        """Every phrase of the newest version."""
        return tuple(p for _, p in self.versioned)

    def matches(self, text: str, version: int = VERSION) -> bool:
        return any(v <= version and _pattern(p).search(text) for v, p in self.versioned)


_pattern = functools.cache(re.compile)  # each phrase compiled once, not looked up per round


def since(version: int, phrase: str) -> tuple[int, str]:
    """A phrase that names its entry from `version` on."""
    return (version, phrase)


def _entry(id: str, title: str, platform: str, *phrases: str | tuple[int, str]) -> Entry:
    return Entry(id, title, platform, tuple(p if isinstance(p, tuple) else (1, p) for p in phrases))


def known(version: int) -> int:
    """`version` when this kernel-ledger knows that vocabulary version; else ValueError."""
    if version not in VERSIONS:
        raise ValueError(f"unknown mechanism vocabulary version {version}")
    return version


# Declared most specific first: the first entry whose phrase occurs in the text is the
# round's (a "persistent grid" is a grid change before it is a block change).
VOCABULARY: tuple[Entry, ...] = (
    _entry(
        "persistent-grid",
        "persistent or grid-stride grid (programs loop over the work)",
        "any",
        r"\bpersistent\b",
        r"\bgrid stride\b",
        r"\bloop over (row )?blocks\b",
    ),
    _entry(
        "program-order",
        "order of programs over the output (swizzle, grouped launch order)",
        "any",
        r"\bswizzl",
        r"\bgroup size m\b",
        r"\bgrouped (launch )?order",
        r"\bprogram order\b",
    ),
    _entry(
        "pipelining",
        "pipelining stages and multibuffering",
        "any",
        r"\bnum stages\b",
        r"\bstages?\b",
        r"\bpipelin",
        r"\bmulti ?buffer",
        r"\bdouble buffer",
        r"\bprefetch",
    ),
    _entry(
        "split-reduction",
        "split or chunked reduction (split-K, tiled or online reduction, two passes)",
        "any",
        r"\bsplit k\b",
        r"\bsplit (the )?reduction\b",
        r"\bchunked\b",
        since(2, r"\bchunks?\b"),
        r"\bonline\b",
        r"\btwo pass",
        r"\btiled (two pass |reduction)",
        r"\bwelford\b",
        r"\brow tile\b",
        r"\bk split\b",
    ),
    _entry(
        "rows-per-program",
        "rows (or items) per program",
        "any",
        r"\brows? per (program|iter|block|cta|prog)\b",
        r"\b(batch|pack|packing) (\w+ )?(contiguous )?rows\b",
        r"\bmulti row\b",
        r"\brows per\b",
    ),
    _entry(
        "warps-per-program",
        "warps per program",
        "gpu",
        r"\bnum warps\b",
        r"\bwarps?\b",
    ),
    _entry(
        "cache-hints",
        "eviction and cache hints",
        "any",
        r"\bevict",
        r"\bcache (hint|modifier|policy)",
        r"\bl2 (resident|persist)",
    ),
    _entry(
        "vector-width",
        "vector width and alignment of loads and stores",
        "any",
        r"\bvector(ize|ise|ized|ised|ization|isation| width| load)",
        r"\balign",
        r"\bmultiple of\b",
        r"\bmax contiguous\b",
        r"\b(64|128) ?bit (loads?|stores?|accesses)\b",
    ),
    _entry(
        "fusion",
        "fusion of operations into one kernel",
        "any",
        r"\bfus(e|ed|es|ion|ing)\b",
    ),
    _entry(
        "precision",
        "precision of loads, math or accumulation",
        "any",
        r"\bprecision\b",
        r"\baccumulat",
        r"\b(fp|bf|tf)(8|16|32)\b",
        r"\bdtype\b",
        r"\b(down|up)cast",
    ),
    _entry(
        "recompute-vs-reuse",
        "recomputation against reuse (keep values live, reload or recompute them)",
        "any",
        r"\brecomput",
        r"\breuse\b",
        r"\breload",
        r"\bsingle pass\b",
        r"\bone pass\b",
        r"\bpasses\b",
        r"\bkeep (\w+ )?in registers\b",
    ),
    _entry(
        "arithmetic-rewrite",
        "cheaper arithmetic for the same result (reciprocal multiply, exp2, rsqrt, FMA)",
        "any",
        r"\breciprocal\b",
        r"\bexp2\b",
        r"\brsqrt\b",
        r"\bfma\b",
        r"\bfast math\b",
        r"\bstrength reduc",
        r"\bnormalize\b",
        r"\bdivis",
        since(2, r"\bspecial function"),
        since(2, r"\bintrinsic"),
    ),
    _entry(
        "masking",
        "masks, tails and boundary handling",
        "any",
        r"\bmask",
        r"\btail\b",
        r"\bboundary\b",
        r"\bpad(ding|ded)?\b",
        r"\bother ?=",
    ),
    _entry(
        "ascend-mte-batching",
        "Ascend: fewer, larger MTE transfers (burst length, contiguous copies)",
        "ascend",
        r"\bmte\b",
        r"\bburst\b",
        r"\bdma\b",
    ),
    _entry(
        "ascend-ub-tiling",
        "Ascend: unified-buffer tiling and live set",
        "ascend",
        r"\bub\b",
        r"\bunified buffer\b",
    ),
    _entry(
        "ascend-core-split",
        "Ascend: split of the work over the AI vector / cube cores",
        "ascend",
        r"\baiv\b",
        r"\bvector cores?\b",
        r"\bcube cores?\b",
        r"\bblock ?dim\b",
        r"\bcore num\b",
    ),
    _entry(
        "gpu-tensor-cores",
        "GPU: tensor-core instructions (tl.dot shapes, MMA)",
        "gpu",
        r"\btensor cores?\b",
        r"\bmma\b",
        r"\bwgmma\b",
        r"\btl dot\b",
    ),
    _entry(
        "gpu-shared-memory",
        "GPU: shared memory staging and TMA",
        "gpu",
        r"\bshared memory\b",
        r"\bsmem\b",
        r"\btma\b",
        r"\btensor descriptor\b",
    ),
    _entry(
        "block-shape",
        "block or tile shape",
        "any",
        r"\bblock (size|shape|m|n|k)\b",
        r"\btile (size|shape)\b",
        r"\btil(e|ed|es|ing)\b",
        r"\bblock\b",
    ),
    _entry(OTHER, "anything else", "any"),
)

BY_ID = {e.id: e for e in VOCABULARY}


def normalize(text: str) -> str:
    """Lower case, every run of characters other than letters, digits and `=` one space:
    "ROWS_PER_ITER=1 -> 4" reads "rows per iter=1 4"."""
    return " ".join(re.sub(r"[^a-z0-9=]+", " ", text.lower()).split())


@dataclass(frozen=True, slots=True)
class Classified:
    entry: str  # an entry's id, `other` when nothing matched
    source: str | None  # "mechanism" or "change": which text named it (None: neither)


@functools.lru_cache(maxsize=4096)  # pure; verify classifies every round again
def classify(mechanism: str | None, change: str | None, version: int = VERSION) -> Classified:
    """The entry a round's free-text `mechanism` names, else the one its `change` names,
    else `other`, under vocabulary `version` (default: the newest).

    >>> classify("rows per program", "ROWS_PER_PROGRAM=1 -> 8")
    Classified(entry='rows-per-program', source='mechanism')
    >>> classify(None, "NUM_WARPS=4 -> 8")
    Classified(entry='warps-per-program', source='change')
    >>> classify("masked-tail fill value", "TAIL_FILL=-inf -> 0.0").entry
    'masking'
    """
    known(version)
    for source, text in (("mechanism", mechanism), ("change", change)):
        if not text or not text.strip():
            continue
        norm = normalize(text)
        for entry in VOCABULARY:
            if entry.matches(norm, version):
                return Classified(entry.id, source)
    return Classified(OTHER, None)


def resolve(name: str) -> Entry | None:
    """The entry a user named: its id, or a text the vocabulary classifies as one entry
    (`other` only by its id)."""
    text = name.strip()
    if text in BY_ID:
        return BY_ID[text]
    found = classify(text, None)
    return None if found.entry == OTHER else BY_ID[found.entry]


def nearest(text: str, count: int = 3) -> tuple[str, ...]:
    """The entries closest to a text that names none (`other`): by how alike the text is
    to each entry's id and title, word for word, closest first; for a reader to pick from.

    >>> nearest("cheaper math")
    ('arithmetic-rewrite', 'precision', 'gpu-tensor-cores')
    """
    import difflib

    words = normalize(text).split()
    if not words:
        return ()

    def score(entry: Entry) -> float:
        named = normalize(f"{entry.id} {entry.title}").split()
        return sum(
            max(difflib.SequenceMatcher(None, w, n).ratio() for n in named) for w in words
        ) / len(words)

    ranked = sorted((e for e in VOCABULARY if e.id != OTHER), key=lambda e: -score(e))
    return tuple(e.id for e in ranked[:count])
