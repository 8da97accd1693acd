"""One HTTP exchange through the gateway: authenticate, route, forward, stream back, record.

Every generation request the gateway forwards gets exactly one `model_call` event (source
"gateway"), however it ends, with: call_id, wire_api, path (as the client sent it),
requested_model, served_model (the run's model id that served it), stream, status (the HTTP
status the client got; null when the call was cut off before any answer), outcome (`ok`;
`error`: the upstream failed or answered with an error; `timeout`: the upstream went silent past
the idle timeout, or the call was cut off after the run's deadline; `cancelled`: cut off before
it, because the client went away or the gateway closed), latency_ms, ttfb_ms, usage, cost_usd
(null when the price or the usage is unknown: a call cut off before the upstream reported its
usage, or one with a retried attempt marked `usage_unknown`, see retry.py), stop_reason, refusal,
request (the delta, see recording.py) and response {text, tool_calls, reasoning} (what had arrived, for a
cut-off call; null when nothing did). Present only when there is something to say: partial
(true: the answer was cut before its end), upstream_model (what the upstream called itself, when
not the served name), retries (every attempt: attempt, status, error, wait_s, usage_unknown when
true; absent = one clean attempt), error, and `headers` (the pass-through request headers such as
anthropic-beta) appears when they differ from the previous call of that wire API. The recorded
request is the one sent upstream: the client's own differs only in `model` (requested_model; for
Gemini the model is in the path) and, on a chat-completions stream that did not ask for its
usage, in `stream_options.include_usage` (chat_usage.py: the gateway asks for it, and the client
gets the stream without what that adds). A call the upstream failed (outcome
`error`, or `timeout` by the idle timeout) also gets a `model_error` event; a refusal a `refusal`
event; a switch to the fallback model a `fallback` event.

A client that closes (or resets) its connection while its call is in flight stops the upstream
call at once; the call is recorded then. One that closes after the whole answer, its final usage
included, was handed to it (only the upstream's end of body still to come) cut nothing off: `ok`.
A call still in flight when the gateway closes is recorded as it is cancelled.
"""

from __future__ import annotations

import asyncio
import math
import socket
import time
import zlib
from collections.abc import AsyncIterator, Iterable
from typing import Any

import orjson

from benchctl.gateway import http11
from benchctl.gateway import wire as wf
from benchctl.gateway.context import GatewayContext
from benchctl.gateway.http_upstreams import HOP_HEADERS, UnsupportedWireApi, UpstreamConfigError
from benchctl.gateway.retry import UpstreamUnavailable, is_timeout, usage_unknown
from benchctl.gateway.upstream import ModelId, UpstreamCall, UpstreamResponse, close_body
from benchctl.gateway.wire import STREAM_UNFINISHED, ResponseSummary, Wire, WireApi, classify, empty_usage, summarize
from benchctl.gateway.wire.chat_usage import UsageChunkFilter
from benchctl.transcript import EventType

SANDBOX_TOKEN = "benchctl-sandbox-token"  # the only credential agents ever see
PASS_HEADERS = ("anthropic-version", "anthropic-beta", "openai-beta")
JSON = {"content-type": "application/json"}
DRAIN_ABOVE = 1 << 16


def set_nodelay(writer: asyncio.StreamWriter) -> None:
    sock = writer.get_extra_info("socket")
    if sock is not None and sock.family in (socket.AF_INET, socket.AF_INET6):
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)


def authorized(headers: dict[str, str], query: str, token: str) -> bool:
    if headers.get("x-api-key") == token or headers.get("x-goog-api-key") == token:
        return True
    if headers.get("authorization") == f"Bearer {token}":
        return True
    return bool(query) and f"key={token}" in query.split("&")


