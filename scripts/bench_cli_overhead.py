#!/usr/bin/env python3
"""Per-run overhead of the CLI harnesses before the first model call.

For each harness (claude-code, codex), N times: start a fresh sandbox (real Docker, network
none, binaries mounted read-only), run the harness against a one-turn scripted model through
the real gateway, and time

    sandbox     DockerSandbox.start()
    prepare     writing the CLI's settings / config files into the sandbox
    cli→call    from the exec of the CLI to the first model request reaching the gateway
    total       from "create sandbox" to the first model request (what a run pays up front)
    run         the whole one-turn run (until the CLI has exited)

and print medians (with min / max) as a table. Then, in one sandbox, the round trip of the
in-sandbox hook every tool call pays (python3 start + POST over the gateway socket + the
host's policy decision). Needs Docker, the sandbox image and the
binaries from the extras.

    python scripts/bench_cli_overhead.py [-n 10] [--harness claude-code --harness codex]
"""
from __future__ import annotations

import argparse
import json
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchctl.gateway import Gateway, GatewayConfig  # noqa: E402
from benchctl.policies import Budget, RunPolicies  # noqa: E402
from benchctl.sandbox.base import SandboxSpec  # noqa: E402
from benchctl.sandbox.docker_sandbox import DockerSandbox  # noqa: E402
from benchctl.transcript import TranscriptWriter  # noqa: E402
from harnesses import registry  # noqa: E402
from harnesses.base import HarnessContext  # noqa: E402

CLI_MODEL = {"claude-code": "claude-sonnet-5-5", "codex": "gpt-5.5"}


def one_run(harness_name: str, image: str, script: Path) -> dict[str, float]:
    base = Path(tempfile.mkdtemp(prefix="bbench-", dir="/tmp"))
    (base / "gw").mkdir()
    transcript = TranscriptWriter(base / "transcript.jsonl")
    first: list[float] = []

    def on_event(ev: dict[str, Any]) -> None:
        if ev["type"] == "model_call" and not first:
            first.append(ev["t"] - (ev.get("latency_ms") or 0) / 1000)   # when the request arrived

    transcript.listeners.append(on_event)
    model = f"scripted/{script}"
    gw = Gateway(GatewayConfig(model=model, socket_path=base / "gw" / "gateway.sock"), transcript).start()
    harness: Any = registry.create(harness_name, {"cli_model": CLI_MODEL[harness_name]})
    t0 = time.time()
    sandbox = DockerSandbox(SandboxSpec(image=image, run_id="bench", gateway_dir=base / "gw",
                                        extra_mounts=harness.mounts()))
    try:
        sandbox.start()
        t_started = time.time()
        ctx = HarnessContext(run_id="bench", model=model, instructions="Say done.", sandbox=sandbox, gateway=gw,
                             transcript=transcript, budget=Budget(time.time(), 120),
                             policies=RunPolicies(early_exit=None), run_dir=base)
        harness.prepare(ctx, {})
        harness._prepared_sandbox = sandbox        # measured above; run() must not redo it
        t_prepared = time.time()
        result = harness.run(ctx)
        t_end = time.time()
        if result.status != "completed" or not first:
            raise RuntimeError(f"{harness_name} run failed: {result.status} {result.error}")
        return {"sandbox": t_started - t0, "prepare": t_prepared - t_started, "cli→call": first[0] - t_prepared,
                "total": first[0] - t0, "run": t_end - t0}
    finally:
        sandbox.stop()
        gw.close()
        transcript.close()
        shutil.rmtree(base, ignore_errors=True)


def transcript_events(path: Path, type: str) -> list[dict[str, Any]]:
    return [e for e in map(json.loads, path.read_text().splitlines()) if e["type"] == type]


