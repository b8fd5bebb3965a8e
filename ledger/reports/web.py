"""`kernel-ledger serve`: a read-only web view of a ledger, pages and a JSON API.

    create_app(url) -> Starlette     every route is GET (and HEAD); nothing writes

Read-only by construction: the store is opened with `read_only` (SQLite through a `mode=ro`
URI with `query_only`, PostgreSQL with `default_transaction_read_only`), no route takes
another method, and no page holds a form that posts. Ledger text reaches a page only
through autoescaped Jinja2 expressions (the templates are those of the HTML report), and
run ids travel in query strings, never in paths, so an id such as `../x` names nothing but
a run. Lists are keyset-paged (`after=`), so a page costs the same at a million events.
"""

from __future__ import annotations

import contextlib
import difflib
from dataclasses import asdict, dataclass
from typing import Any
from urllib.parse import urlencode

from ledger.core.actors import describe, parsed
from ledger.errors import InputError, LedgerError
from ledger.store.history import utc_bound
from ledger.text import display

PAGE = 50
MAX_PAGE = 500
EVENT_PAGE = 100
CSP = "default-src 'none'; style-src 'unsafe-inline'; form-action 'self'; base-uri 'none'"
HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    "X-Frame-Options": "DENY",
}
MAX_NUMBER = 2**53 - 1
"""The largest number a query parameter takes (the ledger's integers are RFC 8785-safe)."""
STATUSES = ("open", "concluded", "passed", "failed", "inconclusive")


class NotFound(InputError):
    pass


def link(path: str, **params: Any) -> str:
    """A same-site link with its query string encoded (None values left out)."""
    query = urlencode({k: v for k, v in params.items() if v is not None and v != ""})
    return f"{path}?{query}" if query else path


# --- reading: what each page shows, as plain data (the JSON API returns the same) ---------


