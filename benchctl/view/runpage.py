"""The run page's data: the header facts, a window of the timeline, the minimap, search hits.

Only a window of `WINDOW` events is rendered per request (more are fetched as the reader scrolls
or follows a deep link), so a page costs the same for a 100-event and a 100,000-event run once
the transcript is indexed (`transcript_index`).
"""

from __future__ import annotations

import bisect
import math
import os
from typing import Any

from benchctl.jsonio import read_json
from benchctl.layout import RUNS
from benchctl.report.aggregate import Options, config_of, field_of, wait_share
from benchctl.report.contests import target_cost
from benchctl.report.load import Run
from benchctl.run.progress import _tokens
from benchctl.task_prompt import TaskPrompt, find_prompt
from benchctl.view import render
from benchctl.view.events import LANES, EventView, category, minimap, once_each, prepare, texts
from benchctl.view.live import sweep_active
from benchctl.view.paths import RUN_ID, RunFiles
from benchctl.view.transcript_index import TranscriptIndex

WINDOW = 200
PROMPT_LINES = 200  # the prompt is looked for in the transcript's first lines
BEFORE = 20  # a deep link shows this many events before its target


def read_meta(files: RunFiles) -> dict[str, Any] | None:
    try:
        meta = read_json(files.meta)
    except (OSError, ValueError):
        return None
    return meta if isinstance(meta, dict) else None


def status_of(root: str, files: RunFiles, meta: dict[str, Any] | None) -> str:
    if meta is not None:
        return str(meta.get("status") or "?")
    if files.attempt is None and sweep_active(root):
        return "running"
    return "unfinished"


def clock_origin(idx: TranscriptIndex) -> tuple[float | None, float | None]:
    """(t0, budget_s): when the run started (its run_start event, else its first event) and its budget."""
    start = idx.start_event or {}
    t0 = start.get("t") if isinstance(start.get("t"), (int, float)) else None
    if t0 is None and len(idx) and not math.isnan(idx.times[0]):
        t0 = idx.times[0]
    budget = start.get("budget_s") or (start.get("spec") or {}).get("budget_s")
    return t0, float(budget) if isinstance(budget, (int, float)) and budget > 0 else None


def facts(
    run_id: str, meta: dict[str, Any] | None, idx: TranscriptIndex, live: dict[str, Any] | None
) -> list[tuple[str, str, str]]:
    """(label, value, live key) for the header, read as `benchctl report` reads a run
    (`config_of`); while a run has no meta.json yet, from its run_start event and live figures."""
    m = meta if meta is not None else {"spec": (idx.start_event or {}).get("spec") or {}}
    cfg = config_of(Run(run_id, m), Options(), True)
    seed = field_of(Run(run_id, m), "seed")
    budget_s = None if cfg.budget_s == float("inf") else cfg.budget_s
    out = [
        ("task", cfg.task, ""),
        ("harness", cfg.harness, ""),
        ("model", cfg.model, ""),
        ("budget", cfg.budget, ""),
        ("variant", cfg.variant, ""),
        ("tools", cfg.tools or "–", ""),
        ("seed", "–" if seed is None else str(seed), ""),
    ]
    tokens: int | None
    if meta is not None:
        elapsed, turns, tokens, cost = m.get("elapsed_s"), m.get("turns"), _tokens(m.get("usage")), m.get("cost_usd")
    else:
        live = live or {}
        elapsed, turns, tokens, cost = (
            live.get("elapsed_s"),
            live.get("turns"),
            live.get("tokens"),
            live.get("cost_usd"),
        )
    out += [
        ("elapsed", f"{render.duration(elapsed)} of {render.duration(budget_s)}", "elapsed"),
        ("turns", "–" if turns is None else str(turns), "turns"),
        ("tokens", render.tokens(tokens), "tokens"),
        ("cost", render.usd(cost), "cost"),
    ]
    if meta is not None:
        served = m.get("served_models") or {}
        if served and list(served) != [m.get("model")]:
            out.append(("served by", ", ".join(f"{k} ×{v}" for k, v in served.items()), ""))
        for fb in m.get("fallbacks") or []:
            if isinstance(fb, dict):
                out.append(("fell back", f"{fb.get('from')} → {fb.get('to')} ({fb.get('reason') or 'refusal'})", ""))
        raw = m.get("rate_limits")
        rl = raw if isinstance(raw, dict) else {}
        if rl.get("waits"):  # the report's "rate-limit wait" column, for this run (shown when it waited)
            share = wait_share(Run(run_id, m))
            out.append(
                (
                    "rate-limit wait",
                    f"{render.duration(rl.get('paused_s'))}"
                    + ("" if share is None else f" ({share:.0%} of the budget)")
                    + (", budget paused" if rl.get("pause_budget") else ""),
                    "",
                )
            )
        for key, label in (
            ("refusals", "refusals"),
            ("reprompts", "reprompts"),
            ("revision_requests", "revision requests"),
        ):
            if m.get(key):
                out.append((label, str(m[key]), ""))
        if isinstance(m.get("target_tools"), dict):
            out.append(("target + auxiliary cost", render.usd(target_cost(m)), ""))
    return out


