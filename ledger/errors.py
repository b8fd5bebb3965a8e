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


MAX_PROBLEMS = 20
"""The most problems one refusal lists; it says how many more there were."""


class InputProblems(InputError):
    """An input with one or more problems, every one listed (up to MAX_PROBLEMS), each
    naming its JSON path: `head: problem` for one, `head: N problems: a; b` for several.
    `problems` are the lines a front end shows one by one, `details` the `--json` keys;
    `hint`, when given, says how to proceed and ends the message (and is shown after the
    lines)."""

    def __init__(self, head: str, problems: list[str], hint: str = "") -> None:
        shown = [" ".join(p.split()) for p in problems[:MAX_PROBLEMS]]
        if len(problems) > MAX_PROBLEMS:
            shown.append(f"... and {len(problems) - MAX_PROBLEMS} more (fix these first)")
        lead = f"{head}: " if head else ""
        self.summary = f"{lead}{len(problems)} problems:"
        if len(problems) == 1:
            message = f"{lead}{shown[0]}"
        else:
            message = f"{self.summary} " + "; ".join(shown)
        self.hint = " ".join(hint.split())
        super().__init__(f"{message}. {self.hint}" if self.hint else message)
        self.problems = shown
        self.details: dict[str, object] = {"problems": shown}
        if self.hint:
            self.details["hint"] = self.hint


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
