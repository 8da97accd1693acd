"""`benchctl gateway` as a real subprocess, and the in-sandbox TCP->unix forwarder (host and Docker)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

from benchctl.gateway import SANDBOX_TOKEN, Gateway, GatewayConfig
from benchctl.gateway.clients import anthropic_client
from benchctl.gateway.forwarder import FORWARDER_SOURCE, forwarder_command
from benchctl.jsonio import read_jsonl
from tests.rigs.run import BENCHCTL, REPO

pytestmark = pytest.mark.timeout(120)
SCRIPT = {"turns": [{"text": "hello from the script", "chunks": 3}]}


def _wait_line(proc: subprocess.Popen[str], needle: str, timeout: float = 30) -> str:
    deadline = time.monotonic() + timeout
    seen = []
    while time.monotonic() < deadline:
        line = proc.stdout.readline()  # type: ignore[union-attr]
        if not line:
            break
        seen.append(line)
        if needle in line:
            return line
    raise AssertionError(f"{needle!r} not printed; got {seen!r}, stderr: {proc.stderr.read() if proc.stderr else ''}")


def test_benchctl_gateway_command_serves_and_prints_summary(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps(SCRIPT))
    sock, transcript = tmp_path / "gw.sock", tmp_path / "t.jsonl"
    proc = subprocess.Popen(
        [*BENCHCTL, "gateway", "--socket", str(sock), "--model", f"scripted/{script}", "--transcript", str(transcript)],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert str(sock) in _wait_line(proc, "listening on")
        assert f"scripted/{script}" in _wait_line(proc, "serving model")
        msg = anthropic_client(sock).messages.create(
            model="x", max_tokens=5, messages=[{"role": "user", "content": "hi"}]
        )
        assert msg.content[0].text == "hello from the script"
    finally:
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert '"calls": 1' in out and f'"scripted/{script}": 1' in out
    assert b'"type":"model_call"' in transcript.read_bytes()
    assert not sock.exists()


def test_benchctl_gateway_command_rejects_bad_model(tmp_path: Path) -> None:
    proc = subprocess.run(
        [*BENCHCTL, "gateway", "--socket", str(tmp_path / "s"), "--model", "nonsense"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2 and "must look like provider/name" in proc.stderr


HAIKU = "anthropic/claude-haiku-4-5"  # priced: tests.limits_scripts' usage makes a call $0.10


def _gateway(tmp_path: Path, up: Any, *args: str, name: str = "gw.sock") -> tuple[subprocess.Popen[str], Path, str]:
    """`benchctl gateway` serving HAIKU from the fake upstream `up`, on a unix socket; with what it
    printed when it started (read to its last startup line: `communicate` later reads the pipe itself,
    past whatever readline had buffered)."""
    sock = tmp_path / name
    env = {
        **os.environ,
        "ANTHROPIC_BASE_URL": up.url,
        "ANTHROPIC_API_KEY": "sk-test-gateway-0123456789",
        "PYTHONPATH": str(REPO),
    }
    proc = subprocess.Popen(
        [*BENCHCTL, "gateway", "--socket", str(sock), "--model", HAIKU, *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    lines = [_wait_line(proc, "listening on")]
    while "clients must use" not in lines[-1]:
        lines.append(_wait_line(proc, ""))
    return proc, sock, "".join(lines)


def _stop(proc: subprocess.Popen[str]) -> str:
    proc.send_signal(signal.SIGINT)
    out, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    return out


def _max_in_flight(tmp_path: Path, *args: str) -> int:
    """Four clients at once through one standalone gateway: the most requests the provider saw at once."""
    from benchctl.testing.fake_upstream import FakeUpstreamServer

    with FakeUpstreamServer({"turns": [{"text": "ok"}], "after_end": "repeat_last"}, latency=0.3) as up:
        proc, sock, _ = _gateway(tmp_path, up, *args, name=f"gw{len(args)}.sock")
        try:

            def call() -> str:
                return (
                    anthropic_client(sock)
                    .messages.create(model="x", max_tokens=5, messages=[{"role": "user", "content": "hi"}])
                    .content[0]
                    .text
                )

            with ThreadPoolExecutor(4) as pool:
                assert list(pool.map(lambda _: call(), range(4))) == ["ok"] * 4
        finally:
            out = _stop(proc)
        assert '"calls": 4' in out and len(up.generation_requests()) == 4
        return up.max_in_flight


def test_gateway_max_connections_holds_the_calls_in_flight_at_the_provider(tmp_path: Path) -> None:
    assert _max_in_flight(tmp_path) > 1  # without it the four calls overlap ...
    assert _max_in_flight(tmp_path, "--max-connections", "1") == 1  # ... with it, one at a time


def test_gateway_max_cost_refuses_calls_once_reached_and_a_restart_continues_from_its_transcript(
    tmp_path: Path,
) -> None:
    import anthropic

    from benchctl.testing.fake_upstream import FakeUpstreamServer

    transcript = tmp_path / "calls.jsonl"

    def ask(sock: Path) -> str:
        return (
            anthropic_client(sock, max_retries=0)
            .messages.create(model="x", max_tokens=5, messages=[{"role": "user", "content": "hi"}])
            .content[0]
            .text
        )

    with FakeUpstreamServer("py:tests.rigs.limits:priced_ok") as up:
        proc, sock, _ = _gateway(tmp_path, up, "--max-cost", "0.15", "--transcript", str(transcript))
        try:
            assert ask(sock) == "ok" and ask(sock) == "ok"  # $0.10, $0.20: the second reaches the cap
            with pytest.raises(anthropic.BadRequestError, match=r"the gateway's cost cap of \$0.15 is reached"):
                ask(sock)
        finally:
            _stop(proc)
        assert len(up.generation_requests()) == 2
        # the same transcript, a higher cap: its $0.20 counts, so one more call reaches $0.25
        proc, sock, started = _gateway(tmp_path, up, "--max-cost", "0.25", "--transcript", str(transcript))
        try:
            assert ask(sock) == "ok"
            with pytest.raises(anthropic.BadRequestError, match="cost cap of \\$0.25 is reached"):
                ask(sock)
        finally:
            _stop(proc)
        assert len(up.generation_requests()) == 3
    assert f"cost cap $0.25: $0.2000 spent before this start (the priced calls in {transcript})" in started
    notices = [e for e in read_jsonl(transcript) if e.get("type") == "notice"]
    assert [(n["kind"], n["cap"], n["max_cost_usd"]) for n in notices] == [
        ("cost_cap", "gateway", 0.15),
        ("cost_cap", "gateway", 0.25),
    ]


def test_gateway_cost_cap_refuses_an_unpriced_model_unless_allowed(tmp_path: Path) -> None:
    bad = subprocess.run(
        [
            *BENCHCTL,
            "gateway",
            "--socket",
            str(tmp_path / "s"),
            "--model",
            "anthropic/claude-sonnet-5-5",
            "--max-cost",
            "1",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert bad.returncode == 2 and "unpriced models spend: anthropic/claude-sonnet-5-5" in bad.stderr
    assert "--allow-unpriced" in bad.stderr
    zero = subprocess.run(
        [*BENCHCTL, "gateway", "--socket", str(tmp_path / "s"), "--model", HAIKU, "--max-connections", "0"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert zero.returncode == 2 and "--max-connections: 0 must be >= 1" in zero.stderr


def test_forwarder_on_host_carries_streaming_calls(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps(SCRIPT))
    with Gateway(GatewayConfig(model=f"scripted/{script}", socket_path=tmp_path / "gw.sock")) as gw:
        cmd = forwarder_command(0, str(gw.socket_path), script=FORWARDER_SOURCE, python=sys.executable)
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
        try:
            line = _wait_line(proc, "forwarding")
            port = int(line.split()[1].rsplit(":", 1)[1])
            import anthropic

            client = anthropic.Anthropic(api_key=SANDBOX_TOKEN, base_url=f"http://127.0.0.1:{port}", max_retries=0)
            for _ in range(2):  # keep-alive through the forwarder
                with client.messages.stream(model="x", max_tokens=5, messages=[{"role": "user", "content": "hi"}]) as s:
                    assert s.get_final_message().content[0].text == "hello from the script"
        finally:
            proc.terminate()
            proc.wait(10)
        assert gw.summary()["calls"] == 2


IN_SANDBOX = r"""
import json, subprocess, sys, time, urllib.request
p = subprocess.Popen([sys.executable, "/opt/benchctl/forwarder.py", "--port", "8765"], stdout=subprocess.PIPE, text=True)
print(p.stdout.readline().strip())
req = urllib.request.Request("http://127.0.0.1:8765/v1/messages", method="POST",
    data=json.dumps({"model": "x", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}).encode(),
    headers={"x-api-key": sys.argv[1], "content-type": "application/json", "anthropic-version": "2023-06-01"})
