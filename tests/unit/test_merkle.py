"""RFC 6962 Merkle tree: public test vectors, then properties against a reference MTH."""

from __future__ import annotations

import hashlib

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ledger.errors import InputError
from ledger.integrity.merkle import (
    EMPTY_ROOT,
    InclusionChecker,
    TreeBuilder,
    consistency_proof,
    inclusion_proof,
    leaf_hash,
    node_hash,
    root,
    verify_consistency,
    verify_inclusion,
)

# Test vectors of the certificate-transparency reference implementation, as republished in
# github.com/transparency-dev/merkle (testonly/constants.go, proof/verify_test.go).
LEAVES = [
    bytes.fromhex(h)
    for h in (
        "",
        "00",
        "10",
        "2021",
        "3031",
        "40414243",
        "5051525354555657",
        "606162636465666768696a6b6c6d6e6f",
    )
]
EMPTY_HEX = "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
ROOTS = [
    bytes.fromhex(h)
    for h in (
        EMPTY_HEX,
        "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
        "fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125",
        "aeb6bcfe274b70a14fb067a5e5578264db0fa9b51af5e0ba159158f329e06e77",
        "d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7",
        "4e3bbb1f7b478dcfe71fb631631519a3bca12c9aefca1612bfce4c13a86264d4",
        "76e67dadbcdf1e10e1b74ddc608abd2f98dfb16fbce75277b5232a127f2087ef",
        "ddb89be403809e325750d3d263cd78929c2942b7942a34b77e122c9594a74c8c",
        "5dc9da79a70659a9ad559cb701ded9a2ab9d823aad2f4960cfe370eff4604328",
    )
]
LEAF_HASHES = [
    "6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d",
    "96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7",
    "0298d122906dcfc10892cb53a73992fc5b9f493ea4c9badb27b791b4127a7fe7",
    "07506a85fd9dd2f120eb694f86011e5bb4662e5c415a62917033d4a9624487e7",
    "bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b",
    "4271a26be0d8a84f0bd54c8c302e7cb3a3b5d1fa6780a40bcce2873477dab658",
    "b08693ec2e721597130641e8211e7eedccb4c26413963eee6c1e2ed16ffb1a5f",
    "46f6ffadd3d06a09ff3c5860d2755c8b9819db7df44251788c7d8e3180de8eb1",
]


def h(text: str) -> bytes:
    return bytes.fromhex(text)


# (0-based leaf index, tree size, audit path)
INCLUSION = [
    (
        0,
        8,
        [
            h("96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7"),
            h("5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e"),
            h("6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"),
        ],
    ),
    (
        5,
        8,
        [
            h("bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"),
            h("ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0"),
            h("d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"),
        ],
    ),
    (2, 3, [h("fac54203e7cc696cf0dfcb42c92a1d9dbaf70ad9e621f4bd8d98662f00e3c125")]),
    (
        1,
        5,
        [
            h("6e340b9cffb37a989ca544e6bb780a2c78901d3fb33738768511a30617afa01d"),
            h("5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e"),
            h("bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"),
        ],
    ),
    (0, 1, []),
]

# (old size, new size, consistency proof)
CONSISTENCY = [
    (1, 1, []),
    (
        1,
        8,
        [
            h("96a296d224f285c67bee93c30f8a309157f0daa35dc5b87e410b78630a09cfc7"),
            h("5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e"),
            h("6b47aaf29ee3c2af9af889bc1fb9254dabd31177f16232dd6aab035ca39bf6e4"),
        ],
    ),
    (
        6,
        8,
        [
            h("0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a"),
            h("ca854ea128ed050b41b35ffc1b87b8eb2bde461e9e3b5596ece6b9d5975a0ae0"),
            h("d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"),
        ],
    ),
    (
        2,
        5,
        [
            h("5f083f0a1a33ca076a95279832580db3e0ef4584bdff1f54c8a360f50de3031e"),
            h("bc1a0643b12e4d2d7c77918f44e0f4f79a838b6cf9ec5b5c283e1f4d88599e6b"),
        ],
    ),
    (
        6,
        7,
        [
            h("0ebc5d3437fbe2db158b9f126a1d118e308181031d0a949f8dededebc558ef6a"),
            h("b08693ec2e721597130641e8211e7eedccb4c26413963eee6c1e2ed16ffb1a5f"),
            h("d37ee418976dd95753c1c73862b9398fa2a2cf9b4ff0fdfe8b30cd95209614b7"),
        ],
    ),
]

