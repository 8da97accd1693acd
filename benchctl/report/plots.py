"""PNG figures from a built report. matplotlib (Agg backend) is imported only here, only
when plots are asked for: it costs ~0.3 s to import and `benchctl report` must stay fast.

    score_vs_budget.png   headline score vs time budget, one line per model, 95 % intervals
    elo.png               tournament Elo, with bootstrap intervals when the ratings have them
    cluster_heatmap.png   mean strict coverage per finding cluster per configuration
"""

from __future__ import annotations

import io
from collections import defaultdict
from typing import Any

from benchctl.report.model import Report, Table


def _plt() -> Any:
    import matplotlib

    matplotlib.use("Agg", force=True)
    import matplotlib.pyplot as plt

    return plt


def _png(fig: Any) -> bytes:
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=110, bbox_inches="tight")
    _plt().close(fig)
    return buf.getvalue()


def score_vs_budget(lb: Table, headline: str | None) -> bytes | None:
    lines: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for r in lb.rows:
        if r.get("budget_s") is None or r.get("score_mean") is None:
            continue
        label = " / ".join(str(r[k]) for k in ("model", "harness", "task", "variant", "tools") if r.get(k))
        if headline is None and r.get("grader"):  # the rows' graders differ: each line says its own
            label += f" ({r['grader']})"
        lines[label + (" (fell back)" if r.get("fell_back") else "")].append(r)
    if not lines:
        return None
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7, 4.5))
    budgets: set[float] = set()
    n = len(lines)
    for i, (label, rows) in enumerate(sorted(lines.items())):
        rows.sort(key=lambda r: r["budget_s"])
        # Dodge lines sideways (multiplicatively: the axis may be log) so intervals do not overlap.
        dodge = 1 + 0.025 * (i - (n - 1) / 2)
        budgets.update(r["budget_s"] / 60 for r in rows)
        xs = [r["budget_s"] / 60 * dodge for r in rows]
        ys = [r["score_mean"] for r in rows]
        lo = [y - r["score_lo"] if r.get("score_lo") is not None else 0 for y, r in zip(ys, rows)]
        hi = [r["score_hi"] - y if r.get("score_hi") is not None else 0 for y, r in zip(ys, rows)]
        ax.errorbar(xs, ys, yerr=[lo, hi], marker="o", capsize=4, label=label)
    if len(budgets) > 1 and max(budgets) / max(min(budgets), 1e-9) > 5:
        ax.set_xscale("log")
    ax.set_xticks(sorted(budgets))
    ax.set_xticklabels([f"{b:g}" for b in sorted(budgets)])
    ax.minorticks_off()
    ax.set_xlabel("time budget (minutes)")
    ax.set_ylabel(f"{headline or 'score'} (mean, 95% t-interval)")
    ax.set_ylim(0, 1.02)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    ax.set_title("Score vs time budget")
    return _png(fig)


def elo(t: Table) -> bytes | None:
    rows = [r for r in t.rows if r.get("elo") is not None]
    if not rows:
        return None
    rows = sorted(rows, key=lambda r: r["elo"])
    plt = _plt()
    fig, ax = plt.subplots(figsize=(7, 0.45 * len(rows) + 1.2))
    ys = list(range(len(rows)))
    xs = [r["elo"] for r in rows]
    lo = [x - r["lo"] if r.get("lo") is not None else 0 for x, r in zip(xs, rows)]
    hi = [r["hi"] - x if r.get("hi") is not None else 0 for x, r in zip(xs, rows)]
    ax.errorbar(xs, ys, xerr=[lo, hi], fmt="o", capsize=4)
    ax.set_yticks(ys)
    ax.set_yticklabels([r["auditor"] for r in rows])
    ax.axvline(1000, color="grey", lw=0.8, ls="--")
    ax.set_xlabel(elo_axis_label(rows))
    ax.set_title("Tournament ratings")
    ax.grid(axis="x", alpha=0.3)
    return _png(fig)


def elo_axis_label(rows: list[dict[str, Any]]) -> str:
    """The axis says which intervals are drawn: a tournament on one environment has none (the
    bootstrap resamples environments), and a dot without a bar must not read as a certain Elo."""
    with_interval = sum(r.get("lo") is not None and r.get("hi") is not None for r in rows)
    if with_interval == len(rows):
        return "Elo (bootstrap 95% interval over environments)"
    if with_interval == 0:
        return "Elo (no interval: one environment, nothing for the bootstrap to resample)"
    return "Elo (bootstrap 95% interval where drawn; none for auditors without one)"


def cluster_heatmap(t: Table) -> bytes | None:
    clusters = [c.key for c in t.columns if c.kind == "score"]
    if not clusters or not t.rows:
        return None
    import numpy as np

    data = np.array([[r.get(c) if r.get(c) is not None else np.nan for c in clusters] for r in t.rows], dtype=float)
    plt = _plt()
    fig, ax = plt.subplots(figsize=(1.1 * len(clusters) + 3, 0.45 * len(t.rows) + 1.5))
    im = ax.imshow(np.ma.masked_invalid(data), vmin=0, vmax=1, cmap="viridis", aspect="auto")
    ax.set_xticks(range(len(clusters)))
    ax.set_xticklabels(clusters, rotation=35, ha="right")
    ax.set_yticks(range(len(t.rows)))
    ax.set_yticklabels([r["config"] for r in t.rows])
    for i in range(data.shape[0]):
        for j in range(data.shape[1]):
            if not np.isnan(data[i, j]):
                ax.text(
                    j,
                    i,
                    f"{data[i, j]:.2f}",
                    ha="center",
                    va="center",
                    fontsize=7,
                    color="white" if data[i, j] < 0.6 else "black",
                )
    fig.colorbar(im, ax=ax, label="mean strict coverage")
    ax.set_title("Coverage by finding cluster")
    return _png(fig)


def make_plots(report: Report) -> dict[str, bytes]:
    """Render every plot the report has data for; fills and returns `report.plots`."""
    out: dict[str, bytes] = {}
    lb = report.table("leaderboard")
    if lb is not None and (png := score_vs_budget(lb, report.plot_data.get("headline"))):
        out["score_vs_budget.png"] = png
    t = report.table("tournament")
    if t is not None and (png := elo(t)):
        out["elo.png"] = png
    t = report.table("clusters")
    if t is not None and (png := cluster_heatmap(t)):
        out["cluster_heatmap.png"] = png
    report.plots = out
    return out