def views(idx: TranscriptIndex, first: int, last: int) -> list[EventView]:
    t0, budget = clock_origin(idx)
    return once_each([prepare(ev, first + k, t0, budget) for k, ev in enumerate(idx.read(first, last))])


def window(idx: TranscriptIndex, at_seq: int | None) -> tuple[int, int]:
    """The lines [first, last) to render: from the start, or around a deep-linked event."""
    n = len(idx)
    pos = idx.position(at_seq) if at_seq is not None else None
    first = max(0, pos - BEFORE) if pos is not None else 0
    return first, min(n, first + WINDOW)


def phases(idx: TranscriptIndex) -> list[tuple[str, int]]:
    out = [("run", idx.seqs[0])] if len(idx) else []
    out += [(f"follow-up {k + 1}", idx.seqs[line]) for k, line in enumerate(idx.phase_starts)]
    return out


def minimap_view(idx: TranscriptIndex, first: int, last: int) -> dict[str, Any]:
    """The SVG minimap: one lane per event category across the budget (or the whole run when it
    ran longer, e.g. with follow-ups); darker = more events; each mark links to the first event
    of its lane in its time slot. A live page fetches it again as events arrive (run.js)."""
    t0, budget = clock_origin(idx)
    n = len(idx)
    end = next((idx.times[i] for i in range(n - 1, -1, -1) if not math.isnan(idx.times[i])), t0)
    ran = (end - t0) if (t0 is not None and end is not None) else 0.0
    span = max(budget or 0.0, ran, 1e-9)
    # Cached per index and extended as the transcript grows (a live page asks again after each
    # batch of new events); counted afresh only when the scale changes (the run passed its budget).
    scale = (idx.generation, t0, span)
    cached = getattr(idx, "_minimap", None)
    if cached is None or cached[0] != scale or cached[1]["lines"] != n:
        since = cached[1] if cached is not None and cached[0] == scale else None
        cached = (scale, minimap(idx.times, idx.types, t0, span, since=since))
        idx._minimap = cached  # type: ignore[attr-defined]
    mm = cached[1]
    lane_h, width = 11, 1000.0
    bw = width / mm["buckets"]
    rects = []
    peak = max(mm["max"], 1)
    for li, lane in enumerate(LANES):
        for b, c in enumerate(mm["counts"][lane]):
            if c:
                line = mm["first"][lane][b]
                rects.append(
                    {
                        "lane": lane,
                        "x": round(b * bw, 2),
                        "y": li * lane_h,
                        "w": round(bw, 2),
                        "h": lane_h - 1,
                        "o": round(0.35 + 0.65 * math.log1p(c) / math.log1p(peak), 3),
                        "seq": idx.seqs[line] if line is not None else 0,
                        "title": f"{c} {lane} events at {render.duration(b * span / mm['buckets'])}",
                    }
                )
    win = None
    if n and t0 is not None and last > first:
        ta, tb = idx.times[first], idx.times[last - 1]
        if not (math.isnan(ta) or math.isnan(tb)):
            x0 = max(0.0, (ta - t0) / span * width)
            win = (round(x0, 2), round(max(2.0, (tb - ta) / span * width), 2))
    budget_x = round(budget / span * width, 2) if budget and budget < span else None
    return {
        "rects": rects,
        "height": lane_h * len(LANES),
        "lane_h": lane_h,
        "window": win,
        "budget_x": budget_x,
        "span_s": span,
    }


def search(idx: TranscriptIndex, q: str, limit: int = 200) -> tuple[list[dict[str, Any]], bool]:
    lines, more = idx.search(q, limit)
    hits = []
    for line in lines:
        ev = idx.read(line, line + 1)[0]
        hits.append(
            {
                "seq": idx.seqs[line],
                "type": ev.get("type"),
                "cat": category(str(ev.get("type"))),
                "snippet": snippet(ev, q),
            }
        )
    return hits, more


