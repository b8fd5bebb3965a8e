"""The `kernel-ledger` command line: parse, call the service, render. Nothing else."""
