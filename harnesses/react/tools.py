"""The ReAct agent's tools, executed inside the sandbox through the Sandbox protocol.

bash (per-command timeout), python, view / create / edit a file, and submit. Paths are
relative to /work unless absolute. Outputs shown to the model are capped (head and tail kept)
so one `cat` of a big log cannot blow the context window.
"""

from __future__ import annotations

import posixpath
import shlex
from dataclasses import dataclass
from typing import Any

from benchctl.output_cap import head_and_tail
from benchctl.sandbox.base import WORK_DIR, Sandbox

MAX_OUTPUT_CHARS = 20_000

TOOL_SPECS: list[dict[str, Any]] = [
    {
        "name": "bash",
        "description": "Run a bash command in the sandbox (cwd /work; task data is read-only in /data; no network). "
        "Returns stdout, stderr and the exit code.",
        "parameters": {
            "type": "object",
            "properties": {
                "command": {"type": "string", "description": "The command line."},
                "timeout": {"type": "number", "description": "Seconds before the command is killed (optional)."},
            },
            "required": ["command"],
        },
    },
    {
        "name": "python",
        "description": "Run a Python 3 program in the sandbox (cwd /work) and return its output.",
        "parameters": {"type": "object", "properties": {"code": {"type": "string"}}, "required": ["code"]},
    },
    {
        "name": "view",
        "description": "Show a file with line numbers (optionally a [start, end] line range) or list a directory.",
        "parameters": {
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "view_range": {
                    "type": "array",
                    "items": {"type": "integer"},
                    "description": "[first_line, last_line], 1-based",
                },
            },
            "required": ["path"],
        },
    },
    {
        "name": "create",
        "description": "Create or overwrite a file with the given text.",
        "parameters": {
            "type": "object",
            "properties": {"path": {"type": "string"}, "file_text": {"type": "string"}},
            "required": ["path", "file_text"],
        },
    },
    {
        "name": "edit",
        "description": "Replace the single occurrence of old_str in a file with new_str (old_str must be unique).",
        "parameters": {
            "type": "object",
            "properties": {"path": {"type": "string"}, "old_str": {"type": "string"}, "new_str": {"type": "string"}},
            "required": ["path", "old_str", "new_str"],
        },
    },
    {
        "name": "submit",
        "description": "Call when your work is complete and your files are written.",
        "parameters": {"type": "object", "properties": {"summary": {"type": "string"}}},
    },
]
TOOL_NAMES = {t["name"] for t in TOOL_SPECS}


@dataclass
class ToolOutcome:
    output: str
    is_error: bool = False
    exit_code: int | None = None
    timed_out: bool = False
    truncated: bool = False
    written_path: str | None = None  # absolute path of a file created/edited (length policy)
    submit: bool = False
    rejected: str | None = None  # not run: "unknown_tool" or "invalid_input"


def resolve(path: str) -> str:
    return posixpath.normpath(path if path.startswith("/") else posixpath.join(WORK_DIR, path))


class ToolBox:
    def __init__(self, sandbox: Sandbox, default_timeout: float = 120.0) -> None:
        self.sandbox = sandbox
        self.default_timeout = default_timeout

    def run(self, name: str, args: dict[str, Any], time_left: float) -> ToolOutcome:
        if name not in TOOL_NAMES:
            return ToolOutcome(
                f"Unknown tool {name!r}. Available: {', '.join(sorted(TOOL_NAMES))}.",
                is_error=True,
                rejected="unknown_tool",
            )
        if not isinstance(args, dict):
            return ToolOutcome(
                f"Tool input must be a JSON object, got {type(args).__name__}.", is_error=True, rejected="invalid_input"
            )
        try:
            return getattr(self, "_" + name)(args, time_left)
        except KeyError as e:
            return ToolOutcome(f"Missing argument {e} for tool {name}.", is_error=True, rejected="invalid_input")
        except Exception as e:  # a tool failure is information for the agent, not a crash
            return ToolOutcome(f"{name} failed: {type(e).__name__}: {e}", is_error=True)

    def _timeout(self, asked: Any, time_left: float) -> float:
        t = self.default_timeout
        if isinstance(asked, (int, float)) and asked > 0:
            t = min(float(asked), t)
        return max(1.0, min(t, time_left + 1.0))

    def _exec(self, cmd: list[str], timeout: float) -> ToolOutcome:
        r = self.sandbox.exec(cmd, timeout=timeout, workdir=WORK_DIR)
        parts = []
        if r.stdout:
            parts.append(r.stdout.rstrip("\n"))
        if r.stderr:
            parts.append("[stderr]\n" + r.stderr.rstrip("\n"))
        if r.timed_out:
            parts.append(f"[killed after {timeout:.0f}s timeout]")
        parts.append(f"[exit code: {r.exit_code}]")
        text, cut = head_and_tail("\n".join(parts), MAX_OUTPUT_CHARS)
        return ToolOutcome(
            text,
            is_error=bool(r.timed_out or r.exit_code),
            exit_code=r.exit_code,
            timed_out=r.timed_out,
            truncated=cut or r.truncated,
        )

    def _bash(self, a: dict[str, Any], time_left: float) -> ToolOutcome:
        return self._exec(["bash", "-c", str(a["command"])], self._timeout(a.get("timeout"), time_left))

    def _python(self, a: dict[str, Any], time_left: float) -> ToolOutcome:
        return self._exec(["python3", "-c", str(a["code"])], self._timeout(None, time_left))

    def _view(self, a: dict[str, Any], time_left: float) -> ToolOutcome:
        path = resolve(str(a["path"]))
        probe = self.sandbox.exec(["bash", "-c", f"test -d {shlex.quote(path)}"], timeout=10)
        if probe.exit_code == 0:
            return self._exec(["ls", "-la", path], self._timeout(None, time_left))
        text = self.sandbox.get_file(path, max_bytes=5_000_000).decode("utf-8", errors="replace")
        lines = text.splitlines()
        start, end = 1, len(lines)
        rng = a.get("view_range")
        if isinstance(rng, list) and len(rng) == 2 and all(isinstance(x, int) for x in rng):
            start = max(1, rng[0])
            end = len(lines) if rng[1] == -1 else min(len(lines), rng[1])
        body = "\n".join(f"{i:6d}\t{lines[i - 1]}" for i in range(start, end + 1))
        out, cut = head_and_tail(body, MAX_OUTPUT_CHARS)
        return ToolOutcome(out or "(empty file)", truncated=cut)

    def _create(self, a: dict[str, Any], time_left: float) -> ToolOutcome:
        path = resolve(str(a["path"]))
        data = str(a["file_text"]).encode()
        self.sandbox.exec(["mkdir", "-p", posixpath.dirname(path)], timeout=10)
        self.sandbox.put_file(path, data)
        return ToolOutcome(f"Wrote {len(data)} bytes to {path}.", written_path=path)

    def _edit(self, a: dict[str, Any], time_left: float) -> ToolOutcome:
        path = resolve(str(a["path"]))
        old, new = str(a["old_str"]), str(a["new_str"])
        text = self.sandbox.get_file(path, max_bytes=5_000_000).decode("utf-8")
        n = text.count(old) if old else 0
        if n != 1:
            why = "was not found" if n == 0 else f"occurs {n} times; include more context to make it unique"
            return ToolOutcome(f"No edit made: old_str {why} in {path}.", is_error=True)
        self.sandbox.put_file(path, text.replace(old, new, 1).encode())
        return ToolOutcome(f"Edited {path}.", written_path=path)

    def _submit(self, a: dict[str, Any], time_left: float) -> ToolOutcome:
        return ToolOutcome("Submission received.", submit=True)