SOME_HASH = h("abacaba000000000000000000000000000000000000000000060061e00123456")


# --- a straight transcription of the RFC 6962 definitions, as the reference ------------


def _k(n: int) -> int:
    k = 1
    while k * 2 < n:
        k *= 2
    return k


def ref_mth(d: list[bytes]) -> bytes:
    if not d:
        return hashlib.sha256(b"").digest()
    if len(d) == 1:
        return hashlib.sha256(b"\x00" + d[0]).digest()
    k = _k(len(d))
    return hashlib.sha256(b"\x01" + ref_mth(d[:k]) + ref_mth(d[k:])).digest()


def ref_path(m: int, d: list[bytes]) -> list[bytes]:
    if len(d) == 1:
        return []
    k = _k(len(d))
    if m < k:
        return [*ref_path(m, d[:k]), ref_mth(d[k:])]
    return [*ref_path(m - k, d[k:]), ref_mth(d[:k])]


def ref_subproof(m: int, d: list[bytes], whole: bool) -> list[bytes]:
    if m == len(d):
        return [] if whole else [ref_mth(d)]
    k = _k(len(d))
    if m <= k:
        return [*ref_subproof(m, d[:k], whole), ref_mth(d[k:])]
    return [*ref_subproof(m - k, d[k:], False), ref_mth(d[:k])]


def accepts(verify, *args) -> bool:
    """True only if the verifier returns True; an InputError counts as a rejection."""
    try:
        return verify(*args) is True
    except InputError:
        return False


