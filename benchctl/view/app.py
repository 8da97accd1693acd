"""The viewer's web app: a Starlette app over one results directory, read-only.

Every route is GET (HEAD): there is no endpoint that writes anything, and the app never writes
into the results dir (caches live in this process). Responses carry a strict
Content-Security-Policy — scripts, styles, images and connections from this server only, no
inline script or style, no frames, forms only to this server — so agent text that slipped
through escaping still could not run or load anything. Bound to one address (loopback by
default), requests must name it in their Host header (a web page that rebinds its DNS name to
127.0.0.1 cannot read the runs).
"""

from __future__ import annotations

import asyncio
import os
import threading
import time
from typing import Any
from urllib.parse import urlencode

import orjson
from starlette.applications import Starlette
from starlette.background import BackgroundTask
from starlette.exceptions import HTTPException
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import FileResponse, HTMLResponse, JSONResponse, Response, StreamingResponse
from starlette.routing import Mount, Route
from starlette.staticfiles import StaticFiles

from benchctl.layout import GRADES, RUNS, SCANS
from benchctl.tournament.schema import RATINGS_FILE, TOURNAMENT
from benchctl.view import compare as cmp
from benchctl.view import conversation, links, reasoning, render, runpage
from benchctl.view import events as evmod
from benchctl.view import scans as scanmod
from benchctl.view import tournament as tour
from benchctl.view import validation as vmod
from benchctl.view.grades import Rubrics, artifacts_with_grades
from benchctl.view.live import sweep_active
from benchctl.view.paths import NotFound, RunFiles, artifact_file, attempts, run_files
from benchctl.view.sweep import FILTER_KEYS, IN_PROGRESS, LINK_KEYS, PAGE_SIZE, PARAM_KEYS, Sweep, counts, select
from benchctl.view.transcript_index import IndexCache

CSP = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "base-uri 'none'; form-action 'self'; frame-ancestors 'none'"
)
SECURITY_HEADERS = [
    (b"content-security-policy", CSP.encode()),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
    (b"cross-origin-opener-policy", b"same-origin"),
    (b"cross-origin-resource-policy", b"same-origin"),
]
POLL_S = 0.5  # how often a live page's stream looks for new events


class SecurityHeaders:
    """Pure ASGI middleware (works with streaming responses): adds SECURITY_HEADERS to every response."""

    def __init__(self, app: Any) -> None:
        self.app = app

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_headers(message: dict[str, Any]) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = list(message.get("headers", [])) + SECURITY_HEADERS
            await send(message)

        await self.app(scope, receive, send_with_headers)


class ViewState:
    def __init__(self, root: str) -> None:
        self.root = os.path.abspath(root)
        self.sweep = Sweep(self.root)
        self.ratings_path = os.path.join(self.root, GRADES, TOURNAMENT, RATINGS_FILE)
        self.indexes = IndexCache()
        self.scan_hashes = scanmod.TranscriptHashes()
        self.env = render.make_env()
        self.env.globals.update(
            qs=_qs,
            cap=evmod.cap,
            is_long=evmod.is_long,
            pretty=evmod.pretty,
            mask_opaque=reasoning.mask_opaque,
            without_reasoning=reasoning.without_reasoning,
            row_link=links.row_link,
            max_detail=evmod.MAX_DETAIL,
            known_types=frozenset(evmod.SHOWN) | {"harness_event"},
            root_name=os.path.basename(self.root.rstrip("/")) or self.root,
            max_cites=scanmod.MAX_CITES,
        )

    def page(self, name: str, status_code: int = 200, **ctx: Any) -> HTMLResponse:
        ctx.setdefault("has_tournament", os.path.isfile(self.ratings_path))
        ctx.setdefault("has_validation", bool(vmod.names(self.root)))
        ctx.setdefault("has_scans", os.path.isdir(os.path.join(self.root, SCANS)))
        html = self.env.get_template(name).render(status_code=status_code, **ctx)
        return HTMLResponse(html, status_code=status_code)

    def files(self, request: Request) -> RunFiles:
        return run_files(self.root, request.path_params["run_id"], request.query_params.get("attempt"))


def _qs(params: dict[str, Any], **overrides: Any) -> str:
    merged = {**params, **overrides}
    return "?" + urlencode({k: v for k, v in merged.items() if v not in (None, "")})


MODES = ("timeline", "conversation")


def _mode(request: Request) -> str:
    mode = request.query_params.get("view") or "timeline"
    if mode not in MODES:
        raise HTTPException(400, f"view={mode}: expected one of {', '.join(MODES)}")
    return mode


