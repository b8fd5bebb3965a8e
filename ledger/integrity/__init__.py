"""What proves the history: canonical bytes and hashes, the Merkle tree, checkpoints, the
replay verifier, run bundles, and the pre-merge gate built on them."""
