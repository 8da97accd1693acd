"""`benchctl run --ray` on a REAL multi-node Ray cluster on this machine.

The cluster (benchctl/testing/ray_cluster.py) is a head and a worker node — separate `ray start`
processes, raylets and object stores — inside one private network namespace, so Ray binds to
loopback; the benchctl driver runs in that namespace too. Sandboxes are real Docker containers.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from benchctl.jsonio import read_json, read_jsonl
from benchctl.testing.ray_cluster import RayCluster
from tests.rigs.plugin import env_with, install_tiny
from tests.rigs.run import BENCHCTL, REPO, bash, containers_with_label, make_scripted_task, run_inprocess, runs, tool

pytestmark = [pytest.mark.docker, pytest.mark.ray]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RayCluster]:
    # every node (and driver) has a third-party plugin pip-installed: tests/plugins/tiny
    plugin = install_tiny(tmp_path_factory.mktemp("tiny"))
    with RayCluster(tmp_path_factory.mktemp("ray"), nodes=2, slots=2, env=env_with(plugin)) as c:
        yield c


def benchctl_in(
    cluster: RayCluster, args: list[str], tmp: Path, env: dict[str, str] | None = None, timeout: float = 400
) -> tuple[int | None, str, str]:
    """Run a benchctl command inside the cluster's namespace; (exit code, stdout, stderr)."""
    tag = uuid.uuid4().hex[:6]
    out, err = tmp / f"cmd-{tag}.out", tmp / f"cmd-{tag}.err"
    pid = cluster.spawn([*BENCHCTL, *args], env=env, cwd=str(REPO), stdout=out, stderr=err)
    rc = cluster.wait(pid, timeout)
    if rc is None:
        cluster.signal(pid, signal.SIGKILL)
    return rc, out.read_text(), err.read_text()


def run_ray(cluster: RayCluster, args: list[str], tmp: Path, **kw: Any) -> tuple[int | None, str, str]:
    return benchctl_in(cluster, ["run", *args, "--ray", cluster.address, "--progress", "json"], tmp, **kw)


def tree(run: Path) -> list[str]:
    return sorted(str(p.relative_to(run)) for p in run.rglob("*") if p.is_file())


def wait_for(pred: Any, timeout: float, what: str) -> Any:
    end = time.time() + timeout
    while time.time() < end:
        got = pred()
        if got:
            return got
        time.sleep(0.3)
    raise AssertionError(f"timed out waiting for {what}")


def tool_output(event: dict) -> str | None:
    """A tool_result's output without the notices the harness appended (they carry the clock)."""
    out = event.get("output")
    return out.split("\n\n[benchctl]")[0] if isinstance(out, str) else out


def test_a_ray_sweep_spreads_over_nodes_and_matches_a_local_sweep(cluster: RayCluster, tmp_path: Path) -> None:
    name = f"rayeq{uuid.uuid4().hex[:6]}"
    turns = [
        bash("wc -l /data/app.log; sleep 1"),
        bash("grep ERROR /data/app.log"),
        tool("create", path="report.md", file_text="# Report\nERROR disk full on db-1\n"),
        tool("submit"),
    ]
    task, model = make_scripted_task(tmp_path, turns, "[early_exit]\nenabled = false\n", name=name)
    local, remote = tmp_path / "local", tmp_path / "remote"
    assert run_inprocess(task, model, local, seeds=4, concurrency=2) == 0
    args = [str(task), "--model", model, "--budget", "1m", "--seeds", "4", "--out", str(remote)]
    rc, _, err = run_ray(cluster, args, tmp_path)
    assert rc == 0, err

    assert [r.name for r in runs(remote)] == [r.name for r in runs(local)]
    node_ids = set(cluster.node_ids().values())
    used = set()
    for lr, rr in zip(runs(local), runs(remote)):
        assert tree(rr) == tree(lr)  # same layout, file for file
        for f in tree(lr):
            if f.startswith("artifacts/"):
                assert (rr / f).read_bytes() == (lr / f).read_bytes()
        lm, rm = read_json(lr / "meta.json"), read_json(rr / "meta.json")
        assert set(rm) - set(lm) == {"node"} and not set(lm) - set(rm)
        for k in (
            "status",
            "spec",
            "task_hash",
            "image_digest",
            "usage",
            "cost_usd",
            "served_models",
            "turns",
            "artifacts",
            "collect",
            "error",
            "reprompts",
            "tool_versions",
            "benchctl_version",
        ):
            assert rm[k] == lm[k], k
        assert rm["node"]["id"] in node_ids
        used.add(rm["node"]["id"])
        le, re_ = read_jsonl(lr / "transcript.jsonl"), read_jsonl(rr / "transcript.jsonl")
        assert [(e["type"], e["source"]) for e in re_] == [(e["type"], e["source"]) for e in le]
        assert [e["seq"] for e in re_] == list(range(len(re_)))  # gapless on the driver
        # ReAct appends its notices (time remaining differs between two runs) to what the model got
        assert [tool_output(e) for e in re_ if e["type"] == "tool_result"] == [
            tool_output(e) for e in le if e["type"] == "tool_result"
        ]
        assert re_[0]["type"] == "run_start" and re_[0]["node"] == rm["node"]
    assert used == node_ids  # runs landed on both nodes

    rc, _, err = run_ray(cluster, args, tmp_path)  # resume: everything is finished
    assert rc == 0, err
    assert err.count('"run_skipped"') == 4 and '"run_started"' not in err