def hook_latency(image: str, script: Path, n: int) -> list[float]:
    """Seconds per PostToolUse hook call, measured inside the sandbox."""
    from benchctl.gateway import SANDBOX_TOKEN
    from benchctl.policies import LengthPolicy
    from harnesses.cli_harness import TOKEN_ENV, hook_command
    from harnesses.hooks import host as hook_host
    base = Path(tempfile.mkdtemp(prefix="bbench-", dir="/tmp"))
    (base / "gw").mkdir()
    transcript = TranscriptWriter(base / "transcript.jsonl")
    gw = Gateway(GatewayConfig(model=f"scripted/{script}", socket_path=base / "gw" / "gateway.sock"), transcript).start()
    harness: Any = registry.create("claude-code", {})
    sandbox = DockerSandbox(SandboxSpec(image=image, run_id="bench", gateway_dir=base / "gw",
                                        extra_mounts=harness.mounts()))
    try:
        sandbox.start()
        # With a length policy: each honoured PostToolUse also reads the report from the container.
        ctx = HarnessContext(run_id="bench", model=f"scripted/{script}", instructions="", sandbox=sandbox, gateway=gw,
                             transcript=transcript, budget=Budget(time.time(), 600),
                             policies=RunPolicies(length=LengthPolicy(file="report.md", max_words=3000)), run_dir=base)
        host = hook_host.install(ctx, "claude-code")
        # As if the model had asked for tool calls t1..tn: each hook is checked and honoured, not refused.
        host.ledger.response({}, "anthropic_messages", [f"t{i}" for i in range(1, n + 1)], "ok")
        sandbox.put_file("/work/report.md", b"word " * 2500)
        cmd = hook_command("post_tool_use", "claude-code", ctx)
        loop = (f"for i in $(seq {n}); do a=$(date +%s%N); echo '{{\"tool_name\":\"Bash\",\"tool_use_id\":\"t'$i'\"}}' "
                f"| {cmd} >/dev/null; b=$(date +%s%N); echo $((b-a)); done")
        out = sandbox.exec(["bash", "-c", loop], timeout=120, env={TOKEN_ENV: SANDBOX_TOKEN})
        assert len(transcript_events(base / "transcript.jsonl", "notice")) >= n, "hooks were not honoured"
        return [int(x) / 1e9 for x in out.stdout.split()]
    finally:
        sandbox.stop()
        gw.close()
        transcript.close()
        shutil.rmtree(base, ignore_errors=True)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", type=int, default=10, help="runs per harness (default 10)")
    ap.add_argument("--harness", action="append", choices=["claude-code", "codex"])
    ap.add_argument("--image", default="benchctl-sandbox:latest")
    args = ap.parse_args()
    names = args.harness or ["claude-code", "codex"]
    tmp = Path(tempfile.mkdtemp(prefix="bbench-script-"))
    script = tmp / "done.json"
    script.write_text(json.dumps({"turns": [{"text": "done"}]}))
    cols = ["sandbox", "prepare", "cli→call", "total", "run"]
    rows = []
    try:
        for name in names:
            one_run(name, args.image, script)          # warm-up: page cache, image layers
            samples = [one_run(name, args.image, script) for _ in range(args.n)]
            rows.append((name, {c: [s[c] for s in samples] for c in cols}))
        hooks = hook_latency(args.image, script, max(args.n, 10) * 3)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"Overhead before the first model call, median of {args.n} runs (min-max), seconds")
    print(f"{'harness':<12}" + "".join(f"{c:>20}" for c in cols))
    for name, data in rows:
        cells = [f"{statistics.median(v):.3f} ({min(v):.2f}-{max(v):.2f})" for v in data.values()]
        print(f"{name:<12}" + "".join(f"{c:>20}" for c in cells))
    print(f"\nPostToolUse hook round trip inside the sandbox, {len(hooks)} calls: median "
          f"{statistics.median(hooks) * 1000:.0f} ms (min {min(hooks) * 1000:.0f}, max {max(hooks) * 1000:.0f})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