print(json.loads(urllib.request.urlopen(req, timeout=20).read())["content"][0]["text"])
"""


@pytest.mark.docker
def test_forwarder_in_networkless_sandbox_as_uid_1000(tmp_path: Path, sandbox_image: str, docker_engine) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps(SCRIPT))
    gwdir = tmp_path / "gwdir"
    gwdir.mkdir()
    for d in (tmp_path, gwdir):  # the run dir must be traversable by the sandbox's uid
        os.chmod(d, 0o755)
    with Gateway(GatewayConfig(model=f"scripted/{script}", socket_path=gwdir / "gw.sock")) as gw:
        out = docker_engine.containers.run(
            sandbox_image,
            ["python3", "-c", IN_SANDBOX, SANDBOX_TOKEN],
            network_mode="none",
            user="1000:1000",
            remove=True,
            stderr=True,
            volumes={
                str(gwdir): {"bind": "/gateway", "mode": "rw"},
                FORWARDER_SOURCE: {"bind": "/opt/benchctl/forwarder.py", "mode": "ro"},
            },
        )
        lines = out.decode().splitlines()
        assert lines[0] == "forwarding 127.0.0.1:8765 -> /gateway/gw.sock"
        assert lines[1] == "hello from the script"
        assert gw.summary()["calls"] == 1


def test_listen_refuses_non_loopback_addresses(tmp_path: Path) -> None:
    from benchctl.gateway.server import GatewayError

    script = tmp_path / "script.json"
    script.write_text(json.dumps(SCRIPT))
    gw = Gateway(GatewayConfig(model=f"scripted/{script}", listen="0.0.0.0:0"))
    with pytest.raises(GatewayError, match="only loopback"):
        gw.start()
    gw.close()


def test_socket_of_a_running_gateway_is_not_taken_over_but_a_stale_one_is(tmp_path: Path) -> None:
    import socket as socketlib

    from benchctl.gateway.server import GatewayError

    script = tmp_path / "script.json"
    script.write_text(json.dumps(SCRIPT))
    sock = tmp_path / "gw.sock"
    with Gateway(GatewayConfig(model=f"scripted/{script}", socket_path=sock)) as first:
        second = Gateway(GatewayConfig(model=f"scripted/{script}", socket_path=sock))
        with pytest.raises(GatewayError, match="in use by another process"):
            second.start()
        second.close()
        msg = anthropic_client(sock).messages.create(
            model="x", max_tokens=5, messages=[{"role": "user", "content": "hi"}]
        )
        assert msg.content[0].text == "hello from the script"  # the first one still serves
        assert first.summary()["calls"] == 1
    stale = socketlib.socket(socketlib.AF_UNIX)
    stale.bind(str(sock))  # a socket file nobody listens on, as a killed process leaves it
    stale.close()
    with Gateway(GatewayConfig(model=f"scripted/{script}", socket_path=sock)) as gw:
        assert gw.socket_path == sock