def test_keys_reach_the_nodes_gateway_and_nothing_else(cluster: RayCluster, tmp_path: Path) -> None:
    key = f"sk-ant-fake-{uuid.uuid4().hex}"
    name = f"raykey{uuid.uuid4().hex[:6]}"
    probe = (
        "(env; for p in /proc/[0-9]*; do tr '\\0' '\\n' < $p/environ; done; ls -la /gateway; "
        "cat /proc/1/cmdline) > /work/env.txt 2>&1; wc -c /work/env.txt"
    )
    script = tmp_path / "upstream.json"
    script.write_text(
        json.dumps(
            {
                "turns": [bash(probe), tool("create", path="report.md", file_text="done\n"), tool("submit")],
                "after_end": "stop",
            }
        )
    )
    port = 18000 + os.getpid() % 1000
    keys_seen = tmp_path / "keys.json"
    up = cluster.spawn(
        [sys.executable, str(REPO / "tests" / "rigs" / "ray_key_upstream.py"), str(script), str(port), str(keys_seen)],
        cwd=str(REPO),
    )
    try:
        task, _ = make_scripted_task(tmp_path, [], "[early_exit]\nenabled = false\n", name=name)
        (task / "task.toml").write_text(
            (task / "task.toml")
            .read_text()
            .replace('artifacts = ["report.md"]', 'artifacts = ["report.md", "env.txt"]')
        )
        out = tmp_path / "out"
        wait_for(keys_seen.exists, 30, "the fake upstream")
        rc, stdout, err = run_ray(
            cluster,
            [str(task), "--model", "anthropic/claude-sonnet-5-5", "--budget", "1m", "--seeds", "1", "--out", str(out)],
            tmp_path,
            env={"ANTHROPIC_API_KEY": key, "ANTHROPIC_BASE_URL": f"http://127.0.0.1:{port}"},
        )
        assert rc == 0, err
        assert json.loads(keys_seen.read_text()) == [key]  # the node's gateway used the driver's key
    finally:
        cluster.signal(up, signal.SIGKILL)
    env_txt = [(r / "artifacts" / "env.txt").read_text() for r in runs(out)]
    assert all("PATH=" in t and "gw.sock" in t for t in env_txt)  # the probe really dumped the sandbox's view
    assert {read_json(r / "meta.json")["node"]["id"] for r in runs(out)} <= set(cluster.node_ids().values())
    leaks = [
        str(p)
        for base in (out, cluster.workdir, cluster.ray_dir)
        for p in Path(base).rglob("*")
        if p.is_file() and key.encode() in p.read_bytes()
    ]
    assert leaks == []  # not in sandboxes, transcripts, meta, artifacts, nor any Ray log or file
    assert key not in stdout and key not in err


