"""mcp: the campaign and audit commands as MCP tools, over stdio."""

from __future__ import annotations

from cli.declare import Command, Env


def mcp(env: Env) -> None:
    import importlib.util

    if importlib.util.find_spec("mcp") is None:
        from ledger.errors import InputError

        raise InputError("kernel-ledger mcp needs the MCP SDK: pip install 'kernel-ledger[mcp]'")
    from cli.mcpserver import serve

    serve(env.db)


COMMAND = Command(
    "mcp",
    """Serve the campaign and audit commands as MCP tools on stdin/stdout, for coding
    agents: one process, the ledger opened once. Results are the objects --json prints.

    Example: kernel-ledger --db sqlite:///ledger.sqlite3 mcp
    """,
    mcp,
    takes_json=False,
)
