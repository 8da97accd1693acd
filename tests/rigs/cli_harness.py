"""A real run seam for the Claude Code / Codex harness tests, without the runner.

FakeUpstreamServer (scripted vendor API, records every request) ← real Gateway (unix socket,
holding a fake "real" key from the host environment) ← real DockerSandbox (network none,
binaries mounted read-only) ← the harness under test, driven through HarnessContext exactly as
the runner does. One container per test.
"""

from __future__ import annotations

import os
import shutil
import socket
import tempfile
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import orjson
import pytest

from benchctl.gateway import Gateway, GatewayConfig, RetryPolicy
from benchctl.harness import HarnessContext
from benchctl.policies import Budget, EarlyExitPolicy, LengthPolicy, RunPolicies
from benchctl.sandbox.base import SandboxSpec
from benchctl.sandbox.docker_sandbox import DockerSandbox
from benchctl.testing.fake_upstream import FakeUpstreamServer
from benchctl.transcript import TranscriptWriter
from harnesses.cli_harness import CliHarness

REAL_KEY = "sk-test-REALKEY-do-not-leak-0123456789"
FAST_RETRY = RetryPolicy(max_attempts=2, initial_wait=0.01, max_wait=0.1, jitter=0.0)
TIME_TEXT = "[benchctl] Time remaining:"
MAIN_POLICIES = RunPolicies(
    early_exit=EarlyExitPolicy(fraction=0.75, max_reprompts=1), length=LengthPolicy(file="report.md", max_words=5)
)
NO_POLICIES = RunPolicies(early_exit=None, length=None)

# Runs inside the sandbox: proves there is no network and shows the environment.
PROBE = (
    "python3 -c \"import socket\ntry:\n socket.create_connection(('1.1.1.1', 80), timeout=3)\n print('NET-OK')\n"
    "except OSError as e:\n print('NET-FAIL', e)\"; env"
)


@dataclass
class Rig:
    ctx: HarnessContext
    up: FakeUpstreamServer
    gw: Gateway
    sandbox: DockerSandbox
    run_dir: Path

    def events(self, type: str | None = None) -> list[dict[str, Any]]:
        path = self.run_dir / "transcript.jsonl"
        out = [orjson.loads(line) for line in path.read_bytes().splitlines() if line.strip()]
        return [e for e in out if type is None or e["type"] == type]

    def bodies(self) -> list[dict[str, Any]]:
        return [r.body for r in self.up.generation_requests()]


def need_binary(harness: CliHarness) -> None:
    """Skip without the CLI binary on a developer machine; fail in CI (which installs the extras)."""
    try:
        _ = harness.binary  # the property raises when the binary is missing
    except Exception as e:
        import os

        if os.environ.get("BENCHCTL_REQUIRE_DOCKER") == "1":
            pytest.fail(f"BENCHCTL_REQUIRE_DOCKER=1 but {e}", pytrace=False)
        pytest.skip(str(e))


class CloseHoldingRelay:
    """A unix socket that relays each connection to the gateway's, byte for byte, except a client's
    close: the gateway learns that the client left only when it next writes to it (the relay then
    closes both sides). Stands for a close that reaches the gateway late (the in-sandbox forwarder or
    the host under load): the gateway then records a call at the upstream's end of body, as it does
    for a client that stays."""

    def __init__(self, path: Path, gateway_socket: Path) -> None:
        self.gateway_socket = gateway_socket
        self.listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.listener.bind(str(path))
        os.chmod(path, 0o666)  # the agent in the sandbox runs as another uid
        self.listener.listen(64)
        self.listener.settimeout(0.05)  # so the accept loop sees `closing`
        self.closing = threading.Event()
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self.closing.is_set():
            try:
                client, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            client.settimeout(None)
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        gateway = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        gateway.connect(str(self.gateway_socket))
        threading.Thread(target=self._back, args=(gateway, client), daemon=True).start()
        try:
            while data := client.recv(65536):
                gateway.sendall(data)
        except OSError:
            pass  # the client's end, or the relay closed it: nothing is passed on

    @staticmethod
    def _back(gateway: socket.socket, client: socket.socket) -> None:
        try:
            while data := gateway.recv(65536):
                client.sendall(data)  # fails once the client is gone
        except OSError:
            pass
        finally:
            client.close()
            gateway.close()

    def close(self) -> None:
        self.closing.set()
        self.listener.close()


@contextmanager
def cli_rig(
    harness: Any,
    monkeypatch: pytest.MonkeyPatch,
    image: str,
    *,
    model: str,
    by_model: dict[str, Any],
    fallback: str | None = None,
    budget_s: float = 120,
    policies: RunPolicies = MAIN_POLICIES,
    instructions: str = "Investigate and write /work/report.md.",
    hold_client_close: bool = False,
) -> Iterator[Rig]:
    """Any harness fits (ReAct too: its SDK clients reach the same gateway); a CLI needs its binary.
    hold_client_close: the sandbox reaches the gateway through a CloseHoldingRelay."""
    if isinstance(harness, CliHarness):
        need_binary(harness)
    # A short private dir: unix socket paths must stay under ~100 bytes.
    base = Path(tempfile.mkdtemp(prefix="bcli-", dir="/tmp"))
    run_dir, gw_dir = base / "run", base / "gw"
    run_dir.mkdir()
    gw_dir.mkdir()
    up = FakeUpstreamServer(by_model=by_model).start()
    monkeypatch.setenv("ANTHROPIC_BASE_URL", up.url)
    monkeypatch.setenv("OPENAI_BASE_URL", up.url + "/v1")
    monkeypatch.setenv("ANTHROPIC_API_KEY", REAL_KEY)
    monkeypatch.setenv("OPENAI_API_KEY", REAL_KEY)
    transcript = TranscriptWriter(run_dir / "transcript.jsonl")
    # With a relay, the gateway listens beside the mounted directory and the relay takes its name in it.
    gw_socket = base / "gateway.sock" if hold_client_close else gw_dir / "gateway.sock"
    gw = Gateway(
        GatewayConfig(model=model, fallback=fallback, socket_path=gw_socket, retry=FAST_RETRY), transcript
    ).start()
    relay = CloseHoldingRelay(gw_dir / "gateway.sock", gw_socket) if hold_client_close else None
    sandbox = DockerSandbox(
        SandboxSpec(image=image, run_id="cli-test", gateway_dir=gw_dir, extra_mounts=harness.mounts())
    )
    try:
        sandbox.start()
        ctx = HarnessContext(
            run_id="cli-test",
            model=model,
            instructions=instructions,
            sandbox=sandbox,
            gateway=gw,
            transcript=transcript,
            budget=Budget(time.time(), budget_s),
            policies=policies,
            run_dir=run_dir,
        )
        yield Rig(ctx, up, gw, sandbox, run_dir)
    finally:
        sandbox.stop()
        if relay is not None:
            relay.close()
        gw.close()
        up.close()
        transcript.close()
        shutil.rmtree(base, ignore_errors=True)