def test_two_nodes_share_one_connection_limit_and_one_cost_cap(cluster: RayCluster, tmp_path: Path) -> None:
    """benchctl/limits on Ray: every node's gateways ask the sweep's one limiter actor."""
    port = 19000 + os.getpid() % 1000
    stats_file = tmp_path / "upstream-stats.json"
    # `-m` from the repo root: the script is `py:tests.rigs.limits:...`, so `tests` must be importable
    up = cluster.spawn(
        [
            sys.executable,
            "-m",
            "tests.rigs.ray_limits_upstream",
            "py:tests.rigs.limits:three_calls",
            str(port),
            str(stats_file),
        ],
        cwd=str(REPO),
    )
    stats = lambda: json.loads(stats_file.read_text())  # noqa: E731
    env = {"ANTHROPIC_API_KEY": "sk-test-limits-0123456789", "ANTHROPIC_BASE_URL": f"http://127.0.0.1:{port}"}
    try:
        wait_for(stats_file.exists, 30, "the fake upstream")
        task, _ = make_scripted_task(
            tmp_path, [], "[early_exit]\nenabled = false\n", name=f"raylim{uuid.uuid4().hex[:6]}"
        )
        base = [str(task), "--model", "anthropic/claude-haiku-4-5", "--budget", "2m", "--seeds", "4"]
        out = tmp_path / "out"
        rc, _, err = run_ray(cluster, [*base, "--out", str(out), "--max-connections", "1"], tmp_path, env=env)
        assert rc == 0, err
        assert stats()["requests"] == 12 and stats()["max_in_flight"] == 1  # 4 runs at once, one call at a time
        metas = [read_json(r / "meta.json") for r in runs(out)]
        assert {m["status"] for m in metas} == {"completed"}
        assert len({m["node"]["id"] for m in metas}) == 2  # both nodes, one limit
        waits = [e for r in runs(out) for e in read_jsonl(r / "transcript.jsonl") if e["type"] == "rate_limit_wait"]
        assert len(waits) >= 4 and {e["reason"] for e in waits} == {"max_connections"}
        assert sum(m["rate_limits"]["waits"] for m in metas) == len(waits)

        # one purse: $0.30 a run, 4 at once on two nodes; the sweep stops once $0.50 is spent
        capped = tmp_path / "capped"
        rc, _, err = run_ray(
            cluster, [*base, "--out", str(capped), "--max-cost", "0.5", "--seeds", "6"], tmp_path, env=env
        )
        assert rc == 3, err  # runs were left unstarted
        metas = [read_json(r / "meta.json") for r in runs(capped)]
        assert any(m["status"] == "budget_exhausted" and m["cost_cap"]["cap"] == "sweep" for m in metas)
        assert 0.5 <= sum(m["cost_usd"] for m in metas) <= 0.5 + 4 * 0.1 + 1e-9  # past the cap by calls in flight only
        assert len(metas) < 6 and '"run_not_started"' in err
    finally:
        cluster.signal(up, signal.SIGKILL)


def test_ctrl_c_stops_every_remote_run_and_leaves_no_container(cluster: RayCluster, tmp_path: Path) -> None:
    name = f"rayint{uuid.uuid4().hex[:6]}"
    task, model = make_scripted_task(tmp_path, [bash("sleep 120")], name=name, after_end="repeat_last")
    out, log = tmp_path / "out", tmp_path / "driver.err"
    pid = cluster.spawn(
        [
            *BENCHCTL,
            "run",
            str(task),
            "--model",
            model,
            "--budget",
            "5m",
            "--seeds",
            "4",
            "--out",
            str(out),
            "--ray",
            cluster.address,
            "--progress",
            "json",
        ],
        cwd=str(REPO),
        stderr=log,
    )

    def mine() -> list:
        return [
            c
            for c in containers_with_label("benchctl.run_id")
            if c.labels.get("benchctl.run_id", "").startswith(f"{name}__")
        ]

    try:
        wait_for(lambda: len(mine()) == 4, 240, "four sandboxes running on the two nodes")
        time.sleep(1.0)
        cluster.signal(pid, signal.SIGINT)
        rc = cluster.wait(pid, 120)
    finally:
        if cluster.wait(pid, 0) is None:
            cluster.signal(pid, signal.SIGKILL)
    assert rc == 130, log.read_text()
    assert "interrupted" in log.read_text()
    assert mine() == []
    metas = [read_json(r / "meta.json") for r in runs(out)]
    assert len(metas) == 4 and all(m["status"] == "error" and m["error"] == "cancelled" for m in metas)
    assert len({m["node"]["id"] for m in metas}) == 2


def test_doctor_checks_every_node(cluster: RayCluster, tmp_path: Path) -> None:
    rc, stdout, err = benchctl_in(cluster, ["doctor", "--ray", cluster.address, "--json"], tmp_path)
    assert rc == 0, err + stdout
    report = json.loads(stdout)
    assert report["ok"] is True
    assert {n["node_id"] for n in report["nodes"]} == set(cluster.node_ids().values())
    for n in report["nodes"]:
        checks = {c["name"]: c for c in n["checks"]}
        for required in ("docker engine", "sandbox image", "sandbox start", "image digest"):
            assert checks[required]["status"] == "ok", checks[required]
        assert checks["sandbox slots"]["detail"].endswith("of 2 free")
        assert any(name.startswith("agent cli:") for name in checks)
        assert checks["harness: tiny"]["detail"] == "benchctl-tiny 0.3.1 (benchctl_tiny:TinyHarness)"


