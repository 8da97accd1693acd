"""Running an agent CLI behind the gateway forwarder, for clients that take only a URL.

Codex (for its model traffic) and both CLIs (for the target tools' MCP server) need a TCP
URL, but the sandbox has no network: `benchctl/gateway/forwarder.py`, mounted read-only,
listens on the sandbox's loopback and relays to the gateway's unix socket.
"""

from __future__ import annotations

import shlex
from pathlib import Path

from benchctl.sandbox.base import TOOLS_DIR, Mount

FORWARDER_IN_SANDBOX = f"{TOOLS_DIR}/gateway/forwarder.py"

# Start the forwarder, wait until it listens, run the CLI, stop the forwarder, exit with the
# CLI's code. The forwarder prints one line once its port accepts connections; the wrapper
# blocks reading it from a pipe (up to 10 s; EOF if the forwarder died), so the CLI starts the
# moment the port is ready: no polling, no sleeps. The line then goes to the log in /tmp
# (no `mkdir`, one process less), after the forwarder's stderr. The CLI runs as a child of this
# shell, not via `exec`: as the exec's own process Codex lingers ~1.5 s after its last event
# (measured).
_WRAPPER = (
    "exec 3< <(exec {fwd} 2>>{log} </dev/null)\n"
    "fwd=$!\n"
    'read -r -t 10 ready <&3 && echo "$ready" >>{log}\n'
    "exec 3<&-\n"
    "{cli}\n"
    "rc=$?\n"
    "kill $fwd 2>/dev/null\n"
    "exit $rc\n"
)


def forwarder_mount() -> Mount:
    from benchctl.gateway.forwarder import FORWARDER_SOURCE

    return Mount(Path(FORWARDER_SOURCE), FORWARDER_IN_SANDBOX, True)


def behind_forwarder(cli: list[str], port: int, socket: str, log: str) -> list[str]:
    """The argv that runs `cli` with a forwarder on 127.0.0.1:`port` to `socket`; its output
    goes to /tmp/benchctl-`log`."""
    from benchctl.gateway.forwarder import forwarder_command

    fwd = forwarder_command(port, socket, script=FORWARDER_IN_SANDBOX)
    log_path = shlex.quote(f"/tmp/benchctl-{log}")
    return ["bash", "-c", _WRAPPER.format(fwd=shlex.join(fwd), log=log_path, cli=shlex.join(cli))]
