"""serve: a read-only web view of the ledger (pages and a JSON API)."""

from __future__ import annotations

from cli.declare import Command, Env, Option
from cli.output import say


def serve(env: Env, host: str, port: int, allow_host: list[str]) -> None:
    from ledger.errors import InputError

    try:
        import starlette  # noqa: F401
        import uvicorn
    except ImportError:
        raise InputError(
            "serve needs the optional 'serve' extra: pip install 'kernel-ledger[serve]'"
        ) from None
    from ledger.reports.web import allowed_hosts, create_app, server_config

    hosts = allowed_hosts(host, allow_host)
    app = create_app(env.url, hosts=hosts)
    say(f"serving {app.state.store.shown_url} read-only on http://{host}:{port}/ (Ctrl-C stops)")
    uvicorn.Server(server_config(app, host, port)).run()


COMMAND = Command(
    "serve",
    """Browse the ledger read-only in a web browser: runs, each run's report with why every
    round was kept or discarded, event logs with hash checks, kernel diffs, history and
    checkpoints; the same data as JSON under /api/. The ledger is opened read-only.

    Safe to leave running: a request whose Host header names another host than this
    machine's loopback names, the address it listens on or an --allow-host is refused (400:
    a DNS-rebinding page cannot read the ledger); a request header must arrive within 10
    seconds, an idle connection is closed after 5, and the connections served at once stay
    well below the process's descriptor limit.

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
        "port": Option("TCP port to listen on.", int, 8000, metavar="N", ge=1, le=65535),
        "allow_host": Option(
            "Also answer requests whose Host header names HOST (repeatable), e.g. the name "
            "a proxy or other machines use.",
            metavar="HOST",
            many=True,
        ),
    },
    takes_json=False,
)
