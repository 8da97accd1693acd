"""The real agent CLIs run against the scripted fake upstream (on the host, no sandbox): proof that
our Anthropic SSE drives Claude Code and our Responses SSE drives Codex through a tool call.
Skipped when the binaries (optional extras) are not installed."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from benchctl.binaries import find_claude, find_codex
from benchctl.gateway.scripted import ScriptRequest
from benchctl.testing import FakeUpstreamServer

pytestmark = pytest.mark.cli_binaries


def _base_env(home: Path) -> dict[str, str]:
    return {"PATH": os.environ.get("PATH", "/usr/bin:/bin"), "HOME": str(home), "LANG": "C.UTF-8"}


def test_claude_code_follows_scripted_tool_call(tmp_path: Path) -> None:
    claude = find_claude()
    if claude is None:
        pytest.skip("Claude Code binary not installed (pip install 'benchctl[claude-code]')")
    work = tmp_path / "work"
    work.mkdir()
    script = {
        "turns": [
            {
                "text": "Writing it.",
                "tool_calls": [
                    {
                        "name": "Bash",
                        "input": {"command": f"echo scripted-ok > {work}/out.txt", "description": "write file"},
                    }
                ],
            },
            {"text": "Done: wrote out.txt.", "chunks": 4},
        ]
    }
    with FakeUpstreamServer(script) as up:
        env = {
            **_base_env(tmp_path),
            "ANTHROPIC_BASE_URL": up.url,
            "ANTHROPIC_API_KEY": "sk-ant-dummy-0000",
            "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
            "DISABLE_TELEMETRY": "1",
            "DISABLE_ERROR_REPORTING": "1",
            "DISABLE_AUTOUPDATER": "1",
            "IS_SANDBOX": "1",
        }
        p = subprocess.run(
            [
                str(claude.path),
                "-p",
                "write the file",
                "--output-format",
                "stream-json",
                "--verbose",
                "--model",
                "claude-sonnet-5-5",
                "--permission-mode",
                "bypassPermissions",
            ],
            env=env,
            cwd=work,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=180,
        )
        gen = up.generation_requests()
    assert p.returncode == 0, p.stderr[-2000:]
    assert (work / "out.txt").read_text() == "scripted-ok\n"
    assert '"result":"Done: wrote out.txt."' in p.stdout
    assert len(gen) == 2 and gen[0].body["stream"] is True
    # the second request carries the tool result for the id we generated
    tool_results = [
        b
        for m in gen[1].body["messages"]
        if isinstance(m["content"], list)
        for b in m["content"]
        if b.get("type") == "tool_result"
    ]
    assert tool_results and tool_results[-1]["tool_use_id"].startswith("toolu_")


def test_codex_follows_scripted_tool_call(tmp_path: Path) -> None:
    codex = find_codex()
    if codex is None:
        pytest.skip("Codex binary not installed (pip install 'benchctl[codex]')")
    work = tmp_path / "work"
    work.mkdir()
    offered: list[list[str]] = []

    def agent(req: ScriptRequest) -> dict:
        offered.append(req.tool_names)
        if not any(m["role"] == "tool" for m in req.messages):
            # Codex offers `exec_command` (cmd string) or the older `shell` (argv list) by model family.
            if "shell" in req.tool_names:
                return {
                    "tool_calls": [
                        {"name": "shell", "input": {"command": ["bash", "-lc", f"echo scripted-ok > {work}/out.txt"]}}
                    ]
                }
            return {
                "text": "Writing.",
                "tool_calls": [{"name": "exec_command", "input": {"cmd": f"echo scripted-ok > {work}/out.txt"}}],
            }
        return {"text": "Done.", "chunks": 3}

    with FakeUpstreamServer(agent) as up:
        env = {**_base_env(tmp_path), "CODEX_HOME": str(tmp_path), "GW_KEY": "dummy-key"}
        provider = f'model_providers.gw={{name="gw",base_url="{up.url}/v1",env_key="GW_KEY",wire_api="responses"}}'
        p = subprocess.run(
            [
                str(codex.path),
                "exec",
                "--json",
                "--skip-git-repo-check",
                "--dangerously-bypass-approvals-and-sandbox",
                "-m",
                "gpt-5",
                "-c",
                "model_provider=gw",
                "-c",
                provider,
                "write the file",
            ],
            env=env,
            cwd=work,
            stdin=subprocess.DEVNULL,
            capture_output=True,
            text=True,
            timeout=180,
        )
        gen = up.generation_requests()
    assert p.returncode == 0, p.stderr[-2000:]
    assert (work / "out.txt").read_text() == "scripted-ok\n", (offered, p.stdout[-2000:])
    assert '"type":"turn.completed"' in p.stdout and '"text":"Done."' in p.stdout
    assert gen[0].headers["authorization"] == "Bearer dummy-key"
    outputs = [it for it in gen[-1].body["input"] if it.get("type") == "function_call_output"]
    assert outputs and outputs[0]["call_id"].startswith("call_")