def assert_absent_from_sandbox(
    sandbox: DockerSandbox, needle: str, skip_dirs: tuple[str, ...] = ("proc", "sys", "dev", "usr")
) -> None:
    """`needle` is in no process environment and no file of the sandbox (outside `skip_dirs`)."""
    procs = sandbox.exec("cat /proc/[0-9]*/environ 2>/dev/null | tr '\\0' '\\n'", timeout=30)
    assert needle not in procs.stdout
    skip = " ".join(f"--exclude-dir={d}" for d in skip_dirs)
    found = sandbox.exec(["sh", "-c", f"grep -rlsI {skip} -e '{needle}' / ; true"], timeout=60)
    assert found.stdout.strip() == "", f"{needle!r} found in sandbox files: {found.stdout}"


def assert_key_never_reached_the_sandbox(rig: Rig) -> None:
    """The real key: absent from every process environment and file in the sandbox, the
    transcript and the harness's files; present only on the upstream side."""
    assert_absent_from_sandbox(rig.sandbox, REAL_KEY, ("proc", "sys", "dev", "usr", "bin"))
    for path in rig.run_dir.rglob("*"):
        if path.is_file():
            assert REAL_KEY.encode() not in path.read_bytes(), f"key in {path}"
    # The gateway did hold it: the upstream received the real key, the sandbox only the dummy token.
    headers = rig.up.generation_requests()[0].headers
    assert REAL_KEY in (headers.get("x-api-key", ""), headers.get("authorization", "").removeprefix("Bearer "))


FALLBACK_TEXT = "Fallback model here; continuing."


def refusing(primary: str, fallback: str | None = None) -> dict[str, Any]:
    """`by_model` for a primary model that refuses at once and, if given, a fallback that answers."""
    by_model: dict[str, Any] = {primary: {"turns": [{"refusal": True, "text": "I can't help with that."}]}}
    if fallback:
        by_model[fallback] = {"turns": [{"text": FALLBACK_TEXT}]}
    return by_model


def assert_fallback_served(rig: Rig, provider: str, primary: str, fallback: str) -> None:
    """The refused turn went to the primary model and the next one to the fallback, which the gateway
    recorded as a switch and whose answer is the last assistant text."""
    assert [b["model"] for b in rig.bodies()] == [primary, fallback]
    assert [c["served_model"] for c in rig.events("model_call")] == [f"{provider}/{primary}", f"{provider}/{fallback}"]
    assert rig.events("fallback")[0]["to"] == f"{provider}/{fallback}"
    assert rig.events("assistant")[-1]["text"] == FALLBACK_TEXT


def texts_of(obj: Any) -> list[str]:
    """Every string inside a JSON value (request bodies mix strings, blocks and lists)."""
    if isinstance(obj, str):
        return [obj]
    if isinstance(obj, dict):
        return [s for v in obj.values() for s in texts_of(v)]
    if isinstance(obj, list):
        return [s for v in obj for s in texts_of(v)]
    return []


def contains(body: dict[str, Any], needle: str) -> bool:
    return any(needle in s for s in texts_of(body))


def claude_notice_next_to(body: dict[str, Any], tool_id: str) -> bool:
    """In a Messages request: the tool_result for `tool_id` carries the hook's time notice, or the
    message right after it does (Claude Code appends it as a <system-reminder> inside the result for
    known models, as a separate role "system" message for unknown ones such as a scripted model's;
    CLI_FACTS.md)."""
    msgs = body.get("messages") or []
    for i, m in enumerate(msgs):
        for b in m["content"] if isinstance(m.get("content"), list) else []:
            if b.get("type") == "tool_result" and b.get("tool_use_id") == tool_id:
                return contains(b, TIME_TEXT) or (i + 1 < len(msgs) and contains(msgs[i + 1], TIME_TEXT))
    return False


def codex_notice_next_to(body: dict[str, Any], call_id: str) -> bool:
    """In a Responses request: the tool output for `call_id` with the hook's time notice as the
    developer message next to it (Codex puts it just before the output; CLI_FACTS.md)."""
    items = body.get("input") or []
    for i, item in enumerate(items):
        if item.get("type") in ("function_call_output", "custom_tool_call_output") and item.get("call_id") == call_id:
            return any(
                n.get("type") == "message" and n.get("role") == "developer" and contains(n, TIME_TEXT)
                for n in items[max(0, i - 1) : i + 2]
            )
    return False
