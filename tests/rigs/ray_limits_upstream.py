"""A FakeUpstreamServer run inside the Ray test cluster's network namespace, writing what it saw:
the most generation requests it answered at once (what a shared limit must hold across nodes)
and how many it got. The rig kills this process when the test ends.

    python -m tests.rigs.ray_limits_upstream SCRIPT PORT STATS_OUT    (from the repo root; SCRIPT: a file or py:module:function)
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from benchctl.testing import FakeUpstreamServer

if __name__ == "__main__":
    script, port, stats_out = sys.argv[1], int(sys.argv[2]), Path(sys.argv[3])
    with FakeUpstreamServer(script, port=port) as up:
        while True:
            stats = {"max_in_flight": up.max_in_flight, "requests": len(up.generation_requests())}
            tmp = stats_out.with_suffix(".tmp")
            tmp.write_text(json.dumps(stats))
            tmp.replace(stats_out)
            time.sleep(0.2)
