"""The checks behind `benchctl doctor`: is this machine ready to run benchmarks?

In order: Docker Engine reachable [required], sandbox image present (with its content digest)
[required], a sandbox starts with no network [required], the harnesses and graders installed (built-in
or plugin; at least one harness required) and no other distribution installing a package of benchctl's
names, agent CLI binaries [optional], provider
API keys set [optional; values are never printed], stray benchctl containers and gateway
directories [optional]. Each failing check says what to do.

Used by `benchctl doctor` (commands/doctor.py) on this machine and, through
executors/ray_node.py `doctor_node`, by `benchctl doctor --ray` (commands/doctor_ray.py) on every
Ray node: it sits below all three, so none of them imports another for its checks. Heavy imports
happen inside the checks so `benchctl --help` stays fast.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import typer


@dataclass
class Check:
    name: str
    status: str  # ok | fail | warn | skip
    detail: str
    fix: str = ""
    required: bool = False


def check_docker() -> tuple[Check, Any]:
    """The engine check and, when it passed, the client the other checks use (the caller closes it)."""
    from benchctl.sandbox.docker_client import FIX, DockerUnavailable, docker_client

    try:
        client = docker_client()
    except DockerUnavailable as e:
        return Check("docker engine", "fail", f"not reachable at {e.host} ({e.reason})", e.fix, True), None
    try:
        version = client.version()
    except Exception as e:  # connected, then failed: report it like an unreachable engine
        client.close()
        return Check("docker engine", "fail", f"version query failed: {str(e).splitlines()[0][:200]}", FIX, True), None
    return Check(
        "docker engine",
        "ok",
        f"Docker {version.get('Version', '?')} (API {version.get('ApiVersion', '?')})",
        required=True,
    ), client


def check_image(client: Any, tag: str) -> Check:
    from benchctl.sandbox import images

    if client is None:
        return Check("sandbox image", "skip", "needs the Docker Engine", required=True)
    info = images.image_info(client, tag)
    if info is None:
        return Check(
            "sandbox image",
            "fail",
            f"{tag} not found",
            "build it with `benchctl images build` (about 1 minute; offline path needs "
            "`apt-get install -y mmdebstrap` and a Debian mirror)",
            True,
        )
    return Check(
        "sandbox image", "ok", f"{tag} {info.id} ({info.build_path} build, {info.size_mb:.0f} MB)", required=True
    )


def check_sandbox_starts(client: Any, tag: str, image_ok: bool) -> Check:
    if not image_ok:
        return Check("sandbox start", "skip", "needs the engine and the image", required=True)
    from benchctl.sandbox.base import SandboxSpec
    from benchctl.sandbox.docker_sandbox import DockerSandbox

    try:
        with DockerSandbox(SandboxSpec(image=tag, run_id="doctor"), client=client) as box:
            r = box.exec("id -un; tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '", timeout=30)
    except Exception as e:
        return Check(
            "sandbox start",
            "fail",
            f"{type(e).__name__}: {str(e)[:300]}",
            "rebuild the image with `benchctl images build`; check `docker info` for errors",
            True,
        )
    words = r.stdout.split()
    if r.exit_code != 0 or words != ["agent", "lo"]:
        return Check(
            "sandbox start",
            "fail",
            f"unexpected sandbox state: {r.stdout!r} {r.stderr[:200]!r}",
            "rebuild the image with `benchctl images build`",
            True,
        )
    return Check("sandbox start", "ok", "runs as agent, loopback only (network none)", required=True)


def check_binaries() -> list[Check]:
    from benchctl import binaries

    checks = []
    for row in binaries.describe():
        name = f"agent cli: {row['name']}"
        if row["status"] == "ok":
            checks.append(Check(name, "ok", f"{row['version']} at {row['path']} ({row['source']})"))
        else:
            checks.append(Check(name, "warn", row["status"], row["fix"]))
    return checks


def check_plugins() -> list[Check]:
    """Every harness, grader and scanner this Python finds (entry points: built-in or a plugin), where
    each comes from, and whether it loads. None at all means benchctl's own entry points are missing."""
    from benchctl.grading.graders import GRADERS
    from benchctl.harness import HARNESSES
    from benchctl.plugins import Registry, UnknownPlugin
    from benchctl.scan.registry import SCANNERS

    registries: tuple[Registry[Any], ...] = (HARNESSES, GRADERS, SCANNERS)
    checks = []
    for registry in registries:
        names = registry.names()
        if not names:
            checks.append(
                Check(
                    f"{registry.kind}s",
                    "fail",
                    f"none found: no installed distribution declares entry points in {registry.group!r}, "
                    "not even benchctl (installed from another checkout, or not installed)",
                    "install benchctl (pip install benchctl, or pip install -e . in a checkout)",
                    required=True,
                )
            )
        for name in names:
            try:
                registry.load(name)
            except UnknownPlugin as e:
                checks.append(
                    Check(f"{registry.kind}: {name}", "warn", str(e), "reinstall or uninstall the distribution")
                )
                continue
            checks.append(Check(f"{registry.kind}: {name}", "ok", registry.provider(name)))
    return checks


