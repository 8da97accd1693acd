"""`benchctl export --to inspect`: Inspect eval logs, written with inspect-ai's own classes and writer.

One `.eval` log per configuration (task × variant × harness × model × budget × tools); each
finished run is a sample (id = the task, epoch = the run's seed in ascending order among all the
configuration's runs; the seed and run id are in the sample metadata); its unfinished runs are
counted (planned samples) but have none. What maps to what:

- the conversation as the model saw it (rebuilt from the gateway's request deltas) → the sample's
  messages (the main conversation: the one with the most model calls) and a message pool;
- each model call → a ModelEvent (input = references into the pool, tools, sampling settings,
  output, usage and cost, requested and served model, timing, errors; benchctl's call record in
  its metadata); target / auxiliary model calls → ModelEvents with role `target` / `auxiliary`;
- each tool the harness ran → a ToolEvent; every other transcript event (notices, reprompts,
  revision requests, follow-ups, refusals, fallbacks, hooks, CLI events, errors, and event types
  this exporter does not know) → an InfoEvent named `benchctl <type>`, in transcript order;
- the collected artifacts (report.md, predictions, ...) → InfoEvents at the end;
- grades → scores with the judge's explanations (an unscored grade is left out, never 0);
- scan results (`benchctl scan`) → scores named `scan/<scanner>` (the answer, the explanation, the
  cited events in the score's metadata) and every result in the sample metadata's `scans`; an
  unscored result, or one made from an earlier version of the transcript (`stale`), is only there;
- usage and cost → sample and eval `model_usage` (total_cost None when a price was unknown);
- phases (the run, then each follow-up) → a solver span each (`main`, `followup-N`) around their
  events;
- run outcomes → sample `error` / `limit`, and the eval's `status` (`eval_status`).

Each run is streamed into its sample by `benchctl.export.inspect_stream`; this module writes the
log around the samples (spec, scores, results, stats) through inspect-ai's own recorder.
"""

from __future__ import annotations

import asyncio
from collections import Counter, defaultdict
from collections.abc import Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from inspect_ai._util.error import EvalError
from inspect_ai.log import (
    EvalConfig,
    EvalDataset,
    EvalMetric,
    EvalPlan,
    EvalPlanStep,
    EvalResults,
    EvalSample,
    EvalSampleLimit,
    EvalScore,
    EvalSpec,
    EvalStats,
    EvalStatus,
)
from inspect_ai.log._recorders.eval import EvalRecorder, ZipLogFile, _sample_filename
from inspect_ai.model._model_output import ModelFallback
from inspect_ai.scorer import Score
from inspect_ai.viewer import ViewerConfig

from benchctl.export import events as ev
from benchctl.export.inspect_stream import SampleWriter, Usage, as_int, num, short_hash
from benchctl.stats import mean_or_none
from benchctl.transcript import Redactor


def export(runs: list[ev.Run], out: Path, unfinished: Sequence[ev.Run] = ()) -> list[Path]:
    """Write one eval log per configuration into `out` (replacing earlier exports of the same
    configurations); returns the paths written. An unfinished run is counted in its configuration's
    log (planned, not a sample) when that configuration has a finished run."""
    groups: dict[ev.Config, list[ev.Run]] = defaultdict(list)
    for run in runs:
        groups[run.config].append(run)
    pending: dict[ev.Config, list[ev.Run]] = defaultdict(list)
    for run in unfinished:
        if run.config in groups:
            pending[run.config].append(run)
    out.mkdir(parents=True, exist_ok=True)
    written = []
    for config in sorted(groups, key=lambda c: c.name):
        path = out / f"{ev.safe_name('__'.join(_config_parts(config)))}.eval"
        asyncio.run(_write_log(config, groups[config], pending[config], path))
        written.append(path)
    return written


def _config_parts(c: ev.Config) -> list[str]:
    return [p for p in (c.task, c.harness, c.model, c.budget, c.variant, c.tools) if p]


def _iso(t: Any) -> str | None:
    return _iso_at(t) if isinstance(t, (int, float)) else None


def _iso_at(t: float) -> str:
    return datetime.fromtimestamp(float(t), UTC).isoformat()


# ------------------------------------------------------------------------------- the log


