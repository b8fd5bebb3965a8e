"""RFC 6962 Merkle tree over the event hashes, in `seq` order.

Leaves are hashed as SHA-256(0x00 || data) and interior nodes as SHA-256(0x01 || left ||
right), so a leaf can never be passed off as a node. For the ledger the leaf data is the raw
32 bytes of an event hash, but any bytes work (the public test vectors use short strings).

The tree head is computed streaming (`TreeBuilder`, `root`) in O(log n) memory; proofs
(`inclusion_proof`, `consistency_proof`) need the leaves in memory. The verifiers follow
RFC 9162 sections 2.1.3.2 and 2.1.4.2 and never need the leaves at all.

>>> root([]).hex()[:16]
'e3b0c44298fc1c14'
>>> leaves = [bytes([i]) * 32 for i in range(5)]
>>> verify_inclusion(leaves[3], 3, 5, inclusion_proof(leaves, 3), root(leaves))
True
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Sequence

from ledger.errors import InputError

HASH_SIZE = 32
EMPTY_ROOT = hashlib.sha256(b"").digest()
BLOCK_HEIGHT = 10
BLOCK = 1 << BLOCK_HEIGHT


def leaf_hash(data: bytes) -> bytes:
    """SHA-256(0x00 || data).

    >>> leaf_hash(b"").hex()[:16]
    '6e340b9cffb37a98'
    """
    return hashlib.sha256(b"\x00" + bytes(data)).digest()


def node_hash(left: bytes, right: bytes) -> bytes:
    """SHA-256(0x01 || left || right).

    >>> node_hash(leaf_hash(b""), leaf_hash(b"\\x00")).hex()[:16]
    'fac54203e7cc696c'
    """
    return hashlib.sha256(b"\x01" + left + right).digest()


class TreeBuilder:
    """Streaming tree head: append leaves one by one, read the root at any size.

    Keeps one hash per set bit of the size (the roots of the perfect subtrees the leaves
    so far split into, largest first), so memory stays O(log n) for any number of leaves.

    >>> builder = TreeBuilder()
    >>> for data in (b"", b"\\x00", b"\\x10"):
    ...     builder.append(data)
    >>> builder.size, builder.root().hex()[:16]
    (3, 'aeb6bcfe274b70a1')
    """

    __slots__ = ("_size", "_stack")

    def __init__(self) -> None:
        self._size = 0
        self._stack: list[bytes] = []

    @property
    def size(self) -> int:
        """Number of leaves appended so far."""
        return self._size

    def append(self, leaf_data: bytes) -> None:
        """Add one leaf (its data, not its hash)."""
        self._push(leaf_hash(leaf_data))

    def extend(self, leaves: Iterable[bytes]) -> None:
        """Add many leaves, in order."""
        for data in leaves:
            self.append(data)

    def extend_hashes(self, packed: bytes) -> None:
        """Add the leaves packed in `packed`, `HASH_SIZE` bytes each (event hashes), in
        order: each aligned block of `BLOCK` leaves is hashed level by level (the leaves
        and the first level in one step) and pushed as one perfect subtree (the same tree,
        far fewer Python steps)."""
        sha, width = hashlib.sha256, HASH_SIZE
        at, end = 0, len(packed)
        while at < end:
            if self._size % BLOCK or end - at < BLOCK * width:
                self.append(packed[at : at + width])
                at += width
                continue
            level = [
                sha(
                    b"\x01"
                    + sha(b"\x00" + packed[i : i + width]).digest()
                    + sha(b"\x00" + packed[i + width : i + 2 * width]).digest()
                ).digest()
                for i in range(at, at + BLOCK * width, 2 * width)
            ]
            while len(level) > 1:
                pairs = zip(level[::2], level[1::2], strict=True)
                level = [sha(b"\x01" + a + b).digest() for a, b in pairs]
            self._push(level[0], BLOCK_HEIGHT)
            at += BLOCK * width

    def frontier(self) -> tuple[bytes, ...]:
        """The roots of the perfect subtrees the leaves so far split into, largest first:
        all a consistency proof from this size needs of the leaves before it
        (`consistency_from`)."""
        return tuple(self._stack)

    def root(self) -> bytes:
        """Root of the tree of all leaves so far (SHA-256 of nothing when empty).

        Folding the perfect subtrees right to left is exactly RFC 6962's MTH: the left
        child of every node is the largest perfect subtree that fits.
        """
        if not self._stack:
            return EMPTY_ROOT
        acc = self._stack[-1]
        for left in reversed(self._stack[:-1]):
            acc = node_hash(left, acc)
        return acc

    def _push(self, digest: bytes, height: int = 0) -> None:
        # Like incrementing a binary counter: every trailing 1 bit of the old size is a
        # perfect subtree of the same height as the carry, so they merge. A subtree of
        # 2**height leaves is pushed where the size is a multiple of it.
        size = self._size >> height
        while size & 1:
            digest = node_hash(self._stack.pop(), digest)
            size >>= 1
        self._stack.append(digest)
        self._size += 1 << height


def root(leaves: Iterable[bytes]) -> bytes:
    """Merkle tree head of the leaves (any iterable, consumed once, O(log n) memory).

    >>> root([b""]) == leaf_hash(b"")
    True
    """
    builder = TreeBuilder()
    builder.extend(leaves)
    return builder.root()


class ProofBuilder:
    """Roots and proofs for many sizes and leaves of one log, sharing work between them.

    Every subtree root is computed once and remembered, so proving every event of a run and
    the consistency of every stored checkpoint costs O(n) hashes in all, not O(n) per proof.
    Results equal `root`, `inclusion_proof` and `consistency_proof` of the same leaves.

    >>> leaves = [b"a", b"b", b"c", b"d", b"e"]
    >>> builder = ProofBuilder(leaves)
    >>> builder.inclusion(3, 5) == inclusion_proof(leaves, 3)
    True
    >>> builder.consistency(3, 5) == consistency_proof(leaves, 3)
    True
    >>> builder.root(3) == root(leaves[:3])
    True
    """

    __slots__ = ("_hashes", "_memo")

    def __init__(self, leaves: Iterable[bytes]) -> None:
        self._hashes = [leaf_hash(data) for data in leaves]
        self._memo: dict[tuple[int, int], bytes] = {}

    @property
    def size(self) -> int:
        return len(self._hashes)

    def root(self, size: int) -> bytes:
        """Root of the tree of the first `size` leaves."""
        self._check_size(size)
        return EMPTY_ROOT if size == 0 else self._subtree(0, size)

    def inclusion(self, index: int, size: int) -> list[bytes]:
        """Audit path of leaf `index` in the tree of the first `size` leaves."""
        self._check_size(size)
        if not 0 <= index < size:
            raise ValueError(f"leaf index {index} is outside a tree of size {size}")
        path: list[bytes] = []
        lo, hi = 0, size
        while hi - lo > 1:
            mid = lo + _split(hi - lo)
            if index < mid:
                path.append(self._subtree(mid, hi))
                hi = mid
            else:
                path.append(self._subtree(lo, mid))
                lo = mid
        path.reverse()
        return path

    def consistency(self, old_size: int, size: int) -> list[bytes]:
        """Proof that the first `old_size` leaves are a prefix of the first `size`."""
        self._check_size(size)
        if not 0 <= old_size <= size:
            raise ValueError(f"old size {old_size} is outside 0..{size}")
        return _consistency(old_size, size, self._subtree)

    def _check_size(self, size: int) -> None:
        if not 0 <= size <= len(self._hashes):
            raise ValueError(f"tree size {size} is outside 0..{len(self._hashes)}")

    def _subtree(self, lo: int, hi: int) -> bytes:
        if hi - lo == 1:
            return self._hashes[lo]
        key = (lo, hi)
        found = self._memo.get(key)
        if found is None:
            mid = lo + _split(hi - lo)
            found = self._memo[key] = node_hash(self._subtree(lo, mid), self._subtree(mid, hi))
        return found


def inclusion_proof(leaves: Sequence[bytes], index: int) -> list[bytes]:
    """Audit path for leaf `index` in the tree of all `leaves` (RFC 6962 PATH), leaf first.

    >>> len(inclusion_proof([b"a", b"b", b"c", b"d", b"e"], 0))
    3
    """
    return ProofBuilder(leaves).inclusion(index, len(leaves))


def consistency_proof(leaves: Sequence[bytes], old_size: int) -> list[bytes]:
    """Proof that the first `old_size` leaves are a prefix of `leaves` (RFC 6962 PROOF).

    Empty when `old_size` is 0 or the full size: nothing needs proving then.

    >>> len(consistency_proof([b"a", b"b", b"c", b"d", b"e"], 2))
    2
    """
    return ProofBuilder(leaves).consistency(old_size, len(leaves))


def consistency_from(
    old_size: int, frontier: Sequence[bytes], new_leaves: Sequence[bytes]
) -> list[bytes]:
    """`consistency_proof(leaves, old_size)` from the `frontier` of the first `old_size`
    leaves (`TreeBuilder.frontier`) and the leaves after them alone: every node of such a
    proof is a run of frontier subtrees or a subtree of the new leaves.

    >>> leaves = [bytes([i]) for i in range(7)]
    >>> builder = TreeBuilder()
    >>> builder.extend(leaves[:3])
    >>> consistency_from(3, builder.frontier(), leaves[3:]) == consistency_proof(leaves, 3)
    True
    """
    starts, at = [], 0
    for height in reversed(range(old_size.bit_length())):
        if old_size >> height & 1:
            starts.append((at, at + (1 << height)))
            at += 1 << height
    new = ProofBuilder(new_leaves)

    def subtree(lo: int, hi: int) -> bytes:
        if lo >= old_size:
            return new._subtree(lo - old_size, hi - old_size)
        pieces = [i for i, (a, b) in enumerate(starts) if lo <= a and b <= hi]
        assert pieces and starts[pieces[0]][0] == lo and starts[pieces[-1]][1] == hi
        acc = frontier[pieces[-1]]
        for i in reversed(pieces[:-1]):
            acc = node_hash(frontier[i], acc)
        return acc

    return _consistency(old_size, old_size + len(new_leaves), subtree)


def _consistency(old_size: int, size: int, subtree: Callable[[int, int], bytes]) -> list[bytes]:
    """RFC 6962 PROOF(old_size, D[0:size]), `subtree(lo, hi)` giving MTH(D[lo:hi]): the
    SUBPROOF recursion unrolled, each step recording one sibling subtree."""
    if old_size in (0, size):
        return []
    proof: list[bytes] = []
    lo, hi, m, whole = 0, size, old_size, True
    while m != hi - lo:
        k = _split(hi - lo)
        if m <= k:
            proof.append(subtree(lo + k, hi))
            hi = lo + k
        else:
            proof.append(subtree(lo, lo + k))
            lo, m, whole = lo + k, m - k, False
    if not whole:
        proof.append(subtree(lo, hi))
    proof.reverse()
    return proof


def verify_inclusion(
    leaf_data: bytes, index: int, size: int, proof: Sequence[bytes], root_hash: bytes
) -> bool:
    """True if `proof` shows `leaf_data` is leaf `index` of the tree of `size` with `root_hash`.

    Raises InputError when the arguments cannot describe any proof (an index outside the
    tree, a hash that is not 32 bytes); a well-formed proof that does not check out is False.

    >>> leaves = [b"a", b"b", b"c"]
    >>> verify_inclusion(b"c", 2, 3, inclusion_proof(leaves, 2), root(leaves))
    True
    >>> verify_inclusion(b"x", 2, 3, inclusion_proof(leaves, 2), root(leaves))
    False
    """
    return InclusionChecker(size, root_hash).verify(leaf_data, index, proof)


class InclusionChecker:
    """`verify_inclusion` for many leaves of one tree (`size`, `root_hash`), each checked in
    full, with the same answers and the same errors, at a fraction of the hashing when the
    leaves come in order (a bundle's events).

    The verification of one proof is a fold over its siblings whose state after each step
    is (leaf position, last position, hash so far). The checker keeps those states of the
    previous call: when a state of this call equals the previous call's state at the same
    step and the siblings still to come are the same hashes, every remaining step computes
    what it computed before, and the previous answer is this one. Consecutive leaves meet
    after a few levels, so a run of leaves costs about two node hashes each instead of one
    per level.
    """

    __slots__ = ("_answer", "_proof", "_root", "_size", "_states")

    def __init__(self, size: int, root_hash: bytes) -> None:
        self._size = size
        self._root = root_hash
        self._states: list[tuple[int, int, bytes]] = []
        self._proof: list[bytes] = []
        self._answer = False

    def verify(self, leaf_data: bytes, index: int, proof: Sequence[bytes]) -> bool:
        """As `verify_inclusion(leaf_data, index, size, proof, root_hash)`."""
        size = self._size
        if not 0 <= index < size:
            raise InputError(f"leaf index {index} is outside a tree of size {size}")
        proof = list(proof)
        _check_hashes(proof, self._root)
        before, before_proof = self._states, self._proof
        states: list[tuple[int, int, bytes]] = []
        fn, sn = index, size - 1
        acc = leaf_hash(leaf_data)
        answer = None
        for step, sibling in enumerate(proof):
            state = (fn, sn, acc)
            if step < len(before) and before[step] == state and before_proof[step:] == proof[step:]:
                answer = self._answer  # the same state and the same steps to come
                states.extend(before[step:])
                break
            states.append(state)
            if sn == 0:
                answer = False
                break
            if fn & 1 or fn == sn:
                acc = node_hash(sibling, acc)
                while not fn & 1 and fn != 0:
                    fn, sn = fn >> 1, sn >> 1
            else:
                acc = node_hash(acc, sibling)
            fn, sn = fn >> 1, sn >> 1
        if answer is None:
            answer = sn == 0 and acc == self._root
        self._states, self._proof, self._answer = states, proof, answer
        return answer


def verify_consistency(
    old_size: int, new_size: int, proof: Sequence[bytes], old_root: bytes, new_root: bytes
) -> bool:
    """True if `proof` shows tree (`old_size`, `old_root`) is a prefix of (`new_size`, `new_root`).

    For `old_size` 0 the proof must be empty and `old_root` the empty-tree root; for equal
    sizes the proof must be empty and the roots equal. Raises InputError when the arguments
    cannot describe any proof (sizes out of order, a hash that is not 32 bytes).

    >>> leaves = [b"a", b"b", b"c", b"d", b"e"]
    >>> proof = consistency_proof(leaves, 3)
    >>> verify_consistency(3, 5, proof, root(leaves[:3]), root(leaves))
    True
    """
    if not 0 <= old_size <= new_size:
        raise InputError(f"old tree size {old_size} is not within 0..{new_size}")
    _check_hashes(proof, old_root, new_root)
    if old_size == 0:
        empty_ok = new_size > 0 or new_root == EMPTY_ROOT
        return not proof and old_root == EMPTY_ROOT and empty_ok
    if old_size == new_size:
        return not proof and old_root == new_root
    if not proof:
        return False
    path = list(proof)
    if old_size & (old_size - 1) == 0:  # a perfect tree: the old root is itself a node
        path.insert(0, old_root)
    fn, sn = old_size - 1, new_size - 1
    while fn & 1:
        fn, sn = fn >> 1, sn >> 1
    old_acc = new_acc = path[0]
    for sibling in path[1:]:
        if sn == 0:
            return False
        if fn & 1 or fn == sn:
            old_acc = node_hash(sibling, old_acc)
            new_acc = node_hash(sibling, new_acc)
            while not fn & 1 and fn != 0:
                fn, sn = fn >> 1, sn >> 1
        else:
            new_acc = node_hash(new_acc, sibling)
        fn, sn = fn >> 1, sn >> 1
    return sn == 0 and old_acc == old_root and new_acc == new_root


def _split(n: int) -> int:
    """Largest power of two strictly below n (n >= 2)."""
    return 1 << ((n - 1).bit_length() - 1)


def _check_hashes(proof: Sequence[bytes], *roots: bytes) -> None:
    for digest in roots:
        if len(digest) != HASH_SIZE:
            raise InputError(f"a root hash must be {HASH_SIZE} bytes, not {len(digest)}")
    for position, digest in enumerate(proof):
        if len(digest) != HASH_SIZE:
            raise InputError(f"proof hash {position} must be {HASH_SIZE} bytes, not {len(digest)}")
