"""`LedgerService`: every use case as a method, for the command line, the MCP server, the
controller's drop-in and the web view. Each use case is one method, showing its whole
workflow, in the module of its concern:

    ledger/services/session.py    the store (opened on first use), clock, event ids, the
                                  one append, the run's projection as a use case reads it
    ledger/services/writes.py     plan, record, profile, diagnose, noise, conclude
    ledger/services/queries.py    round_detail, compare, explanations, explain_rounds, ...
    ledger/services/analysis.py   analyze (a function of the service: conclude, then write
                                  analysis.json, report.md and manifest.json)
    ledger/services/building.py   the events built from the files a user hands in
"""

from __future__ import annotations

from ledger.services.queries import Queries
from ledger.services.writes import Writes


class LedgerService(Writes, Queries):
    """The application service. Construct it with a store (or `LedgerService.opening`, which
    opens the store on first use); every method is one use case."""