def test_a_plugin_harness_installed_on_the_nodes_runs_there_by_name(cluster: RayCluster, tmp_path: Path) -> None:
    task, model = make_scripted_task(tmp_path, [{"text": "done"}], name=f"rayplug{uuid.uuid4().hex[:6]}")
    out = tmp_path / "out"
    args = [str(task), "--harness", "tiny", "--model", model, "--budget", "1m", "--seeds", "2", "--out", str(out)]
    rc, _, err = run_ray(cluster, args, tmp_path)
    assert rc == 0, err
    for run in runs(out):
        meta = read_json(run / "meta.json")
        assert (meta["status"], meta["harness"], meta["tool_versions"]) == ("completed", "tiny", {"tiny": "0.3.1"})
        assert meta["node"]["id"] in set(cluster.node_ids().values())
        assert (run / "artifacts" / "report.md").read_text() == "found by name\n"


def test_a_node_whose_image_digest_differs_is_refused(cluster: RayCluster, tmp_path: Path, sandbox_image: str) -> None:
    snippet = (
        "import json, sys\n"
        "from benchctl.executors.ray_driver import connect, on_each_node\n"
        "from benchctl.executors.ray_node import check_node\n"
        f"ray = connect({cluster.address!r})\n"
        f"res = on_each_node(ray, check_node, {sandbox_image!r}, 'sha256:' + '0' * 64, [('react', {{}})])\n"
        "print(json.dumps([r['problems'] for _, r in res]))\n"
    )
    tag = uuid.uuid4().hex[:6]
    pid = cluster.spawn(
        [sys.executable, "-c", snippet], cwd=str(REPO), stdout=tmp_path / f"{tag}.out", stderr=tmp_path / f"{tag}.err"
    )
    assert cluster.wait(pid, 300) == 0, (tmp_path / f"{tag}.err").read_text()
    problems = json.loads((tmp_path / f"{tag}.out").read_text())
    assert len(problems) == 2
    for p in problems:
        assert len(p) == 1 and "would not be reproducible" in p[0] and "sha256:00000000" in p[0]


def test_a_run_on_a_node_that_dies_is_redone_on_another_node(tmp_path: Path) -> None:
    name = f"raydie{uuid.uuid4().hex[:6]}"
    turns = [bash("sleep 2")] * 6 + [tool("create", path="report.md", file_text="r\n"), tool("submit")]
    task, model = make_scripted_task(tmp_path, turns, "[early_exit]\nenabled = false\n", name=name)
    out, log = tmp_path / "out", tmp_path / "driver.err"
    with RayCluster(tmp_path / "cluster", nodes=2, slots=1) as cluster:
        worker = cluster.node_ids()[1]
        pid = cluster.spawn(
            [
                *BENCHCTL,
                "run",
                str(task),
                "--model",
                model,
                "--budget",
                "2m",
                "--seeds",
                "2",
                "--out",
                str(out),
                "--ray",
                cluster.address,
                "--progress",
                "json",
            ],
            cwd=str(REPO),
            stderr=log,
        )

        def run_busy_on_worker() -> Path | None:
            for r in runs(out) if (out / "runs").exists() else []:
                events = read_jsonl(r / "transcript.jsonl") if (r / "transcript.jsonl").exists() else []
                if (
                    events
                    and events[0].get("node", {}).get("id") == worker
                    and any(e["type"] == "tool_result" for e in events)
                ):
                    return r
            return None

        victim = wait_for(run_busy_on_worker, 240, "a run busy on the worker node")
        assert cluster.kill_node(1)
        rc = cluster.wait(pid, 300)
        assert rc == 0, log.read_text()
        head = cluster.node_ids()[0]
    for r in runs(out):
        meta = read_json(r / "meta.json")
        assert meta["status"] == "completed" and meta["node"]["id"] == head  # finished on the surviving node
        assert (r / "artifacts" / "report.md").read_text() == "r\n"
        assert containers_with_label("benchctl.run_id", r.name) == []
    lost = victim / "attempts" / "1"
    assert sorted(p.name for p in (victim / "attempts").iterdir()) == ["1"]  # one lost attempt, kept
    lost_meta = read_json(lost / "meta.json")
    assert lost_meta["status"] == "error" and lost_meta["error"].startswith("lost with node")
    assert lost_meta["node"]["id"] == worker
    events = read_jsonl(lost / "transcript.jsonl")
    assert any(e["type"] == "tool_result" for e in events)  # what streamed before the death is kept
    assert events[-1]["type"] == "run_end" and [e["seq"] for e in events] == list(range(len(events)))
    starts = [e for e in read_jsonl(victim / "transcript.jsonl") if e["type"] == "run_start"]
    assert len(starts) == 1  # the redo's transcript is its own
    others = [r for r in runs(out) if r != victim]
    assert all(not (r / "attempts").exists() for r in others)  # nothing else redone or duplicated
    left = [p.name for p in (tmp_path / "cluster" / "node-runs").iterdir()]
    assert left == []  # the killed run's scratch dir went with the next run on that machine


