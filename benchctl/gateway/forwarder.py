#!/usr/bin/env python3
"""TCP -> unix socket forwarder, run INSIDE the sandbox with the image's own python3.

URL-only clients (Codex's provider config takes a base URL, not a socket) talk to
http://127.0.0.1:PORT; this forwards each TCP connection byte for byte to the gateway's unix
socket (its directory bind-mounted at /gateway: /gateway/gw.sock), so a `--network none` container still reaches
the gateway and nothing else.

    python3 /opt/benchctl/forwarder.py --port 8765 [--socket /gateway/gw.sock]

Prints one line `forwarding 127.0.0.1:PORT -> SOCKET` once listening (PORT 0 picks a free
port and the line names it), so the harness can wait for readiness. Standard library only,
no asyncio (starts in ~30 ms): one accept loop, two pump threads per connection. TCP_NODELAY
on the TCP side so SSE events are not held back by Nagle / delayed ACKs.

The harness puts this file into the sandbox (put_file or a read-only mount); on the host,
`FORWARDER_SOURCE` is its path and `forwarder_command()` builds the command line.
"""

import argparse
import os
import socket
import sys
import threading

DEFAULT_SOCKET = "/gateway/gw.sock"  # where a run mounts its gateway socket (run_body.SOCKET_NAME)
FORWARDER_SOURCE = os.path.abspath(__file__)
BUFSIZE = 65536


def forwarder_command(
    port: int, socket_path: str = DEFAULT_SOCKET, script: str = "/opt/benchctl/forwarder.py", python: str = "python3"
) -> list:
    """The in-sandbox command line that runs this forwarder. `-I -S`: no site import, no user
    site, no PYTHON* variables: it needs only the standard library and starts faster."""
    return [python, "-I", "-S", script, "--port", str(port), "--socket", socket_path]


def _pump(src: socket.socket, dst: socket.socket) -> None:
    try:
        while True:
            data = src.recv(BUFSIZE)
            if not data:
                break
            dst.sendall(data)
    except OSError:
        pass
    finally:
        try:
            dst.shutdown(socket.SHUT_WR)  # pass the half-close on: the other side sees EOF
        except OSError:
            pass


def _serve_one(client: socket.socket, socket_path: str) -> None:
    upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        upstream.connect(socket_path)
    except OSError as e:
        sys.stderr.write(f"forwarder: cannot connect to {socket_path}: {e}\n")
        client.close()
        upstream.close()
        return
    back = threading.Thread(target=_pump, args=(upstream, client), daemon=True)
    back.start()
    _pump(client, upstream)
    back.join()
    client.close()
    upstream.close()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Forward TCP 127.0.0.1:PORT to the gateway's unix socket.")
    parser.add_argument("--port", type=int, required=True)
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--socket", default=DEFAULT_SOCKET)
    args = parser.parse_args(argv)
    server = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    server.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    server.bind((args.host, args.port))
    server.listen(128)
    port = server.getsockname()[1]
    sys.stdout.write(f"forwarding {args.host}:{port} -> {args.socket}\n")
    sys.stdout.flush()
    while True:
        try:
            client, _ = server.accept()
        except KeyboardInterrupt:
            return 0
        client.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        threading.Thread(target=_serve_one, args=(client, args.socket), daemon=True).start()


if __name__ == "__main__":
    sys.exit(main())