async def handle_connection(gw: GatewayContext, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    task = asyncio.current_task()
    if task is not None:
        gw.track(task)
    set_nodelay(writer)
    if not gw.open_connection():
        # Every connection may hold a request head in memory: their number is capped. Nothing of this
        # one is read, so its wire format is unknown (None: the Anthropic shape, see wire.error_body).
        gw.refused(503, "too many connections")
        body = wf.error_body(
            None, 503, f"benchctl gateway: more than {http11.MAX_CONNECTIONS} connections at once", "overloaded_error"
        )
        writer.write(http11.whole_response(503, {**JSON, "retry-after": "1"}, body, keep_alive=False))
        writer.close()
        return
    try:
        while True:
            try:
                req = await http11.read_head(reader)
            except (http11.BadRequest, ValueError) as e:
                writer.write(
                    http11.whole_response(
                        400, JSON, wf.error_body(None, 400, f"benchctl gateway: {e}"), keep_alive=False
                    )
                )
                break
            if req is None:
                break
            try:
                keep = await Exchange(gw, req, reader, writer, task).run()
            finally:
                gw.body_budget.give(req.reserved)
                req.reserved = 0
            if not req.body_complete:  # answered before (all of) its body was read: drop the rest, close
                await writer.drain()
                if writer.can_write_eof():
                    writer.write_eof()  # the answer is complete: a client reading to the end stops here
                await http11.discard_body(reader, req)
                break
            if not (req.keep_alive and keep):
                break
    except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
        pass
    except http11.BadRequest as e:  # a malformed body
        writer.write(
            http11.whole_response(400, JSON, wf.error_body(None, 400, f"benchctl gateway: {e}"), keep_alive=False)
        )
    except Exception as e:  # a gateway bug: tell the client and the transcript, keep serving others
        gw.transcript.emit("error", source="gateway", error=f"gateway internal error: {type(e).__name__}: {e}")
        try:
            body = wf.error_body(None, 500, f"benchctl gateway internal error: {type(e).__name__}: {e}")
            writer.write(http11.whole_response(500, JSON, gw.redact(body), keep_alive=False))
        except Exception:
            pass
    finally:
        gw.close_connection()
        try:
            writer.close()
        except Exception:
            pass


class Exchange:
    def __init__(
        self,
        gw: GatewayContext,
        req: http11.Request,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        task: asyncio.Task[None] | None = None,
    ) -> None:
        self.gw, self.req, self.reader, self.writer = gw, req, reader, writer
        self.task = task  # the connection's task: cancelled when the client goes away mid-call
        self.t0 = time.perf_counter()
        self.ttfb: float | None = None
        self.wire: WireApi | None = None
        self.hide_usage = False  # the gateway asked for this chat stream's usage: the client does not see it

    def ms(self, t: float | None) -> float | None:
        return None if t is None else round((t - self.t0) * 1000, 3)

    def send_whole(self, status: int, headers: dict[str, str], body: bytes) -> None:
        if self.ttfb is None:
            self.ttfb = time.perf_counter()
        # Redacted here, for every whole answer: upstream bodies, and also our own error messages,
        # which quote exception text that an upstream or a route handler may have filled with a key.
        keep_alive = self.req.keep_alive and self.req.body_complete  # an unread body: the connection ends
        self.writer.write(http11.whole_response(status, headers, self.gw.redact(body), keep_alive))

    def fail(
        self,
        status: int,
        message: str,
        event_type: EventType = "model_call",
        headers: dict[str, str] | None = None,
        **fields: Any,
    ) -> bool:
        """Answer with an error in the caller's wire format and record it (the first few of each status
        in full, then only counted: an agent must not be able to fill the host's disk with refusals).
        The vendor's error type (Gemini: status name) follows from the HTTP status, in its wire module."""
        self.gw.account("", {}, 0.0, False, True, counted=False)
        if self.gw.refused(status, message):
            self.gw.transcript.emit(
                event_type,
                source="gateway",
                call_id=self.gw.next_call_id(),
                wire_api=self.wire,
                method=self.req.method,
                path=self.req.path,
                status=status,
                outcome="error",
                latency_ms=self.ms(time.perf_counter()),
                error=message,
                **fields,
            )
        self.send_whole(
            status, {**JSON, "x-should-retry": "false", **(headers or {})}, wf.error_body(self.wire, status, message)
        )
        return True

    async def run(self) -> bool:
        req, gw = self.req, self.gw
        route = next((handler for prefix, handler in gw.routes if req.path.startswith(prefix)), None)
        if route is None:
            self.wire = classify(req.method, req.path)
        # The token first, then the caps, and only then is a byte of the body read.
        if not authorized(req.headers, req.query, SANDBOX_TOKEN):
            return self.fail(
                401,
                "benchctl gateway: invalid API key; agents must use the sandbox token the harness "
                "gave them (real keys stay on the host)",
            )
        try:
            await http11.read_body(self.reader, self.writer, req, gw.body_limits.max_body, gw.body_budget)
        except http11.BodyRefused as e:
            if e.status == 429:  # the client may try again: the SDKs and CLIs do, after retry-after
                return self.fail(429, f"benchctl gateway: {e}", headers={"retry-after": "1", "x-should-retry": "true"})
            return self.fail(413, f"benchctl gateway: {e}")
        if route is not None:
            return await self.extra_route(route)
        if self.wire is None:
            return self.fail(
                404,
                f"benchctl gateway: no route for {req.method} {req.path}; served: POST /v1/messages, "
                "/v1/messages/count_tokens, /v1/responses, /v1/chat/completions, "
                "/v1beta/models/M:generateContent|streamGenerateContent, GET /v1/models",
            )
        served = gw.router.current
        if self.wire == "models_list":
            return self.models_list(served)
        if gw.deadline is not None and time.time() > gw.deadline:
            return self.fail(400, "benchctl: time budget exhausted", event_type="model_error", served_model=str(served))
        if gw.limits.stop.is_set():  # a cost cap is reached (benchctl/limits): no new calls
            return self.fail(
                400,
                f"benchctl: {gw.limits.stop.reason}; the run is stopping",
                event_type="model_error",
                served_model=str(served),
            )
        encoding = req.headers.get("content-encoding", "identity").lower()
        if encoding not in ("identity", "gzip", "deflate"):
            return self.fail(
                415,
                f"benchctl gateway: request content-encoding {encoding!r} is not supported "
                "(send identity, gzip or deflate)",
            )
        try:
            raw = req.body if encoding == "identity" else self.inflate(encoding)
        except http11.BodyRefused as e:
            if e.status == 429:
                return self.fail(429, f"benchctl gateway: {e}", headers={"retry-after": "1", "x-should-retry": "true"})
            return self.fail(413, f"benchctl gateway: {e}")
        except zlib.error as e:
            return self.fail(400, f"benchctl gateway: request body is not valid {encoding}: {e}")
        try:
            body = orjson.loads(raw) if raw else {}
            if not isinstance(body, dict):
                raise ValueError("request body must be a JSON object")
        except ValueError as e:
            return self.fail(400, f"benchctl gateway: request body is not valid JSON: {e}")
        spoken = wf.wire(self.wire)
        info = spoken.request_info(req.path, body)
        requested = info.model
        if requested and requested != served.name and gw.config.other_model_policy == "reject":
            return self.fail(
                400, f"benchctl gateway: this run serves {served.name}, not {requested}", requested_model=requested
            )
        stream = info.stream
        path = spoken.address(req.path, body, served.name)
        if info.counts_tokens and served.provider != spoken.token_count_provider:
            return self.estimate_tokens(body, requested, served, spoken)
        if stream:
            self.hide_usage = spoken.prepare_stream(body)
        headers = {k: req.headers[k] for k in PASS_HEADERS if k in req.headers}
        # The sandbox token may come as ?key= (Gemini style): it is ours, never forwarded.
        query = "&".join(p for p in req.query.split("&") if p and not p.startswith("key=")) if req.query else ""
        call = UpstreamCall(self.wire, req.method, path, served, body, stream, query, headers)
        if gw.observers and self.wire != "anthropic_count_tokens":
            gw.observe("request", req.headers, self.wire, body)
        return await self.forward(call, requested)

    # ------------------------------------------------------------------ forwarding

    async def forward(self, call: UpstreamCall, requested: str | None) -> bool:
        """Forward one generation call and record it exactly once, however it ends: answered, failed,
        or cut off because the client went away or the gateway closed (the run ended, Ctrl-C)."""
        self.call_id = call.call_id = self.gw.next_call_id()
        self.deadline = self.gw.deadline  # in force when the call started: a cut after it is a `timeout`
        self.phase = self.gw.phase  # (the deadline of this phase moves with rate-limit waits)
        self.deadline_cut = False
        self.status: int | None = None  # the upstream's HTTP status, once its head arrived
        self.parts: list[bytes] = []  # the response bytes received so far
        self.attempts: list[dict[str, Any]] = []  # of earlier sends (refusal retries)
        self.recorded = False
        self.client_gone = False
        self.relayed = False  # every byte that arrived is in the client's socket (pass_through)
        task = self.task
        protocol = self.writer.transport.get_protocol()
        client = protocol if isinstance(protocol, http11.ClientProtocol) and task is not None else None

        def gone() -> None:  # the client closed or reset the connection: stop the upstream call now
            self.client_gone = True
            task.cancel()  # type: ignore[union-attr]

        if client is not None:
            client.on_client_gone = gone
        # In `forwarding` from before the request goes upstream until after its model_call is
        # written (every way out below records first; a gateway bug gets an `error` event instead, from
        # handle_connection): Gateway.settle() waits on exactly that.
        self.gw.forwarding.add(self)
        try:
            return await self._forward(call, requested)
        except asyncio.CancelledError:
            if self.client_gone:
                self.record(call, requested, cut=f"the client went away after {self.elapsed():.1f} s")
                task.uncancel()  # type: ignore[union-attr]  # our own cancel: this connection is done
                return False
            if self.deadline_cut:
                self.record(call, requested, cut=f"cut off by the gateway after {self.elapsed():.1f} s")
                task.uncancel()  # type: ignore[union-attr]
                self.answer_cut(call.wire_api)
                return False
            self.record(
                call,
                requested,
                cut=f"the gateway closed after {self.elapsed():.1f} s (the run ended or was interrupted)",
            )
            raise
        finally:
            self.gw.forwarding.discard(self)
            if client is not None:
                client.on_client_gone = None

    def cut_at_deadline(self) -> None:
        """Called by the gateway's deadline watcher: stop this call now (recorded as `timeout`)."""
        if not self.deadline_cut and not self.recorded and self.task is not None:
            self.deadline_cut = True
            self.task.cancel()

    def answer_cut(self, wire: str) -> None:
        """Tell the client its call was cut at the deadline: an error answer, or an error event when a
        stream had started; the connection then closes."""
        message = "benchctl: time budget exhausted (the call was cut off at the run's deadline)"
        try:
            if self.ttfb is None:
                self.send_whole(400, {**JSON, "x-should-retry": "false"}, wf.error_body(wire, 400, message))
            else:  # the same status, said in the stream the client is already reading
                self.writer.write(http11.chunk(wf.stream_error_event(wire, message, 400)) + http11.LAST_CHUNK)
        except Exception:
            pass

    def elapsed(self) -> float:
        return time.perf_counter() - self.t0

    async def _forward(self, call: UpstreamCall, requested: str | None) -> bool:
        gw = self.gw
        policy_retry = gw.router.policy == "retry" and call.wire_api != "anthropic_count_tokens"
        refusal_tries = gw.router.retries if policy_retry else 0
        while True:
            try:
                resp = await gw.upstream_for(call.model).send(call)
            except UpstreamUnavailable as e:
                self.attempts += e.attempts
                call.attempts = []  # (the same attempts: now in self.attempts)
                what = "upstream timed out" if e.timed_out else "upstream unreachable"
                return self.upstream_failed(
                    call, requested, f"{what}: {e}", 504 if e.timed_out else 502, timed_out=e.timed_out
                )
            except (UnsupportedWireApi, UpstreamConfigError) as e:
                return self.upstream_failed(call, requested, str(e), 400, sent=False)
            except Exception as e:  # a bug in an upstream must not kill the connection silently
                return self.upstream_failed(call, requested, f"{type(e).__name__}: {e}", 502)
            self.attempts += resp.attempts
            call.attempts = []  # (the same attempts: now in self.attempts)
            self.status = resp.status
            if not policy_retry:
                break
            # Refusal retry: hold the whole response, and ask again while it refuses.
            try:
                async for data in resp.body:
                    self.parts.append(data)
            except Exception as e:  # nothing reached the client yet: answer with an error, and record it
                message = f"upstream stream failed: {type(e).__name__}: {e}"
                self.record(call, requested, message, timed_out=is_timeout(e), answered=502)
                self.send_whole(
                    502,
                    {**JSON, "x-should-retry": "false"},
                    wf.error_body(call.wire_api, 502, f"benchctl gateway: {message}"),
                )
                return True
            data = b"".join(self.parts)
            s = summarize(call.wire_api, call.stream, data, resp.status)
            resp.body = _one(data)
            if not s.refusal or refusal_tries <= 0:
                break
            refusal_tries -= 1
            self.parts, self.status = [], None
            cost = self.price(str(call.model), s)
            gw.account(str(call.model), s.usage, cost, True, False, counted=True, requested=requested)
            # The refused answer never reaches the client and gets no model_call event of its own: its
            # usage and cost are here, so the transcript adds up to the run's summary.
            gw.transcript.emit(
                "refusal",
                source="gateway",
                call_id=self.call_id,
                model=str(call.model),
                stop_reason="refusal",
                **_upstream_reason(s),
                action="retry",
                text=s.text[:500],
                usage=s.usage,
                cost_usd=cost,
            )
        return await self.pass_through(call, requested, resp)

    async def pass_through(self, call: UpstreamCall, requested: str | None, resp: UpstreamResponse) -> bool:
        headers = {k: v for k, v in resp.headers.items() if k.lower() not in HOP_HEADERS}
        headers["x-benchctl-served-model"] = str(call.model)
        error: str | None = None
        timed_out = False
        writer = self.writer
        gw_redact = self.gw.redact  # real keys never reach the client, even if an upstream echoed one
        if call.stream and resp.status < 400:
            # A key may be cut in two by the upstream's reads: scrub across the pieces.
            scrub = gw_redact.stream()
            hide = UsageChunkFilter() if self.hide_usage else None
            self.parts = []  # (a held refusal-retry answer is replayed from resp.body)
            # The head leaves with the first chunk (already fetched by the retry layer): one write, not two.
            head: bytes | None = http11.stream_head(resp.status, headers, self.req.keep_alive)
            sent = 0
            try:
                async for data in resp.body:
                    self.parts.append(data)
                    self.relayed = False
                    if writer.transport.is_closing():
                        raise ConnectionResetError("client closed the connection")
                    out = scrub.feed(data if hide is None else hide.feed(data))
                    if head is not None:
                        writer.write(head + http11.chunk(out) if out else head)
                        head = None
                        self.ttfb = time.perf_counter()
                    elif out:
                        writer.write(http11.chunk(out))
                    sent += len(data)
                    if writer.transport.get_write_buffer_size() > DRAIN_ABOVE:
                        await writer.drain()
                    self.relayed = writer.transport.get_write_buffer_size() == 0
            except asyncio.CancelledError:  # client gone or gateway closing: forward() records what got through
                await close_body(resp.body)
                raise
            except Exception as e:
                if writer.transport.is_closing():  # the client went away: stop reading upstream, record
                    await close_body(resp.body)
                    self.record(call, requested, cut=f"the client went away after {sent} bytes")
                    return False
                error = f"upstream stream failed after {sent} bytes were sent to the client: {type(e).__name__}: {e}"
                timed_out = is_timeout(e)
            if head is not None:  # an empty stream
                writer.write(head)
            held = scrub.feed(hide.end()) + scrub.end() if hide is not None else scrub.end()
            if held:
                writer.write(http11.chunk(held))
            # Record before the last byte goes out: once a client has its answer, the transcript has it too.
            self.record(call, requested, error, timed_out=timed_out)
            if error is not None:
                # Cannot retry (the client has part of it): end the stream with an error event it understands.
                # 502, as a whole answer would say (the upstream failed, not the gateway).
                event = wf.stream_error_event(call.wire_api, f"benchctl gateway: {error}", 502)
                writer.write(http11.chunk(gw_redact(event)))
            writer.write(http11.LAST_CHUNK)
        else:
            status = resp.status
            try:
                self.parts = [await resp.read()]  # already read whole by the retry layer
            except Exception as e:
                error = f"upstream body failed: {type(e).__name__}: {e}"
                status = 502
            self.ttfb = time.perf_counter()
            self.record(call, requested, error, answered=502 if error else None)
            data = (
                b"".join(self.parts)
                if error is None
                else wf.error_body(call.wire_api, 502, f"benchctl gateway: {error}")
            )
            self.send_whole(status, headers, data)
        if writer.transport.get_write_buffer_size() > 0:
            await writer.drain()
        return True

    def price(self, model: str, s: ResponseSummary, attempts: Iterable[dict[str, Any]] = ()) -> float | None:
        """Cost from the usage the answer reported. Unknown (None, unless the model is free) when the
        answer was cut off before it reported its usage, or when an attempt before it that a vendor may
        bill lost its own (`usage_unknown`: went silent after taking the request, or broke off after a
        2xx head; see retry.py): the vendor's bill would be more than this answer's usage says."""
        if s.usage_final and not usage_unknown(attempts):
            return self.gw.prices.cost(model, s.usage)
        return self.gw.prices.cost_of_unknown_usage(model)

    def record(
        self,
        call: UpstreamCall,
        requested: str | None,
        error: str | None = None,
        *,
        cut: str | None = None,
        timed_out: bool = False,
        answered: int | None = None,
        sent: bool = True,
    ) -> None:
        """Write this call's one `model_call` event (plus refusal / fallback / model_error events) and
        count it in the gateway's summary; later calls for the same exchange do nothing.

        error: what went wrong on the way (stream failed, upstream unreachable); cut: why the call was
        stopped before its end (client gone, gateway closing), which makes its outcome `timeout` when the
        deadline in force at its start has passed, else `cancelled` (a client gone once it had the whole
        answer cut nothing); timed_out: the upstream went silent past the idle timeout; answered: the
        status the gateway answered the client with itself, when not the upstream's (what arrived from
        the upstream, if anything, is still summarized); sent: False when the request never left the
        gateway (not counted as a call)."""
        if self.recorded:
            return
        self.recorded = True
        gw = self.gw
        t_end = time.perf_counter()
        served = str(call.model)
        data = b"".join(self.parts)
        upstream_status = self.status
        s = (
            summarize(call.wire_api, call.stream, data, upstream_status)
            if upstream_status is not None
            else ResponseSummary(usage=empty_usage())
        )
        if cut is not None and self.client_gone and self.relayed and s.usage_final and s.error is None:
            # The client left once the whole answer was in its socket, only the upstream's end of body
            # still to come (Codex drops its connection at `response.completed`): nothing was cut off.
            cut = None
        # cut while the limiter held it back (benchctl/limits): never sent, so nothing generated or counted
        never_sent = call.waiting_for_limit and not call.attempts
        if never_sent and cut is not None:
            cut += " (it was waiting for the rate limit; nothing was sent)"
            sent = False
        attempts = self.attempts + call.attempts
        if upstream_status is None and (never_sent or not cut):
            # No upstream answer and none pending: this one generated nothing (an attempt that may have,
            # e.g. one that went silent after taking the request, says so itself: `usage_unknown`).
            s.usage_final = True
        if cut is not None and s.error == STREAM_UNFINISHED:
            s.error = None  # unfinished because it was cut: that is the cut, not an upstream fault
        deadline = self.gw.deadline if self.phase == self.gw.phase else self.deadline  # moved by rate-limit waits
        past_deadline = deadline is not None and time.time() >= deadline
        if s.error is not None:  # what arrived says the upstream failed (error event, malformed data)
            outcome = "error"
        elif cut is not None:
            outcome = "timeout" if past_deadline else "cancelled"
        else:
            outcome = "ok" if error is None else "timeout" if timed_out else "error"
        # Partial: an answer had started and did not reach its end (cut off, or failed on the way).
        partial = upstream_status is not None and upstream_status < 400 and (cut is not None or error is not None)
        if cut is not None:
            error = cut + (", past the run's deadline" if past_deadline else "")
        error = "; ".join(e for e in (s.error, error) if e) or None
        status = answered if answered is not None else upstream_status
        failed = outcome == "error" or (outcome == "timeout" and cut is None)  # the upstream's fault, not the run's
        counted = sent and call.wire_api != "anthropic_count_tokens"
        cost = self.price(served, s, attempts) if counted else 0.0
        response = s.response() if upstream_status is not None else None
        delta = gw.recorder.delta(self.call_id, call.wire_api, call.body, len(self.req.body))
        if outcome == "ok" and response is not None:
            gw.recorder.note_response(self.call_id, call.wire_api, response)
        gw.account(served, s.usage, cost, s.refusal, failed, counted, requested)
        if gw.observers and counted:
            ids = [str(c["id"]) for c in s.tool_calls if c.get("id")] if outcome == "ok" else []
            gw.observe("response", self.req.headers, call.wire_api, ids, outcome)
        if cut is not None and upstream_status is None and not never_sent:  # cut during the send: the attempt in flight
            attempts = attempts + [
                {"attempt": len(call.attempts) + 1, "status": upstream_status, "error": error, "wait_s": 0.0}
            ]
        # Fields that are almost always empty or derivable are left out when so (a 200-turn run writes
        # 200 of these, next to deltas that are often only a few KB): absent retries / error mean none,
        # absent upstream_model means the upstream named the served model itself, absent partial: whole.
        extra: dict[str, Any] = {}
        if len(attempts) > 1 or (attempts and attempts[0]["error"]) or (not attempts and error is not None):
            extra["retries"] = attempts
        if error is not None:
            extra["error"] = error
        if partial:
            extra["partial"] = True
        if s.served_model and s.served_model != call.model.name:
            extra["upstream_model"] = s.served_model
        if call.headers != gw.last_headers.get(call.wire_api, {}):
            # Pass-through headers (anthropic-version, anthropic-beta, ...) change rarely: recorded when they do.
            extra["headers"] = gw.last_headers[call.wire_api] = call.headers
        gw.transcript.emit(
            "model_call",
            source="gateway",
            call_id=self.call_id,
            wire_api=call.wire_api,
            path=self.req.path,
            requested_model=requested,
            served_model=served,
            stream=call.stream,
            status=status,
            outcome=outcome,
            latency_ms=self.ms(t_end),
            ttfb_ms=self.ms(self.ttfb),
            usage=s.usage,
            cost_usd=cost,
            stop_reason=s.stop_reason,
            refusal=s.refusal,
            **extra,
            request=delta,
            response=response,
        )
        if s.refusal:
            # Every wire API says "refused" its own way (Responses: status "completed" with a refusal part;
            # chat: content_filter; Gemini: SAFETY ...): the reason recorded is "refusal", the vendor's beside it.
            switch = gw.router.on_refusal(call.model, "refusal", call_id=self.call_id, **_upstream_reason(s))
            gw.transcript.emit(
                "refusal",
                source="gateway",
                call_id=self.call_id,
                model=served,
                stop_reason="refusal",
                **_upstream_reason(s),
                action="fallback" if switch else "none",
                text=s.text[:500],
            )
            if switch:
                gw.transcript.emit("fallback", source="gateway", **switch)
        if failed:
            gw.transcript.emit(
                "model_error",
                source="gateway",
                call_id=self.call_id,
                model=served,
                status=status,
                error=error,
                retries=attempts,
            )

    def upstream_failed(
        self,
        call: UpstreamCall,
        requested: str | None,
        message: str,
        status: int,
        *,
        timed_out: bool = False,
        sent: bool = True,
    ) -> bool:
        self.record(call, requested, message, timed_out=timed_out, answered=status, sent=sent)
        self.send_whole(
            status,
            {**JSON, "x-should-retry": "false"},
            wf.error_body(call.wire_api, status, f"benchctl gateway: {message}"),
        )
        return True

    # ------------------------------------------------------------------ answered locally

    def models_list(self, served: ModelId) -> bool:
        item = {
            "id": served.name,
            "type": "model",
            "display_name": served.name,
            "created_at": "2025-01-01T00:00:00Z",
            "object": "model",
            "created": 0,
            "owned_by": "benchctl",
        }
        if self.req.path.startswith("/v1/models/"):
            body = orjson.dumps(item)
        else:
            body = orjson.dumps(
                {"object": "list", "data": [item], "has_more": False, "first_id": served.name, "last_id": served.name}
            )
        self.gw.transcript.emit(
            "model_call",
            source="gateway",
            call_id=self.gw.next_call_id(),
            wire_api="models_list",
            method=self.req.method,
            path=self.req.path,
            status=200,
            outcome="ok",
            served_model=str(served),
            latency_ms=self.ms(time.perf_counter()),
            answered_by="gateway",
        )
        self.send_whole(200, JSON, body)
        return True

    def estimate_tokens(self, body: dict[str, Any], requested: str | None, served: ModelId, spoken: Wire) -> bool:
        # ~4 bytes per token: good enough for a CLI deciding when to compact; recorded as an estimate.
        n = math.ceil(len(orjson.dumps(body)) / 4)
        self.gw.transcript.emit(
            "model_call",
            source="gateway",
            call_id=self.gw.next_call_id(),
            wire_api=self.wire,
            method=self.req.method,
            path=self.req.path,
            status=200,
            outcome="ok",
            requested_model=requested,
            served_model=str(served),
            latency_ms=self.ms(time.perf_counter()),
            answered_by="gateway",
            estimated_input_tokens=n,
        )
        self.send_whole(200, JSON, spoken.token_count_body(n))
        return True

    def inflate(self, encoding: str) -> bytearray:
        """A gzip/deflate request body, decompressed under the same caps as plain bodies (its bytes are
        reserved as they come out): a small compressed body from the sandbox must not make the host
        allocate gigabytes."""
        limit, budget, req = self.gw.body_limits.max_body, self.gw.body_budget, self.req
        inflater = zlib.decompressobj(47 if encoding == "gzip" else 15)
        out = bytearray()
        pending: bytes = bytes(req.body)
        while pending or not inflater.eof:
            piece = inflater.decompress(pending, http11.READ_SIZE)
            pending = inflater.unconsumed_tail
            if not piece:
                break
            if len(out) + len(piece) > limit:
                raise http11.BodyRefused(413, f"decompressed request body is over the {limit}-byte limit")
            if not budget.take(len(piece)):
                raise http11.BodyRefused(429, http11.BUSY)
            req.reserved += len(piece)
            out += piece
        if not inflater.eof:
            raise zlib.error(f"{encoding} request body is incomplete or truncated")
        return out

    async def extra_route(self, handler: Any) -> bool:
        try:
            status, headers, body = await asyncio.to_thread(
                handler, self.req.method, self.req.path, bytes(self.req.body)
            )
        except Exception as e:
            status, headers, body = 500, JSON, wf.error_body(None, 500, f"benchctl gateway route error: {e}")
        self.send_whole(status, dict(headers), body)
        await self.writer.drain()
        return True


async def _one(data: bytes) -> AsyncIterator[bytes]:
    yield data


def _upstream_reason(s: ResponseSummary) -> dict[str, str]:
    """The vendor's own stop reason of a refusal, when it says more than "refusal"."""
    return {"upstream_stop_reason": s.stop_reason} if s.stop_reason and s.stop_reason != "refusal" else {}