def _copy_task(src: Path, tmp: Path, name: str, extra: str = "") -> Path:
    import re
    import shutil

    dest = tmp / name
    shutil.copytree(src, dest)
    toml = dest / "task.toml"
    toml.write_text(re.sub(r'(?m)^name = ".*"$', f'name = "{name}"', toml.read_text()) + extra)
    return dest


def _same_runs(local: Path, remote: Path) -> list[tuple[dict, dict]]:
    assert [r.name for r in runs(remote)] == [r.name for r in runs(local)]
    pairs = []
    for lr, rr in zip(runs(local), runs(remote)):
        assert tree(rr) == tree(lr)
        pairs.append((read_json(lr / "meta.json"), read_json(rr / "meta.json")))
    return pairs


@pytest.mark.cli_binaries
def test_cli_harness_followups_and_variants_run_on_ray_as_locally(cluster: RayCluster, tmp_path: Path) -> None:
    name = f"raycli{uuid.uuid4().hex[:6]}"
    task = _copy_task(
        REPO / "configs" / "demo",
        tmp_path,
        name,
        '\n[[followups]]\nprompt = "Add one more sentence to your report."\nbudget = "1m"\n',
    )
    args = [
        str(task),
        "--harness",
        "claude-code",
        "--model",
        "scripted/configs/demo/investigator-claude-code.json",
        "--budget",
        "2m",
        "--variant",
        "contoso",
    ]  # a scripted path relative to the driver's cwd
    local, remote = tmp_path / "local", tmp_path / "remote"
    r = subprocess.run(
        [*BENCHCTL, "run", *args, "--out", str(local), "--progress", "quiet"],
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=400,
    )
    assert r.returncode == 0, r.stderr
    rc, _, err = run_ray(cluster, [*args, "--out", str(remote)], tmp_path)
    assert rc == 0, err
    [(lm, rm)] = _same_runs(local, remote)
    for k in ("status", "artifacts", "task_hash", "turns", "served_models", "reprompts", "revision_requests"):
        assert rm[k] == lm[k], k
    assert rm["spec"]["variant_counts"] == lm["spec"]["variant_counts"] and sum(rm["spec"]["variant_counts"].values())
    assert [f["status"] for f in rm["followups"]] == [f["status"] for f in lm["followups"]]
    assert "report.followup-1.md" in rm["artifacts"]
    (run,) = runs(remote)
    assert (run / "harness" / "claude-code.1.exit.json").exists() and (
        run / "harness" / "claude-code.2.exit.json"
    ).exists()


def test_target_tools_run_on_ray_as_locally(cluster: RayCluster, tmp_path: Path) -> None:
    name = f"rayhb{uuid.uuid4().hex[:6]}"
    task = _copy_task(REPO / "configs" / "hidden-behaviour-demo", tmp_path, name)
    args = [
        str(task),
        "--model",
        "scripted/py:benchctl.targets.demo:investigator",
        "--tools",
        "prefill",
        "--budget",
        "2m",
    ]
    local, remote = tmp_path / "local", tmp_path / "remote"
    assert (
        subprocess.run(
            [*BENCHCTL, "run", *args, "--out", str(local), "--progress", "quiet"],
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=400,
        ).returncode
        == 0
    )
    rc, _, err = run_ray(cluster, [*args, "--out", str(remote)], tmp_path)
    assert rc == 0, err
    [(lm, rm)] = _same_runs(local, remote)
    assert rm["status"] == lm["status"] == "completed"
    tt_local, tt_remote = lm["target_tools"], rm["target_tools"]
    assert tt_remote["tool_calls"] == tt_local["tool_calls"] and sum(tt_remote["tool_calls"].values()) > 0
    assert tt_remote["target"] == tt_local["target"]
    (run,) = runs(remote)
    assert (run / "artifacts" / "predictions.md").read_text() == (
        runs(local)[0] / "artifacts" / "predictions.md"
    ).read_text()
