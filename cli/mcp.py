"""mcp: the campaign and audit commands as MCP tools, over stdio."""

from __future__ import annotations

from cli.declare import Command, Env, Option


def mcp(env: Env, allow_path: list[str]) -> None:
    import importlib.util

    if importlib.util.find_spec("mcp") is None:
        from ledger.errors import InputError

        raise InputError("kernel-ledger mcp needs the MCP SDK: pip install 'kernel-ledger[mcp]'")
    from cli.mcpserver import serve

    serve(env.db, allow_path)


COMMAND = Command(
    "mcp",
    """Serve the campaign and audit commands as MCP tools on stdin/stdout, for coding
    agents: one process, the ledger opened once. Results are the objects --json prints.
    Every path a tool names must lie inside the folder it runs in, a root its client
    declares or an --allow-path folder; one outside is a tool error, nothing read or written.
    A relative --db or KERNEL_LEDGER_DB is relative to the folder the server runs in. Needs
    the MCP SDK: pip install 'kernel-ledger[mcp]'.

    Example: kernel-ledger --db sqlite:///ledger.sqlite3 mcp
    """,
    mcp,
    options={
        "allow_path": Option(
            "Also let tools read and write under DIR (repeatable).",
            metavar="DIR",
            many=True,
            file=True,
        )
    },
    takes_json=False,
)
