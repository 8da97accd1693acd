"""The model gateway: one host-side HTTP server that every model call of a run goes through.

    gw = Gateway(GatewayConfig(model="anthropic/claude-sonnet-5-5", socket_path=run_dir / "gateway.sock"),
                 transcript=writer)
    gw.start()            # listening; serves from its own thread running an asyncio loop
    ...                   # agents call it with SANDBOX_TOKEN; real keys stay in this process
    gw.summary()          # calls, usage, cost, served models, fallbacks, refusals, errors
    gw.close()

Requests are passed to the run's upstream with the model rewritten; responses stream back
chunk by chunk as they arrive. After each response the accumulated bytes are summarized and a
`model_call` event is written (see `exchange.py` for the per-call flow and the event fields);
a call cut off because its client left or the gateway closed is written then, with what had
arrived. Read `summary()` after `close()` to count the calls that close cut off. `settle(timeout)`
waits until the calls in flight now are written (a harness calls it once its agent has exited).
"""

from __future__ import annotations

import asyncio
import os
import socket
import stat
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchctl.gateway import http11
from benchctl.gateway.body_limits import BodyBudget, BodyLimits
from benchctl.gateway.context import CallObserver, RouteHandler
from benchctl.gateway.exchange import SANDBOX_TOKEN as SANDBOX_TOKEN  # re-exported
from benchctl.gateway.exchange import handle_connection
from benchctl.gateway.fallback import ModelRouter
from benchctl.gateway.pricing import PriceTable
from benchctl.gateway.recording import RequestRecorder
from benchctl.gateway.registry import resolve_upstream
from benchctl.gateway.retry import RetryPolicy
from benchctl.gateway.upstream import ModelId, Upstream
from benchctl.gateway.wire.neutral import USAGE_KEYS
from benchctl.limits.run import RunLimits
from benchctl.transcript import Redactor, TranscriptWriter

new_event_loop: Callable[[], asyncio.AbstractEventLoop]
try:  # uvloop: asyncio's API with the loop and transports in C; at 32 callers a fifth less CPU per
    # call and less added latency than asyncio's own loop (scripts/bench_gateway.py --against)
    from uvloop import new_event_loop
except ImportError:  # a platform without its wheels: asyncio's own loop serves the same way
    new_event_loop = asyncio.new_event_loop

MODEL_POLICIES = ("serve", "reject")  # for requests naming another model than the run's
RECORDED_REFUSALS = 50  # per kind; more are only counted (see Gateway.refused)
DEADLINE_TICK_S = 0.25  # how often the deadline watcher looks (while no deadline is near)
SETTLE_TICK_S = 0.005  # how often settle() looks again while a call it waits for is unrecorded


@dataclass
class GatewayConfig:
    model: str
    fallback: str | None = None
    refusal_policy: str = "auto"  # none | retry | fallback | auto (fallback if fallback else none)
    refusal_retries: int = 1
    socket_path: Path | None = None
    listen: str | None = None  # "127.0.0.1:PORT" (PORT 0 picks a free port)
    deadline: float | None = None  # unix seconds
    prices_path: Path | None = None
    other_model_policy: str = "serve"  # serve: answer with the run's model, record requested_model; reject: 400
    retry: RetryPolicy | None = None  # upstream retry policy (default: RetryPolicy())
    body_limits: BodyLimits | None = None  # request body caps (default: BodyLimits(), from the environment)
    # The run's benchctl.limits.run.RunLimits (shared limiter, rate-limit waits, budget pause, cost stop);
    # default: a private limiter with no limits of its own (it still honours 429s' retry-after).
    limits: Any = None


class GatewayError(RuntimeError):
    pass


def _socket_in_use(path: Path) -> bool:
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        probe.settimeout(1.0)
        probe.connect(str(path))
        return True
    except OSError:  # refused: nobody listens (stale); other errors: not ours to judge, treat as stale
        return False
    finally:
        probe.close()


