"""`benchctl targets probe-tools`: how informative each tool is on its own, without an investigator.

Each tool of the named configurations is run N times on generic probes (generic_probes.py: written
without any behaviour in mind) through the same TargetTools an investigator gets, and the judge,
given the ground truth, rates each output STRONG / WEAK / NONE as evidence of the behaviour. Beside
the agents' any-of-N success (`benchctl report`) this shows AuditBench's tool-to-agent gap: a tool
whose outputs are strong evidence while agents using it still fail.

Files under DIR (study_store.py has the shared ones):

    probe_tools.json  [{"tool", "target", "strong", "weak", "none", "n"}], one entry per tool; n counts
                      the rated outputs (a probe the tool or the judge failed on is not in n)
    probes.jsonl      one line per probe: id, tool, config, target, input (the tool's arguments),
                      output, rating (strong | weak | none | null), reason, judge, rubric, error

A tool in several configurations is probed once, with the settings (batch size, reply cap) of the
first configuration that has it.
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from benchctl.grading.judge import Judge
from benchctl.jsonio import write_json_atomic
from benchctl.limits.config import LimitsConfig
from benchctl.targets.generic_probes import probe_args
from benchctl.targets.spec import TargetSpecError, check_config
from benchctl.targets.study_config import StudyError, StudyTask
from benchctl.targets.study_judge import RATINGS, ask, rubric
from benchctl.targets.study_store import Records, StudyDir, cap_reached, count_model_spend, session, study_caller
from benchctl.targets.tools import TargetTools

PROBE_TOOLS_FILE = "probe_tools.json"
PROBES_FILE = "probes.jsonl"


@dataclass
class ProbeOptions:
    judge: str
    out: Path
    configs: list[str]
    n: int = 20
    concurrency: int = 4  # probes in flight (a scaffolded probe is a whole batch)
    max_cost: float | None = None
    limits: LimitsConfig | None = None


@dataclass
class ProbeOutcome:
    rows: list[dict[str, Any]]  # probe_tools.json
    out: Path
    not_rated: int
    spent_before_usd: float = 0.0
    spent_usd: float = 0.0
    notes: list[str] = field(default_factory=list)


def run_probe_tools(task: StudyTask, opts: ProbeOptions) -> ProbeOutcome:
    return asyncio.run(_probe(task, opts))


def _configs(task: StudyTask, names: list[str]) -> list[Any]:
    out = []
    for name in dict.fromkeys(names):
        if name not in task.tools.configs:
            raise StudyError(
                f"--tools {name}: unknown tool configuration. Fix: use one of "
                f"{', '.join(sorted(task.tools.configs))} or add [tools.configs.{name}] to {task.file}"
            )
        config = task.tools.configs[name]
        try:
            check_config(task.target, config, task.file)
        except TargetSpecError as e:
            raise StudyError(str(e)) from None
        out.append(config)
    return out


async def _probe(task: StudyTask, opts: ProbeOptions) -> ProbeOutcome:
    configs = _configs(task, opts.configs)
    out = StudyDir(opts.out, "probe-tools")
    started = time.time()
    try:
        study = out.check_study({"task": task.name, "target_model": task.target.model})
        if study.get("n") not in (None, opts.n):
            raise StudyError(
                f"{out.path / 'study.json'}: key `n`: this directory's probes have n = {study['n']}, not {opts.n}. "
                f"Fix: pass --n {study['n']} to resume them, or another --out"
            )
        judge = Judge(opts.judge, concurrency=opts.concurrency, max_cost=opts.max_cost, spent=out.spent_before)
        count_model_spend(judge, out.transcript)
        caller = study_caller(opts.limits, out.transcript)
        records = Records(out.path / PROBES_FILE, key=lambda r: str(r["id"]))
        tools: dict[str, TargetTools] = {}  # tool name -> the TargetTools (configuration) that probes it
        for config in configs:
            tt = TargetTools(task.target, config, out.transcript, caller=caller)
            for name in config.tools:
                tools.setdefault(name, tt)
        records.extend(
            {
                "id": f"{name}-{i + 1:02d}",
                "tool": name,
                "config": tt.config.name,
                "target": task.target.model,
                "input": probe_args(name, i),
                "output": None,
                "rating": None,
                "reason": None,
                "judge": None,
                "rubric": None,
                "error": None,
            }
            for name, tt in tools.items()
            for i in range(opts.n)
        )
        study.update(n=opts.n, judge=opts.judge, configs=sorted({*study.get("configs", []), *opts.configs}))
        out.write_study(study)
        sem = asyncio.Semaphore(opts.concurrency)
        not_asked = 0
        question_rubric = rubric("informativeness")

        async def one(row: dict[str, Any]) -> None:
            nonlocal not_asked
            row = dict(row)
            if row["tool"] not in tools:
                return  # a tool of a configuration not named this time: kept as it is
            if row.get("output") is None:
                async with sem:
                    if (why := cap_reached(judge)) is not None:
                        not_asked += 1
                        records.put({**row, "error": why})
                        return
                    got = await tools[row["tool"]].acall(row["tool"], row["input"])
                if got.is_error:
                    records.put({**row, "error": f"the tool failed: {got.text}"})
                    return
                row.update(output=got.text, error=None)
                records.put(row)
            if (
                row.get("rating") is not None
                and row.get("judge") == judge.model
                and row.get("rubric") == question_rubric
            ):
                return
            tally = out.tally(str(row["id"]))
            shown = f"tool: {row['tool']}\narguments: {json.dumps(row['input'], ensure_ascii=False)}"
            j = await ask(judge, "informativeness", task.ground_truth, shown, row["output"], tally, "informativeness")
            out.judge_log(str(row["id"]), judge, tally)
            row.update(rating=j.value, reason=j.reason, judge=judge.model, rubric=question_rubric, error=j.error)
            records.put(row)

        try:
            await asyncio.gather(*(one(r) for r in records))
        finally:
            await caller.aclose()
        rows = summarise(list(records))
        write_json_atomic(out.path / PROBE_TOOLS_FILE, rows)
        not_rated = sum(1 for r in records if r["tool"] in tools and r.get("rating") is None)
        study["sessions"] = [
            *study.get("sessions", []),
            session(judge, started, out.spent_before, probes_not_run=not_asked, not_rated=not_rated),
        ]
        study["spent_usd"] = round(out.spent_on_disk(), 6)
        out.write_study(study)
        return ProbeOutcome(rows, out.path, not_rated, out.spent_before, judge.spent - out.spent_before)
    finally:
        out.close()


def summarise(records: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """probe_tools.json: per (tool, target), how many rated outputs were STRONG, WEAK, NONE."""
    rows: dict[tuple[str, str], dict[str, Any]] = {}
    for r in records:
        key = (str(r["tool"]), str(r["target"]))
        row = rows.setdefault(key, {"tool": key[0], "target": key[1], "strong": 0, "weak": 0, "none": 0, "n": 0})
        if r.get("rating") in RATINGS:
            row[r["rating"]] += 1
            row["n"] += 1
    return list(rows.values())