@dataclass
class Reader:
    service: Any

    @property
    def store(self) -> Any:
        return self.service.store

    def runs(
        self, *, op: str | None, soc: str | None, status: str | None, after: str | None, limit: int
    ) -> tuple[list[Any], str | None]:
        from ledger.store.pages import runs_page

        if status is not None and status not in STATUSES:
            raise InputError(f"status must be one of {', '.join(STATUSES)}, not {status!r}")
        with self.store.transaction() as conn:
            rows = runs_page(conn, op=op, soc=soc, status=status, after=after, limit=limit + 1)
        return rows[:limit], rows[limit - 1].run_id if len(rows) > limit else None

    def run(self, run_id: str) -> Any:
        from ledger.reports.report import gather

        self._known(run_id)
        return gather(self.service, run_id, tree_head=False)

    def _known(self, run_id: str) -> None:
        with self.store.transaction() as conn:
            if self.store.load_view(conn, run_id) is None:
                raise NotFound(f"run {run_id!r} is not in the ledger")

    def events(
        self, run_id: str, after: int, limit: int
    ) -> tuple[list[dict[str, Any]], int | None]:
        """A page of the run's events with each one's hash, parent and checks: the hash
        recomputed from the stored bytes, and the parent equal to the previous event's hash."""
        from ledger.store.pages import events_page

        self._known(run_id)
        with self.store.transaction() as conn:
            page = events_page(conn, run_id, after, limit + 1)
            before = self.store.read_version(conn, run_id, after) if after > 0 else None
        previous = before.event_hash if before is not None else "0" * 64
        out = []
        for record in page[:limit]:
            try:
                computed = record.computed_hash()
            except ValueError:
                computed = None
            try:
                record.event()
                readable, actor = True, parsed(record.actor)
            except ValueError:
                readable, actor = False, None
            out.append(
                {
                    "seq": record.seq,
                    "stream_version": record.stream_version,
                    "event_type": record.event_type,
                    "recorded_at": record.recorded_at,
                    "event_hash": record.event_hash,
                    "parent_hash": record.parent_hash,
                    "hash_ok": computed == record.event_hash,
                    "parent_ok": record.parent_hash == previous,
                    "readable": readable,
                    "actor": actor,  # who appended it (null before actors were recorded)
                    "by": describe(actor),
                }
            )
            previous = record.event_hash
        more = page[limit - 1].stream_version if len(page) > limit else None
        return out, more

    def kernels(self, run_id: str) -> tuple[dict[int, tuple[str, str]], dict[int, int]]:
        """Round -> (sha256, path) of each kernel the run stored (0 the original), and
        round -> the round whose kernel it started from (its parent_kernel_sha256: the best
        kernel then, 0 the original), which the round's diff compares it with."""
        from ledger.core.events import RoundSubmitted, RunPlanned

        self._known(run_id)
        with self.store.transaction() as conn:
            stored = self.store.read_stream(conn, run_id, types=("RunPlanned", "RoundSubmitted"))
        out: dict[int, tuple[str, str]] = {}
        parents: dict[int, int] = {}
        for record in stored:
            event = record.event()
            if isinstance(event, RunPlanned):
                out[0] = (event.kernel.sha256, event.kernel.path)
            elif isinstance(event, RoundSubmitted):
                earlier = [n for n in out if out[n][0] == event.parent_kernel_sha256]
                parents[event.round] = max(earlier, default=0)
                out[event.round] = (event.candidate.sha256, event.candidate.path)
        return out, parents

    def diff(self, run_id: str, a: int, b: int) -> dict[str, Any]:
        kernels, _ = self.kernels(run_id)
        for number in (a, b):
            if number not in kernels:
                raise NotFound(f"run {run_id!r} has no round {number}")
        texts = []
        with self.store.transaction() as conn:
            for number in (a, b):
                blob = self.store.get_blob(conn, kernels[number][0])
                texts.append(None if blob is None else blob.decode("utf-8", "replace"))
        diff = None
        if texts[0] is not None and texts[1] is not None:
            diff = "".join(
                difflib.unified_diff(
                    texts[0].splitlines(keepends=True),
                    texts[1].splitlines(keepends=True),
                    fromfile=f"round {a} ({kernels[a][0][:12]})",
                    tofile=f"round {b} ({kernels[b][0][:12]})",
                )
            )
        sides = {
            side: {
                "round": n,
                "sha256": kernels[n][0],
                "path": kernels[n][1],
                "stored": t is not None,
            }
            for side, n, t in (("a", a, texts[0]), ("b", b, texts[1]))
        }
        return {
            "run_id": run_id,
            **sides,
            "rounds": sorted(kernels),
            "diff": diff,
        }

    def history(
        self, f: Any
    ) -> tuple[list[Any], dict[str, Any], tuple[str, str, int] | None, dict[Any, Any]]:
        """A page of rounds, why each was decided, the key of the next page (None: the
        last) and who recorded each decision (actor objects, by run and round)."""
        from dataclasses import replace

        from ledger.core.actors import parsed
        from ledger.store.history import decision_actors, query_rounds

        limit = f.limit
        with self.store.transaction() as conn:
            rows = query_rounds(conn, replace(f, limit=limit + 1))
            rows, more = rows[:limit], len(rows) > limit
            actors = decision_actors(conn, rows) if rows else {}
        why = self.service.explain_rounds([(r.run_id, r.round) for r in rows])
        last = (rows[-1].recorded_at, rows[-1].run_id, rows[-1].round) if more else None
        return rows, why, last, {key: parsed(text) for key, text in actors.items()}

    def like_profile(self, run_id: str, version: int, limit: int) -> dict[str, Any]:
        """Past rounds whose starting profile resembles a stored profile (as --like-profile
        does for a profile file): same bottleneck class, nearest signals first."""
        from ledger.core.events import ProfileRecorded
        from ledger.core.similar import rank
        from ledger.store.history import rounds_with_bottleneck

        with self.store.transaction() as conn:
            record = self.store.read_version(conn, run_id, version)
            if record is None or record.event_type != "ProfileRecorded":
                raise NotFound(f"run {run_id!r} has no profile at event {version}")
            profile = record.event()
            assert isinstance(profile, ProfileRecorded)
            bottleneck = str((profile.attribution or {}).get("bottleneck") or "unknown")
            candidates = rounds_with_bottleneck(conn, bottleneck, 500)
        return {
            "profile": {"run_id": run_id, "stream_version": version, "bottleneck": bottleneck},
            "similar": rank(profile.signals, candidates, limit),
        }

    def profiles(self, limit: int = 20) -> list[Any]:
        from ledger.store.pages import latest_profiles

        with self.store.transaction() as conn:
            return latest_profiles(conn, limit)

    def checkpoints(self, verify: bool) -> dict[str, Any]:
        from ledger.store.audit_store import list_checkpoints

        with self.store.transaction() as conn:
            stored = list_checkpoints(conn)
            size = self.store.event_count(conn)
        out: dict[str, Any] = {
            "event_count": size,
            "checkpoints": [asdict(c) for c in stored],
            "verification": None,
        }
        if verify:
            from ledger.integrity.audit import verify as audit_verify

            report = audit_verify(self.store)
            out["verification"] = report.as_dict()
            results = {r.source: r for r in report.stored}
            for c in out["checkpoints"]:
                result = results.get(f"stored #{c['checkpoint_id']}")
                c["status"] = result.status if result else "not run"
                c["reason"] = result.reason if result else None
        return out


