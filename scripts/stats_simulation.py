#!/usr/bin/env python3
"""The report's comparison statistics, checked by simulation through whole results directories.

Each study is a results directory written in the on-disk format `benchctl run` and `benchctl grade`
write (runs/<id>/meta.json, grades/combined/<id>.json) with scores drawn from known distributions,
read back by `build_report` (the loader, the grouping, the comparisons table). Printed per check:
the share of studies in which the table's rows behave as the statistics promise.

  per-task coverage   two models on one task, 3 seeds each, different noise (0.05 and 0.12): the
                      95 % interval of b − a covers the true 0.08 (Welch)
  null false positive a third model equal to the first: p < 0.05 in ~5 % of studies
  MDE power           model d is better than a by exactly the MDE the design has (from the true
                      noise): p < 0.05 in ~80 % of studies
  across tasks        3 tasks whose difficulty varies with SD 0.25: the task-paired row covers the true
                      0.08, and its interval is compared with a Welch test on the runs pooled over tasks
  Holm                5 models with one true score on one task (10 comparisons): the share of studies
                      with any p_holm < 0.05 (family-wise error), against any raw p < 0.05

    python scripts/stats_simulation.py [--studies 400] [--seed 0]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from benchctl.report import inference as inf  # noqa: E402
from benchctl.report.build import build_report  # noqa: E402
from tests.rigs.report import add_grade, add_run  # noqa: E402

SEEDS = 3
NOISE = {"a": 0.05, "b": 0.12, "c": 0.05, "d": 0.05}
TRUE = {"a": 0.30, "b": 0.38, "c": 0.30}
MDE_AD = inf.t_mde([((0.05**2 / SEEDS, SEEDS - 1.0), (0.05**2 / SEEDS, SEEDS - 1.0))])[0]
TRUE["d"] = TRUE["a"] + MDE_AD


def study(root: Path, rng: np.random.Generator) -> dict[str, list[float]]:
    """Three tasks (difficulty offsets drawn per study); models a, b, c, d; the runs pooled per model
    for the unpaired comparison."""
    pooled: dict[str, list[float]] = {m: [] for m in TRUE}
    for task, offset in zip(("t1", "t2", "t3"), rng.normal(0.0, 0.25, 3)):
        for model, mean in TRUE.items():
            for seed in range(SEEDS):
                s = float(mean + offset + rng.normal(0.0, NOISE[model]))
                pooled[model].append(s)
                add_grade(root, "combined", add_run(root, model=model, seed=seed, task=task), s)
    return pooled


def null_family(root: Path, rng: np.random.Generator) -> None:
    for model in ("m1", "m2", "m3", "m4", "m5"):
        for seed in range(4):
            add_grade(root, "combined", add_run(root, model=model, seed=seed, task="null"), float(rng.normal(0.5, 0.1)))


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--studies", type=int, default=400)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    rng = np.random.default_rng(args.seed)
    hits: dict[str, list[bool]] = {k: [] for k in ("cover", "null", "power", "across", "holm", "raw")}
    widths: list[tuple[float, float]] = []
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        for i in range(args.studies):
            root = Path(tmp) / f"s{i}"
            pooled = study(root, rng)
            null_family(root, rng)
            t = build_report(root, cache=False).table("comparisons")
            assert t is not None
            rows = {(r["task"], r["a"]["model"], r["b"]["model"]): r for r in t.rows if r["dimension"] == "model"}
            r = rows[("t1", "a", "b")]
            hits["cover"].append(r["lo"] <= TRUE["b"] - TRUE["a"] <= r["hi"])
            hits["null"].append(rows[("t1", "a", "c")]["p"] < 0.05)
            hits["power"].append(rows[("t1", "a", "d")]["p"] < 0.05)
            across = rows[(None, "a", "b")]
            hits["across"].append(across["lo"] <= TRUE["b"] - TRUE["a"] <= across["hi"])
            flat = inf.t_results([inf.welch(pooled["a"], pooled["b"])], clip=None, mde=False)[0]
            widths.append((across["hi"] - across["lo"], flat.hi - flat.lo))  # type: ignore[operator]
            family = [r for r in t.rows if r["task"] == "null"]
            hits["holm"].append(any(r["p_holm"] < 0.05 for r in family))
            hits["raw"].append(any(r["p"] < 0.05 for r in family))
    n = args.studies

    def rate(k: str) -> str:
        p = float(np.mean(hits[k]))
        return f"{100 * p:5.1f} %  (± {200 * np.sqrt(p * (1 - p) / n):.1f}, 2 s.e.)"

    w = np.array(widths)
    print(f"{n} studies through results directories, {time.perf_counter() - t0:.0f} s")
    print(f"per-task 95% interval covers the truth (Welch, 3 vs 3 seeds) {rate('cover')}")
    print(f"null pair: p < 0.05                                          {rate('null')}")
    print(f"true difference = MDE ({MDE_AD:.3f}): p < 0.05                   {rate('power')}")
    print(f"across tasks (paired by task): interval covers the truth      {rate('across')}")
    print(
        f"across tasks: mean interval width {w[:, 0].mean():.3f}, unpaired Welch on pooled runs "
        f"{w[:, 1].mean():.3f} ({w[:, 0].mean() / w[:, 1].mean():.0%} of it)"
    )
    print(f"family of 10 null comparisons: any raw p < 0.05               {rate('raw')}")
    print(f"family of 10 null comparisons: any Holm-adjusted p < 0.05     {rate('holm')}")


if __name__ == "__main__":
    main()