def _window_ctx(mode: str, views: list[evmod.EventView]) -> dict[str, Any]:
    """What _fragment.html needs to draw a window of events in `mode`."""
    return {"mode": mode, "views": views, "blocks": conversation.blocks(views) if mode == "conversation" else None}


def _attempt_ctx(files: RunFiles) -> dict[str, Any]:
    q = f"?attempt={files.attempt}" if files.attempt is not None else ""
    return {"attempt": files.attempt, "attempt_q": q, "attempt_amp": q.replace("?", "&")}


def create_app(root: str | os.PathLike[str], host: str = "127.0.0.1") -> Starlette:
    state = ViewState(str(root))
    if not os.path.isdir(os.path.join(state.root, RUNS)):
        raise FileNotFoundError(
            f"{root} is not a results directory: no {RUNS}/ inside. Pass the sweep directory "
            "that `benchctl run` wrote (it contains runs/<run_id>/meta.json)."
        )

    # The first load of the sweep starts now, in the background: a run page does not need it, and
    # pages that do wait for it (Sweep.snapshot holds its lock while loading). Then the templates
    # are compiled, which would otherwise cost a page's first request about 0.1 s of CPU.
    def warm_up() -> None:
        state.sweep.snapshot()
        for name in state.env.list_templates(filter_func=lambda n: n.endswith(".html")):
            state.env.get_template(name)

    threading.Thread(target=warm_up, name="benchctl-view-load", daemon=True).start()

    def sweep_page(request: Request) -> Response:
        rows = state.sweep.rows()
        params = {k: request.query_params.get(k, "") for k in PARAM_KEYS}
        matched = select(rows, params, _auditor_key())
        pages = max(1, -(-len(matched) // PAGE_SIZE))
        page_arg = request.query_params.get("page", "1")
        page = min(max(1, int(page_arg) if page_arg.isdigit() else 1), pages)
        facets = [(k, c) for k in FILTER_KEYS if k != "status" and len(c := counts(rows, k)) > 1]
        menus = {"status", *(k for k, _ in facets)}  # filters the page offers a menu (or chips) for
        headlines = state.sweep.headlines
        columns = [
            ("run_id", "run"),
            ("status", "status"),
            ("task", "task"),
            ("harness", "harness"),
            ("model", "model"),
            ("budget_s", "budget"),
            ("variant", "variant"),
            ("tools", "tools"),
            ("seed", "seed"),
            ("score", headlines.single or "score"),
            ("elapsed_s", "elapsed / budget"),
            ("turns", "turns"),
            ("tokens", "tokens"),
            ("cost_usd", "cost"),
        ]
        return state.page(
            "sweep.html",
            rows=rows,
            total=len(rows),
            matched=len(matched),
            params=params,
            shown=matched[(page - 1) * PAGE_SIZE : page * PAGE_SIZE],
            page=page,
            pages=pages,
            status_counts=counts(rows, "status"),
            other_filters=[(k, params[k]) for k in (*FILTER_KEYS, *LINK_KEYS) if params[k] and k not in menus],
            facets=facets,
            columns=columns,
            headlines=headlines,
            problems=state.sweep.results().problems,
            reload_error=state.sweep.refresh_error,
        )

    def _auditor_key() -> str | None:
        ratings = state.sweep.results().ratings
        return str(ratings.get("auditor_key") or "model") if ratings else None

    def live_json(request: Request) -> Response:
        """Preformatted live figures of the runs in progress, and the status of the ids asked
        about (`?ids=a,b`) that have finished since the page was rendered."""
        rows = state.sweep.rows()
        wanted = set(filter(None, request.query_params.get("ids", "").split(",")))
        out = {}
        for r in rows:
            if r.status in IN_PROGRESS or r.run_id in wanted:
                out[r.run_id] = {
                    "status": r.status,
                    "doing": r.doing or "",
                    "elapsed": render.duration(r.elapsed_s)
                    + (f" / {render.duration(r.budget_s)}" if r.budget_s else ""),
                    "turns": "–" if r.turns is None else str(r.turns),
                    "tokens": render.tokens(r.tokens),
                    "cost": render.usd(r.cost_usd),
                }
        return JSONResponse(
            {
                "runs": out,
                "counts": dict(counts(rows, "status")),
                "total": len(rows),
                "active": sweep_active(state.root),
            }
        )

    def rows_fragment(request: Request) -> Response:
        """The runs page's rows of the runs named in `ids` that match the page's filters (the
        sweep page's own query parameters), in its order: for a page that picks up new runs."""
        wanted = set(filter(None, request.query_params.get("ids", "").split(",")))
        params = {k: request.query_params.get(k, "") for k in PARAM_KEYS}
        shown = select([r for r in state.sweep.rows() if r.run_id in wanted], params, _auditor_key())
        html = state.env.get_template("_run_rows.html").render(shown=shown, headlines=state.sweep.headlines)
        return HTMLResponse(html)

    def _header(files: RunFiles, idx: Any, tab: str) -> dict[str, Any]:
        meta = runpage.read_meta(files)
        status = runpage.status_of(state.root, files, meta)
        live = state.sweep.live.stats(files.run_id) if status in IN_PROGRESS and files.attempt is None else None
        prev_run, next_run = runpage.neighbours(state.root, files.run_id)
        return {
            "run_id": files.run_id,
            "meta": meta,
            "status": status,
            "tab": tab,
            "facts": runpage.facts(files.run_id, meta, idx, live),
            "error": (meta or {}).get("error"),
            "attempts": attempts(os.path.join(state.root, RUNS, files.run_id)),
            "prev_run": prev_run,
            "next_run": next_run,
            **_attempt_ctx(files),
        }

    def run_page(request: Request, mode: str = "timeline") -> Response:
        files = state.files(request)
        at_arg, q = request.query_params.get("at"), request.query_params.get("q")
        at = int(at_arg) if at_arg and at_arg.isdigit() else None
        # The first window needs only the transcript's first lines: a big transcript's page is
        # served from its first chunk, the rest is indexed once the page is sent, and the page
        # fetches what needs the whole index (/overview). A deep link or a search waits for it.
        first_window = at is None and not q
        idx = state.indexes.get(files.transcript, lines=runpage.WINDOW if first_window else None)
        pending = first_window and idx.partial
        first, last = runpage.window(idx, at)
        hits, more = runpage.search(idx, q) if q else ([], False)
        head = _header(files, idx, mode)
        _, budget = runpage.clock_origin(idx)
        views = runpage.views(idx, first, last)
        live = head["status"] == "running"
        page = state.page(
            "run.html",
            **head,
            **_window_ctx(mode, views),
            prompt=runpage.prompt(idx, [v.ev for v in views] if first == 0 else None),
            first=first,
            last=last,
            total=len(idx),
            window=runpage.WINDOW,
            live=live,
            flight=runpage.in_flight(idx) if live and not pending else None,
            now=time.time(),
            q=q,
            hits=hits,
            more=more,
            lanes=evmod.LANES,
            budget_s=budget,
            phases=None if pending else runpage.phases(idx),
            mm=None if pending else runpage.minimap_view(idx, first, last),
            # an earlier attempt's transcript is not the one scanned
            scans=scanmod.run_scans(state.root, files.run_id, state.scan_hashes) if files.attempt is None else [],
        )
        if pending:  # after the response is sent, not before
            page.background = BackgroundTask(idx.refresh)
        return page

    def conversation_page(request: Request) -> Response:
        return run_page(request, "conversation")

    def overview_fragment(request: Request) -> Response:
        """The run page's parts that need the whole index (phase links, minimap with lines
        [first, last) marked) as HTML, and the event count in `x-total`: for a page served
        while its transcript was still being indexed. Waits for the index."""
        files = state.files(request)
        idx = state.indexes.get(files.transcript)
        try:
            first, last = int(request.query_params.get("first", "0")), int(request.query_params.get("last", "0"))
        except ValueError:
            raise HTTPException(400, "first and last are line numbers") from None
        first, last = max(0, first), min(last, len(idx))
        _, budget = runpage.clock_origin(idx)
        html = state.env.get_template("_overview_fragment.html").render(
            phases=runpage.phases(idx),
            mm=runpage.minimap_view(idx, first, last),
            lanes=evmod.LANES,
            budget_s=budget,
            **_attempt_ctx(files),
        )
        return HTMLResponse(html, headers={"x-total": str(len(idx))})

    def events_fragment(request: Request) -> Response:
        """Lines [from, to) of the timeline (`view=conversation`: of the conversation) as HTML, for
        loading more as the reader scrolls (at most one window)."""
        files = state.files(request)
        idx = state.indexes.get(files.transcript)
        try:
            a = max(0, int(request.query_params.get("from", "0")))
            b = min(int(request.query_params.get("to", str(a + runpage.WINDOW))), a + runpage.WINDOW)
        except ValueError:
            raise HTTPException(400, "from and to are line numbers") from None
        html = _window_html(files, idx, a, b, _mode(request))
        return HTMLResponse(html, headers={"x-lines": f"{a}-{min(b, len(idx))}", "x-total": str(len(idx))})

    def _window_html(files: RunFiles, idx: Any, a: int, b: int, mode: str) -> str:
        ctx = _window_ctx(mode, runpage.views(idx, a, b))
        return state.env.get_template("_fragment.html").render(run_id=files.run_id, **ctx, **_attempt_ctx(files))

    async def stream(request: Request) -> Response:
        """Server-sent events for a run in progress: `events` (rendered HTML of new lines, as the
        page's mode renders them; id = lines sent so far), `stats` (live header figures and what
        the run waits for, `runpage.in_flight`), `end` (meta.json appeared: final status)."""
        files = state.files(request)
        mode = _mode(request)
        idx = await asyncio.to_thread(state.indexes.get, files.transcript)
        start = request.headers.get("last-event-id") or request.query_params.get("after") or str(len(idx))
        if not start.isdigit():
            raise HTTPException(400, "after must be a line number")

        def batch(sent: int) -> tuple[int, str | None, str | None]:
            n = idx.refresh()
            if n <= sent:
                return sent, None, None
            last = min(n, sent + runpage.WINDOW)
            html = _window_html(files, idx, sent, last, mode)
            live = state.sweep.live.stats(files.run_id)
            stats = {
                "elapsed": f"{render.duration(live.get('elapsed_s'))} of {render.duration(live.get('budget_s'))}",
                "turns": str(live.get("turns", "–")),
                "tokens": render.tokens(live.get("tokens")),
                "cost": render.usd(live.get("cost_usd")),
                "total": last,
                "flight": runpage.in_flight(idx) if last == n else None,
                "now": time.time(),
            }
            return last, html, orjson.dumps(stats).decode()

        async def gen() -> Any:
            sent = int(start)
            yield "retry: 2000\n\n"
            idle = 0.0
            while not await request.is_disconnected():
                sent, html, stats = await asyncio.to_thread(batch, sent)
                if html is not None:
                    yield _sse("events", orjson.dumps(html).decode(), sent) + _sse("stats", stats or "{}")
                    idle = 0.0
                    continue
                meta = await asyncio.to_thread(runpage.read_meta, files)
                if meta is not None:
                    sent, html, _ = await asyncio.to_thread(batch, sent)  # events written just before meta.json
                    if html is not None:
                        yield _sse("events", orjson.dumps(html).decode(), sent)
                    yield _sse("end", orjson.dumps({"status": meta.get("status")}).decode())
                    return
                idle += POLL_S
                if idle >= 15:
                    yield ": keep-alive\n\n"
                    idle = 0.0
                await asyncio.sleep(POLL_S)

        return StreamingResponse(
            gen(), media_type="text/event-stream", headers={"cache-control": "no-cache", "x-accel-buffering": "no"}
        )

    def event_json(request: Request) -> Response:
        files = state.files(request)
        idx = state.indexes.get(files.transcript)
        line = idx.position(request.path_params["seq"])
        if line is None:
            raise NotFound(f"no event {request.path_params['seq']}")
        return Response(
            orjson.dumps(idx.read(line, line + 1)[0], option=orjson.OPT_INDENT_2), media_type="application/json"
        )

    def meta_json(request: Request) -> Response:
        files = state.files(request)
        if not os.path.isfile(files.meta) or os.path.islink(files.meta):
            raise NotFound("no meta.json yet: the run has not finished")
        return FileResponse(files.meta, media_type="application/json")

    def artifacts_page(request: Request) -> Response:
        files = state.files(request)
        idx = state.indexes.get(files.transcript, lines=1)  # the header needs only run_start (line 0)
        head = _header(files, idx, "artifacts")
        arts, orphans = artifacts_with_grades(state.root, files, head["meta"])
        return state.page("artifacts.html", **head, artifacts=arts, orphans=orphans, rubric=Rubrics(head["meta"]))

    def artifact_raw(request: Request) -> Response:
        files = state.files(request)
        path = artifact_file(files, request.path_params["path"])
        with open(path, "rb") as f:
            data = f.read()
        # Always plain text (or a download), never HTML: an artifact is agent output.
        try:
            data.decode("utf-8")
            return Response(data, media_type="text/plain; charset=utf-8")
        except UnicodeDecodeError:
            return Response(data, media_type="application/octet-stream", headers={"content-disposition": "attachment"})

    def compare_page(request: Request) -> Response:
        picked = [r for r in request.query_params.getlist("run") if r.strip()]
        if len(picked) != 2:
            return state.page(
                "compare.html",
                a=None,
                b=None,
                picked=picked,
                error=None,
                suggestions=cmp.candidates(state.sweep.rows(), picked[0]) if len(picked) == 1 else [],
            )
        try:
            fa, fb = (run_files(state.root, r) for r in picked)
        except NotFound as e:
            return state.page(
                "compare.html", status_code=404, a=None, b=None, picked=picked, error=str(e), suggestions=[]
            )
        sides = [cmp.side(state.root, f, state.indexes) for f in (fa, fb)]
        a, b = sides
        return state.page(
            "compare.html", a=a, b=b, rows=cmp.rows(a, b), findings=cmp.findings(a, b), types=cmp.type_counts(a, b)
        )

    def tournament_page(request: Request) -> Response:
        ratings = state.sweep.results().ratings
        if not ratings:
            raise NotFound("no tournament in this results dir (grades/tournament/ratings.json)")
        board, scale = tour.leaderboard(ratings)
        return state.page(
            "tournament.html",
            ratings=ratings,
            board=board,
            scale=scale,
            overlap=tour.overlap(ratings),
            envs=tour.environments(ratings),
            one_environment_note=tour.one_environment_note(ratings),
        )

    def validation_page(request: Request) -> Response:
        name = request.path_params.get("name")
        if name is None:
            studies = [vmod.summary(state.root, n) for n in vmod.names(state.root)]
            return state.page("validation.html", page=None, studies=studies)
        return state.page("validation.html", page=vmod.detail(state.root, name), studies=[])

    def report_page(request: Request) -> Response:
        from benchctl.report.build import build_report
        from benchctl.report.provenance import provenance_lines

        try:
            rep = build_report(state.sweep.results())
        except ValueError as e:
            raise HTTPException(400, str(e)) from None
        return state.page(
            "report.html",
            report=rep,
            provenance=provenance_lines(rep.provenance),
            links={t.name: links.table_links(t.name, t.rows) for t in rep.tables},
        )

    def scans_page(request: Request) -> Response:
        only = request.query_params.get("scanner") or None
        return state.page("scans.html", scanners=scanmod.scans_overview(state.root, state.scan_hashes, only), only=only)

    async def not_found(request: Request, exc: Exception) -> Response:
        return await asyncio.to_thread(state.page, "error.html", 404, message=str(exc))

    async def http_error(request: Request, exc: HTTPException) -> Response:
        resp = await asyncio.to_thread(state.page, "error.html", exc.status_code, message=exc.detail)
        resp.headers.update(exc.headers or {})  # e.g. Allow on a 405
        return resp

    routes = [
        Route("/", sweep_page),
        Route("/api/live", live_json),
        Route("/api/rows", rows_fragment),
        Route("/run/{run_id}", run_page),
        Route("/run/{run_id}/conversation", conversation_page),
        Route("/run/{run_id}/events", events_fragment),
        Route("/run/{run_id}/overview", overview_fragment),
        Route("/run/{run_id}/stream", stream),
        Route("/run/{run_id}/event/{seq:int}", event_json),
        Route("/run/{run_id}/meta.json", meta_json),
        Route("/run/{run_id}/artifacts", artifacts_page),
        Route("/run/{run_id}/artifact/{path:path}", artifact_raw),
        Route("/compare", compare_page),
        Route("/tournament", tournament_page),
        Route("/report", report_page),
        Route("/validation", validation_page),
        Route("/validation/{name}", validation_page),
        Route("/scans", scans_page),
        Mount("/static", StaticFiles(packages=[("benchctl.view", "static")]), name="static"),
    ]
    # Bound to one name: only that name (and the loopback names) may appear in Host. Bound to
    # every interface, or to an IPv6 address (starlette's check cannot parse "[::1]:port"),
    # the check is off: such a server is reachable by names this process cannot know.
    hosts = ["*"] if host in ("0.0.0.0", "::", "") or ":" in host else sorted({"127.0.0.1", "localhost", host})
    app = Starlette(
        routes=routes,
        middleware=[Middleware(SecurityHeaders), Middleware(TrustedHostMiddleware, allowed_hosts=hosts)],
        # starlette types each handler as taking any Exception; ours take the exception they handle
        exception_handlers={NotFound: not_found, HTTPException: http_error},  # type: ignore[dict-item]
    )
    app.state.view = state  # for tests and benchmarks
    return app


def _sse(event: str, data: str, id_: int | None = None) -> str:
    """One server-sent event. `data` is always one line of JSON (JSON escapes CR and LF, which
    would otherwise end the field and let agent text forge SSE fields)."""
    return f"event: {event}\n" + (f"id: {id_}\n" if id_ is not None else "") + f"data: {data}\n\n"