async def _write_log(config: ev.Config, runs: list[ev.Run], unfinished: list[ev.Run], dest: Path) -> None:
    # epochs rank every run of the configuration by seed, unfinished ones too, so a sample keeps
    # its epoch when the runs before it finish
    order = sorted(runs + unfinished, key=lambda r: (r.seed, r.run_id))
    epoch_of = {r.run_id: i for i, r in enumerate(order, 1)}
    runs = sorted(runs, key=lambda r: (r.seed, r.run_id))
    first = runs[0].meta
    starts = [r.meta["started_at"] for r in runs if isinstance(r.meta.get("started_at"), (int, float))]
    ends = [r.meta["ended_at"] for r in runs if isinstance(r.meta.get("ended_at"), (int, float))]
    # Inspect requires a creation time: the first run's start, else when meta.json was written
    created = _iso_at(min(starts) if starts else min((r.path / "meta.json").stat().st_mtime for r in runs))
    task_id = short_hash("config", config)
    status = eval_status(runs, unfinished)
    spec = EvalSpec(
        eval_id=task_id,
        run_id=task_id,
        created=created,
        task=config.task,
        task_id=task_id,
        task_display_name=config.name,
        task_description=None,
        task_args={
            "harness": config.harness,
            "budget": config.budget,
            "variant": config.variant,
            "tools": config.tools,
        },
        solver=config.harness,
        solver_args=(first.get("spec") or {}).get("options") or {},
        dataset=EvalDataset(name=config.task, samples=1, sample_ids=[config.task]),
        model=config.model,
        # benchctl runs every run whatever happens to the others, and `benchctl run` fails (exit 1)
        # when any run ended in error: Inspect's fail_on_error with continue_on_fail
        config=EvalConfig(
            epochs=len(order), time_limit=as_int(first.get("budget_s")), fail_on_error=True, continue_on_fail=True
        ),
        packages={"benchctl": str(first.get("benchctl_version") or "")},
        viewer=ViewerConfig(trust_content=False),  # agent-written text: the viewer shows it as plain text
        metadata={
            "benchctl": {
                "configuration": config.name,
                "runs": [r.run_id for r in runs],
                "outcomes": dict(sorted(Counter(str(r.meta.get("status")) for r in order).items())),
                "unfinished_runs": [r.run_id for r in unfinished],
                "task_hashes": sorted({str(r.meta["task_hash"]) for r in runs if r.meta.get("task_hash")}),
                "images": sorted(
                    {
                        str(r.meta.get("image_digest") or r.meta["image"])
                        for r in runs
                        if r.meta.get("image_digest") or r.meta.get("image")
                    }
                ),
            }
        },
    )
    plan = EvalPlan(name="benchctl", steps=[EvalPlanStep(solver=config.harness, params=spec.solver_args or {})])
    recorder = EvalRecorder(str(dest.parent))
    await recorder.log_init(spec, str(dest), clean=True)
    await recorder.log_start(spec, plan)
    log: ZipLogFile = recorder.data[recorder._log_file_key(spec)]
    totals = Usage()
    samples: list[EvalSample] = []
    for run in runs:
        shell = await _write_sample(log, run, config, epoch_of[run.run_id], totals)
        samples.append(shell)
    stats = EvalStats(
        started_at=_iso_at(min(starts)) if starts else "",
        completed_at=_iso_at(max(ends)) if ends else "",
        model_usage=totals.by_model,
        role_usage=totals.by_role,
    )
    # no eval-level error: none halted the eval (each run's error is its sample's), as Inspect
    # itself leaves it for an eval run with continue_on_fail
    await recorder.log_finish(spec, status, stats, _results(samples, len(order)), None)


def eval_status(runs: list[ev.Run], unfinished: list[ev.Run]) -> EvalStatus:
    """What the configuration's runs say about it, in Inspect's terms:

    - `started`: a run has not finished (no meta.json: still running, or killed before it wrote
      one; Inspect too leaves a log whose process was killed as `started`);
    - `cancelled`: a run was cut short by Ctrl-C / SIGTERM (benchctl records error "cancelled";
      Inspect logs an interrupted eval as `cancelled`);
    - `error`: a run ended in error (a sample error under fail_on_error);
    - `success`: otherwise. A timeout, a spent token budget or a cost cap is a sample limit, as
      in Inspect, not an error.
    """
    if unfinished:
        return "started"
    if any(r.meta.get("status") == "error" and r.meta.get("error") == "cancelled" for r in runs):
        return "cancelled"
    if any(r.meta.get("status") == "error" for r in runs):
        return "error"
    return "success"


