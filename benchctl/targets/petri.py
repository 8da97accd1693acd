"""Petri transcripts: AuditBench's thirteenth tool configuration. A Petri auditing run made
beforehand (its judge's summaries, scores and transcripts) is read from the task; the
investigator lists the summaries and opens transcripts by index. No model is called.

    [tools.petri]
    transcripts_file = "petri/top50.jsonl"   # one transcript per line, highest scored first:
    # {"summary": "...", "scores": {"concerning": 7, "unprompted_bizarre_behavior": 3},
    #  "transcript": "..." or [{"role": "user", "content": "..."}, ...]}

Tools: petri_summaries() -> every summary with its scores, numbered from 0;
petri_transcript(index) -> that transcript in full.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

TOOLS = ("petri_summaries", "petri_transcript")


class PetriError(ValueError):
    pass


@dataclass(frozen=True)
class PetriTranscript:
    summary: str
    scores: tuple[tuple[str, float], ...]
    transcript: str


def parse_petri(raw: Any, task_dir: Path, file: Path | str) -> tuple[PetriTranscript, ...]:
    """The [tools.petri] table -> its transcripts (empty without the table)."""
    if raw is None:
        return ()
    if not isinstance(raw, dict) or set(raw) != {"transcripts_file"} or not isinstance(raw["transcripts_file"], str):
        raise PetriError(
            f'{file}: key `tools.petri`: expected only transcripts_file = "path". Fix: '
            f'write [tools.petri] transcripts_file = "petri/transcripts.jsonl"'
        )
    path = (task_dir / raw["transcripts_file"]).resolve()
    if not path.is_file():
        raise PetriError(
            f"{file}: key `tools.petri.transcripts_file`: {path} does not exist. Fix: point it at a file "
            "relative to the task directory"
        )
    out = []
    for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
        if line.strip():
            out.append(_transcript(line, f"{path}: line {n}"))
    if not out:
        raise PetriError(f"{path}: no transcripts. Fix: one {{summary, scores, transcript}} object per line")
    return tuple(out)


def _transcript(line: str, where: str) -> PetriTranscript:
    fix = 'Fix: {"summary": "...", "scores": {"concerning": 7}, "transcript": "..." or [{"role", "content"}...]}'
    try:
        obj = json.loads(line)
    except ValueError as e:
        raise PetriError(f"{where}: not JSON ({e}). {fix}") from None
    if not isinstance(obj, dict) or not isinstance(obj.get("summary"), str):
        raise PetriError(f"{where}: key `summary`: expected a string. {fix}")
    scores = obj.get("scores", {})
    if not isinstance(scores, dict) or not all(
        isinstance(v, (int, float)) and not isinstance(v, bool) for v in scores.values()
    ):
        raise PetriError(f"{where}: key `scores`: expected a table of numbers. {fix}")
    body = obj.get("transcript")
    if isinstance(body, list) and all(isinstance(m, dict) and isinstance(m.get("content"), str) for m in body):
        text = "\n\n".join(f"{str(m.get('role', '?')).upper()}: {m['content']}" for m in body)
    elif isinstance(body, str):
        text = body
    else:
        raise PetriError(f"{where}: key `transcript`: expected a string or a list of messages. {fix}")
    return PetriTranscript(obj["summary"].strip(), tuple((str(k), float(v)) for k, v in scores.items()), text)


def specs(transcripts: tuple[PetriTranscript, ...], who: str) -> dict[str, dict[str, Any]]:
    n = len(transcripts)
    return {
        "petri_summaries": {
            "description": f"The summaries of {n} conversations an automated auditing agent (Petri) had with {who}, "
            "as its judge wrote them, with the judge's scores, highest scored first, numbered from 0.",
            "parameters": {"type": "object", "properties": {}},
        },
        "petri_transcript": {
            "description": f"The full transcript of one of the {n} Petri conversations (see petri_summaries).",
            "parameters": {
                "type": "object",
                "properties": {"index": {"type": "integer", "description": f"0 to {n - 1}"}},
                "required": ["index"],
            },
        },
    }


def run(name: str, args: dict[str, Any], transcripts: tuple[PetriTranscript, ...]) -> str:
    """A Petri tool's text; ValueError for a bad index."""
    if name == "petri_summaries":
        out = [f"{len(transcripts)} Petri transcripts, highest scored first:"]
        for i, t in enumerate(transcripts):
            scores = ", ".join(f"{k} {v:g}" for k, v in t.scores)
            out.append(f"[{i}]{f' ({scores})' if scores else ''} {t.summary}")
        return "\n\n".join(out)
    index = args.get("index")
    if isinstance(index, str) and index.strip().isdigit():
        index = int(index)
    if not isinstance(index, int) or isinstance(index, bool) or not 0 <= index < len(transcripts):
        raise ValueError(f"index must be an integer from 0 to {len(transcripts) - 1}, got {index!r}.")
    return f"Petri transcript [{index}]: {transcripts[index].summary}\n\n{transcripts[index].transcript}"
