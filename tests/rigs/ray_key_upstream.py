"""A FakeUpstreamServer run inside the Ray test cluster's network namespace (the nodes' gateways
must reach it on the namespace's loopback). It writes the API keys it received to a file, so a
test can check that the driver's key reached the node's gateway — and nothing else.

    python tests/rigs/ray_key_upstream.py SCRIPT PORT KEYS_OUT
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from benchctl.testing import FakeUpstreamServer

if __name__ == "__main__":
    script, port, keys_out = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3])
    with FakeUpstreamServer(json.loads(Path(script).read_text()), port=port) as up:
        while True:  # the rig kills this process when the test ends
            keys = sorted({r.headers.get("x-api-key", "") for r in up.generation_requests()})
            keys_out.write_text(json.dumps(keys))
            time.sleep(0.2)
