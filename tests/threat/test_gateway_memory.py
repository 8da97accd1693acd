"""Threat model: an agent cannot exhaust the host's memory through the gateway.

The gateway runs as its own process (`benchctl gateway`), so its peak memory (VmHWM) is its own;
a hostile program inside a real network-less sandbox attacks it through the mounted socket with
huge bodies (by Content-Length, chunked, with a wrong token), parallel uploads that each fit but
not together, and a flood of connections. The process's peak RSS must stay within the buffered
bytes cap plus a small constant, and every refusal is a clear HTTP answer in the caller's format.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from benchctl.gateway.http11 import MAX_CONNECTIONS
from benchctl.sandbox.base import SandboxSpec
from benchctl.sandbox.docker_sandbox import DockerSandbox

MIB = 1 << 20
MAX_BODY, MAX_BUFFERED = 8 * MIB, 32 * MIB
SLACK = 48 * MIB  # interpreter, per-connection buffers (heads are capped), transient copies
FLOOD = MAX_CONNECTIONS + 44

ATTACK = r"""
import json, socket, threading, time
SOCK, TOKEN, MIB = "/gateway/gw.sock", "benchctl-sandbox-token", 1 << 20
PIECE = b"x" * MIB
release = threading.Event()
results, lock = [], threading.Lock()

def reply_of(s):
    data = b""
    try:
        s.settimeout(120)
        while True:
            p = s.recv(65536)
            if not p:
                break
            data += p
    except OSError:
        pass
    return data

def upload(kind, path, token, total, chunked=False, hold=False, sent_event=None):
    s = socket.socket(socket.AF_UNIX); s.connect(SOCK)
    head = f"POST {path} HTTP/1.1\r\nhost: gateway\r\nx-api-key: {token}\r\ncontent-type: application/json\r\n"
    head += "transfer-encoding: chunked\r\n\r\n" if chunked else f"content-length: {total}\r\n\r\n"
    got = []
    reader = threading.Thread(target=lambda: got.append(reply_of(s))); reader.start()
    try:
        s.sendall(head.encode())
        sent, limit = 0, total - 1 if hold else total     # a holder keeps its last byte: the body stays open
        while sent < limit:
            n = min(MIB, limit - sent)
            s.sendall((b"%x\r\n" % n + PIECE[:n] + b"\r\n") if chunked else PIECE[:n])
            sent += n
        if chunked and not hold:
            s.sendall(b"0\r\n\r\n")
    except OSError:
        pass
    if sent_event is not None:
        sent_event.set()
    if hold:
        release.wait()
        s.shutdown(socket.SHUT_RDWR)     # (wakes the reader thread; close alone would not)
    reader.join()
    s.close()
    body = got[0].partition(b"\r\n\r\n")[2] if got and got[0] else b""
    status = int(got[0].split(b" ", 2)[1]) if got and got[0] else None
    with lock:
        results.append({"kind": kind, "status": status, "body": body.decode("latin-1")[:400]})

def run(threads):
    for t in threads: t.start()
    return threads

# 1. Ten uploads of 6 MB that each fit the 8 MB cap, held open: together they do not fit 32 MB.
sent = [threading.Event() for _ in range(10)]
holders = run([threading.Thread(target=upload, args=("hold", "/v1/messages", TOKEN, 6 * MIB), kwargs={"hold": True, "sent_event": e}) for e in sent])
for e in sent: e.wait(120)
time.sleep(0.5)
# 2. While they hold: huge bodies by length, chunked, to the Responses API, and with a wrong token.
big = run([threading.Thread(target=upload, args=a, kwargs=k) for a, k in [
    (("length", "/v1/messages", TOKEN, 200 * MIB), {}), (("length", "/v1/messages", TOKEN, 200 * MIB), {}),
    (("length", "/v1/messages", TOKEN, 200 * MIB), {}), (("responses", "/v1/responses", TOKEN, 200 * MIB), {}),
    (("chunked", "/v1/messages", TOKEN, 200 * MIB), {"chunked": True}),
    (("token", "/v1/messages", "stolen-key", 200 * MIB), {}), (("token", "/benchctl/hooks/stop", "", 200 * MIB), {})]])
