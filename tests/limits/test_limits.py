"""The Limiter seam without Docker: its bookkeeping, the providers' headers, and gateways that share
one in-process limiter, measured at the fake upstream (real HTTP, real SDK clients)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import anthropic
import pytest

from benchctl.gateway import Gateway, GatewayConfig
from benchctl.gateway.clients import anthropic_client
from benchctl.gateway.upstream import ModelId
from benchctl.limits.config import LimitsConfig, LimitsConfigError, ProviderLimit, keys_for, parse_sweep_limits
from benchctl.limits.headers import duration_s, hold_until
from benchctl.limits.local import LocalLimiter
from benchctl.limits.run import CallRefused, LimitsPlan, RunLimits
from benchctl.limits.state import Exhausted, LimitState
from benchctl.policies import Budget, time_notice
from benchctl.testing.fake_upstream import FakeUpstreamServer
from benchctl.transcript import TranscriptWriter
from tests.rigs.gateway import FAST_RETRY, events, point_env_at

pytestmark = pytest.mark.timeout(120)
MODEL = "anthropic/claude-haiku-4-5"  # priced
MSG = [{"role": "user", "content": "hi"}]


# ---------------------------------------------------------------- bookkeeping (pure)


def cfg(**providers: ProviderLimit) -> LimitsConfig:
    return LimitsConfig(providers=dict(providers))


def test_connection_slots_go_in_arrival_order_and_a_model_limit_holds_up_only_its_model() -> None:
    st = LimitState(LimitsConfig(max_connections=2, providers={"anthropic/m1": ProviderLimit(max_connections=1)}))
    a = st.enqueue(("anthropic", "anthropic/m1"), "r", 0)
    b = st.enqueue(("anthropic", "anthropic/m1"), "r", 0)  # m1's own limit: waits for a
    c = st.enqueue(("anthropic", "anthropic/m2"), "r", 0)  # another model: may pass b
    d = st.enqueue(("anthropic", "anthropic/m2"), "r", 0)  # the provider's 2 slots are taken by a and c
    granted = [t.id for t, p in st.grant_ready(0.0)]
    assert granted == [a.id, c.id]
    assert st._waiting[b.id].reason == "max_connections" and st._waiting[d.id].reason == "max_connections"
    assert st.wait_hint(d.id, 0.0) is None  # only a release can let it go
    assert st.release(a.id, 0, 1.0)
    assert [t.id for t, _ in st.grant_ready(1.0)] == [b.id]  # m1's slot and a provider slot: b, first in line
    assert st.in_flight("anthropic") == 2 and st.in_flight("anthropic/m1") == 1
    assert not st.release(a.id, 0, 1.0)  # a second release of the same permit does nothing


def test_buckets_holds_and_the_money_cap() -> None:
    st = LimitState(
        LimitsConfig(max_cost=1.0, providers={"openai": ProviderLimit(requests_per_minute=60, tokens_per_minute=600)})
    )
    keys = ("openai", "openai/gpt-5")
    t1 = st.enqueue(keys, "r", 0)
    ((_, p1),) = st.grant_ready(0.0)
    assert st.release(p1.id, 700, 0.0)  # 700 tokens against 600/min: overdrawn by 100
    t2 = st.enqueue(keys, "r", 0)
    assert st.grant_ready(0.0) == [] and st._waiting[t2.id].reason == "tokens_per_minute"
    assert st.wait_hint(t2.id, 0.0) == pytest.approx(10.0, abs=0.01)  # 100 tokens at 10/s
    assert [t.id for t, _ in st.grant_ready(10.1)] == [t2.id]
    st.hold("openai/gpt-5", 20.0, "retry_after", 10.1)  # a 429 on the model holds its key
    t3 = st.enqueue(keys, "r", 10.1)
    assert st.grant_ready(10.2) == [] and st._waiting[t3.id].reason == "retry_after"
    assert st.wait_hint(t3.id, 10.2) == pytest.approx(9.8)
    t4 = st.enqueue(("openai", "openai/gpt-5-mini"), "r", 10.2)  # another model of the provider goes on
    assert [t.id for t, _ in st.grant_ready(10.2)] == [t4.id]
    assert t1.id != t2.id and not st.charge(0.6) and st.charge(0.4)
    assert [type(r) for _, r in st.grant_ready(30.0)] == [Exhausted]  # t3: refused, the money is spent


def test_provider_rate_limit_headers_hold_the_key_until_their_reset() -> None:
    now = 1_000_000.0
    reset = datetime.fromtimestamp(now + 7, tz=UTC).isoformat().replace("+00:00", "Z")
    assert hold_until(
        200, {"anthropic-ratelimit-requests-remaining": "0", "anthropic-ratelimit-requests-reset": reset}, now
    ) == (pytest.approx(now + 7), "rate_limit_headers")
    assert (
        hold_until(
            200, {"anthropic-ratelimit-tokens-remaining": "1500", "anthropic-ratelimit-tokens-reset": reset}, now
        )
        is None
    )
    assert hold_until(
        200,
        {
            "x-ratelimit-remaining-requests": "0",
            "x-ratelimit-reset-requests": "6m0s",
            "x-ratelimit-remaining-tokens": "0",
            "x-ratelimit-reset-tokens": "1.5s",
        },
        now,
    ) == (pytest.approx(now + 360), "rate_limit_headers")
    assert hold_until(429, {"retry-after": "3"}, now) == (now + 3, "retry_after")
    assert hold_until(429, {"retry-after-ms": "1500"}, now) == (now + 1.5, "retry_after")
    assert hold_until(429, {}, now) is None  # no word on how long: the call's own backoff
    assert [duration_s(x) for x in ("1s", "6m0s", "59.6s", "20ms", "1h2m3s", "soon")] == [
        1.0,
        360.0,
        59.6,
        0.02,
        3723.0,
        None,
    ]


def test_keys_of_a_call_and_the_sweep_file_table() -> None:
    assert keys_for(ModelId.parse("anthropic/claude-x")) == ("anthropic", "anthropic/claude-x")
    assert keys_for(ModelId.parse("openai-compatible/prism")) == ("openai-compatible/prism",)
    c = parse_sweep_limits(
        {
            "max_cost": 5,
            "max_connections": 4,
            "providers": {"anthropic": {"tokens_per_minute": 1000}, "openai/gpt-5": {"max_connections": 1}},
        },
        "s.toml",
    )
    assert c.limit_for("anthropic") == ProviderLimit(max_connections=4, tokens_per_minute=1000)
    assert c.limit_for("google") == ProviderLimit(max_connections=4)
    assert c.limit_for("openai/gpt-5") == ProviderLimit(max_connections=1)
    assert c.limit_for("openai/gpt-5-mini") == ProviderLimit()  # a model without its own table: no limit of its own
    for table, where in [
        ({"max_costs": 1}, "`limits.max_costs`: unknown key"),
        ({"max_cost": 0}, "`limits.max_cost`: 0 is not a positive amount"),
        (
            {"providers": {"anthropic": {"max_connections": 0}}},
            "`limits.providers.anthropic.max_connections`: 0 is not a whole number",
        ),
        ({"providers": {"antropic": {}}}, "`limits.providers.antropic`: not a provider key"),
        ({"providers": {"openai": {"tpm": 5}}}, "`limits.providers.openai.tpm`: unknown key"),
    ]:
        with pytest.raises(LimitsConfigError, match="s.toml: key " + where.replace("(", r"\(")):
            parse_sweep_limits(table, "s.toml")


def test_the_budget_pauses_and_the_time_notice_says_so() -> None:
    paused = [0.0]
    b = Budget(1000.0, 600.0, paused=lambda: paused[0])
    assert b.deadline == 1600.0 and time_notice(b, 1060.0) == "[benchctl] Time remaining: 9m 00s of 10m 00s."
    paused[0] = 45.0  # calls were held back 45 s in this phase
    assert b.deadline == 1645.0 and b.remaining(1060.0) == 585.0
    assert b.fraction_used(1060.0) == pytest.approx(15 / 600)  # the paused time is not "used"
    assert time_notice(b, 1060.0) == (
        "[benchctl] Time remaining: 9m 45s of 10m 00s (the clock was paused for "
        "45s while rate limits held your model calls back)."
    )
    assert not b.expired(1610.0) and b.expired(1645.0)


# ---------------------------------------------------------------- gateways sharing one limiter


class Fleet:
    """Several runs' gateways on one fake upstream, sharing one in-process limiter."""

    def __init__(
        self,
        tmp: Path,
        monkeypatch: pytest.MonkeyPatch,
        script: Any,
        config: LimitsConfig,
        n: int,
        pause: bool = True,
        run_max_cost: float | None = None,
        latency: float = 0.0,
    ) -> None:
        self.up = FakeUpstreamServer(script, latency=latency).start()
        point_env_at(monkeypatch, self.up)
        self.limiter = LocalLimiter(config)
        self.paths = [tmp / f"run{i}.jsonl" for i in range(n)]
        self.transcripts = [TranscriptWriter(p) for p in self.paths]
        self.limits = [
            RunLimits(LimitsPlan(self.limiter, config, pause, run_max_cost), t, holder=f"run{i}")
            for i, t in enumerate(self.transcripts)
        ]
        for lim, t in zip(self.limits, self.transcripts):
            t.listeners.append(lim.on_event)
        self.gws = [
            Gateway(
                GatewayConfig(model=MODEL, socket_path=tmp / f"gw{i}.sock", retry=FAST_RETRY, limits=lim), t
            ).start()
            for i, (lim, t) in enumerate(zip(self.limits, self.transcripts))
        ]

    def events(self, i: int, type: str) -> list[dict[str, Any]]:
        return events(self.paths[i], type)

    def close(self) -> None:
        for gw in self.gws:
            gw.close()
        for t in self.transcripts:
            t.close()
        self.up.close()


