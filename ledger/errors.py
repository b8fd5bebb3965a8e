"""One small exception tree. The command line maps each class to an exit code."""

from __future__ import annotations


class LedgerError(Exception):
    """Base class: every error the ledger raises on purpose. The message is one sentence."""

    exit_code = 2

    def __init__(self, message: str) -> None:
        super().__init__(" ".join(str(message).split()))

    @property
    def message(self) -> str:
        return str(self)


class InputError(LedgerError):
    """An input file, flag or value was rejected. Nothing was written."""

    exit_code = 2


class CoverageError(InputError):
    """A readable validation manifest that does not vouch for this kernel or these cases.
    `status` is the manifest's own status."""

    def __init__(self, message: str, *, status: str) -> None:
        super().__init__(message)
        self.status = status


class CheckFailed(LedgerError):
    """A check (verify, check-merge) ran and found a problem."""

    exit_code = 1


class ConflictError(LedgerError):
    """Another writer appended first; retry with fresh state. Nothing was written."""

    exit_code = 3


class StoreUnavailable(LedgerError):
    """The store cannot be opened, read or written, or its schema is out of date."""

    exit_code = 4


class LedgerMissing(StoreUnavailable):
    """No ledger exists at the URL, and the command may not create one."""


class SchemaOutOfDate(StoreUnavailable):
    """The database schema is older than this version of kernel-ledger."""