def snippet(ev: dict[str, Any], q: str, width: int = 70) -> str:
    """Where the query occurs in the first of the event's texts (`events.texts`) that contains
    it, compared as search compares them (case-folded)."""
    fq = q.casefold()
    for v in texts(ev):
        folded = v.casefold()
        k = folded.find(fq)
        if k < 0:
            continue
        m = len(fq)
        if len(folded) != len(v):  # folding changed lengths ("ß" -> "ss"): map back
            ends, pos = [], 0
            for ch in v:
                pos += len(ch.casefold())
                ends.append(pos)
            k0 = bisect.bisect_right(ends, k)
            k1 = bisect.bisect_left(ends, k + len(fq))
            k, m = k0, k1 - k0 + 1
        a, b = max(0, k - width), min(len(v), k + m + width)
        return ("…" if a else "") + " ".join(v[a:b].split()) + ("…" if b < len(v) else "")
    return ""


def prompt(idx: TranscriptIndex, head: list[dict[str, Any]] | None = None) -> TaskPrompt | None:
    """The run's prompt (`benchctl.task_prompt`), read from its first lines (`head`: those lines,
    when the caller has them parsed already) once per transcript; looked for again while a run
    has not made its first model call yet."""
    cached = getattr(idx, "_prompt", None)
    if cached is not None and cached[0] == idx.generation:
        return cached[1]
    scan = min(len(idx), PROMPT_LINES)
    found = find_prompt(head[:scan] if head is not None and len(head) >= scan else idx.read(0, scan))
    if found is not None or len(idx) >= PROMPT_LINES:
        idx._prompt = (idx.generation, found)  # type: ignore[attr-defined]
    return found


# After these the agent waits for its model: the next model call is in flight.
MODEL_NEXT = frozenset({"run_start", "tool_result", "reprompt", "revision_request", "followup", "fallback"})
# Written beside the agent's steps (by hooks, policies, the CLI), saying nothing of what it waits for.
ASIDE = frozenset({"notice", "warning", "hook", "forged_hook", "stderr", "harness_event", "rate_limit_wait"})
FLIGHT_LOOKBACK = 64  # events looked at from the end


def in_flight(idx: TranscriptIndex) -> dict[str, Any] | None:
    """What a running run is waiting for, from the end of its transcript (a model call is written
    when it ends, so one in flight shows as its absence): {"what": "model" | "tool", "label",
    "since": epoch seconds}, or None when the agent is between steps."""
    n = len(idx)
    events = idx.read(max(0, n - FLIGHT_LOOKBACK), n)
    answered: set[Any] = set()
    last: dict[str, Any] | None = None  # the newest event that is not an aside
    for ev in reversed(events):
        type_ = ev.get("type")
        if type_ in ASIDE:
            if type_ == "rate_limit_wait" and last is None:
                last = ev
            continue
        last = last or ev
        if type_ == "tool_result":
            answered.add(ev.get("id"))
        elif type_ == "tool_call" and ev.get("id") not in answered:
            return {"what": "tool", "label": f"tool {ev.get('name')} running", "since": ev.get("t")}
        elif type_ in ("model_call", "assistant"):
            break
    if last is None or last.get("type") not in MODEL_NEXT | {"rate_limit_wait"}:
        return None
    held = last.get("type") == "rate_limit_wait"
    return {
        "what": "model",
        "label": "model call held back by a rate limit" if held else "model call in flight",
        "since": last.get("t"),
    }


_NEIGHBOURS: dict[str, tuple[int, list[str]]] = {}  # runs dir -> (its mtime_ns, sorted run ids)


def neighbours(root: str, run_id: str) -> tuple[str | None, str | None]:
    """The runs before and after `run_id` in the runs page's default order (by run id)."""
    runs = os.path.join(root, RUNS)
    try:
        mtime = os.stat(runs).st_mtime_ns  # changes when a run directory is added or removed
    except OSError:
        return None, None
    cached = _NEIGHBOURS.get(runs)
    if cached is None or cached[0] != mtime:
        with os.scandir(runs) as it:
            ids = sorted(e.name for e in it if e.is_dir(follow_symlinks=False) and RUN_ID.fullmatch(e.name))
        cached = _NEIGHBOURS[runs] = (mtime, ids)
    ids = cached[1]
    k = bisect.bisect_left(ids, run_id)
    if k >= len(ids) or ids[k] != run_id:
        return None, None
    return (ids[k - 1] if k > 0 else None), (ids[k + 1] if k + 1 < len(ids) else None)