for t in big: t.join()
# 3. A flood of connections, all open at once.
flood = []
for _ in range(FLOOD_N):
    s = socket.socket(socket.AF_UNIX); s.connect(SOCK); flood.append(s)
time.sleep(1.0)
for s in flood:
    s.setblocking(False)
    try:
        data = s.recv(4096)
    except BlockingIOError:
        data = b""
    results.append({"kind": "flood", "status": int(data.split(b" ", 2)[1]) if data else None, "body": ""})
    s.close()
release.set()
for t in holders: t.join()
# 4. The gateway still serves an honest call.
s = socket.socket(socket.AF_UNIX); s.connect(SOCK)
body = json.dumps({"model": "m", "max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]}).encode()
s.sendall(b"POST /v1/messages HTTP/1.1\r\nhost: gateway\r\nx-api-key: " + TOKEN.encode() +
          b"\r\nconnection: close\r\ncontent-length: %d\r\n\r\n" % len(body) + body)
results.append({"kind": "honest", "status": int(reply_of(s).split(b" ", 2)[1]), "body": ""})
print(json.dumps(results))
"""


def _peak_rss(pid: int) -> int:
    """VmHWM: the most memory the process has held at once, in bytes."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmHWM")


@pytest.mark.docker
@pytest.mark.timeout(300)
def test_hostile_uploads_from_the_sandbox_stay_within_the_buffer_cap(sandbox_image: str, tmp_path: Path) -> None:
    base = Path(tempfile.mkdtemp(prefix="bmem-", dir="/tmp"))
    gw_dir = base / "gw"
    gw_dir.mkdir()
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"turns": [{"text": "fine"}]}))
    env = {
        **os.environ,
        "BENCHCTL_GATEWAY_MAX_BODY": "8m",
        "BENCHCTL_GATEWAY_MAX_BUFFERED": "32m",
        "PYTHONPATH": os.pathsep.join(sys.path),
    }
    gateway = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "from benchctl.cli import app; app()",
            "gateway",
            "--socket",
            str(gw_dir / "gw.sock"),
            "--model",
            f"scripted/{script}",
            "--transcript",
            str(base / "t.jsonl"),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    sandbox = DockerSandbox(SandboxSpec(image=sandbox_image, run_id="threat-memory", gateway_dir=gw_dir))
    try:
        assert "listening on" in (gateway.stdout.readline() if gateway.stdout else "")
        sandbox.start()
        # Warm up: one honest call, so that what the first call loads is in the baseline.
        warm = sandbox.exec(
            [
                "python3",
                "-c",
                "import socket,json;s=socket.socket(socket.AF_UNIX);s.connect('/gateway/gw.sock');"
                "b=json.dumps({'model':'m','max_tokens':5,'messages':[{'role':'user','content':'hi'}]}).encode();"
                "s.sendall(b'POST /v1/messages HTTP/1.1\\r\\nhost: g\\r\\nx-api-key: benchctl-sandbox-token\\r\\n"
                "connection: close\\r\\ncontent-length: %d\\r\\n\\r\\n' % len(b) + b);print(s.recv(100))",
            ],
            timeout=60,
        )
        assert b"200 OK" in warm.stdout.encode(), warm
        time.sleep(0.5)
        baseline = _peak_rss(gateway.pid)
        sandbox.put_file("/tmp/attack.py", ATTACK.replace("FLOOD_N", str(FLOOD)).encode())
        res = sandbox.exec(["python3", "/tmp/attack.py"], timeout=240, output_cap=10_000_000)
        assert res.exit_code == 0, res.stderr[-3000:]
        peak = _peak_rss(gateway.pid)
        results = json.loads(res.stdout)
    finally:
        sandbox.stop()
        gateway.send_signal(signal.SIGINT)
        out, err = gateway.communicate(timeout=60)
        shutil.rmtree(base, ignore_errors=True)

    by_kind: dict[str, list[dict]] = {}
    for r in results:
        by_kind.setdefault(r["kind"], []).append(r)
    growth = peak - baseline
    assert growth <= MAX_BUFFERED + SLACK, (
        f"peak RSS grew by {growth / MIB:.0f} MiB (baseline {baseline / MIB:.0f} MiB)"
    )

    # Five 6 MB uploads fit the 32 MB at once; the other five were told to come back later.
    holds = sorted(str(r["status"]) for r in by_kind["hold"])
    assert holds == ["429"] * 5 + ["None"] * 5, holds
    assert all('"rate_limit_error"' in r["body"] for r in by_kind["hold"] if r["status"] == 429)
    # Over the per-request cap: 413 in each API's own error shape, read before any of the body.
    for r in by_kind["length"]:
        assert r["status"] == 413 and json.loads(r["body"])["error"]["type"] == "request_too_large", r
    responses = json.loads(by_kind["responses"][0]["body"])
    assert by_kind["responses"][0]["status"] == 413 and responses["error"]["code"] == "request_too_large"
    assert by_kind["chunked"][0]["status"] in (413, 429)  # 429 when the holders leave no room for its chunks
    # A wrong or missing token: 401 before a byte of the body, on the model API and on the hook route.
    assert [r["status"] for r in by_kind["token"]] == [401, 401]
    # More connections than the cap: the extra ones are answered 503 and closed at once.
    flood = [r["status"] for r in by_kind["flood"]]
    assert flood.count(503) >= FLOOD - MAX_CONNECTIONS and set(flood) <= {503, None}
    assert by_kind["honest"][0]["status"] == 200
    summary = json.loads(out[out.index("{") :])
    assert summary["refused"]["413"] >= 4 and summary["refused"]["401"] == 2 and summary["refused"]["503"] >= 44


