"""serve: a read-only web view of the ledger (pages and a JSON API)."""

from __future__ import annotations

from cli.declare import Command, Env, Option
from cli.output import say


def serve(env: Env, host: str, port: int) -> None:
    from ledger.errors import InputError

    if not 0 < port < 65536:
        raise InputError(f"--port must be between 1 and 65535, not {port}")
    try:
        import starlette  # noqa: F401
        import uvicorn
    except ImportError:
        raise InputError(
            "serve needs the optional 'serve' extra: pip install 'kernel-ledger[serve]'"
        ) from None
    from ledger.reports.web import create_app

    app = create_app(env.url)
    say(f"serving {app.state.store.shown_url} read-only on http://{host}:{port}/ (Ctrl-C stops)")
    uvicorn.run(app, host=host, port=port, log_level="warning", access_log=False)


COMMAND = Command(
    "serve",
    """Browse the ledger read-only in a web browser: runs, each run's report with why every
    round was kept or discarded, event logs with hash checks, kernel diffs, history and
    checkpoints; the same data as JSON under /api/. The ledger is opened read-only.

    Example: (then open http://127.0.0.1:8000/ in a browser)

    \b
        kernel-ledger serve --port 8000
    """,
    serve,
    options={
        "host": Option(
            "Address to listen on (default: this machine only).",
            default="127.0.0.1",
            metavar="ADDR",
        ),
        "port": Option("TCP port to listen on.", int, 8000, metavar="N"),
    },
    takes_json=False,
)
