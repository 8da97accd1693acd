#!/usr/bin/env python3
"""benchctl's agent-CLI hook, run *inside the sandbox* by Claude Code and Codex.

Stdlib only (it runs with the image's python3, mounted read-only at
/opt/benchctl/hooks/hook.py). The CLI pipes the hook input (JSON) to stdin; this script
POSTs it to the host over the gateway's unix socket at /benchctl/hooks/<event> and prints
whatever the host answers (the CLI's hook output JSON). All policy decisions are made on the
host (harnesses/hooks/host.py); this script only carries data.

    hook.py <event> --socket /gateway/gateway.sock [--file /work/report.md]

With `--file`, the text of the length-policy file travels along: for `stop` always (the
revision decision needs it), for `post_tool_use` only when the file changed since the last
hook call (size or mtime), whichever tool changed it (Write, Edit, Bash, apply_patch...).

If the host cannot be reached the hook prints `{}` (no effect) and exits 0, so a broken
gateway never wedges the agent; the host notices the missing hook events instead.
"""
from __future__ import annotations

import argparse
import hashlib
import http.client
import json
import os
import socket
import sys

MAX_FILE_BYTES = 2_000_000
STATE_DIR = os.environ.get("BENCHCTL_HOOK_STATE", "/tmp/benchctl-hooks")


class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        s.connect(self._path)
        self.sock = s


def _file_state(path: str) -> str | None:
    try:
        st = os.stat(path)
    except OSError:
        return None
    return f"{st.st_size}:{st.st_mtime_ns}"


def _changed_since_last(path: str) -> bool:
    """True when `path` differs from what the previous hook call saw (and remember it)."""
    state = _file_state(path)
    marker = os.path.join(STATE_DIR, hashlib.sha1(path.encode()).hexdigest()[:16])
    try:
        with open(marker) as f:
            before = f.read()
    except OSError:
        before = None
    if state == before:
        return False
    try:
        os.makedirs(STATE_DIR, exist_ok=True)
        with open(marker, "w") as f:
            f.write(state or "")
    except OSError:
        pass
    return state is not None


def _read(path: str) -> str | None:
    try:
        with open(path, "rb") as f:
            return f.read(MAX_FILE_BYTES).decode("utf-8", errors="replace")
    except OSError:
        return None


def main(argv: list[str]) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("event", choices=["post_tool_use", "stop"])
    ap.add_argument("--socket", default="/gateway/gateway.sock")
    ap.add_argument("--file", default=None)
    ap.add_argument("--cli", default="")
    ap.add_argument("--timeout", type=float, default=60.0)
    args = ap.parse_args(argv)

    raw = sys.stdin.read()
    try:
        hook_input = json.loads(raw) if raw.strip() else {}
    except ValueError:
        hook_input = {"_unparsed": raw[:10000]}
    payload: dict = {"event": args.event, "cli": args.cli, "input": hook_input, "file": None}
    if args.file:
        send = args.event == "stop" or _changed_since_last(args.file)
        if args.event == "stop":
            _changed_since_last(args.file)   # keep the marker current
        if send:
            payload["file"] = {"path": args.file, "text": _read(args.file)}

    body = json.dumps(payload).encode()
    try:
        conn = UnixHTTPConnection(args.socket, args.timeout)
        conn.request("POST", f"/benchctl/hooks/{args.event}", body=body,
                     headers={"content-type": "application/json", "content-length": str(len(body))})
        resp = conn.getresponse()
        answer = resp.read().decode("utf-8", errors="replace")
        conn.close()
        if resp.status != 200:
            raise OSError(f"host answered HTTP {resp.status}: {answer[:200]}")
        json.loads(answer)   # only ever print valid JSON to the CLI
    except (OSError, ValueError, http.client.HTTPException) as e:
        print(f"benchctl hook {args.event}: host unreachable ({e}); no policy applied", file=sys.stderr)
        answer = "{}"
    sys.stdout.write(answer)
    sys.stdout.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