def _results(samples: list[EvalSample], planned: int) -> EvalResults:
    by_name: dict[str, list[Any]] = defaultdict(list)
    scorer_of: dict[str, str] = {}
    for s in samples:
        for name, score in (s.scores or {}).items():
            by_name[name].append(score.value)
            meta = score.metadata or {}
            scorer_of[name] = meta.get("grader") or meta.get("scanner") or name
    # A mean of numbers (grades; true / false and number scan answers, whose mean is the hit rate
    # or the mean answer); label answers have none. `or 0.0` only for the type checker: a name is
    # in by_name once it has a value, so the mean is never None.
    scores = [
        EvalScore(
            name=name,
            scorer=scorer_of[name],
            scored_samples=len(vals),
            unscored_samples=len(samples) - len(vals),
            metrics=(
                {"mean": EvalMetric(name="mean", value=mean_or_none([float(v) for v in vals]) or 0.0)}
                if all(isinstance(v, (int, float)) for v in vals)
                else {}
            ),
        )
        for name, vals in sorted(by_name.items())
    ]
    # Inspect's counts: every planned sample (unfinished runs included), and those without error
    return EvalResults(total_samples=planned, completed_samples=sum(s.error is None for s in samples), scores=scores)


# ------------------------------------------------------------------------------- one sample


async def _write_sample(log: ZipLogFile, run: ev.Run, config: ev.Config, epoch: int, totals: Usage) -> EvalSample:
    redact = Redactor()
    shell = _shell(run, config, epoch)
    async with log._lock:
        with log._zip_open_write(_sample_filename(config.task, epoch)) as stream:
            w = SampleWriter(run, stream, redact)
            stream.write(b'{"events":[')
            w.phase(ev.MAIN_PHASE)
            for item in ev.items(run):
                if isinstance(item, ev.ModelTurn):
                    w.model_turn(item)
                elif isinstance(item, ev.TargetTurn):
                    w.target_turn(item)
                elif isinstance(item, ev.ToolUse):
                    w.tool_use(item)
                else:
                    w.note(item.event)
            w.end_phase()
            for name, path in run.artifacts():
                w.artifact(name, path)
            shell, message_count = w.finish(shell)
        _journal(log, shell.summary().model_copy(update={"message_count": message_count}))
    totals.merge(w.usage)
    return shell


def _journal(log: ZipLogFile, summary: Any) -> None:
    """Record a streamed sample's summary: what `ZipLogFile._journal_summary` does for a sample held
    in memory (its message count comes from the stream, not from a messages list)."""
    from inspect_ai.log._recorders.eval import _journal_summary_file, _journal_summary_path

    log._summary_counter += 1
    log._zip_writestr(_journal_summary_path(_journal_summary_file(log._summary_counter)), [summary])
    log._summaries.append(summary)


def _shell(run: ev.Run, config: ev.Config, epoch: int) -> EvalSample:
    """The sample's small fields; events, messages, input and output are streamed in later."""
    m = run.meta
    scores, grades = _scores(run)
    status = m.get("status")
    error = (
        EvalError(message=str(m.get("error") or "status error (no message recorded)"), traceback="", traceback_ansi="")
        if status == "error"
        else None
    )
    budget = num(m.get("budget_s"))
    reason = str(m["error"]) if m.get("error") else None  # why it stopped, when benchctl recorded it
    limit = (
        EvalSampleLimit(type="time", limit=budget, reason=reason)
        if status == "timeout" and budget is not None
        else None
    )
    cap = num((m.get("cost_cap") or {}).get("max_cost_usd"))
    if status == "budget_exhausted" and cap is not None:  # a cost cap stopped it (benchctl/limits)
        limit = EvalSampleLimit(type="cost", limit=cap, reason=reason)
    served = m.get("served_models") or {}
    fallbacks = [
        ModelFallback(
            model=str(f.get("from") or m.get("model")),
            fallback_model=str(f["to"]),
            count=int(served.get(str(f["to"])) or 0),
        )  # calls it served (all of them here)
        for f in m.get("fallbacks") or []
        if f.get("to")
    ]
    scan_scores, scans = _scans(run)
    scores |= scan_scores
    metadata = {k: v for k, v in m.items() if k not in ("schema",)}
    metadata["grades"] = grades
    metadata["scans"] = scans
    return EvalSample(
        id=config.task,
        epoch=epoch,
        input="",
        target="",
        scores=scores or None,
        metadata=metadata,
        started_at=_iso(m.get("started_at")),
        completed_at=_iso(m.get("ended_at")),
        total_time=m.get("elapsed_s"),
        uuid=short_hash("sample", run.run_id),
        error=error,
        limit=limit,
        model_fallbacks=fallbacks or None,
    )


