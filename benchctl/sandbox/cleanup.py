"""Containers never outlive benchctl: a registry of live sandboxes, signal/atexit handlers, and
stray finding/removal for `benchctl cleanup` / `benchctl doctor`.

Every container benchctl starts carries the labels `benchctl.managed=1`, `benchctl.run_id`,
`benchctl.owner_pid` and `benchctl.owner_host`. A container's *name* is registered here before
the create request is sent, so even a SIGINT that lands mid-create can be cleaned up by name.

Usage by a long-running command (the runner):

    from benchctl.sandbox.cleanup import install_signal_handlers
    install_signal_handlers()   # main thread, once; SIGINT/SIGTERM remove all containers

Removal at normal interpreter exit (atexit) is arranged automatically by the first sandbox.

After cleanup the previous handler runs: SIGINT still raises KeyboardInterrupt (so `finally`
blocks run), SIGTERM terminates the process with the usual status unless a handler was set.
"""

from __future__ import annotations

import atexit
import os
import signal
import socket
import threading
from collections.abc import Callable
from dataclasses import dataclass
from types import FrameType
from typing import Any

from benchctl.sandbox.base import LABEL_KEY, LABEL_MANAGED
from benchctl.sandbox.docker_client import CLEANUP_TIMEOUT, docker_client

LABEL_OWNER_PID = "benchctl.owner_pid"
LABEL_OWNER_HOST = "benchctl.owner_host"

_lock = threading.Lock()
_live: set[str] = set()  # container names (or ids) this process may have created
_installed = False
_atexit_registered = False
_owner_pid = os.getpid()  # a forked child must not remove its parent's containers


def register(name: str) -> None:
    """Track a container name; the first registration also arranges removal at interpreter exit."""
    global _atexit_registered, _owner_pid
    with _lock:
        if os.getpid() != _owner_pid:  # first registration in a forked child: start afresh
            _live.clear()
            _owner_pid = os.getpid()
        _live.add(name)
        if not _atexit_registered:
            atexit.register(remove_all_live)
            _atexit_registered = True


def unregister(name: str) -> None:
    with _lock:
        _live.discard(name)


def live_containers() -> list[str]:
    with _lock:
        return sorted(_live)


def _remove_one(client: Any, name: str) -> None:
    import docker.errors

    try:
        client.api.remove_container(name, force=True, v=True)
    except docker.errors.NotFound:
        pass
    except docker.errors.APIError as e:
        if "already in progress" not in str(e):
            raise


def remove_all_live() -> list[str]:
    """Force-remove every container this process registered. Safe to call from a signal handler
    or atexit, and more than once. Returns the names it tried."""
    names = live_containers()
    if not names or os.getpid() != _owner_pid:
        return []  # nothing to do, or a forked child: the containers belong to the parent
    try:
        client = docker_client(CLEANUP_TIMEOUT)  # a fresh client: the main one may be mid-request
    except Exception:
        # The engine is unreachable (this connects to ask its API version). Raising here would replace
        # a SIGINT's KeyboardInterrupt; the names stay registered for a later attempt.
        return []
    try:
        # Sequential on purpose: thread pools refuse work during interpreter shutdown (atexit),
        # and a force-remove takes ~0.1 s.
        for name in names:
            _safe_remove(client, name)
    finally:
        client.close()
    with _lock:
        _live.difference_update(names)
    return names


def _safe_remove(client: Any, name: str) -> None:
    try:
        _remove_one(client, name)
    except Exception:  # cleanup must never raise out of a signal handler
        pass


def _make_handler(signum: int, previous: Any) -> Callable[[int, FrameType | None], None]:
    def handler(sig: int, frame: FrameType | None) -> None:
        remove_all_live()
        if callable(previous):
            previous(sig, frame)
        elif previous == signal.SIG_IGN:
            return
        else:  # SIG_DFL: die the way the signal would have killed us
            signal.signal(signum, signal.SIG_DFL)
            os.kill(os.getpid(), signum)

    return handler


def install_signal_handlers(signals: tuple[int, ...] = (signal.SIGINT, signal.SIGTERM)) -> None:
    """Remove all live sandboxes on SIGINT/SIGTERM and at interpreter exit. Call once from the
    main thread; idempotent."""
    global _installed
    if _installed:
        return
    for signum in signals:
        signal.signal(signum, _make_handler(signum, signal.getsignal(signum)))
    _installed = True


def owner_labels(run_id: str) -> dict[str, str]:
    return {
        LABEL_MANAGED: "1",
        LABEL_KEY: run_id,
        LABEL_OWNER_PID: str(os.getpid()),
        LABEL_OWNER_HOST: socket.gethostname(),
    }


@dataclass
class Stray:
    id: str
    name: str
    run_id: str
    status: str
    owner_alive: bool  # its benchctl process still runs on this host (so it is not a stray yet)


def pid_alive(pid: int) -> bool:
    """Whether process `pid` exists on this host (one we may not signal still counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def find_managed(client: Any, run_id: str | None = None) -> list[Stray]:
    """All containers labelled benchctl.managed=1 (optionally of one run), live owner or not."""
    filters = {"label": [f"{LABEL_MANAGED}=1"] + ([f"{LABEL_KEY}={run_id}"] if run_id else [])}
    out = []
    host = socket.gethostname()
    for c in client.api.containers(all=True, filters=filters):
        labels = c.get("Labels") or {}
        pid = labels.get(LABEL_OWNER_PID, "")
        # Our own pid counts as dead: such a container was left by an earlier process that had this
        # pid (pids are reused), since callers clean up before they start sandboxes of their own.
        alive = (
            labels.get(LABEL_OWNER_HOST) == host and pid.isdigit() and int(pid) != os.getpid() and pid_alive(int(pid))
        )
        out.append(
            Stray(
                id=c["Id"][:12],
                name=(c.get("Names") or ["?"])[0].lstrip("/"),
                run_id=labels.get(LABEL_KEY, "?"),
                status=c.get("Status", "?"),
                owner_alive=alive,
            )
        )
    return out


def remove_strays(client: Any, include_live_owners: bool = False, run_id: str | None = None) -> list[Stray]:
    """Remove labelled containers whose owning process is gone (or all, if asked). Returns them."""
    victims = [s for s in find_managed(client, run_id) if include_live_owners or not s.owner_alive]
    remove(client, victims)
    return victims


def remove(client: Any, victims: list[Stray]) -> None:
    """Force-remove the given containers (as listed by find_managed)."""
    for s in victims:
        _remove_one(client, s.id)
