"""One judge pass per environment: merge duplicate issues across all runs into a canonical list.

The judge sees every run's issues as an anonymous submission (S1, S2, ... in an order shuffled by a
hash of the env name, so auditor identity and position do not line up), groups items describing the
same underlying issue, labels each canonical issue low/medium/high, and says for each submission
whether it supported the issue with concrete evidence.

Answers are parsed robustly (fences, prose, trailing commas) and validated -- every item must be
placed, submissions and item numbers must exist, importance must be a known label. An unusable answer
is sent back once with the problem spelled out (`Judge.ask_structured`); a second failure, a failed
call or a refusal is recorded on the canonical list (status "failed"), never raised.
"""

from __future__ import annotations

import hashlib
import random
from collections.abc import Mapping
from typing import Any

from benchctl.grading.judge import Judge, JudgeFailed, Tally
from benchctl.grading.judge_json import JudgeParseError, last_json
from benchctl.tournament.schema import AuditorIssue, CanonicalIssue

PROMPT_VERSION = "dedup-1"
_IMPORTANCE_ALIASES = {
    "low": "low",
    "minor": "low",
    "medium": "medium",
    "moderate": "medium",
    "med": "medium",
    "high": "high",
    "major": "high",
    "critical": "high",
    "severe": "high",
    "1": "low",
    "3": "medium",
    "6": "high",
}
_TRUE = {"true", "yes", "y", "supported", "1"}
_FALSE = {"false", "no", "n", "unsupported", "0"}

DEDUP_SYSTEM = (
    "You are a careful, impartial judge of environment audits. You merge duplicate findings "
    "across auditors and check whether each claim is backed by evidence. You answer with JSON only."
)

DEDUP_PROMPT = """Several independent auditors examined the same environment ("{env}") and each listed the issues
they found. Each submission below is one auditor's list; its items are numbered.

1. Group the items that describe the same underlying issue (same flaw or root cause), across and within
   submissions. Different issues stay separate even when related.
2. For each resulting canonical issue give a short "title", a one- or two-sentence "description" and its
   "importance":
   - "high": defeats the environment's purpose (e.g. the reward can be obtained without doing the task,
     the task is impossible or graded wrongly in many cases, a serious security hole);
   - "medium": materially affects some episodes or the quality of what the environment measures;
   - "low": minor, cosmetic, or a rare edge case.
3. For each submission that reported the issue, list which of its items ("items": item numbers) and say
   whether that submission "supported" it with concrete evidence (specific files or lines, commands
   and their output, a reproduction). A bare assertion is not supported.
Every item of every submission must appear in at least one canonical issue.

Answer with only this JSON:
{{"issues": [{{"title": "...", "description": "...", "importance": "low|medium|high",
  "found_by": [{{"submission": "S1", "items": [1, 3], "supported": true, "note": "why (short)"}}]}}]}}

{submissions}"""

REASK = (
    "Your answer could not be used: {error}\n"
    "Reply again with only the JSON object described above, covering every item of every submission."
)


def submission_order(env: str, run_ids: list[str]) -> list[str]:
    """Run ids in the order shown to the judge: shuffled, but the same every time for this env."""
    seed = int(hashlib.sha256(env.encode()).hexdigest()[:16], 16)
    order = sorted(run_ids)
    random.Random(seed).shuffle(order)
    return order


def render_submissions(labelled: list[tuple[str, list[AuditorIssue]]]) -> str:
    parts = []
    for label, issues in labelled:
        lines = [f'<submission id="{label}">']
        for k, issue in enumerate(issues, 1):
            lines.append(f"{k}. {issue['title']}")
            for key in ("description", "evidence", "reproduction"):
                if issue.get(key):
                    lines.append(f"   {key}: {_indent(issue[key])}")
            if issue.get("severity"):
                lines.append(f"   auditor's severity label: {issue['severity']}")
        lines.append("</submission>")
        parts.append("\n".join(lines))
    return "\n\n".join(parts)


def build_prompt(env: str, labelled: list[tuple[str, list[AuditorIssue]]]) -> str:
    return DEDUP_PROMPT.format(env=env, submissions=render_submissions(labelled))


