"""scripts/check_internals_gpu.py: on a machine without a GPU it says so and exits 0; with --tiny it
serves the tiny model on CPU and reports every tool's latency (what a GPU run prints for a real model)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "check_internals_gpu.py"


def run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True, timeout=300)


def test_without_a_gpu_there_is_nothing_to_measure():
    import torch

    if torch.cuda.is_available():  # a machine with a GPU measures instead (the tiny run below still checks it)
        return
    r = run("--model", "/nonexistent")
    assert r.returncode == 0 and "no GPU here: nothing to measure" in r.stdout


def test_tiny_run_reports_every_tool(tmp_path):
    out = tmp_path / "numbers.json"
    r = run("--tiny", "--n", "1", "--max-tokens", "4", "--batch", "2", "--samples", "1", "--json", str(out))
    assert r.returncode == 0, r.stderr
    numbers = json.loads(out.read_text())
    tools = numbers["tools"]
    assert list(tools) == [
        "steering_vector (1 pair)",
        "generate (4 tokens)",
        "steered_chat (plain + steered)",
        "generate x2 concurrent",
        "logit_lens (layer 2)",
        "sae_features (layer 2, top 50)",
        "ask_latent_question (1 samples per position, layer 2)",
    ]
    assert all(t["latency_s"] > 0 for t in tools.values())
    assert tools["generate (4 tokens)"]["tokens_per_s"] > 0 and tools["steered_chat (plain + steered)"]["compute_s"] > 0
    assert numbers["device"] == "cpu" and "generate (4 tokens)" in r.stdout
