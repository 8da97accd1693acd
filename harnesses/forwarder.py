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

# Start the forwarder in the background, wait (up to ~5 s) until its port accepts connections,
# run the CLI, stop the forwarder, exit with the CLI's code. The CLI runs as a child of this
# shell, not via `exec`: as the exec's own process Codex lingers ~1.5 s after its last event
# (measured).
_WRAPPER = ('mkdir -p "$HOME/.benchctl"\n'
            '{fwd} >"$HOME/.benchctl/{log}" 2>&1 </dev/null &\n'
            'fwd=$!\n'
            'for i in $(seq 100); do (exec 3<>/dev/tcp/127.0.0.1/{port}) 2>/dev/null && break; sleep 0.05; done\n'
            '{cli}\n'
            'rc=$?\n'
            'kill $fwd 2>/dev/null\n'
            'exit $rc\n')


def forwarder_mount() -> Mount:
    from benchctl.gateway.forwarder import FORWARDER_SOURCE
    return Mount(Path(FORWARDER_SOURCE), FORWARDER_IN_SANDBOX, True)


def behind_forwarder(cli: list[str], port: int, socket: str, log: str) -> list[str]:
    """The argv that runs `cli` with a forwarder on 127.0.0.1:`port` to `socket`; its output
    goes to ~/.benchctl/`log`."""
    from benchctl.gateway.forwarder import forwarder_command
    fwd = forwarder_command(port, socket, script=FORWARDER_IN_SANDBOX)
    return ["bash", "-c", _WRAPPER.format(fwd=shlex.join(fwd), port=port, cli=shlex.join(cli), log=log)]