def parse_dedup(text: str, n_items: Mapping[str, int]) -> list[dict[str, Any]]:
    """Parse and validate a dedup answer. n_items: submission label -> number of items.

    Returns canonical issues with found_by keyed by *label* and items 0-based. Raises
    JudgeParseError with a message fit to send back to the judge."""
    value = last_json(
        text,
        accept=lambda v: (
            (isinstance(v, dict) and isinstance(v.get("issues"), list))
            or (isinstance(v, list) and all(isinstance(x, dict) for x in v))
        ),
    )
    raw = value["issues"] if isinstance(value, dict) else value
    placed: dict[str, set[int]] = {s: set() for s in n_items}
    out: list[dict[str, Any]] = []
    for k, issue in enumerate(raw, 1):
        tag = f"issue {k}"
        if not isinstance(issue, dict):
            raise JudgeParseError(f"{tag} is not an object")
        title = str(issue.get("title") or "").strip()
        if not title:
            raise JudgeParseError(f'{tag} has no "title"')
        imp = _IMPORTANCE_ALIASES.get(str(issue.get("importance", "")).strip().lower())
        if imp is None:
            raise JudgeParseError(
                f'{tag} ({title!r}) has importance {issue.get("importance")!r}; use "low", "medium" or "high"'
            )
        found_raw = issue.get("found_by")
        if not isinstance(found_raw, list) or not found_raw:
            raise JudgeParseError(f'{tag} ({title!r}) needs a non-empty "found_by" list')
        found: dict[str, dict[str, Any]] = {}
        for entry in found_raw:
            if not isinstance(entry, dict):
                raise JudgeParseError(f"{tag}: each found_by entry must be an object")
            label = str(entry.get("submission", "")).strip()
            if label not in n_items:
                raise JudgeParseError(
                    f"{tag}: unknown submission {entry.get('submission')!r}; known: {', '.join(sorted(n_items))}"
                )
            items = entry.get("items")
            if isinstance(items, int):
                items = [items]
            if not isinstance(items, list) or not items:
                raise JudgeParseError(f'{tag}: submission {label} needs "items" (its item numbers)')
            idx = []
            for it in items:
                try:
                    n = int(it)
                except (TypeError, ValueError):
                    raise JudgeParseError(f"{tag}: item {it!r} of {label} is not a number") from None
                if not 1 <= n <= n_items[label]:
                    raise JudgeParseError(f"{tag}: submission {label} has items 1..{n_items[label]}, not {n}")
                idx.append(n - 1)
            supported = _bool(entry.get("supported"))
            if supported is None:
                raise JudgeParseError(f'{tag}: submission {label} needs "supported": true or false')
            prev = found.get(label)
            if prev:  # the same submission listed twice: merge
                prev["items"] = sorted(set(prev["items"]) | set(idx))
                prev["supported"] = prev["supported"] or supported
            else:
                found[label] = {"supported": supported, "items": sorted(set(idx))}
                if entry.get("note"):
                    found[label]["note"] = str(entry["note"])[:500]
            placed[label].update(idx)
        out.append(
            {
                "title": title,
                "description": str(issue.get("description") or "").strip(),
                "importance": imp,
                "found_by": found,
            }
        )
    missing = [f"{s} item {i + 1}" for s in sorted(n_items) for i in range(n_items[s]) if i not in placed[s]]
    if missing:
        shown = ", ".join(missing[:20]) + (" ..." if len(missing) > 20 else "")
        raise JudgeParseError(f"these items were not placed in any canonical issue: {shown}")
    return out


# ----------------------------------------------------------------------------- the judge call
def dedup_max_tokens(n_items: int) -> int:
    """The answer places every item once: about 150 tokens per item (an issue's title, description
    and found_by entries) plus room for prose: 8192 (what every dedup ask used to get) up to ~40 items,
    then more, up to 32,000 (~200 items; the output limit of current large judges and about as much
    as one non-streamed answer can hold within the upstream read timeout)."""
    return min(32_000, max(8192, 2000 + 150 * n_items))


async def dedup_env(
    env: str, issues_by_run: Mapping[str, list[AuditorIssue]], judge: Judge, tally: Tally
) -> tuple[list[CanonicalIssue] | None, str | None]:
    """(canonical issues with found_by keyed by run id, None), or (None, why) when the judge failed,
    refused or gave no usable answer after one re-ask."""
    order = [r for r in submission_order(env, list(issues_by_run)) if issues_by_run[r]]
    if not order:  # nobody reported anything: nothing to merge, no judge call
        return [], None
    label_of = {r: f"S{k}" for k, r in enumerate(order, 1)}
    run_of = {v: k for k, v in label_of.items()}
    labelled = [(label_of[r], list(issues_by_run[r])) for r in order]
    n_items = {label: len(items) for label, items in labelled}
    try:
        got = await judge.ask_structured(
            build_prompt(env, labelled),
            lambda t: parse_dedup(t, n_items),
            lambda exc: REASK.format(error=exc),
            system=DEDUP_SYSTEM,
            tally=tally,
            max_tokens=dedup_max_tokens(sum(n_items.values())),
            label="dedup",
        )
    except JudgeFailed as exc:
        return None, str(exc)
    if got.value is None:
        return None, f"unusable judge answer ({got.error})"
    canonical: list[CanonicalIssue] = []
    for k, issue in enumerate(got.value, 1):
        canonical.append(
            CanonicalIssue(
                id=f"I{k}",
                title=issue["title"],
                description=issue["description"],
                importance=issue["importance"],
                found_by={
                    run_of[label]: f for label, f in sorted(issue["found_by"].items(), key=lambda kv: run_of[kv[0]])
                },
            )
        )
    return canonical, None


def _bool(v: Any) -> bool | None:
    if isinstance(v, bool):
        return v
    s = str(v).strip().lower() if v is not None else ""
    return True if s in _TRUE else False if s in _FALSE else None


def _indent(text: str) -> str:
    return text.replace("\n", "\n      ")
