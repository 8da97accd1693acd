"""What a verifier run leaves, read back: its verdict (artifacts/verdict.json) and its tool calls
with their outputs (transcript.jsonl), as the `verification` of a canonical issue."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import orjson

from benchctl.jsonio import read_jsonl
from benchctl.layout import ARTIFACTS, FINAL_STATUSES, TRANSCRIPT, read_meta, run_dir
from benchctl.output_cap import head_and_tail
from benchctl.tournament.schema import VERDICTS, Verification, VerifierCommand
from benchctl.tournament.verify_prompt import VERDICT_FILE

MAX_TEXT = 2000  # characters of one command, or of its output, kept in the canonical list
MAX_REASON = 4000


def unverified(reason: str, run_id: str | None = None, commands: list[VerifierCommand] | None = None) -> Verification:
    return Verification(verdict=None, reason=reason, verifier_run=run_id, commands=commands or [])


def read_verification(root: Path, run_id: str, not_run: str | None = None) -> Verification:
    """The verification a verifier run left: its verdict file, and its tool calls with their outputs."""
    path = run_dir(root, run_id)
    meta = read_meta(path) if path.is_dir() else None
    if meta is None:
        why = not_run or "the verifier run did not finish"
        return unverified(f"not verified: {why}", run_id if path.is_dir() else None)
    commands = commands_of(path / TRANSCRIPT)
    verdict, reason = read_verdict(path / ARTIFACTS / VERDICT_FILE)
    if verdict is None:
        ended = f"{meta.get('status')}" + (f" ({meta['error']})" if meta.get("error") else "")
        return unverified(f"not verified: {reason}; the verifier run ended {ended}", run_id, commands)
    return Verification(verdict=verdict, reason=reason, verifier_run=run_id, commands=commands)  # type: ignore[typeddict-item]


def read_verdict(path: Path) -> tuple[str | None, str]:
    """(verdict, reason) from a verdict.json, or (None, what is wrong with it)."""
    try:
        data = orjson.loads(path.read_bytes())
    except FileNotFoundError:
        return None, f"the verifier wrote no /work/{VERDICT_FILE}"
    except orjson.JSONDecodeError as e:
        return None, f"/work/{VERDICT_FILE} is not JSON ({e})"
    verdict = str(data.get("verdict", "")).strip().lower() if isinstance(data, dict) else ""
    if verdict not in VERDICTS:
        return None, f'/work/{VERDICT_FILE} has no "verdict" of {", ".join(VERDICTS)}'
    return verdict, str(data.get("reason") or "")[:MAX_REASON]


def commands_of(transcript: Path) -> list[VerifierCommand]:
    """Every tool call of a verifier run, in order, with its exit code and (cut) output."""
    calls: dict[str, dict[str, Any]] = {}
    out: list[VerifierCommand] = []
    try:
        events = read_jsonl(transcript)
    except OSError:
        return out
    for ev in events:
        if ev.get("type") == "tool_call":
            calls[str(ev.get("id"))] = ev
        elif ev.get("type") == "tool_result" and str(ev.get("id")) in calls:
            call = calls.pop(str(ev.get("id")))
            out.append(_command(call, ev.get("exit_code"), str(ev.get("output") or "")))
    return out + [_command(call, None, "(no result: the run ended first)") for call in calls.values()]


def _command(call: dict[str, Any], exit_code: Any, output: str) -> VerifierCommand:
    inp = call.get("input")
    if isinstance(inp, dict) and isinstance(inp.get("command" if call.get("name") == "bash" else "code"), str):
        text = inp["command" if call.get("name") == "bash" else "code"]
    else:
        text = orjson.dumps(inp).decode()
    return VerifierCommand(
        tool=str(call.get("name")),
        command=head_and_tail(text, MAX_TEXT)[0],
        exit_code=exit_code if isinstance(exit_code, int) else None,
        output=head_and_tail(output, MAX_TEXT)[0],
    )


def settled(path: Path) -> bool:
    """A finished verifier run with a usable verdict: its verification is reused as it is."""
    meta = read_meta(path) if path.is_dir() else None
    return bool(meta and meta.get("status") in FINAL_STATUSES and read_verdict(path / ARTIFACTS / VERDICT_FILE)[0])
