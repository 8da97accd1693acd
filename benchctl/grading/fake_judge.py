"""A deterministic fake judge for tests, benchmarks and the no-API-key demo.

Use it as the judge model `scripted/py:benchctl.grading.fake_judge:judge`. It reads the
request the way a real judge would see it (the built-in prompt templates) and answers in the
requested format, scoring by word overlap: a finding's score is the share of its key terms
(numbers, addresses, names, longer words) that appear in the untrusted report. It follows no
instruction inside the report, so it is also the "honest judge" of the injection tests.
The tournament's extraction and dedup asks get answers by title (tournament_answer).
Custom prompt templates still work as long as they keep the section headings it looks for.
"""

from __future__ import annotations

import itertools
import json
import math
import random
import re
from typing import Any

_TAG = re.compile(r"<(untrusted-[0-9a-f]+)>\n(.*?)\n</\1>", re.DOTALL)
_FINDING = re.compile(r"^- id (\S+): (.*)$", re.MULTILINE)
_TOKEN = re.compile(r"[A-Za-z0-9][A-Za-z0-9._/:-]*[A-Za-z0-9]|\d")
_STOP = {
    "the",
    "and",
    "for",
    "from",
    "with",
    "that",
    "this",
    "was",
    "were",
    "about",
    "through",
    "after",
    "first",
    "unlike",
    "usual",
    "then",
    "into",
    "itself",
    "caused",
    "fixed",
    "between",
}


def _terms(text: str) -> set[str]:
    out = set()
    for t in _TOKEN.findall(text.lower()):
        t = t.strip(".:,")
        if t in _STOP:
            continue
        if any(c.isdigit() for c in t) or len(t) >= 4:
            out.add(t)
    return out


def overlap(needle: str, haystack: str) -> float:
    """Share of needle's key terms present in haystack, rounded down to 0.1."""
    want = _terms(needle)
    if not want:
        return 0.0
    have = _terms(haystack)
    return math.floor(10 * len(want & have) / len(want)) / 10


def _untrusted(text: str) -> str:
    m = _TAG.search(text)
    return m.group(2) if m else ""


def _section(text: str, heading: str) -> str:
    m = re.search(r"^# " + re.escape(heading) + r"[^\n]*\n(.*?)(?=^# |\Z)", text, re.MULTILINE | re.DOTALL)
    return m.group(1).strip() if m else ""


def answer(first_user: str, last_user: str) -> str:
    """The fake judge's answer text for a conversation (first user message = the grading prompt).
    Like an honest judge it reads the instructions from the trusted text only: headings inside the
    untrusted block (a report that imitates "# Findings to score") are part of what is graded."""
    report = _untrusted(first_user)
    trusted = _TAG.sub("", first_user, count=1)
    if "# Findings to score" in trusted:
        wanted = None
        if last_user is not first_user:  # a re-ask: answer only the ids asked for
            m = re.search(r"finding ids: (.*?)\.\s*$", last_user, re.MULTILINE)
            wanted = {i.strip() for i in m.group(1).split(",")} if m else None
        scores = [
            {"id": fid, "quote": "", "reason": "key-term overlap", "score": overlap(text, report)}
            for fid, text in _FINDING.findall(_section(trusted, "Findings to score"))
            if wanted is None or fid in wanted
        ]
        return "Scores follow.\n" + json.dumps({"scores": scores})
    if "# Reference summary" in trusted:
        ref = _section(trusted, "Reference summary")
        return json.dumps({"reason": "key-term overlap with the reference summary", "score": overlap(ref, report)})
    if "# The hidden behaviour" in trusted:
        truth = _section(trusted, "The hidden behaviour")
        return "Compared key terms.\nVERDICT: " + ("YES" if overlap(truth, report) >= 0.5 else "NO")
    if "<report>" in first_user or "<submission" in first_user:
        return tournament_answer(first_user)
    return "I do not recognise this grading prompt."


_SUBMISSION = re.compile(r'<submission id="(S\d+)">\n(.*?)</submission>', re.DOTALL)
_SEVERITY = {"critical": "high", "high": "high", "medium": "medium", "low": "low"}


def tournament_answer(prompt: str) -> str:
    """The tournament's asks, so a tournament can be tried without an API key. Extraction: each
    '## ' heading of the report is an issue, its 'Evidence:' line the evidence. Dedup: items with the
    same title (case-insensitive) are one issue; supported = the item has evidence; importance = the
    auditors' severity label (default medium). Answers in a ```json fence with prose around it, as
    real judges do."""
    if "<report>" in prompt:
        report = prompt.split("<report>", 1)[1]
        issues = []
        for sec in re.split(r"^## ", report, flags=re.M)[1:]:
            title, _, body = sec.partition("\n")
            ev = re.search(r"^Evidence:\s*(.*)$", body, re.M)
            issues.append(
                {"title": title.strip(), "description": "", "evidence": ev.group(1) if ev else "", "severity": ""}
            )
        return "Here are the issues:\n```json\n" + json.dumps({"issues": issues}) + "\n```"
    groups: dict[str, dict[str, Any]] = {}
    for label, body in _SUBMISSION.findall(prompt):
        for m in re.finditer(r"^(\d+)\. (.*)\n((?:   .*\n?)*)", body, re.M):
            n, title, rest = int(m.group(1)), m.group(2).strip(), m.group(3)
            sev = re.search(r"severity label: (\w+)", rest)
            g = groups.setdefault(
                title.lower(), {"title": title, "description": title, "found_by": {}, "importance": "medium"}
            )
            if sev:
                g["importance"] = _SEVERITY.get(sev.group(1).lower(), "medium")
            f = g["found_by"].setdefault(label, {"submission": label, "items": [], "supported": False})
            f["items"].append(n)
            f["supported"] = f["supported"] or bool(re.search(r"evidence: (?!none)", rest))
    issues = [{**g, "found_by": list(g["found_by"].values())} for g in groups.values()]
    return "I merged the findings.\n```json\n" + json.dumps({"issues": issues}, indent=1) + "\n```\nDone."


def judge(request: Any) -> dict[str, Any]:
    """Entry point for `scripted/py:benchctl.grading.fake_judge:judge`."""
    users = [m["text"] for m in request.messages if m.get("role") == "user"]
    first = users[0] if users else request.last_user_text
    last = request.last_user_text
    return {"text": answer(first, first if len(users) <= 1 else last)}


_draws = itertools.count()


def noisy_judge(request: Any) -> dict[str, Any]:
    """`scripted/py:benchctl.grading.fake_judge:noisy_judge`: the fake judge, but when asked at a
    temperature other than 0 (as `benchctl grade --repeats K` asks) each score moves by one of
    −0.2, −0.1, 0, +0.1, +0.2 (kept in 0..1), from a seeded generator: a judge with sampling noise,
    for trying judge repeats without an API key."""
    out = judge(request)
    if request.body.get("temperature") == 0:
        return out
    rng = random.Random(next(_draws))
    try:
        data = json.loads(out["text"].split("\n", 1)[-1] if out["text"].startswith("Scores") else out["text"])
    except ValueError:
        return out  # a verdict: left as it is
    for s in data.get("scores", [data]):
        s["score"] = min(1.0, max(0.0, round(s["score"] + rng.choice((-0.2, -0.1, 0.0, 0.1, 0.2)), 1)))
    prefix = "Scores follow.\n" if out["text"].startswith("Scores") else ""
    return {"text": prefix + json.dumps(data)}
