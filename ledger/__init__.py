"""kernel-ledger: an event-sourced, hash-chained ledger for kernel optimization rounds."""

__version__ = "0.1.0"