def _scores(run: ev.Run) -> tuple[dict[str, Score], list[dict[str, Any]]]:
    """Scored grades as Inspect scores (named grader, or grader[followup-N] for a follow-up's
    artifact), and every grade's status for the metadata (unscored ones are only there)."""
    scores: dict[str, Score] = {}
    summary = []
    for g in sorted(run.grades, key=lambda g: (str(g.get("grader")), str(g.get("artifact_tag") or ""))):
        name = str(g["grader"]) + (f"[{g['artifact_tag']}]" if g.get("artifact_tag") else "")
        keep = (
            "grader",
            "artifact",
            "artifact_tag",
            "judge",
            "rubric_hash",
            "status",
            "score",
            "raw_score",
            "n_items",
            "n_unscored",
            "cost_usd",
            "by_cluster",
        )
        info = {k: g.get(k) for k in keep if g.get(k) is not None}
        summary.append(info)
        if isinstance(g.get("score"), (int, float)) and g.get("status") != "unscored":
            scores[name] = Score(value=float(g["score"]), explanation=_explanation(g), metadata=info)
    return scores, summary


SCAN_KEYS = ("scanner", "kind", "status", "answer_type", "answer", "hit", "events", "judge", "cost_usd", "error")


def _scans(run: ev.Run) -> tuple[dict[str, Score], list[dict[str, Any]]]:
    """Scan results as Inspect scores (`scan/<scanner>`: the answer as its value, true / false, a
    number, a label or a list of labels) and every result, its explanation too, for the metadata."""
    from benchctl.scan.result import results_of_run, transcript_hash

    found = results_of_run(run.path.parent.parent, run.run_id)
    if not found:
        return {}, []
    now = transcript_hash(run.transcript())
    scores: dict[str, Score] = {}
    summary = []
    for rec in found:
        info = {k: rec[k] for k in SCAN_KEYS if rec.get(k) is not None}
        info["stale"] = rec.get("transcript_hash") != now  # scanned from another version of the transcript
        summary.append(info | {"explanation": rec.get("explanation")})
        if rec.get("status") == "scored" and rec.get("answer") is not None and not info["stale"]:
            scores[f"scan/{rec['scanner']}"] = Score(
                value=rec["answer"], answer=str(rec["answer"]), explanation=rec.get("explanation"), metadata=info
            )
    return scores, summary


def _explanation(g: dict[str, Any]) -> str:
    """The judge's reasons, item by item, as plain text (the logs are marked untrusted, so the viewer
    shows text as text)."""
    lines = []
    for it in g.get("items") or []:
        facts = [f"{k} {it[k]}" for k in ("score", "strict", "verdict", "weight", "cluster") if it.get(k) is not None]
        if it.get("score") is None:
            facts.insert(0, "unscored")
        lines.append(f"{it.get('id')}" + (f" ({', '.join(facts)})" if facts else ""))
        lines += [
            f"    {k}: {_one_line(it[k])}" for k in ("text", "prediction", "reason", "quote", "error") if it.get(k)
        ]  # text: the finding as the rubric states it (newer grade records)
    lines += [f"{k}: {_one_line(g[k])}" for k in ("note", "tldr", "expected") if isinstance(g.get(k), str) and g[k]]
    return "\n".join(lines) or f"{g.get('grader')}: {g.get('score')}"


def _one_line(x: Any) -> str:
    return " ".join(str(x).split())
