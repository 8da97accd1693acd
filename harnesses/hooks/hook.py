#!/usr/bin/env python3
"""benchctl's agent-CLI hook, run *inside the sandbox* by Claude Code and Codex.

Stdlib only (it runs with the image's python3, mounted read-only at
/opt/benchctl/hooks/hook.py). The CLI pipes the hook input (JSON) to stdin; this script
POSTs it to the host over the gateway's unix socket at /benchctl/hooks/<event>, with the
sandbox token from $BENCHCTL_GATEWAY_TOKEN (the CLI's environment, which hooks inherit), and
prints whatever the host answers (the CLI's hook output JSON).

    hook.py <event> --socket /gateway/gw.sock [--cli NAME]

It only carries the hook input: every decision is made on the host (harnesses/hooks/host.py),
which checks each hook against the model traffic the gateway saw itself and reads the
length-policy file from the container itself. Nothing here, nor anything the agent could post
in its place (it runs as the same user), is trusted.

If the host cannot be reached the hook prints `{}` (no effect) and exits 0, so a broken
gateway never wedges the agent; the host notices the missing hook events instead.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import socket
import sys

TOKEN_ENV = "BENCHCTL_GATEWAY_TOKEN"


class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        s.connect(self._path)
        self.sock = s


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("event", choices=["post_tool_use", "stop"])
    ap.add_argument("--socket", default="/gateway/gw.sock")
    ap.add_argument("--cli", default="")
    ap.add_argument("--timeout", type=float, default=60.0)
    args = ap.parse_args(argv)

    raw = sys.stdin.read()
    try:
        hook_input = json.loads(raw) if raw.strip() else {}
    except ValueError:
        hook_input = {"_unparsed": raw[:10000]}
    body = json.dumps({"event": args.event, "cli": args.cli, "input": hook_input}).encode()
    try:
        conn = UnixHTTPConnection(args.socket, args.timeout)
        conn.request(
            "POST",
            f"/benchctl/hooks/{args.event}",
            body=body,
            headers={
                "content-type": "application/json",
                "content-length": str(len(body)),
                "authorization": f"Bearer {os.environ.get(TOKEN_ENV, '')}",
            },
        )
        resp = conn.getresponse()
        answer = resp.read().decode("utf-8", errors="replace")
        conn.close()
        if resp.status != 200:
            raise OSError(f"host answered HTTP {resp.status}: {answer[:200]}")
        json.loads(answer)  # only ever print valid JSON to the CLI
    except (OSError, ValueError, http.client.HTTPException) as e:
        print(f"benchctl hook {args.event}: host unreachable ({e}); no policy applied", file=sys.stderr)
        answer = "{}"
    sys.stdout.write(answer)
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
