"""The reference internals server: an ASGI app (starlette, served by uvicorn) around one Runner.

Requests are queued and run on one worker thread that owns the model (forward hooks are global to
a module, so two requests must never share a forward pass unless batched on purpose). The worker
takes everything queued at once: all generations (the protocol's `generate` and the OpenAI-style
chat and completions) are decoded as one batch, up to `max_batch` rows, each row with its own
steering, sampling and seed; the analyses run one after the other, each batched inside.

Besides the internals protocol (benchctl/internals/protocol.py) the server answers the subset of
the OpenAI API that benchctl's black-box target tools send (backend.py): `POST /v1/chat/completions`
(non-streaming, with vLLM's `continue_final_message` / `add_generation_prompt`), `POST
/v1/completions` and `GET /v1/models`. So one `benchctl internals serve` is a whole target:
`[target] model = "openai-compatible/<name>"` with its base URL at `<server>/v1`, and `[target]
internals` at the same server.
"""

from __future__ import annotations

import asyncio
import queue
import socket
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from benchctl.internals import protocol as p
from benchctl.internals.protocol import ProtocolError

DEFAULT_MAX_BATCH = 32
MAX_QUEUE = 4096


@dataclass
class Job:
    kind: str
    body: dict[str, Any]
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[dict[str, Any]]
    enqueued: float = field(default_factory=time.monotonic)


GENERATIONS = ("generate", "chat", "completion")


class Batcher:
    """One worker thread running queued jobs on the runner, generations batched together."""

    def __init__(self, runner: Any, max_batch: int = DEFAULT_MAX_BATCH) -> None:
        self.runner = runner
        self.max_batch = max_batch
        self._queue: queue.Queue[Job | None] = queue.Queue(MAX_QUEUE)
        self._thread = threading.Thread(target=self._work, name="benchctl-internals", daemon=True)
        self._thread.start()

    async def submit(self, kind: str, body: dict[str, Any]) -> dict[str, Any]:
        loop = asyncio.get_running_loop()
        job = Job(kind, body, loop, loop.create_future())
        try:
            self._queue.put_nowait(job)
        except queue.Full:
            raise ProtocolError(
                f"the server's queue is full ({MAX_QUEUE} requests): retry later", "overloaded"
            ) from None
        return await job.future

    def close(self) -> None:
        self._queue.put(None)
        self._thread.join(30)

    # ---------------------------------------------------------------- worker

    def _work(self) -> None:
        while True:
            first = self._queue.get()
            if first is None:
                return
            jobs = [first]
            while True:
                try:
                    nxt = self._queue.get_nowait()
                except queue.Empty:
                    break
                if nxt is None:
                    self._queue.put(None)  # stop after this round
                    break
                jobs.append(nxt)
            gens = [j for j in jobs if j.kind in GENERATIONS]
            for i in range(0, len(gens), self.max_batch):
                self._generations(gens[i : i + self.max_batch])
            for job in jobs:
                if job.kind not in GENERATIONS:
                    self._run(job)

    def _finish(self, job: Job, result: dict[str, Any] | BaseException) -> None:
        def set_it() -> None:
            if job.future.done():
                return
            if isinstance(result, BaseException):
                job.future.set_exception(result)
            else:
                job.future.set_result(result)

        job.loop.call_soon_threadsafe(set_it)

    def _timed(self, job: Job, started: float, result: dict[str, Any], batch: int) -> dict[str, Any]:
        now = time.monotonic()
        return {
            **result,
            "compute_s": round(now - started, 6),
            "queue_s": round(started - job.enqueued, 6),
            "batch_size": batch,
        }

    def _generations(self, jobs: list[Job]) -> None:
        from benchctl.internals import handlers

        rows, ready = [], []
        for job in jobs:
            try:
                rows.append(handlers.gen_row(self.runner, job.kind, job.body))
                ready.append(job)
            except Exception as e:
                self._finish(job, e)
        if not rows:
            return
        started = time.monotonic()
        try:
            out = self.runner.target.generate(rows)
        except Exception as e:
            for job in ready:
                self._finish(job, e)
            return
        for job, gen in zip(ready, out):
            self._finish(
                job, self._timed(job, started, handlers.gen_response(self.runner, job.kind, job.body, gen), len(rows))
            )

    def _run(self, job: Job) -> None:
        from benchctl.internals import handlers

        started = time.monotonic()
        try:
            result = handlers.analysis(self.runner, job.kind, job.body, self.max_batch)
        except Exception as e:
            self._finish(job, e)
            return
        self._finish(job, self._timed(job, started, result, 1))


# -------------------------------------------------------------------- HTTP


def _json(status: int, body: Any) -> Response:
    return Response(orjson.dumps(body), status_code=status, media_type="application/json")


def create_app(runner: Any, max_batch: int = DEFAULT_MAX_BATCH) -> Starlette:
    batcher = Batcher(runner, max_batch)

    def endpoint(kind: str) -> Callable[[Request], Any]:
        async def handle(request: Request) -> Response:
            try:
                body = orjson.loads(await request.body())
            except orjson.JSONDecodeError as e:
                return _json(400, p.error_body("bad_request", f"the body is not JSON: {e}"))
            if not isinstance(body, dict):
                return _json(400, p.error_body("bad_request", "the body must be a JSON object"))
            try:
                return _json(200, await batcher.submit(kind, body))
            except ProtocolError as e:
                return _json(e.status, e.body())
            except Exception as e:  # a bug or the model failing: the client sees what, not a hang
                return _json(500, p.error_body("internal", f"{type(e).__name__}: {e}"))

        return handle

    async def info(_request: Request) -> Response:
        return _json(200, {"protocol": p.VERSION, "max_batch": max_batch, **runner.info()})

    async def models(_request: Request) -> Response:
        name = runner.info()["model"]
        return _json(200, {"object": "list", "data": [{"id": name, "object": "model", "owned_by": "benchctl"}]})

    routes = [
        Route(p.PATHS["info"], info, methods=["GET"]),
        Route("/v1/models", models, methods=["GET"]),
        Route("/v1/chat/completions", endpoint("chat"), methods=["POST"]),
        Route("/v1/completions", endpoint("completion"), methods=["POST"]),
    ]
    for kind in ("generate", "steering_vector", "logit_lens", "sae_features", "oracle"):
        routes.append(Route(p.PATHS[kind], endpoint(kind), methods=["POST"]))
    app = Starlette(routes=routes)
    app.state.batcher = batcher
    return app


def bind(host: str, port: int) -> socket.socket:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind((host, port))
    sock.listen(256)
    return sock


def url_of(sock: socket.socket) -> str:
    host, port = sock.getsockname()[:2]
    return f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}"


class BackgroundServer:
    """The app on a socket in a background thread (tests, the GPU check): `.url`, `.close()`."""

    def __init__(self, runner: Any, host: str = "127.0.0.1", port: int = 0, max_batch: int = DEFAULT_MAX_BATCH) -> None:
        import uvicorn

        self.sock = bind(host, port)
        self.url = url_of(self.sock)
        self.app = create_app(runner, max_batch)
        self.server = uvicorn.Server(uvicorn.Config(self.app, log_level="warning", timeout_graceful_shutdown=1))
        self.thread = threading.Thread(target=self.server.run, kwargs={"sockets": [self.sock]}, daemon=True)
        self.thread.start()
        deadline = time.monotonic() + 30
        while not self.server.started and time.monotonic() < deadline:
            time.sleep(0.01)

    def close(self) -> None:
        self.server.should_exit = True
        self.thread.join(10)
        self.app.state.batcher.close()
        self.sock.close()

    def __enter__(self) -> BackgroundServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