def test_the_recorder_keeps_a_bounded_number_of_bytes() -> None:
    """Sequential big requests of distinct conversations are not all kept in memory: past the byte
    bound the oldest conversation is forgotten (its next request is then recorded whole)."""
    from benchctl.gateway.recording import RequestRecorder, reconstruct

    rec = RequestRecorder(max_bytes=10 * MIB)
    convs = [[{"role": "user", "content": f"conversation {i} " + "x" * 100}] for i in range(4)]
    events = []
    for i, msgs in enumerate(convs):  # four 4 MB conversations: at most two fit
        body = {"model": "m", "messages": msgs}
        events.append(
            {
                "type": "model_call",
                "call_id": f"c{i}",
                "wire_api": "anthropic_messages",
                "request": rec.delta(f"c{i}", "anthropic_messages", body, size=4 * MIB),
            }
        )
    again = {"model": "m", "messages": convs[0] + [{"role": "user", "content": "more"}]}
    d = rec.delta("c9", "anthropic_messages", again, size=4 * MIB)
    assert d["base"] is None  # conversation 0 was forgotten: stored whole, and still exact
    latest = {"model": "m", "messages": convs[3] + [{"role": "user", "content": "more"}]}
    assert rec.delta("c10", "anthropic_messages", latest, size=4 * MIB)["base"] == "c3"  # the newest is kept
    events += [{"type": "model_call", "call_id": "c9", "wire_api": "anthropic_messages", "request": d}]
    assert reconstruct(events)["c9"] == again


def test_body_caps_from_the_environment_are_checked(monkeypatch: pytest.MonkeyPatch) -> None:
    from benchctl.gateway.body_limits import BodyLimits

    monkeypatch.setenv("BENCHCTL_GATEWAY_MAX_BODY", "16m")
    monkeypatch.setenv("BENCHCTL_GATEWAY_MAX_BUFFERED", "1g")
    assert BodyLimits() == BodyLimits(16 * MIB, 1024 * MIB)
    monkeypatch.setenv("BENCHCTL_GATEWAY_MAX_BODY", "16")
    with pytest.raises(ValueError, match="BENCHCTL_GATEWAY_MAX_BODY='16' must be a size with a unit"):
        BodyLimits()
    monkeypatch.setenv("BENCHCTL_GATEWAY_MAX_BODY", "2g")
    with pytest.raises(ValueError, match="max_buffered .* must be at least max_body"):
        BodyLimits()