def flip(digest: bytes, bit: int) -> bytes:
    changed = bytearray(digest)
    changed[bit // 8] ^= 1 << (bit % 8)
    return bytes(changed)


# --- known answers ---------------------------------------------------------------------


def test_empty_tree_root_is_sha256_of_nothing():
    assert root([]).hex() == EMPTY_HEX
    assert EMPTY_ROOT.hex() == EMPTY_HEX
    assert TreeBuilder().root().hex() == EMPTY_HEX


def test_leaf_hashes_match_vectors():
    assert [leaf_hash(d).hex() for d in LEAVES] == LEAF_HASHES
    assert node_hash(h(LEAF_HASHES[0]), h(LEAF_HASHES[1])) == ROOTS[2]


@pytest.mark.parametrize("size", range(9))
def test_roots_match_vectors(size):
    assert root(LEAVES[:size]) == ROOTS[size]
    assert root(iter(LEAVES[:size])) == ROOTS[size]  # any iterable, consumed once


def test_builder_gives_the_root_at_every_size_while_streaming():
    builder = TreeBuilder()
    seen = [builder.root()]
    for data in LEAVES:
        builder.append(data)
        seen.append(builder.root())
        assert builder.root() == seen[-1]  # reading the root consumes nothing
    assert builder.size == 8
    assert seen == ROOTS


@pytest.mark.parametrize(("index", "size", "proof"), INCLUSION)
def test_inclusion_proofs_match_vectors(index, size, proof):
    assert inclusion_proof(LEAVES[:size], index) == proof
    assert verify_inclusion(LEAVES[index], index, size, proof, ROOTS[size])


@pytest.mark.parametrize(("index", "size", "proof"), INCLUSION[:4])
def test_corrupted_inclusion_proofs_are_rejected(index, size, proof):
    good_root, leaf = ROOTS[size], LEAVES[index]
    probes = [
        (leaf, index - 1, size, proof, good_root),
        (leaf, index + 1, size, proof, good_root),
        (leaf, index ^ 2, size, proof, good_root),
        (leaf, index, size * 2, proof, good_root),
        (leaf, index, size // 2, proof, good_root),
        (b"WrongLeaf", index, size, proof, good_root),
        (leaf, index, size, proof, EMPTY_ROOT),
        (leaf, index, size, proof, SOME_HASH),
        (leaf, index, size, [*proof, b""], good_root),
        (leaf, index, size, [*proof, good_root], good_root),
        (leaf, index, size, [b"", *proof], good_root),
        (leaf, index, size, [good_root, *proof], good_root),
        (leaf, index, size, proof[:-1], good_root),
        (leaf, index, size, [proof[0], SOME_HASH, *proof[1:]], good_root),
    ]
    for position in range(len(proof)):
        changed = list(proof)
        changed[position] = flip(changed[position], 3)
        probes.append((leaf, index, size, changed, good_root))
    for probe in probes:
        assert not accepts(verify_inclusion, *probe), probe


@pytest.mark.parametrize(("old", "new", "proof"), CONSISTENCY)
def test_consistency_proofs_match_vectors(old, new, proof):
    assert consistency_proof(LEAVES[:new], old) == proof
    assert verify_consistency(old, new, proof, ROOTS[old], ROOTS[new])


@pytest.mark.parametrize(("old", "new", "proof"), CONSISTENCY[1:])
def test_corrupted_consistency_proofs_are_rejected(old, new, proof):
    r1, r2 = ROOTS[old], ROOTS[new]
    probes = [
        (old - 1, new, proof, r1, r2),
        (old + 1, new, proof, r1, r2),
        (old ^ 2, new, proof, r1, r2),
        (old, new * 2, proof, r1, r2),
        (old, new // 2, proof, r1, r2),
        (old, new, proof, SOME_HASH, r2),
        (old, new, proof, r1, SOME_HASH),
        (old, new, proof, r2, r1),
        (old, new, [], r1, r2),
        (old, new, [*proof, b""], r1, r2),
        (old, new, [*proof, r1], r1, r2),
        (old, new, [*proof, r2], r1, r2),
        (old, new, [b"", *proof], r1, r2),
        (old, new, [r1, *proof], r1, r2),
        (old, new, [r2, *proof], r1, r2),
        (old, new, [proof[0], *proof], r1, r2),
        (old, new, proof[:-1], r1, r2),
    ]
    for position in range(len(proof)):
        changed = list(proof)
        changed[position] = flip(changed[position], 4)
        probes.append((old, new, changed, r1, r2))
    for probe in probes:
        assert not accepts(verify_consistency, *probe), probe


@pytest.mark.parametrize(
    ("old", "new", "old_root", "new_root", "proof", "expected"),
    [
        (0, 0, EMPTY_ROOT, EMPTY_ROOT, [], True),
        (0, 1, EMPTY_ROOT, ROOTS[1], [], True),
        (0, 1, SOME_HASH, ROOTS[1], [], False),  # the empty tree has exactly one root
        (0, 1, EMPTY_ROOT, ROOTS[1], [EMPTY_ROOT], False),
        (1, 1, ROOTS[1], ROOTS[1], [], True),
        (1, 1, ROOTS[1], SOME_HASH, [], False),
        (1, 1, ROOTS[1], ROOTS[1], [EMPTY_ROOT], False),
        (1, 2, ROOTS[1], ROOTS[2], [], False),
    ],
)
def test_consistency_edge_cases(old, new, old_root, new_root, proof, expected):
    assert verify_consistency(old, new, proof, old_root, new_root) is expected


# --- malformed arguments ---------------------------------------------------------------


def test_verifiers_raise_input_error_for_malformed_arguments():
    proof = INCLUSION[0][2]
    with pytest.raises(InputError, match="leaf index 8 is outside a tree of size 8"):
        verify_inclusion(LEAVES[0], 8, 8, proof, ROOTS[8])
    with pytest.raises(InputError, match="leaf index -1"):
        verify_inclusion(LEAVES[0], -1, 8, proof, ROOTS[8])
    with pytest.raises(InputError, match="proof hash 1 must be 32 bytes, not 31"):
        verify_inclusion(LEAVES[0], 0, 8, [proof[0], proof[1][:31], proof[2]], ROOTS[8])
    with pytest.raises(InputError, match="a root hash must be 32 bytes, not 9"):
        verify_inclusion(LEAVES[0], 0, 8, proof, b"WrongRoot")
    with pytest.raises(InputError, match=r"old tree size 2 is not within 0\.\.1"):
        verify_consistency(2, 1, [], ROOTS[2], ROOTS[1])
    with pytest.raises(InputError, match="a root hash must be 32 bytes"):
        verify_consistency(1, 2, [h(LEAF_HASHES[1])], ROOTS[1], b"short")


def test_proof_builders_reject_out_of_range_arguments():
    with pytest.raises(ValueError, match="leaf index 3 is outside a tree of size 3"):
        inclusion_proof(LEAVES[:3], 3)
    with pytest.raises(ValueError, match="leaf index 0 is outside a tree of size 0"):
        inclusion_proof([], 0)
    with pytest.raises(ValueError, match=r"old size 4 is outside 0\.\.3"):
        consistency_proof(LEAVES[:3], 4)
    assert consistency_proof(LEAVES[:3], 0) == []
    assert consistency_proof(LEAVES[:3], 3) == []


# --- properties ------------------------------------------------------------------------

event_hashes = st.lists(st.binary(min_size=32, max_size=32), max_size=300, unique=True)


@given(st.lists(st.binary(max_size=40), max_size=300))
def test_streaming_root_equals_reference_mth(leaves):
    assert root(leaves) == ref_mth(leaves)
    builder = TreeBuilder()
    for count, data in enumerate(leaves, start=1):
        builder.append(data)
        if count in (1, len(leaves) // 2, len(leaves) - 1):
            assert builder.root() == ref_mth(leaves[:count])
    assert builder.root() == ref_mth(leaves)


@given(event_hashes.filter(bool), st.data())
def test_inclusion_proof_verifies_and_any_change_breaks_it(leaves, data):
    size = len(leaves)
    index = data.draw(st.integers(0, size - 1), label="index")
    proof = inclusion_proof(leaves, index)
    head = root(leaves)
    assert proof == ref_path(index, leaves)
    assert verify_inclusion(leaves[index], index, size, proof, head)

    if proof:
        position = data.draw(st.integers(0, len(proof) - 1), label="position")
        bit = data.draw(st.integers(0, 255), label="bit")
        changed = list(proof)
        changed[position] = flip(changed[position], bit)
        assert not verify_inclusion(leaves[index], index, size, changed, head)
    if size > 1:
        other = data.draw(st.integers(0, size - 1).filter(lambda i: i != index), label="other")
        assert not verify_inclusion(leaves[index], other, size, proof, head)
        assert not verify_inclusion(leaves[other], index, size, proof, head)
    assert not verify_inclusion(leaves[index], index, size, proof, flip(head, 0))


@given(event_hashes.filter(bool), st.data())
def test_inclusion_checker_answers_as_verify_inclusion_call_after_call(leaves, data):
    """The checker's memo of the previous call never changes an answer: over a sequence of
    calls, in order and not, with proofs changed at any level, leaves swapped, indexes
    moved and proofs cut or lengthened, it answers (or raises) as `verify_inclusion`."""
    size = len(leaves)
    head = root(leaves)
    checker = InclusionChecker(size, head)
    calls = data.draw(st.integers(1, 12), label="calls")
    start = data.draw(st.integers(0, size - 1), label="start")
    for step in range(calls):
        index = (
            (start + step) % size
            if data.draw(st.booleans())
            else data.draw(st.integers(0, size - 1))
        )
        proof = inclusion_proof(leaves, index)
        leaf, at = leaves[index], index
        change = data.draw(st.sampled_from(["none", "flip", "leaf", "index", "cut", "add"]))
        if change == "flip" and proof:
            position = data.draw(st.integers(0, len(proof) - 1))
            proof[position] = flip(proof[position], data.draw(st.integers(0, 255)))
        elif change == "leaf":
            leaf = flip(leaf, 0)
        elif change == "index":
            at = data.draw(st.integers(-1, size))
        elif change == "cut" and proof:
            proof = proof[:-1]
        elif change == "add":
            proof = [*proof, leaves[0]]
        try:
            expected = verify_inclusion(leaf, at, size, proof, head)
        except InputError:
            with pytest.raises(InputError):
                checker.verify(leaf, at, proof)
            continue
        assert checker.verify(leaf, at, proof) is expected
        if change == "none":
            assert expected


def test_inclusion_checker_verifies_a_whole_tree_in_order_and_catches_each_change():
    leaves = [hashlib.sha256(str(i).encode()).digest() for i in range(300)]
    head = root(leaves)
    checker = InclusionChecker(len(leaves), head)
    for i, leaf in enumerate(leaves):
        proof = inclusion_proof(leaves, i)
        assert checker.verify(leaf, i, proof)
        for level in range(len(proof)):  # a changed upper sibling is caught, also after a hit
            changed = list(proof)
            changed[level] = flip(changed[level], 7)
            assert not checker.verify(leaf, i, changed)
            assert checker.verify(leaf, i, proof)


@given(event_hashes, st.data())
def test_consistency_proof_verifies_and_other_roots_fail(leaves, data):
    new = len(leaves)
    old = data.draw(st.integers(0, new), label="old")
    proof = consistency_proof(leaves, old)
    old_root, new_root = root(leaves[:old]), root(leaves)
    if 0 < old < new:
        assert proof == ref_subproof(old, leaves, True)
    assert verify_consistency(old, new, proof, old_root, new_root)

    bit = data.draw(st.integers(0, 255), label="bit")
    assert not verify_consistency(old, new, proof, flip(old_root, bit), new_root)
    if old > 0 or new == 0:  # nothing ties an empty old tree to any particular new root
        assert not verify_consistency(old, new, proof, old_root, flip(new_root, bit))
    if old not in (0, new):
        other = data.draw(st.integers(1, new).filter(lambda m: m != old), label="other")
        assert not verify_consistency(old, new, proof, root(leaves[:other]), new_root)


def test_every_proof_verifies_for_small_trees():
    leaves = [hashlib.sha256(str(i).encode()).digest() for i in range(33)]
    roots = [root(leaves[:n]) for n in range(len(leaves) + 1)]
    for n in range(len(leaves) + 1):
        for i in range(n):
            assert verify_inclusion(leaves[i], i, n, inclusion_proof(leaves[:n], i), roots[n])
        for m in range(n + 1):
            proof = consistency_proof(leaves[:n], m)
            assert verify_consistency(m, n, proof, roots[m], roots[n]), (m, n)
            if m < n:
                assert not verify_consistency(m, n, proof, roots[m + 1], roots[n]), (m, n)


def test_large_tree_is_fast_enough():
    size = 100_000
    leaves = [i.to_bytes(32, "big") for i in range(size)]
    head = root(leaves)
    index = 77_777
    assert verify_inclusion(leaves[index], index, size, inclusion_proof(leaves, index), head)
    old = 65_537
    proof = consistency_proof(leaves, old)
    assert verify_consistency(old, size, proof, root(leaves[:old]), head)