class Gateway:
    def __init__(self, config: GatewayConfig, transcript: TranscriptWriter | None = None) -> None:
        if config.other_model_policy not in MODEL_POLICIES:
            raise GatewayError(f"other_model_policy {config.other_model_policy!r} is not one of {MODEL_POLICIES}")
        if config.socket_path is not None and config.listen is not None:
            raise GatewayError("give either socket_path or listen, not both")
        self.config = config
        primary = ModelId.parse(config.model)
        fallback = ModelId.parse(config.fallback) if config.fallback else None
        self.router = ModelRouter(primary, fallback, config.refusal_policy, config.refusal_retries)
        self.prices = PriceTable(config.prices_path)
        self.transcript = transcript if transcript is not None else TranscriptWriter(None)
        self.body_limits = config.body_limits or BodyLimits()
        self.recorder = RequestRecorder(max_bytes=self.body_limits.max_buffered)
        self.redact = Redactor()  # secret values of this host's environment, scrubbed from what clients get
        self.routes: list[tuple[str, RouteHandler]] = []
        self.observers: list[CallObserver] = []
        self.last_headers: dict[str, dict[str, str]] = {}  # wire api -> pass-through headers last recorded
        self.limits = config.limits if config.limits is not None else RunLimits(None, self.transcript)
        self._deadline = config.deadline
        self.body_budget = BodyBudget(self.body_limits.max_buffered)
        self._connections = 0
        self._refused: dict[str, int] = {}  # requests the gateway refused itself, by status
        self.phase = 0  # +1 at each set_deadline (the run, then each follow-up)
        self.forwarding: set[Any] = set()  # exchanges with a call in flight, until recorded (cut at the deadline)
        # Resolve upstreams now so a misconfigured model fails before the run starts.
        self._upstreams: dict[ModelId, Upstream] = {m: self._resolve(m) for m in (primary, fallback) if m is not None}
        self._stats_lock = threading.Lock()
        self._calls = 0
        self._usage = {k: 0 for k in USAGE_KEYS}
        self._cost: float | None = 0.0
        self._served: dict[str, int] = {}
        self._requested: dict[str, int] = {}
        self._refusals = 0
        self._errors = 0
        self._call_seq = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._thread: threading.Thread | None = None
        self._servers: list[asyncio.AbstractServer] = []
        self._watcher: asyncio.Future[None] | None = None
        self._conn_tasks: set[asyncio.Task[None]] = set()
        self._tmpdir: tempfile.TemporaryDirectory[str] | None = None
        self._closed = False
        self.socket_path: Path | None = None
        self.url: str | None = None

    # ------------------------------------------------------------------ lifecycle

    def start(self) -> Gateway:
        if self._thread is not None:
            return self
        ready = threading.Event()
        failure: list[BaseException] = []
        self._loop = new_event_loop()

        def run() -> None:
            assert self._loop is not None
            asyncio.set_event_loop(self._loop)
            try:
                self._loop.run_until_complete(self._listen())
            except BaseException as e:  # report to start(); the thread ends
                failure.append(e)
                ready.set()
                return
            ready.set()
            self._loop.run_forever()
            self._loop.run_until_complete(self._loop.shutdown_asyncgens())
            self._loop.close()

        self._thread = threading.Thread(target=run, name="benchctl-gateway", daemon=True)
        self._thread.start()
        ready.wait()
        if failure:
            self._thread.join()
            raise GatewayError(f"gateway failed to start: {failure[0]}") from failure[0]
        return self

    async def _listen(self) -> None:
        handler = lambda r, w: handle_connection(self, r, w)  # noqa: E731
        if self.config.listen is not None:
            host, sep, port = self.config.listen.rpartition(":")
            if not sep or not port.isdigit():
                raise GatewayError(f"--listen {self.config.listen!r} must look like 127.0.0.1:PORT")
            host = host.strip("[]")  # [::1]:PORT is how an IPv6 address is written with a port
            if host not in ("127.0.0.1", "::1", "localhost", ""):
                # The sandbox token is public: whoever reaches the gateway spends the host's API keys.
                raise GatewayError(
                    f"--listen {self.config.listen!r}: only loopback addresses (127.0.0.1, ::1) are "
                    "allowed, since anyone who can reach the gateway spends your API keys"
                )
            server = await http11.serve_tcp(handler, host or "127.0.0.1", int(port))
            bound = server.sockets[0].getsockname()
            self.url = f"http://[{bound[0]}]:{bound[1]}" if ":" in bound[0] else f"http://{bound[0]}:{bound[1]}"
        else:
            path = self.config.socket_path
            if path is None:
                self._tmpdir = tempfile.TemporaryDirectory(prefix="benchctl-gw-")
                path = Path(self._tmpdir.name) / "gateway.sock"
            path = Path(path)
            if len(str(path).encode()) > 100:
                raise GatewayError(
                    f"socket path {path} is too long for a unix socket (max ~100 bytes); use a shorter run dir"
                )
            path.parent.mkdir(parents=True, exist_ok=True)
            if path.exists() or path.is_symlink():
                if not stat.S_ISSOCK(path.lstat().st_mode):
                    raise GatewayError(f"{path} exists and is not a socket; remove it or choose another --socket path")
                if _socket_in_use(path):  # unlinking it would silently cut a live gateway off its clients
                    raise GatewayError(
                        f"{path} is in use by another process (a running gateway?); stop it or "
                        "choose another --socket path"
                    )
                path.unlink()  # a stale socket left by a process that died
            server = await http11.serve_unix(handler, path)
            # World-connectable: the agent in the sandbox runs as another uid (e.g. 1000). The socket
            # is only reachable by those the run directory (and its bind mount) lets in.
            os.chmod(path, 0o666)
            self.socket_path = path
        self._servers.append(server)
        self._watcher = asyncio.ensure_future(self._watch_deadline())

    async def _watch_deadline(self) -> None:
        """Cut the calls still in flight when the run's deadline passes. The deadline moves with the
        rate-limit pause (benchctl/limits), so no client-side timeout set at a call's start can do this."""
        while True:
            deadline = self.deadline
            now = time.time()
            if deadline is not None and now >= deadline and self.forwarding:
                for exchange in list(self.forwarding):
                    exchange.cut_at_deadline()
            nap = DEADLINE_TICK_S if deadline is None or now >= deadline else min(DEADLINE_TICK_S, deadline - now)
            await asyncio.sleep(max(nap, 0.005))

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        loop = self._loop
        if loop is not None and self._thread is not None and self._thread.is_alive():
            try:
                asyncio.run_coroutine_threadsafe(self._shutdown(), loop).result(timeout=15)
            except Exception:
                pass
            loop.call_soon_threadsafe(loop.stop)
            self._thread.join(timeout=15)
        elif loop is None:  # never started: still release upstream clients
            asyncio.run(self._close_upstreams())
        elif not loop.is_closed():  # start() failed: the thread ended without running the loop
            loop.run_until_complete(self._close_upstreams())
            loop.close()
        if self.socket_path is not None and self.config.socket_path is not None:
            try:
                self.socket_path.unlink()
            except FileNotFoundError:
                pass
        if self._tmpdir is not None:
            self._tmpdir.cleanup()

    async def _shutdown(self) -> None:
        if self._watcher is not None:
            self._watcher.cancel()
        for server in self._servers:
            server.close()
        for task in list(self._conn_tasks):
            task.cancel()
        if self._conn_tasks:
            await asyncio.gather(*self._conn_tasks, return_exceptions=True)
        await self._close_upstreams()

    async def _close_upstreams(self) -> None:
        for upstream in self._upstreams.values():
            try:
                await upstream.aclose()
            except Exception:
                pass

    def __enter__(self) -> Gateway:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.close()

    # ------------------------------------------------------------------ run-facing API

    def set_deadline(self, unix_seconds: float | None) -> None:
        """Start a phase (the run, a follow-up) with this deadline; its rate-limit pause starts at 0."""
        self.limits.new_phase()
        self.phase += 1
        self._deadline = unix_seconds

    @property
    def deadline(self) -> float | None:
        """The phase's deadline, moved by the time its calls waited for rate limits when the run
        pauses its budget then (benchctl/limits/run.py; the harness's Budget moves the same way)."""
        if self._deadline is None:
            return None
        return self._deadline + self.limits.extension()

    def settle(self, timeout: float) -> bool:
        """Wait at most `timeout` seconds until every model call in flight now is recorded (its
        `model_call` written, so the transcript's listeners have seen it). True once they all are,
        at once when none is in flight; False at the timeout, some still unrecorded (each is still
        recorded when it ends: its upstream finishes, its client leaves, the deadline cuts it, or
        the gateway closes). Calls that start later are not waited for.

        For a harness whose agent has just exited: a client can have its whole answer before the
        gateway records the call, which happens at the upstream's end of body or when the gateway
        notices the client left (Codex exits right after `response.completed`). Thread-safe; not
        from the gateway's own thread, which it waits on."""
        loop, thread = self._loop, self._thread
        if loop is None or thread is None or not thread.is_alive() or self._closed:
            return True  # not serving: nothing in flight (close() records the calls it cuts)
        if threading.current_thread() is thread:
            raise GatewayError("Gateway.settle() waits on the gateway's own thread: call it from another one")
        try:
            waited = asyncio.run_coroutine_threadsafe(self._settle(timeout), loop)
        except RuntimeError:  # the loop closed meanwhile: close() recorded what it cut
            return True
        try:
            # The loop may be slow to start it (busy): bounded all the same, a little later.
            return waited.result(timeout + 1.0)
        except TimeoutError:
            waited.cancel()
            return False

    async def _settle(self, timeout: float) -> bool:
        # Read on the loop, so no exchange is halfway into or out of `forwarding`. An exchange joins
        # it before its request goes upstream and leaves it only after record() wrote its model_call
        # (exchange.py, Exchange.forward), so "left `forwarding`" means "recorded". Looking again every
        # few ms costs the calls nothing (no per-call signal), and settle() is rare: once per phase.
        pending = set(self.forwarding)
        # time.monotonic, not loop.time(): uvloop's clock is libuv's, cached per loop iteration in
        # whole milliseconds, so a bound taken from it can end a little before `timeout` has passed.
        until = time.monotonic() + timeout
        while pending:
            if time.monotonic() >= until:
                return False
            await asyncio.sleep(SETTLE_TICK_S)
            pending &= self.forwarding
        return True

    def add_route(self, prefix: str, handler: RouteHandler) -> None:
        """Serve `prefix*` paths with `handler(method, path, body) -> (status, headers, body)` in a worker thread.

        Extra routes are host-side endpoints for the sandbox (hook policy decisions, MCP). Like every
        route they need the sandbox token and their bodies count against the body caps; handlers must
        still not expose anything secret (the token is no secret from the agent)."""
        if not prefix.startswith("/"):
            raise GatewayError(f"route prefix {prefix!r} must start with '/'")
        self.routes.append((prefix, handler))
        self.routes.sort(key=lambda r: len(r[0]), reverse=True)  # longest prefix wins

    def add_observer(self, observer: CallObserver) -> None:
        """Tell `observer` about every generation call from now on (see CallObserver)."""
        self.observers.append(observer)

    def observe(self, method: str, *args: Any) -> None:
        """Call every observer's `method`; an observer's bug is recorded, never the client's problem."""
        for observer in self.observers:
            try:
                getattr(observer, method)(*args)
            except Exception as e:
                self.transcript.emit(
                    "error",
                    source="gateway",
                    error=f"call observer {type(observer).__name__} failed: {type(e).__name__}: {e}",
                )

    def summary(self) -> dict[str, Any]:
        """calls: generation requests sent to an upstream, however they ended (answered, failed, cut
        off), plus answers held back by the refusal-retry policy; side calls such as token counting
        and model listing are not counted, nor requests the gateway refused itself; usage and
        cost_usd summed over them (cost None when any call's price or usage is unknown);
        served_models / requested_models: counts by model; current_model: what serves the next
        call; fallbacks: the switches; refusals; errors: calls that ended in an upstream error or
        idle timeout, and requests the gateway refused (bad token, deadline, unknown path); refused:
        how many requests the gateway refused itself, by HTTP status (and the hook host's forged
        hooks and bad hook payloads as "forged_hook" / "bad_hook"), including those only counted
        and not recorded."""
        with self._stats_lock:
            return {
                "calls": self._calls,
                "usage": dict(self._usage),
                "cost_usd": round(self._cost, 6) if self._cost is not None else None,
                "served_models": dict(self._served),
                "requested_models": dict(self._requested),
                "current_model": str(self.router.current),
                "fallbacks": list(self.router.fallbacks),
                "refusals": self._refusals,
                "errors": self._errors,
                "refused": dict(self._refused),
            }

    # ------------------------------------------------------------------ used by exchange.py

    def upstream_for(self, model: ModelId) -> Upstream:
        upstream = self._upstreams.get(model)
        if upstream is None:
            upstream = self._upstreams[model] = self._resolve(model)
        return upstream

    def _resolve(self, model: ModelId) -> Upstream:
        return resolve_upstream(model, self.config.retry, lambda: self.deadline, limits=self.limits)

    def next_call_id(self) -> str:
        with self._stats_lock:
            self._call_seq += 1
            return f"call-{self._call_seq}"

    def account(
        self,
        served: str,
        usage: dict[str, int],
        cost: float | None,
        refusal: bool,
        error: bool,
        counted: bool,
        requested: str | None = None,
    ) -> None:
        with self._stats_lock:
            if counted:
                self._calls += 1
                self._served[served] = self._served.get(served, 0) + 1
                if requested:
                    self._requested[requested] = self._requested.get(requested, 0) + 1
                for k in USAGE_KEYS:
                    self._usage[k] += usage.get(k, 0) or 0
                if cost is None:
                    self._cost = None
                elif self._cost is not None:
                    self._cost += cost
            self._refusals += int(refusal)
            self._errors += int(error)

    def open_connection(self) -> bool:
        """Count a new connection; False when there are MAX_CONNECTIONS already (event loop only)."""
        if self._connections >= http11.MAX_CONNECTIONS:
            return False
        self._connections += 1
        return True

    def close_connection(self) -> None:
        self._connections = max(0, self._connections - 1)

    def refused(self, status: int | str, why: str) -> bool:
        """Count a request the gateway refused itself (bad token, over a cap, unknown path, forged
        hook, ...); True while it should also be recorded in full. The first RECORDED_REFUSALS of each
        kind are; later ones are only counted (`summary()["refused"]`), with one `error` event saying
        so, because an agent could otherwise fill the host's disk with refused requests."""
        key = str(status)
        with self._stats_lock:
            n = self._refused[key] = self._refused.get(key, 0) + 1
        if n == RECORDED_REFUSALS + 1:
            self.transcript.emit(
                "error",
                source="gateway",
                status=status,
                message=f"more than {RECORDED_REFUSALS} requests refused with {status} ({why}): "
                "further ones are counted in the gateway summary, not recorded",
            )
        return n <= RECORDED_REFUSALS

    def track(self, task: asyncio.Task[None]) -> None:
        self._conn_tasks.add(task)
        task.add_done_callback(self._conn_tasks.discard)