@pytest.fixture
def fleet_factory(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Any:
    made: list[Fleet] = []

    def make(*args: Any, **kw: Any) -> Fleet:
        made.append(Fleet(tmp_path, monkeypatch, *args, **kw))
        return made[-1]

    yield make
    for f in made:
        f.close()


def in_threads(fns: list[Callable[[], Any]]) -> list[Any]:
    out: list[Any] = [None] * len(fns)

    def run(i: int) -> None:
        try:
            out[i] = fns[i]()
        except Exception as e:
            out[i] = e

    threads = [threading.Thread(target=run, args=(i,)) for i in range(len(fns))]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    return out


SLOW = {
    "turns": [
        {
            "text": "one two three four",
            "chunks": 4,
            "chunk_delay": 0.1,
            "delay": 0.2,
            "usage": {"input_tokens": 10, "output_tokens": 4},
        }
    ],
    "after_end": "repeat_last",
}


def test_runs_sharing_a_key_never_have_more_calls_in_flight_than_the_limit(fleet_factory: Any) -> None:
    fleet = fleet_factory(SLOW, LimitsConfig(max_connections=3), n=4)

    def call(gw: Gateway, stream: bool) -> str:
        client = anthropic_client(gw, max_retries=0)
        if stream:  # a stream holds its slot until its last event
            with client.messages.stream(model="m", max_tokens=5, messages=MSG) as s:
                return s.get_final_text()
        return client.messages.create(model="m", max_tokens=5, messages=MSG).content[0].text

    results = in_threads([lambda gw=gw, k=k: call(gw, k % 2 == 0) for gw in fleet.gws for k in range(4)])
    assert results == ["one two three four"] * 16
    assert fleet.up.max_in_flight == 3  # exactly the limit: reached, never passed
    waits = [e for i in range(4) for e in fleet.events(i, "rate_limit_wait")]
    assert waits and {e["reason"] for e in waits} == {"max_connections"}
    calls = {e["call_id"] for i in range(4) for e in fleet.events(i, "model_call")}
    assert all(e["call_id"] in calls for e in waits) and all(e["wait_s"] > 0 for e in waits)
    for i, lim in enumerate(fleet.limits):
        s = lim.summary()
        mine = fleet.events(i, "rate_limit_wait")
        assert s["waits"] == len(mine) and s["wait_s"] == pytest.approx(sum(e["wait_s"] for e in mine), abs=0.01)
        assert s["paused_s"] <= s["wait_s"] + 0.01  # overlapping waits count once in the pause
    assert fleet.limiter.stats()["anthropic"]["in_flight"] == 0  # every slot came back


def test_a_429_holds_the_key_for_every_run_and_its_waits_move_the_deadline(fleet_factory: Any) -> None:
    fleet = fleet_factory(
        {"turns": [{"text": "ok", "usage": {"input_tokens": 5, "output_tokens": 1}}], "after_end": "repeat_last"},
        LimitsConfig(),
        n=2,
    )
    a, b = fleet.gws
    for gw in fleet.gws:
        gw.set_deadline(time.time() + 600)
    base = [gw._deadline for gw in fleet.gws]
    fleet.up.fail_next(429, retry_after=1.5)
    t0 = time.time()
    assert (
        anthropic_client(a, max_retries=0).messages.create(model="m", max_tokens=5, messages=MSG).content[0].text
        == "ok"
    )
    assert (
        anthropic_client(b, max_retries=0).messages.create(model="m", max_tokens=5, messages=MSG).content[0].text
        == "ok"
    )
    assert time.time() - t0 >= 1.4
    # a's own backoff (this retry policy caps a wait at 0.5 s), then the rest of the hold on the key
    backoff, held = fleet.events(0, "rate_limit_wait")
    assert backoff["reason"] == "retry_after" and backoff["status"] == 429 and backoff["paused"] is True
    assert held["reason"] == "retry_after" and "status" not in held
    assert 1.4 <= backoff["wait_s"] + held["wait_s"] < 5
    (call_a,) = fleet.events(0, "model_call")
    assert backoff["call_id"] == held["call_id"] == call_a["call_id"]
    assert [r["status"] for r in call_a["retries"]] == [429, 200]
    # b never saw the 429 itself: the hold on the model's key made it wait (if it came in time)
    wb = fleet.events(1, "rate_limit_wait")
    assert all(w["reason"] == "retry_after" and "status" not in w for w in wb)
    for gw, lim, d in zip(fleet.gws, fleet.limits, base):
        assert gw.deadline == pytest.approx(d + lim.extension(), abs=0.01)
    assert fleet.gws[0].deadline - base[0] == pytest.approx(backoff["wait_s"] + held["wait_s"], abs=0.05)


def test_spent_rate_limit_headers_make_the_next_call_wait(fleet_factory: Any) -> None:
    fleet = fleet_factory({"turns": [{"text": "ok"}], "after_end": "repeat_last"}, LimitsConfig(), n=1)
    reset = datetime.fromtimestamp(time.time() + 1.5, tz=UTC).isoformat()
    fleet.up.headers_next({"anthropic-ratelimit-requests-remaining": "0", "anthropic-ratelimit-requests-reset": reset})
    client = anthropic_client(fleet.gws[0], max_retries=0)
    client.messages.create(model="m", max_tokens=5, messages=MSG)
    assert fleet.events(0, "rate_limit_wait") == []  # the answer came; the key is spent until the reset
    client.messages.create(model="m", max_tokens=5, messages=MSG)
    (w,) = fleet.events(0, "rate_limit_wait")
    assert w["reason"] == "rate_limit_headers" and 0.5 < w["wait_s"] < 5


def test_a_token_limit_is_charged_with_each_calls_usage(fleet_factory: Any) -> None:
    turn = {"text": "ok", "usage": {"input_tokens": 600, "cache_read_tokens": 5000, "output_tokens": 20}}
    fleet = fleet_factory(
        {"turns": [turn], "after_end": "repeat_last"},
        LimitsConfig(providers={"anthropic": ProviderLimit(tokens_per_minute=600)}),
        n=1,
    )
    client = anthropic_client(fleet.gws[0], max_retries=0)
    client.messages.create(model="m", max_tokens=5, messages=MSG)  # 620 counted (cache reads are not)
    client.messages.create(model="m", max_tokens=5, messages=MSG)  # overdrawn by 20 at 10 tokens/s: ~2 s
    (w,) = fleet.events(0, "rate_limit_wait")
    assert w["reason"] == "tokens_per_minute" and 1.0 < w["wait_s"] < 10


def test_a_call_waiting_at_the_deadline_is_cut_and_never_counted_unless_the_budget_pauses(fleet_factory: Any) -> None:
    fleet = fleet_factory(
        {"turns": [{"text": "ok", "delay": 3.0}], "after_end": "repeat_last"},
        LimitsConfig(max_connections=1),
        n=2,
        pause=False,
    )
    holder, waiter = fleet.gws
    first = in_threads_bg(
        lambda: anthropic_client(holder, max_retries=0).messages.create(model="m", max_tokens=5, messages=MSG)
    )
    fleet.up.wait_for_requests(1)
    waiter.set_deadline(time.time() + 0.8)
    with pytest.raises(anthropic.BadRequestError, match="time budget exhausted"):
        anthropic_client(waiter, max_retries=0, timeout=30).messages.create(model="m", max_tokens=5, messages=MSG)
    (cut,) = fleet.events(1, "model_call")
    assert cut["outcome"] == "timeout" and cut["status"] is None and cut["cost_usd"] == 0.0
    assert (
        "waiting for the rate limit; nothing was sent" in cut["error"] and "retries" not in cut or cut["retries"] == []
    )
    assert waiter.summary()["calls"] == 0 and waiter.summary()["cost_usd"] == 0.0  # never sent: not a call
    first.join(30)
    assert len(fleet.up.generation_requests()) == 1


def test_with_the_budget_paused_a_waiting_call_outlives_its_original_deadline(fleet_factory: Any) -> None:
    fleet = fleet_factory(
        {"turns": [{"text": "first", "delay": 3.0}, {"text": "ok", "delay": 0.5}], "after_end": "repeat_last"},
        LimitsConfig(max_connections=1),
        n=2,
        pause=True,
    )
    holder, waiter = fleet.gws
    first = in_threads_bg(
        lambda: anthropic_client(holder, max_retries=0).messages.create(model="m", max_tokens=5, messages=MSG)
    )
    fleet.up.wait_for_requests(1)
    start = time.time()
    waiter.set_deadline(start + 1.5)  # passes while the call waits ~3 s for the slot
    r = anthropic_client(waiter, max_retries=0, timeout=60).messages.create(model="m", max_tokens=5, messages=MSG)
    assert r.content[0].text == "ok"  # the wait moved the deadline: answered in budget
    assert time.time() - start > 1.5
    (w,) = fleet.events(1, "rate_limit_wait")
    assert w["reason"] == "max_connections" and w["paused"] and w["wait_s"] > 1.5
    assert waiter.deadline == pytest.approx(start + 1.5 + fleet.limits[1].extension(), abs=0.01)
    assert fleet.limits[1].summary()["budget_extended_s"] == pytest.approx(w["wait_s"], abs=0.05)
    first.join(30)


def in_threads_bg(fn: Callable[[], Any]) -> threading.Thread:
    t = threading.Thread(target=fn, daemon=True)
    t.start()
    return t


# ---------------------------------------------------------------- money


def test_a_runs_cost_cap_stops_it_and_the_sweeps_cap_stops_every_run(fleet_factory: Any) -> None:
    turn = {"text": "ok", "usage": {"input_tokens": 100_000, "output_tokens": 0}}  # $0.10 each on haiku
    fleet = fleet_factory(
        {"turns": [turn], "after_end": "repeat_last"}, LimitsConfig(max_cost=0.45), n=2, run_max_cost=0.25
    )
    a, b = fleet.gws
    ca, cb = anthropic_client(a, max_retries=0), anthropic_client(b, max_retries=0)
    for _ in range(2):
        ca.messages.create(model="m", max_tokens=5, messages=MSG)
    assert not fleet.limits[0].stop.is_set()  # $0.20 < the run's $0.25
    ca.messages.create(model="m", max_tokens=5, messages=MSG)  # $0.30: the run's cap
    stop = fleet.limits[0].stop
    assert stop.is_set() and stop.info["cap"] == "run" and stop.settled()
    (notice,) = fleet.events(0, "notice")
    assert notice["kind"] == "cost_cap" and "run's cost cap of $0.25" in notice["text"]
    with pytest.raises(anthropic.BadRequestError, match="cost cap"):
        ca.messages.create(model="m", max_tokens=5, messages=MSG)  # refused by the gateway, never sent
    assert len(fleet.up.generation_requests()) == 3 and a.summary()["calls"] == 3
    cb.messages.create(model="m", max_tokens=5, messages=MSG)  # sweep: $0.40
    assert not fleet.limits[1].stop.is_set()
    cb.messages.create(model="m", max_tokens=5, messages=MSG)  # $0.50 >= $0.45: the sweep's cap
    assert fleet.limits[1].stop.info["cap"] == "sweep" and fleet.limiter.exhausted()
    assert fleet.limiter.spent() == pytest.approx(0.5)
    with pytest.raises(anthropic.BadRequestError, match="sweep's cost cap"):
        cb.messages.create(model="m", max_tokens=5, messages=MSG)


def test_a_call_waiting_when_the_sweeps_money_runs_out_is_refused() -> None:
    async def scenario() -> None:
        limiter = LocalLimiter(LimitsConfig(max_cost=1.0, max_connections=1))
        plan = LimitsPlan(limiter, limiter.config)
        first = RunLimits(plan, TranscriptWriter(None))
        second = RunLimits(plan, TranscriptWriter(None))
        g = await first.acquire(("anthropic", MODEL), MODEL, "call-1")
        waiting = asyncio.ensure_future(second.acquire(("anthropic", MODEL), MODEL, "call-1"))
        await asyncio.sleep(0.05)
        assert not waiting.done()
        first.on_event({"type": "model_call", "cost_usd": 1.5})
        first.finished(g, 0)
        with pytest.raises(CallRefused, match="sweep's cost cap of \\$1.00"):
            await waiting
        assert second.stop.is_set() and second.stop.info["cap"] == "sweep"

    asyncio.run(scenario())


# ---------------------------------------------------------------- the Ray actor's leases, without Ray


def test_the_ray_limiter_frees_the_permits_of_a_run_whose_node_went_silent() -> None:
    from benchctl.limits.ray_limiter import LimiterActor

    async def scenario() -> None:
        actor = LimiterActor(LimitsConfig(max_connections=1), 0.0, lease_s=0.6)
        keys = ["anthropic", MODEL]
        assert (await actor.acquire(keys, "lost-node-run", "t1"))[:2] == ("granted", True)
        waiting = asyncio.ensure_future(actor.acquire(keys, "live-run", "t2"))
        for _ in range(4):  # the live run renews its lease; the lost one never does
            await asyncio.sleep(0.3)
            assert not actor.renew(["live-run"])
        kind, tracked, waited, reason = await asyncio.wait_for(waiting, 5)
        assert (kind, tracked, reason) == ("granted", True, "max_connections") and waited >= 0.5
        assert actor.stats()["anthropic"]["in_flight"] == 1  # the lost run's slot came back, once
        actor.cancel("t2")  # a client that gave up after its grant gives the slot back
        assert actor.stats()["anthropic"]["in_flight"] == 0

    asyncio.run(scenario())


# ---------------------------------------------------------------- what a resumed sweep has spent


def test_spend_on_disk_counts_finished_unfinished_and_earlier_attempts(tmp_path: Path) -> None:
    import orjson

    from benchctl.limits.spend import spent_on_disk

    def write(d: Path, meta: dict[str, Any] | None, events: list[dict[str, Any]]) -> None:
        d.mkdir(parents=True)
        if meta is not None:
            (d / "meta.json").write_bytes(orjson.dumps(meta))
        (d / "transcript.jsonl").write_bytes(b"".join(orjson.dumps(e) + b"\n" for e in events) + b'{"torn')

    call = lambda c: {"type": "model_call", "cost_usd": c}  # noqa: E731
    runs = tmp_path / "runs"
    write(runs / "a", {"status": "completed", "cost_usd": 0.5}, [call(9.0)])  # meta wins: 0.5
    write(
        runs / "b",
        {
            "status": "completed",
            "cost_usd": 0.25,
            "target_tools": {"target": {"cost_usd": 0.1}, "auxiliary": {"cost_usd": 0.05}},
        },
        [],
    )
    write(
        runs / "c",
        {"status": "completed", "cost_usd": None},  # unknown: its transcript
        [
            call(0.2),
            call(None),
            {"type": "refusal", "action": "retry", "cost_usd": 0.03},
            {"type": "refusal", "action": "fallback", "cost_usd": 7.0},
            {"type": "target_call", "cost_usd": 0.02},
        ],
    )
    write(runs / "d", None, [call(0.4), {"type": "rate_limit_wait", "wait_s": 3.0}])  # unfinished
    write(runs / "d" / "attempts" / "1", {"status": "error", "cost_usd": 0.11}, [])
    write(runs / "d" / "attempts" / "2", None, [call(0.07)])
    assert spent_on_disk(tmp_path) == pytest.approx(0.5 + 0.4 + 0.25 + 0.4 + 0.11 + 0.07)
    assert spent_on_disk(tmp_path / "nothing-here") == 0.0


# ---------------------------------------------------------------- configuration, before anything runs


def test_cost_caps_refuse_unpriced_models_and_bad_limits_name_their_source(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from benchctl.run.config import RunError, resolve_config
    from tests.rigs.run import make_scripted_task

    monkeypatch.setenv("ANTHROPIC_API_KEY", "sk-test-0123456789")
    task, _ = make_scripted_task(tmp_path, [], name="capped")
    base = dict(
        task=task,
        harnesses=[],
        budgets=["1m"],
        seeds=1,
        out=tmp_path / "out",
        concurrency=None,
        fallback=None,
        variants=[],
        sweep=None,
    )
    with pytest.raises(
        RunError,
        match=r"--max-cost: a cost cap cannot count what unpriced models spend: "
        r"anthropic/claude-sonnet-5-5 .*--allow-unpriced",
    ):
        resolve_config(models=["anthropic/claude-sonnet-5-5", MODEL], max_cost=5.0, **base)
    r = resolve_config(
        models=["anthropic/claude-sonnet-5-5"], max_cost=5.0, allow_unpriced=True, max_connections=4, **base
    )
    assert r.sweep.limits.max_cost == 5.0 and r.sweep.limits.max_connections == 4
    resolve_config(models=[MODEL], max_cost=5.0, **base)  # priced: fine
    with pytest.raises(RunError, match="--max-connections: 0 must be >= 1"):
        resolve_config(models=[MODEL], max_connections=0, **base)
    # a run's own cap lives in the task's [limits]; a bad one names the file and the key
    (task / "task.toml").write_text((task / "task.toml").read_text() + "[limits]\nmax_cost = -1\n")
    with pytest.raises(RunError, match=r"task.toml: key `limits.max_cost`: -1 is not a positive amount of USD"):
        resolve_config(models=[MODEL], **base)
    (task / "task.toml").write_text(
        (task / "task.toml").read_text().replace("max_cost = -1", "max_cost = 2\nmax_costs = 1")
    )
    with pytest.raises(
        RunError, match=r"key `limits.max_costs`: unknown key. Fix: use one of: cpus, memory, pids, work, max_cost"
    ):
        resolve_config(models=[MODEL], **base)
    (task / "task.toml").write_text((task / "task.toml").read_text().replace("\nmax_costs = 1", ""))
    with pytest.raises(
        RunError, match=r"task.toml: key `limits.max_cost`: .*unpriced models spend: anthropic/claude-sonnet-5-5"
    ):
        resolve_config(models=["anthropic/claude-sonnet-5-5"], **base)
    assert resolve_config(models=[MODEL], **base).task.max_cost == 2.0
    # a sweep file's [limits]: its errors name the file and key; flags override it
    sweep = tmp_path / "sweep.toml"
    sweep.write_text(
        f'task = "capped"\nmodels = ["{MODEL}"]\nout = "o"\n[limits]\nmax_cost = 3\n'
        '[limits.providers.anthropic]\nmax_connections = "8"\n'
    )
    sweep_base = {**base, "task": None, "out": None, "sweep": sweep}
    with pytest.raises(RunError, match=r"sweep.toml: key `limits.providers.anthropic.max_connections`: '8' is not"):
        resolve_config(models=[], **sweep_base)
    sweep.write_text(sweep.read_text().replace('"8"', "8"))
    r = resolve_config(models=[], **sweep_base)
    assert r.sweep.limits.max_cost == 3 and r.sweep.limits.limit_for("anthropic").max_connections == 8
    assert resolve_config(models=[], max_cost=9.0, **sweep_base).sweep.limits.max_cost == 9.0
    assert r.sweep.to_dict()["limits"]["providers"] == {"anthropic": {"max_connections": 8}}


def test_the_cli_hooks_and_react_tell_the_agent_the_same_paused_time(tmp_path: Path) -> None:
    from benchctl.harness import HarnessContext, tool_notices
    from benchctl.policies import RunPolicies
    from harnesses.hooks.host import HookHost

    paused = [0.0]
    now = 2000.0
    ctx = HarnessContext(
        run_id="r",
        model=MODEL,
        instructions="x",
        sandbox=None,
        gateway=None,  # type: ignore[arg-type]
        transcript=TranscriptWriter(None),
        budget=Budget(1900.0, 600.0, paused=lambda: paused[0]),
        policies=RunPolicies(),
        run_dir=tmp_path,
    )
    paused[0] = 75.0
    host = HookHost(ctx, "claude-code", clock=lambda: now)
    host.ledger.response({}, "anthropic_messages", ["t1"], "ok")  # the model asked for t1 (the gateway saw it)
    hook = host.post_tool_use({"tool_use_id": "t1", "tool_name": "Bash"})
    react = tool_notices(ctx, "t1", None, now)  # what ReAct appends to its tool result
    assert (
        hook["hookSpecificOutput"]["additionalContext"]
        == "\n".join(react)
        == (
            "[benchctl] Time remaining: 9m 35s of 10m 00s (the clock was paused for 1m 15s while rate limits held "
            "your model calls back)."
        )
    )


def test_a_stream_its_client_abandons_gives_its_slot_back_at_once(fleet_factory: Any) -> None:
    slow = {
        "turns": [{"text": "one two three four five six", "chunks": 6, "chunk_delay": 1.0}],
        "after_end": "repeat_last",
    }
    fleet = fleet_factory(slow, LimitsConfig(max_connections=1), n=2)
    a, b = fleet.gws
    with anthropic_client(a, max_retries=0).messages.stream(model="m", max_tokens=5, messages=MSG) as s:
        next(iter(s.text_stream))  # the first words, then the client hangs up
    end = time.monotonic() + 10
    while not fleet.events(0, "model_call") and time.monotonic() < end:
        time.sleep(0.02)
    (cut,) = fleet.events(0, "model_call")
    assert cut["outcome"] == "cancelled" and cut["partial"] is True
    time.sleep(0.2)
    assert fleet.limiter.stats()["anthropic"]["in_flight"] == 0  # its slot is free, 5 s before its stream's end
    r = anthropic_client(b, max_retries=0, timeout=30).messages.create(model="m", max_tokens=5, messages=MSG)
    assert r.content[0].text.startswith("one") and fleet.events(1, "rate_limit_wait") == []
