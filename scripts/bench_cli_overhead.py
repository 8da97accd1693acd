#!/usr/bin/env python3
"""Per-run overhead of the CLI harnesses before the first model call, phase by phase.

For each harness (claude-code, codex), N times: start a fresh sandbox (real Docker, network
none, binaries mounted read-only), run the harness against a one-turn scripted model through
the real gateway, and time the phases (seconds, from host and in-sandbox wall clocks, which
are the same clock):

    sandbox    DockerSandbox.start(): create and start the container
    setup      harness.run() until the CLI's `docker exec` is sent: hook route, config files
               (Codex: CODEX_HOME written root-owned), command line
    exec       the exec until the first process runs inside the sandbox (measured by a
               one-builtin bash shim the benchmark puts in front of the harness's argv: it
               adds one bash exec, a few ms)
    forwarder  (Codex) from there until the gateway forwarder's log line is written, i.e.
               the forwarder listens and the wrapper goes on to start the CLI
    cli→call   the CLI's own start-up until its first model request reaches the gateway
    total      from "create sandbox" to the first model request (what a run pays up front)
    run        the whole one-turn run, until the CLI has exited

and print median and p90 per phase. Then, in a sandbox of its own: what the forwarder
wrapper costs on its own (the wrapper around `true` vs a plain `docker exec true`,
alternating), and the round trip of the in-sandbox hook every tool call pays (python3 start +
POST over the gateway socket + the host's policy decision).

`--baseline DIR` also measures another checkout of benchctl (e.g. `git worktree add /tmp/base
main`) and prints both side by side. Each checkout is imported by a worker process of its own
and the two are asked in turn, run by run: on a machine shared with other work, only runs
taken at the same moments compare fairly. Needs Docker, the sandbox image and the binaries
from the extras.

    python scripts/bench_cli_overhead.py [-n 10] [--harness claude-code --harness codex]
    python scripts/bench_cli_overhead.py --baseline /tmp/base -n 15
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _stats import percentile  # noqa: E402

CLI_MODEL = {"claude-code": "claude-sonnet-5-5", "codex": "gpt-5.5"}
PHASES = ["sandbox", "setup", "exec", "forwarder", "cli→call", "total", "run"]
EXEC_STAMP = "/tmp/.bench-exec-started"
# Put in front of the harness's argv: records when the exec's first process runs, then becomes
# the harness's command (exec: same process, same environment, same exit code).
SHIM = ["bash", "-c", f'printf %s "$EPOCHREALTIME" >{EXEC_STAMP}; exec "$@"', "bash"]
ANSWER = "bench-answer "  # prefix of a --worker's answer lines on its stdout


def load_tree(tree: Path) -> None:
    """Import benchctl and harnesses from `tree` (a benchctl checkout)."""
    sys.path.insert(0, str(tree))
    import benchctl

    if Path(benchctl.__file__).resolve().parents[1] != tree.resolve():
        raise SystemExit(f"benchctl imported from {benchctl.__file__}, not from {tree} (unset PYTHONPATH?)")


def timed_harness(name: str) -> Any:
    """The registered harness, its command run behind SHIM (a subclass: the harness is otherwise unchanged)."""
    from benchctl.harness import create_harness

    cls = type(create_harness(name, {}))

    class Timed(cls):  # type: ignore[misc, valid-type]
        def command(self, *args: Any, **kwargs: Any) -> tuple[list[str], dict[str, str]]:
            argv, env = super().command(*args, **kwargs)
            return [*SHIM, *argv], env

    return Timed(options={"cli_model": CLI_MODEL[name]})


def one_run(harness_name: str, image: str, script: Path) -> dict[str, float]:
    from benchctl.gateway import Gateway, GatewayConfig
    from benchctl.harness import HarnessContext
    from benchctl.policies import Budget, RunPolicies
    from benchctl.sandbox.base import SandboxSpec
    from benchctl.sandbox.docker_sandbox import DockerSandbox
    from benchctl.transcript import TranscriptWriter

    base = Path(tempfile.mkdtemp(prefix="bbench-", dir="/tmp"))
    (base / "gw").mkdir()
    transcript = TranscriptWriter(base / "transcript.jsonl")
    marks: dict[str, float] = {}

    def on_event(ev: dict[str, Any]) -> None:
        if ev["type"] == "model_call" and "call" not in marks:
            marks["call"] = ev["t"] - (ev.get("latency_ms") or 0) / 1000  # when the request arrived
        elif ev["type"] == "harness_event" and ev.get("kind") == "start":
            marks["exec"] = ev["t"]  # right before the exec is sent

    transcript.listeners.append(on_event)
    model = f"scripted/{script}"
    gw = Gateway(GatewayConfig(model=model, socket_path=base / "gw" / "gateway.sock"), transcript).start()
    harness = timed_harness(harness_name)
    t0 = time.time()
    sandbox = DockerSandbox(
        SandboxSpec(image=image, run_id="bench", gateway_dir=base / "gw", extra_mounts=harness.mounts())
    )
    try:
        sandbox.start()
        t_started = time.time()
        ctx = HarnessContext(
            run_id="bench",
            model=model,
            instructions="Say done.",
            sandbox=sandbox,
            gateway=gw,
            transcript=transcript,
            budget=Budget(time.time(), 120),
            policies=RunPolicies(early_exit=None),
            run_dir=base,
        )
        t_run = time.time()
        result = harness.run(ctx)
        t_end = time.time()
        if result.status != "completed" or "call" not in marks:
            raise RuntimeError(f"{harness_name} run failed: {result.status} {result.error}")
        t_proc = float(sandbox.get_file(EXEC_STAMP))
        row = {
            "sandbox": t_started - t0,
            "setup": marks["exec"] - t_run,
            "exec": t_proc - marks["exec"],
            "total": marks["call"] - t0,
            "run": t_end - t0,
        }
        t_cli = t_proc
        # The forwarder's log (~/.benchctl/ before this benchmark's first version, /tmp/ since):
        # last written once the forwarder listens.
        logs = sandbox.exec(
            ["sh", "-c", "stat -c %.9Y /home/agent/.benchctl/*.log /tmp/benchctl-*.log 2>/dev/null"], timeout=30
        ).stdout
        if logs.split():
            t_cli = float(logs.split()[0])
            row["forwarder"] = t_cli - t_proc
        row["cli→call"] = marks["call"] - t_cli
        return row
    finally:
        sandbox.stop()
        gw.close()
        transcript.close()
        shutil.rmtree(base, ignore_errors=True)


def side_checks(image: str, script: Path, n: int) -> dict[str, list[float]]:
    """In one sandbox: the forwarder wrapper around `true` vs a plain `true` exec (interleaved),
    and the PostToolUse hook round trip."""
    from benchctl.gateway import SANDBOX_TOKEN, Gateway, GatewayConfig
    from benchctl.harness import HarnessContext, create_harness
    from benchctl.policies import Budget, LengthPolicy, RunPolicies
    from benchctl.sandbox.base import SandboxSpec
    from benchctl.sandbox.docker_sandbox import DockerSandbox
    from benchctl.transcript import TranscriptWriter
    from harnesses.cli_harness import TOKEN_ENV, hook_command, sandbox_socket
    from harnesses.forwarder import behind_forwarder
    from harnesses.hooks import host as hook_host

    base = Path(tempfile.mkdtemp(prefix="bbench-", dir="/tmp"))
    (base / "gw").mkdir()
    transcript = TranscriptWriter(base / "transcript.jsonl")
    gw = Gateway(
        GatewayConfig(model=f"scripted/{script}", socket_path=base / "gw" / "gateway.sock"), transcript
    ).start()
    harness: Any = create_harness("codex", {})
    sandbox = DockerSandbox(
        SandboxSpec(image=image, run_id="bench", gateway_dir=base / "gw", extra_mounts=harness.mounts())
    )
    out: dict[str, list[float]] = {"plain exec": [], "exec behind forwarder": [], "hook": []}
    try:
        sandbox.start()
        ctx = HarnessContext(
            run_id="bench",
            model=f"scripted/{script}",
            instructions="",
            sandbox=sandbox,
            gateway=gw,
            transcript=transcript,
            budget=Budget(time.time(), 600),
            policies=RunPolicies(),
            run_dir=base,
        )
        wrapped = behind_forwarder(["true"], 18555, sandbox_socket(ctx), "bench.log")
        env = {"HOME": "/home/agent"}
        for _ in range(n):
            for key, argv in (("plain exec", ["true"]), ("exec behind forwarder", wrapped)):
                t = time.perf_counter()
                res = sandbox.exec(argv, env=env, workdir="/work")
                out[key].append(time.perf_counter() - t)
                if res.exit_code != 0:
                    raise RuntimeError(f"{key} failed: {res.stderr}")
        # With a length policy: each honoured PostToolUse also reads the report from the container.
        ctx.policies = RunPolicies(length=LengthPolicy(file="report.md", max_words=3000))
        host = hook_host.install(ctx, "claude-code")
        # As if the model had asked for tool calls t1..tn: each hook is checked and honoured, not refused.
        host.ledger.response({}, "anthropic_messages", [f"t{i}" for i in range(1, n + 1)], "ok")
        sandbox.put_file("/work/report.md", b"word " * 2500)
        cmd = hook_command("post_tool_use", "claude-code", ctx)
        loop = (
            f'for i in $(seq {n}); do a=$(date +%s%N); echo \'{{"tool_name":"Bash","tool_use_id":"t\'$i\'"}}\' '
            f"| {cmd} >/dev/null; b=$(date +%s%N); echo $((b-a)); done"
        )
        res = sandbox.exec(["bash", "-c", loop], timeout=300, env={TOKEN_ENV: SANDBOX_TOKEN})
        notices = [
            e for e in map(json.loads, (base / "transcript.jsonl").read_text().splitlines()) if e["type"] == "notice"
        ]
        if len(notices) < n:
            raise RuntimeError("the hooks were not honoured")
        out["hook"] = [int(x) / 1e9 for x in res.stdout.split()]
        return out
    finally:
        sandbox.stop()
        gw.close()
        transcript.close()
        shutil.rmtree(base, ignore_errors=True)


class Local:
    """Measures the checkout this process imported."""

    def __init__(self, image: str) -> None:
        self.image = image
        self.tmp = Path(tempfile.mkdtemp(prefix="bbench-script-"))
        self.script = self.tmp / "done.json"
        self.script.write_text(json.dumps({"turns": [{"text": "done"}]}))

    def run(self, name: str) -> dict[str, float]:
        return one_run(name, self.image, self.script)

    def side(self, n: int) -> dict[str, list[float]]:
        return side_checks(self.image, self.script, n)

    def close(self) -> None:
        shutil.rmtree(self.tmp, ignore_errors=True)


class Worker:
    """Measures another checkout: a subprocess importing it, asked for one measurement at a time,
    so two checkouts can be measured alternately, run by run."""

    def __init__(self, tree: Path, image: str) -> None:
        env = {k: v for k, v in os.environ.items() if k != "PYTHONPATH"}
        self.tree = tree
        self.proc = subprocess.Popen(
            [sys.executable, str(Path(__file__).resolve()), "--worker", "--tree", str(tree), "--image", image],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
            env=env,
        )

    def _ask(self, op: str, arg: Any) -> Any:
        assert self.proc.stdin and self.proc.stdout
        self.proc.stdin.write(json.dumps([op, arg]) + "\n")
        self.proc.stdin.flush()
        for line in self.proc.stdout:
            if line.startswith(ANSWER):
                answer = json.loads(line[len(ANSWER) :])
                if "error" in answer:
                    raise SystemExit(f"measuring {self.tree} failed: {answer['error']}")
                return answer["ok"]
        raise SystemExit(f"the worker measuring {self.tree} died (exit code {self.proc.wait()})")

    def run(self, name: str) -> dict[str, float]:
        return self._ask("run", name)

    def side(self, n: int) -> dict[str, list[float]]:
        return self._ask("side", n)

    def close(self) -> None:
        if self.proc.stdin:
            self.proc.stdin.close()
        self.proc.wait()


def serve(local: Local) -> None:
    """--worker: answer [op, arg] lines on stdin with one ANSWER line each on stdout."""
    for line in sys.stdin:
        op, arg = json.loads(line)
        try:
            out = {"ok": local.run(arg) if op == "run" else local.side(arg)}
        except Exception as e:
            out = {"error": f"{type(e).__name__}: {e}"}
        print(ANSWER + json.dumps(out), flush=True)


def measure(measurers: dict[str, Any], names: list[str], n: int) -> dict[str, dict[str, Any]]:
    """n runs per harness per checkout, the checkouts alternating run by run (order flipped every
    round), after one warm-up run each (page cache, image layers, lazy imports); then the side
    checks, alternating in three chunks."""
    labels = list(measurers)
    results: dict[str, dict[str, Any]] = {label: {"runs": {name: [] for name in names}, "side": {}} for label in labels}
    for name in names:
        for m in measurers.values():
            m.run(name)
    for i in range(n):
        for name in names:
            for label in labels if i % 2 == 0 else labels[::-1]:
                results[label]["runs"][name].append(measurers[label].run(name))
        print(f"round {i + 1}/{n} done", file=sys.stderr)
    for i in range(3):
        for label in labels if i % 2 == 0 else labels[::-1]:
            for key, values in measurers[label].side(max(n, 10)).items():
                results[label]["side"].setdefault(key, []).extend(values)
    return results


def cell(values: list[float]) -> str:
    if not values:
        return f"{'-':>15}"
    return f"{statistics.median(values):>7.3f} {percentile(values, 90):>7.3f}"


def report(results: dict[str, dict[str, Any]]) -> None:
    labels = list(results)
    head = "".join(f"{label + ' median / p90':>24}" for label in labels)
    first = next(iter(results.values()))
    for name in first["runs"]:
        counts = ", ".join(f"{label}: {len(r['runs'][name])} runs" for label, r in results.items())
        print(f"\n{name} ({counts}), seconds")
        print(f"{'phase':<12}{head}" + (f"{'Δ median':>12}" if len(labels) == 2 else ""))
        for phase in PHASES:
            cols = [[row[phase] for row in r["runs"][name] if phase in row] for r in results.values()]
            if not any(cols):
                continue
            line = f"{phase:<12}" + "".join(f"{cell(c):>24}" for c in cols)
            if len(labels) == 2 and all(cols):
                line += f"{statistics.median(cols[1]) - statistics.median(cols[0]):>+12.3f}"
            print(line)
    print("\nin one sandbox, seconds per call")
    print(f"{'':<24}{head}")
    for key in first["side"]:
        print(f"{key:<24}" + "".join(f"{cell(r['side'][key]):>24}" for r in results.values()))
    for label, r in results.items():
        added = statistics.median(r["side"]["exec behind forwarder"]) - statistics.median(r["side"]["plain exec"])
        print(f"{label}: the forwarder wrapper adds {added:.3f} s to an exec (difference of medians)")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("-n", type=int, default=10, help="runs per harness (and per checkout; default 10)")
    ap.add_argument("--harness", action="append", choices=["claude-code", "codex"])
    ap.add_argument("--image", default="benchctl-sandbox:latest")
    ap.add_argument("--baseline", type=Path, help="another benchctl checkout, measured alternately with this one")
    ap.add_argument("--tree", type=Path, default=HERE.parent, help=argparse.SUPPRESS)
    ap.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = ap.parse_args()
    names = args.harness or ["claude-code", "codex"]
    if args.worker:
        load_tree(args.tree)
        local = Local(args.image)
        try:
            serve(local)
        finally:
            local.close()
        return 0
    if args.baseline is None:
        load_tree(args.tree)
        measurers: dict[str, Any] = {"this": Local(args.image)}
    else:
        measurers = {
            "baseline": Worker(args.baseline.resolve(), args.image),
            "this": Worker(args.tree.resolve(), args.image),
        }
    try:
        report(measure(measurers, names, args.n))
    finally:
        for m in measurers.values():
            m.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
