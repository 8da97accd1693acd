"""`benchctl internals serve` as a user runs it: a real process on the tiny model, listening on
127.0.0.1 by default, printing the URL it serves; bad paths and busy ports fail with exit 2 and a fix."""

from __future__ import annotations

import os
import re
import signal
import socket
import subprocess
import sys
import time

import httpx2

from benchctl.internals import protocol as p
from tests.rigs.internals import tiny  # noqa: F401


def serve(*args: str) -> subprocess.Popen[str]:
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_VERBOSITY": "error", "OMP_NUM_THREADS": "1"}
    return subprocess.Popen(
        [sys.executable, "-m", "benchctl", "internals", "serve", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )


def test_serve_listens_on_loopback_and_prints_its_url(tiny):
    proc = serve("--model", str(tiny.model), "--sae", str(tiny.sae), "--port", "0")
    try:
        assert proc.stdout is not None
        line = proc.stdout.readline()
        m = re.search(r"at (http://127\.0\.0\.1:\d+) \(Ctrl-C to stop\)", line)
        assert m, (line, proc.stderr.read() if proc.poll() is not None else "")
        assert "tiny-model (4 layers, cpu, float32, SAE at layer 2)" in line
        info = httpx2.get(m.group(1) + p.PATHS["info"], timeout=30).json()
        assert info["layers"] == 4 and info["sae"]["layer"] == 2 and info["oracle"] is None
        port = int(m.group(1).rsplit(":", 1)[1])
        # bound to loopback only: the one listening socket on that port is 127.0.0.1's
        listening = subprocess.run(["ss", "-ltnH", f"sport = :{port}"], capture_output=True, text=True).stdout
        assert [line.split()[3] for line in listening.splitlines()] == [f"127.0.0.1:{port}"]
    finally:
        proc.send_signal(signal.SIGINT)
        proc.wait(30)
    # a graceful stop: uvicorn shuts down, then re-raises the captured SIGINT (128 + 2, as a shell reports Ctrl-C)
    assert proc.returncode == 130


def test_bad_paths_and_a_busy_port_fail_with_a_fix(tiny, tmp_path):
    proc = serve("--model", str(tmp_path), "--port", "0")
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 2 and f"{tmp_path}: not a Hugging Face checkpoint directory (no config.json)" in err
    proc = serve("--model", str(tiny.model), "--sae", str(tmp_path), "--port", "0")
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 2 and "not an SAE directory. Fix: give a directory with cfg.json" in err
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen(1)
        port = busy.getsockname()[1]
        t0 = time.monotonic()
        proc = serve("--model", str(tiny.model), "--port", str(port))
        _, err = proc.communicate(timeout=120)
    assert proc.returncode == 2 and f"cannot listen on 127.0.0.1:{port}" in err and "pick another --port" in err
    assert time.monotonic() - t0 < 60