def check_package_names() -> Check:
    """No other installed distribution ships a top-level package of benchctl's names (benchctl,
    harnesses): pip would put both into one directory, each overwriting the other's files."""
    from benchctl.plugins import own_packages, package_clashes

    clashes = package_clashes()
    if clashes:
        return Check(
            "package names",
            "warn",
            "; ".join(f"{top!r} is also installed by {', '.join(d)}" for top, d in clashes.items()),
            "keep them in separate virtual environments (pip uninstall the other one, then pip install "
            "--force-reinstall benchctl)",
        )
    return Check("package names", "ok", f"no other distribution installs {', '.join(own_packages())}")


def check_keys() -> list[Check]:
    checks = []
    from benchctl.gateway.provider_env import PROVIDERS

    for provider, env in PROVIDERS.items():
        names = env.keys
        present = [n for n in names if os.environ.get(n)]
        if present:
            checks.append(Check(f"key: {provider}", "ok", f"{present[0]} is set"))
        else:
            checks.append(
                Check(
                    f"key: {provider}",
                    "warn",
                    f"{' / '.join(names)} not set",
                    f"export {names[0]}=... to run or judge with {provider} models",
                )
            )
    return checks


def check_strays(client: Any) -> Check:
    if client is None:
        return Check("stray containers", "skip", "needs the Docker Engine")
    from benchctl.sandbox.cleanup import find_managed

    found = find_managed(client)
    strays = [s for s in found if not s.owner_alive]
    live = len(found) - len(strays)
    live_note = f"; {live} belong to running benchctl processes" if live else ""
    if strays:
        return Check(
            "stray containers",
            "warn",
            f"{len(strays)} left behind ({', '.join(s.name for s in strays[:5])})" + live_note,
            "remove them with `benchctl cleanup`",
        )
    return Check("stray containers", "ok", "none" + live_note)


def check_gateway_dirs() -> Check:
    from benchctl.sandbox import gateway_dir

    stale = [d for d in gateway_dir.find() if not d.owner_alive]
    if stale:
        return Check(
            "stale gateway dirs",
            "warn",
            f"{len(stale)} left behind ({', '.join(str(d.path) for d in stale[:5])})",
            "remove them with `benchctl cleanup`",
        )
    return Check("stale gateway dirs", "ok", "none")


def run_checks(tag: str) -> list[Check]:
    docker_check, client = check_docker()
    image_check = check_image(client, tag)
    checks = [docker_check, image_check, check_sandbox_starts(client, tag, image_check.status == "ok")]
    checks += check_plugins() + [check_package_names()] + check_binaries() + check_keys()
    checks += [check_strays(client), check_gateway_dirs()]
    if client is not None:
        client.close()
    return checks


_MARK = {"ok": "ok  ", "fail": "FAIL", "warn": "warn", "skip": "skip"}


def print_checks(checks: list[Check], indent: str = "") -> None:
    width = max(len(c.name) for c in checks)
    for c in checks:
        req = " (required)" if c.required and c.status == "fail" else ""
        typer.echo(f"{indent}[{_MARK[c.status]}] {c.name:<{width}}  {c.detail}{req}")
        if c.fix and c.status in ("fail", "warn"):
            typer.echo(f"{indent}       {'':<{width}}  fix: {c.fix}")