# --- the application -------------------------------------------------------------------


# --- safe to leave running ---------------------------------------------------------------

HEADER_TIMEOUT_S = 10.0
"""A connection must deliver a request's whole header within this many seconds of opening
(or of the previous answer), however slowly it trickles in, or it is closed."""
IDLE_TIMEOUT_S = 5
"""A kept-alive connection with no new request is closed after this many seconds."""
LOOPBACK = ("127.0.0.1", "localhost", "::1")
WILDCARDS = ("", "0.0.0.0", "::")


def connection_limit() -> int:
    """How many connections are served at once: well below this process's descriptor limit
    (which the ledger's files, the log and the listening socket also need), at most 1024."""
    import resource

    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    if soft == resource.RLIM_INFINITY:
        soft = 4096
    return max(8, min(1024, soft - 64, soft // 2))


def allowed_hosts(bind: str, extra: Any = ()) -> frozenset[str]:
    """The names a request's Host header may carry: this machine's loopback names, the
    address the server is bound to (unless a wildcard) and each `--allow-host`."""
    names = {*LOOPBACK, *(h.strip().lower().strip("[]") for h in extra)}
    if bind.strip("[]") not in WILDCARDS:
        names.add(bind.strip("[]").lower())
    return frozenset(n for n in names if n)


def host_name(header: str) -> str:
    """The host of a Host header, without its port: `[::1]:8000` is `::1`."""
    header = header.strip().lower()
    if header.startswith("["):
        return header[1:].partition("]")[0]
    return header.rpartition(":")[0] if header.count(":") == 1 else header


class Guarded:
    """ASGI middleware in front of the view: the security headers on every answer (those of
    Starlette's own 404 and 405 included), and, when `hosts` is given, a request whose Host
    header names another host (a DNS-rebinding page in a browser) refused with 400."""

    def __init__(self, app: Any, hosts: frozenset[str] | None) -> None:
        self.app = app
        self.hosts = hosts

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_guarded(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                headers = list(message.get("headers", []))
                present = {name.lower() for name, _ in headers}
                for name, value in HEADERS.items():
                    if name.lower().encode() not in present:
                        headers.append((name.lower().encode(), value.encode()))
                message = {**message, "headers": headers}
            await send(message)

        if self.hosts is not None:
            given = [v for k, v in scope.get("headers", []) if k == b"host"]
            host = given[0].decode("latin-1") if len(given) == 1 else ""
            if host_name(host) not in self.hosts:
                body = (
                    "Error: this server answers only requests for "
                    f"{', '.join(sorted(self.hosts))}; start it with --allow-host NAME to "
                    "add the name used here\n"
                ).encode()
                await send_guarded(
                    {
                        "type": "http.response.start",
                        "status": 400,
                        "headers": [
                            (b"content-type", b"text/plain; charset=utf-8"),
                            (b"content-length", str(len(body)).encode()),
                        ],
                    }
                )
                await send({"type": "http.response.body", "body": body})
                return
        await self.app(scope, receive, send_guarded)


def guarded_protocol(limit: int, header_timeout: float = HEADER_TIMEOUT_S) -> type:
    """uvicorn's HTTP/1.1 protocol with the limits a server left running needs: at most
    `limit` connections (one more is closed at once, before it costs more than its
    descriptor), and a request header that has not arrived whole within `header_timeout`
    seconds closes its connection (a client sending one byte at a time included)."""
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class GuardedProtocol(H11Protocol):
        header_task: Any = None

        def connection_made(self, transport: Any) -> None:  # type: ignore[override]
            if len(self.connections) >= limit:
                transport.abort()
                return
            super().connection_made(transport)
            self._arm()

        def _arm(self) -> None:
            if self.header_task is not None:
                self.header_task.cancel()
            self.header_task = self.loop.call_later(header_timeout, self._header_late)

        def _header_late(self) -> None:
            self.header_task = None
            waiting = self.cycle is None or self.cycle.response_complete
            if waiting and self.conn.their_state in (h11.IDLE, h11.DONE):
                self.transport.close()

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                self._arm()

        def connection_lost(self, exc: Exception | None) -> None:
            if self.header_task is not None:
                self.header_task.cancel()
                self.header_task = None
            if self.transport is None:  # refused in connection_made
                return
            super().connection_lost(exc)

    return GuardedProtocol


def server_config(
    app: Any,
    host: str,
    port: int,
    *,
    limit: int | None = None,
    header_timeout: float = HEADER_TIMEOUT_S,
) -> Any:
    """The uvicorn configuration `serve` runs: the guarded protocol, the idle timeout, and
    a log that says nothing of a client's behaviour (bad requests, dropped connections)."""
    import uvicorn

    return uvicorn.Config(
        app,
        host=host,
        port=port,
        http=guarded_protocol(connection_limit() if limit is None else limit, header_timeout),
        timeout_keep_alive=IDLE_TIMEOUT_S,
        log_level="error",
        access_log=False,
        lifespan="on",
    )


def create_app(url: str, *, hosts: frozenset[str] | None = None) -> Any:
    """The Starlette application over the ledger at `url`, opened read-only, behind
    `Guarded` (security headers on every answer; with `hosts`, the Host header checked)."""
    from starlette.applications import Starlette
    from starlette.responses import HTMLResponse, JSONResponse
    from starlette.routing import Route

    from ledger.core.projections import as_dict
    from ledger.reports import rendering as templates
    from ledger.services.service import LedgerService
    from ledger.store.eventstore import Store
    from ledger.store.history import RoundFilter

    store = Store(url, create=False, read_only=True)
    reader = Reader(LedgerService(store))

    def page(name: str, title: str, status: int = 200, **context: Any) -> HTMLResponse:
        body = templates.render(name, csp=CSP, title=f"{title} — kernel-ledger", **context)
        return HTMLResponse(body, status_code=status, headers=HEADERS)

    def api(data: Any, status: int = 200) -> JSONResponse:
        return JSONResponse(data, status_code=status, headers=HEADERS)

    def handled(endpoint, *, json: bool):
        def run(request):
            try:
                return endpoint(request)
            except NotFound as exc:
                code = 404
                message = exc.message
            except LedgerError as exc:
                code = 400 if isinstance(exc, InputError) else 503
                message = exc.message
            except Exception as exc:  # a bug: one line, never a traceback on the page
                code = 500
                message = f"internal error ({type(exc).__name__}); this is a bug in kernel-ledger"
            if json:
                return api({"status": "error", "error": message}, code)
            return page("error.html", "error", code, message=message)

        return run

    def arg(request, name: str, default: str | None = None) -> str | None:
        value = request.query_params.get(name)
        return value if value not in (None, "") else default

    def number(request, name: str, default: int, *, low: int = 0, high: int = MAX_NUMBER) -> int:
        value = arg(request, name)
        if value is None:
            return default
        shown = display(value[:40] + ("…" if len(value) > 40 else ""))
        if len(value) > 20 or not value.strip().lstrip("+-").isdigit():
            raise InputError(f"{name} must be a whole number from {low} to {high}, not {shown!r}")
        parsed = int(value)
        if not low <= parsed <= high:
            raise InputError(f"{name} must be a whole number from {low} to {high}, not {shown}")
        return parsed

    def when(request, name: str) -> str | None:
        value = arg(request, name)
        return None if value is None else utc_bound(value, name)

    def required(request, name: str) -> str:
        value = arg(request, name)
        if value is None:
            raise InputError(f"the query needs {name}=")
        return value

    # runs
    def runs_data(request):
        filters = {k: arg(request, k) for k in ("op", "soc", "status")}
        limit = number(request, "limit", PAGE, low=1, high=MAX_PAGE)
        rows, more = reader.runs(after=arg(request, "after"), limit=limit, **filters)
        return rows, more, filters

    def runs_page(request):
        rows, more, filters = runs_data(request)
        return page(
            "web_runs.html",
            "runs",
            rows=rows,
            filters=filters,
            statuses=STATUSES,
            next=link("/", after=more, **filters) if more else None,
        )

    def runs_api(request):
        rows, more, _ = runs_data(request)
        return api({"status": "ok", "runs": [as_dict(r) for r in rows], "next_after": more})

    # one run
    def run_links(run_id: str, best: int) -> dict[str, Any]:
        _, parents = reader.kernels(run_id)
        return {
            "events": link("/events", run=run_id),
            "diff": link("/diff", run=run_id, a=0, b=best),
            "round_diff": lambda n: link("/diff", run=run_id, a=parents.get(n, 0), b=n),
            "checkpoints": "/checkpoints",
        }

    drawn: dict[tuple[str, int, str], Any] = {}

    def run_charts(data: Any) -> Any:
        """The run's charts, drawn once per state of the run: they are a pure function of
        its events, so (run, version, last hash) names them; the 32 newest are kept."""
        from ledger.reports.charts import charts

        v = data.verification
        key = (data.run_id, v.stream_version, v.last_event_hash)
        if key not in drawn:
            if len(drawn) >= 32:
                drawn.pop(next(iter(drawn)))
            drawn[key] = charts(data)
        return drawn[key]

    def run_page(request):
        data = reader.run(required(request, "id"))
        run = data.view.run
        return page(
            "web_run.html",
            f"{run.op_name} run {run.run_id}",
            data=data,
            charts=run_charts(data),
            links=run_links(run.run_id, run.best_round),
        )

    def run_api(request):
        data = reader.run(required(request, "id"))
        noise = data.noise
        return api(
            {
                "status": "ok",
                "run": as_dict(data.view.run),
                "cases": [as_dict(c) for c in data.view.cases],
                "rounds": [
                    {
                        "round": r.round,
                        "decision": r.decision,
                        "hypothesis": r.hypothesis,
                        "change": r.change,
                        "relative_improvement": r.relative_improvement,
                        "worst_case_regression": r.worst_case_regression,
                        "cumulative_improvement": r.cumulative_improvement,
                        "evidence": r.evidence,
                        "flags": list(r.flags),
                        "rule": r.rule,
                        "explanation": r.explanation,
                        "candidate_sha256": r.candidate_sha256,
                    }
                    for r in data.rounds
                ],
                "noise": {
                    "sentence": noise.sentence,
                    "noise_floor": noise.noise_floor,
                    "statistics": noise.statistics,
                    "pairs": [asdict(p) for p in noise.pairs],
                    "drift": [
                        {"round": r, "sigma": s, "estimated": e, "pairs": n}
                        for r, s, e, n in noise.drift
                    ],
                },
                "verification": {
                    "status": data.verification.status,
                    "events_checked": data.verification.events_checked,
                    "checks": data.verification.checks,
                    "first_failure": data.verification.first_failure,
                    "last_event_hash": data.verification.last_event_hash,
                },
            }
        )

    # the event log
    def events_data(request):
        run_id = required(request, "run")
        after = number(request, "after", 0)
        limit = number(request, "limit", EVENT_PAGE, low=1, high=MAX_PAGE)
        rows, more = reader.events(run_id, after, limit)
        return run_id, rows, more

    def events_page(request):
        run_id, rows, more = events_data(request)
        return page(
            "web_events.html",
            f"events of {run_id}",
            run_id=run_id,
            rows=rows,
            run_link=link("/run", id=run_id),
            next=link("/events", run=run_id, after=more) if more else None,
        )

    def events_api(request):
        run_id, rows, more = events_data(request)
        return api({"status": "ok", "run_id": run_id, "events": rows, "next_after": more})

    # kernel diff
    def diff_data(request):
        run_id = required(request, "run")
        return reader.diff(run_id, number(request, "a", 0), number(request, "b", 0))

    def diff_page(request):
        data = diff_data(request)
        lines = []
        for line in (data["diff"] or "").splitlines():
            kind = (
                "hunk"
                if line.startswith("@@")
                else "add"
                if line.startswith("+") and not line.startswith("+++")
                else "del"
                if line.startswith("-") and not line.startswith("---")
                else ""
            )
            lines.append((kind, line))
        return page(
            "web_diff.html",
            f"kernel diff of {data['run_id']}",
            d=data,
            lines=lines,
            run_link=link("/run", id=data["run_id"]),
        )

    def diff_api(request):
        return api({"status": "ok", **diff_data(request)})

    # history
    history_keys = (
        "run",
        "op",
        "soc",
        "decision",
        "bottleneck",
        "mechanism",
        "search",
        "actor",
        "since",
        "until",
    )

    def history_filter(request) -> tuple[Any, dict[str, Any]]:
        given = {k: arg(request, k) for k in history_keys}
        decision = given["decision"]
        if decision is not None and decision.upper() not in ("KEEP", "DISCARD", "NOISE", "FAIL"):
            raise InputError(f"decision must be KEEP, DISCARD, NOISE or FAIL, not {decision!r}")
        after = None
        if arg(request, "after_at") is not None:
            after = (
                required(request, "after_at"),
                required(request, "after_run"),
                number(request, "after_round", 0),
            )
        f = RoundFilter(
            run_id=given["run"],
            op_name=given["op"],
            soc=given["soc"],
            decision=decision.upper() if decision else None,
            bottleneck=given["bottleneck"],
            mechanism=given["mechanism"],
            search=given["search"],
            actor=given["actor"],
            since=when(request, "since"),
            until=when(request, "until"),
            limit=number(request, "limit", PAGE, low=1, high=MAX_PAGE),
            after=after,
        )
        return f, given

    def history_data(request):
        like = arg(request, "like")
        if like is not None:
            version = number(request, "like_version", 1, low=1)
            return "like", reader.like_profile(
                like, version, number(request, "limit", 10, low=1, high=MAX_PAGE)
            )
        f, given = history_filter(request)
        rows, why, last, actors = reader.history(f)
        next_link = None
        if last is not None:
            next_link = link(
                "/history", after_at=last[0], after_run=last[1], after_round=last[2], **given
            )
        by = {key: describe(actor) for key, actor in actors.items()}
        return "rounds", {
            "rows": rows,
            "why": why,
            "actors": actors,
            "by": by,
            "next": next_link,
            "filters": given,
        }

    def history_page(request):
        kind, data = history_data(request)
        return page(
            "web_history.html",
            "history",
            kind=kind,
            d=data,
            profiles=reader.profiles(),
            filters=data.get("filters", {}),
            keys=history_keys,
            link=link,
        )

    def history_api(request):
        kind, data = history_data(request)
        if kind == "like":
            return api(
                {
                    "status": "ok",
                    "profile": data["profile"],
                    "rounds": [
                        {
                            **as_dict(s.row),
                            "distance": s.distance,
                            "shared_signals": s.shared_signals,
                        }
                        for s in data["similar"]
                    ],
                }
            )
        why = data["why"]
        return api(
            {
                "status": "ok",
                "rounds": [
                    {
                        **as_dict(r),
                        "explanation": why[(r.run_id, r.round)].sentence
                        if (r.run_id, r.round) in why
                        else None,
                        "actor": data["actors"].get((r.run_id, r.round)),
                    }
                    for r in data["rows"]
                ],
                "next": data["next"],
            }
        )

    # checkpoints
    def checkpoints_page(request):
        data = reader.checkpoints(arg(request, "verify") == "1")
        return page("web_checkpoints.html", "checkpoints", d=data)

    def checkpoints_api(request):
        return api({"status": "ok", **reader.checkpoints(arg(request, "verify") == "1")})

    routes = []
    for path, endpoint, json in (
        ("/", runs_page, False),
        ("/run", run_page, False),
        ("/events", events_page, False),
        ("/diff", diff_page, False),
        ("/history", history_page, False),
        ("/checkpoints", checkpoints_page, False),
        ("/api/runs", runs_api, True),
        ("/api/run", run_api, True),
        ("/api/events", events_api, True),
        ("/api/diff", diff_api, True),
        ("/api/history", history_api, True),
        ("/api/checkpoints", checkpoints_api, True),
    ):
        routes.append(Route(path, handled(endpoint, json=json), methods=["GET"]))

    @contextlib.asynccontextmanager
    async def lifespan(app):
        yield
        store.close()

    inner = Starlette(routes=routes, lifespan=lifespan)
    app = Guarded(inner, hosts)
    app.state, app.routes = inner.state, inner.routes
    app.state.store = store
    return app
