"""`benchctl doctor --ray ADDRESS`: the doctor's checks on every node of a Ray cluster.

Per node (each alive node that declares `benchctl_sandbox` slots): Docker Engine, sandbox image
present and its digest equal to the driver's (or, when the driver has no image, to the other
nodes'), a sandbox starts with no network, agent CLIs, stray containers, and free slots.
Exit code 1 if any node fails a required check, 2 if the cluster cannot be reached.
"""

from __future__ import annotations

import json
from typing import Any

import typer

from benchctl.doctor_checks import Check, print_checks


def _node_checks(ray: Any, image: str) -> list[tuple[dict[str, Any], list[Check]]]:
    from benchctl.executors.ray_driver import driver_image_digest, on_each_node
    from benchctl.executors.ray_node import SLOT, doctor_node

    expected = driver_image_digest(image)
    try:  # Ray has no public per-node view of free resources; without it, say "?"
        from ray._private.state import available_resources_per_node

        free: dict[str, Any] | None = available_resources_per_node()
    except Exception:
        free = None
    out = []
    for node, res in on_each_node(ray, doctor_node, image, expected):
        if isinstance(res, Exception):
            checks = [
                Check(
                    "node",
                    "fail",
                    f"could not run the checks there: {type(res).__name__}: {str(res)[:300]}",
                    "check that the node has the same benchctl and Ray versions as the driver",
                    True,
                )
            ]
        else:
            checks = [Check(**c) for c in res]
        total = node.get("Resources", {}).get(SLOT, 0)
        avail = "?" if free is None else f"{free.get(node['NodeID'], {}).get(SLOT, 0):g}"
        checks.append(Check("sandbox slots", "ok", f"{avail} of {total:g} free"))
        out.append((node, checks))
    return out


def doctor_ray(address: str, image: str, as_json: bool) -> int:
    from benchctl.executors.ray_driver import RayUnavailable, connect, slot_nodes

    try:
        ray = connect(address)
    except RayUnavailable as e:
        typer.secho(f"error: {e}", fg="red", err=True)
        return 2
    if not slot_nodes(ray):
        typer.secho(
            f"error: no node of the Ray cluster at {address} declares benchctl_sandbox slots; start nodes "
            "with `ray start ... --resources '{\"benchctl_sandbox\": 8}'`",
            fg="red",
            err=True,
        )
        return 1
    results = _node_checks(ray, image)
    failed = [(n, c) for n, checks in results for c in checks if c.required and c.status == "fail"]
    if as_json:
        from dataclasses import asdict

        typer.echo(
            json.dumps(
                {
                    "ok": not failed,
                    "nodes": [
                        {
                            "node_id": n["NodeID"],
                            "address": n["NodeManagerAddress"],
                            "checks": [asdict(c) for c in checks],
                        }
                        for n, checks in results
                    ],
                },
                indent=2,
            )
        )
    else:
        for n, checks in results:
            typer.echo(f"node {n['NodeManagerAddress']} ({n['NodeID'][:12]}):")
            print_checks(checks, indent="  ")
        typer.echo(
            f"doctor: {len(results)} node(s); "
            + ("all required checks passed" if not failed else f"{len(failed)} required check(s) failed")
        )
    return 1 if failed else 0
