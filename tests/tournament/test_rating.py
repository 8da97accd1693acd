"""Tournament rating maths: matches, Bradley-Terry fit, bootstrap intervals, ranks, overlap (no judge)."""

from __future__ import annotations

import math

import numpy as np
import pytest

from benchctl.tournament.bootstrap import bootstrap, interval_ranks
from benchctl.tournament.bradley_terry import fit_batch, strongly_connected, to_elo
from benchctl.tournament.matches import env_matches
from benchctl.tournament.ratings import compute_ratings


def canon(env: str, runs: list[str], issues: list[tuple[str, str, dict[str, bool]]]) -> dict:
    """issues: (id, importance, {run_id: supported})."""
    return {
        "env": env,
        "status": "ok",
        "runs": {r: {} for r in runs},
        "issues": [
            {"id": i, "title": i, "importance": imp, "found_by": {r: {"supported": s} for r, s in found.items()}}
            for i, imp, found in issues
        ],
    }


# The worked example: one shared high issue cancels; A keeps 6+3+3+1 = 13, B keeps 6 -> 13/19 vs 6/19.
WORKED = canon(
    "env1",
    ["ra", "rb"],
    [
        ("I1", "high", {"ra": True, "rb": True}),
        ("I2", "high", {"ra": True}),
        ("I3", "medium", {"ra": True}),
        ("I4", "medium", {"ra": True}),
        ("I5", "low", {"ra": True, "rb": False}),  # B mentioned it without evidence: no credit, no cancel
        ("I6", "high", {"rb": True}),
    ],
)


def test_worked_example_13_of_19() -> None:
    [m] = env_matches(WORKED, {"ra": "A", "rb": "B"})
    assert m["cancelled"] == ["I1"]
    assert m["a_only"] == ["I2", "I3", "I4", "I5"] and m["b_only"] == ["I6"]
    assert (m["points_a"], m["points_b"]) == (13.0, 6.0)
    assert m["share_a"] == 13 / 19
    assert m["outcome"] == "split" and m["weight"] == 19.0
    r = compute_ratings([WORKED], {"ra": "A", "rb": "B"}, rounds=20)
    top, bottom = r["leaderboard"]
    assert (top["auditor"], top["points_won"], top["points_at_stake"]) == ("A", 13.0, 19.0)
    assert bottom["mean_share"] == pytest.approx(6 / 19, abs=1e-6)
    # a single match: the fitted expected share reproduces the observed share exactly
    assert 1 / (1 + 10 ** ((bottom["elo"] - top["elo"]) / 400)) == pytest.approx(13 / 19, abs=1e-4)


def test_unweighted_option_counts_each_match_once() -> None:
    [m] = env_matches(WORKED, {"ra": "A", "rb": "B"}, weighting="unweighted")
    assert m["weight"] == 1.0 and m["share_a"] == 13 / 19
    with pytest.raises(ValueError, match="weighting"):
        env_matches(WORKED, {"ra": "A", "rb": "B"}, weighting="bogus")  # type: ignore[arg-type]


def test_superset_wins_outright_and_equal_sets_are_skipped() -> None:
    c = canon(
        "e",
        ["ra", "rb", "rc"],
        [
            ("I1", "high", {"ra": True, "rb": True, "rc": True}),
            ("I2", "low", {"ra": True}),
        ],
    )
    rows = {(m["a"], m["b"]): m for m in env_matches(c, {"ra": "A", "rb": "B", "rc": "C"})}
    assert rows[("A", "B")]["outcome"] == "a" and rows[("A", "B")]["share_a"] == 1.0
    assert rows[("A", "C")]["outcome"] == "a"
    assert rows[("B", "C")]["outcome"] == "skipped" and rows[("B", "C")]["share_a"] is None
    assert rows[("B", "C")]["weight"] == 0.0 and rows[("B", "C")]["cancelled"] == ["I1"]


def test_unsupported_issue_earns_nothing() -> None:
    c = canon("e", ["ra", "rb"], [("I1", "high", {"ra": False}), ("I2", "low", {"rb": True})])
    [m] = env_matches(c, {"ra": "A", "rb": "B"})
    assert m["outcome"] == "b" and m["points_a"] == 0.0 and m["points_b"] == 1.0


def test_several_runs_of_one_auditor_share_one_match_of_weight() -> None:
    c = canon("e", ["a1", "a2", "rb"], [("I1", "medium", {"a1": True, "a2": True}), ("I2", "low", {"rb": True})])
    rows = env_matches(c, {"a1": "A", "a2": "A", "rb": "B"})
    assert len(rows) == 2  # no A-vs-A match; each seed plays B
    assert sum(m["weight"] for m in rows) == pytest.approx(4.0)  # (3+1) points, split over 2 pairs


# ----------------------------------------------------------------------------- the fit
def random_tournament(
    rng: np.random.Generator, n_aud: int, n_env: int
) -> tuple[list[dict], dict[str, str], np.ndarray]:
    """Canonical lists where auditor k finds each issue with probability rising in its true strength."""
    true = rng.normal(0, 1.0, n_aud)
    find_p = 1 / (1 + np.exp(-true))
    canons, auditor_of = [], {}
    for e in range(n_env):
        runs = [f"e{e}-a{k}" for k in range(n_aud)]
        for k, r in enumerate(runs):
            auditor_of[r] = f"aud{k:02d}"
        issues = []
        for i in range(int(rng.integers(3, 9))):
            imp = ["low", "medium", "high"][int(rng.integers(0, 3))]
            found = {runs[k]: bool(rng.random() < 0.9) for k in range(n_aud) if rng.random() < find_p[k]}
            issues.append((f"I{i + 1}", imp, found))
        canons.append(canon(f"env{e}", runs, issues))
    return canons, auditor_of, true


def independent_mle(rows: list[dict], names: list[str], iters: int = 200_000) -> np.ndarray:
    """Plain gradient ascent on the per-match weighted likelihood -- shares no code with the solver."""
    idx = {a: k for k, a in enumerate(names)}
    live = [m for m in rows if m["share_a"] is not None]
    i = np.array([idx[m["a"]] for m in live])
    j = np.array([idx[m["b"]] for m in live])
    s = np.array([m["share_a"] for m in live])
    w = np.array([m["weight"] for m in live])
    deg = np.bincount(i, w, len(names)) + np.bincount(j, w, len(names))
    lr = 1.0 / (0.5 * deg.max())  # 1 / Lipschitz bound of the gradient
    theta = np.zeros(len(names))
    for _ in range(iters):
        p = 1 / (1 + np.exp(-(theta[i] - theta[j])))
        g_pair = w * (s - p)
        grad = np.bincount(i, g_pair, len(names)) - np.bincount(j, g_pair, len(names))
        theta += lr * grad
        if np.abs(grad).max() < 1e-10 * deg.max():
            break
    return 1000 + 400 / math.log(10) * (theta - theta.mean())


@pytest.mark.parametrize("weighting", ["points", "unweighted"])
@pytest.mark.parametrize("seed", [1, 2, 3])
def test_fit_matches_independent_maximum_likelihood(weighting: str, seed: int) -> None:
    rng = np.random.default_rng(seed)
    canons, auditor_of, _ = random_tournament(rng, n_aud=5, n_env=12)
    r = compute_ratings(canons, auditor_of, weighting=weighting, rounds=10)  # type: ignore[arg-type]
    assert not r["flags"]["prior_used"]
    names = sorted(set(auditor_of.values()))
    rows = [m for env in r["environments"] for m in env["matches"]]
    expected = independent_mle(rows, names)
    got = {row["auditor"]: row["elo"] for row in r["leaderboard"]}
    for k, a in enumerate(names):
        assert abs(got[a] - expected[k]) < 0.5, (a, got[a], expected[k])
    assert np.mean(list(got.values())) == pytest.approx(1000.0, abs=0.01)


def test_elo_scale_100_points_is_64_percent() -> None:
    # i wins 64 % of the weight against j: the fit puts them ~100 Elo apart
    p = 1 / (1 + 10 ** (-100 / 400))
    w = np.array([[0.0, p], [1 - p, 0.0]])  # W[0,1] = p, W[1,0] = 1-p
    fit = fit_batch(w * 50, prior_weight=1.0)
    assert fit.elo[0] - fit.elo[1] == pytest.approx(100.0, abs=1e-6)
    assert fit.elo.mean() == pytest.approx(1000.0)
    assert to_elo(np.array([1.0, -1.0])).mean() == pytest.approx(1000.0)


def test_deterministic_under_fixed_seed() -> None:
    rng = np.random.default_rng(7)
    canons, auditor_of, _ = random_tournament(rng, n_aud=4, n_env=10)
    a = compute_ratings(canons, auditor_of, rounds=200, seed=11)
    b = compute_ratings(canons, auditor_of, rounds=200, seed=11)
    c = compute_ratings(canons, auditor_of, rounds=200, seed=12)

    def strip(r: dict) -> list:
        return [(x["auditor"], x["elo"], x["lo"], x["hi"], x["rank"]) for x in r["leaderboard"]]

    assert strip(a) == strip(b)
    assert strip(a) != strip(c)  # the seed really drives the resampling
    for row in a["leaderboard"]:
        assert row["lo"] < row["hi"]


def test_intervals_cover_truth_about_95_percent() -> None:
    """Simulate from known strengths (binary matches, several per env); count how often the bootstrap
    interval of each auditor contains its true (centred) Elo."""
    rng = np.random.default_rng(2024)
    truth = np.array([0.8, 0.2, -0.3, -0.7])
    true_elo = to_elo(truth)
    a, n_env, reps = len(truth), 40, 120
    p = 1 / (1 + np.exp(-(truth[:, None] - truth[None, :])))
    hits = total = 0
    for rep in range(reps):
        wins = rng.binomial(3, np.broadcast_to(p, (n_env, a, a))).astype(float)
        iu = np.triu_indices(a, 1)
        env_w = np.zeros((n_env, a, a))
        env_w[:, iu[0], iu[1]] = wins[:, iu[0], iu[1]]
        env_w[:, iu[1], iu[0]] = 3 - wins[:, iu[0], iu[1]]
        full = fit_batch(env_w.sum(0), prior_weight=1.0)
        ci = bootstrap(env_w, full, prior_weight=1.0, rounds=200, seed=rep)
        hits += int(((ci.lo <= true_elo) & (true_elo <= ci.hi)).sum())
        total += a
    coverage = hits / total
    print(f"coverage {coverage:.3f}")
    assert 0.88 <= coverage <= 0.995, coverage


def test_disconnected_graph_gets_prior_and_flags() -> None:
    # {A, B} meet only in env1, {C, D} only in env2: no match links the two groups
    c1 = canon("env1", ["a", "b"], [("I1", "high", {"a": True}), ("I2", "low", {"b": True})])
    c2 = canon("env2", ["c", "d"], [("I1", "medium", {"c": True}), ("I2", "high", {"d": True})])
    r = compute_ratings([c1, c2], {"a": "A", "b": "B", "c": "C", "d": "D"}, rounds=100)
    f = r["flags"]
    assert f["disconnected"] and f["prior_used"] and not f["mle_exists"]
    assert sorted(map(sorted, f["components"])) == [["A", "B"], ["C", "D"]]
    assert f["prior_weight"] > 0
    elo = {x["auditor"]: x["elo"] for x in r["leaderboard"]}
    assert all(math.isfinite(v) for v in elo.values())
    assert np.mean(list(elo.values())) == pytest.approx(1000.0, abs=0.01)
    assert elo["A"] > elo["B"] and elo["D"] > elo["C"]


def test_auditor_that_never_loses_is_finite_and_flagged() -> None:
    c = canon(
        "e",
        ["a", "b", "c"],
        [
            ("I1", "high", {"a": True}),
            ("I2", "low", {"b": True, "a": True}),
            ("I3", "low", {"c": True, "a": True}),
            ("I4", "medium", {"b": True, "a": True}),
        ],
    )
    r = compute_ratings([c], {"a": "A", "b": "B", "c": "C"}, rounds=50)
    assert not r["flags"]["disconnected"] and r["flags"]["prior_used"] and not r["flags"]["mle_exists"]
    top = r["leaderboard"][0]
    assert top["auditor"] == "A" and math.isfinite(top["elo"]) and top["elo"] < 3000


def test_strong_connectivity_batched() -> None:
    cyc = np.array([[0, 1, 0], [0, 0, 1], [1, 0, 0]], dtype=float)
    chain = np.array([[0, 1, 0], [0, 0, 1], [0, 0, 0]], dtype=float)
    assert strongly_connected(np.stack([cyc, chain])).tolist() == [True, False]


def test_interval_ranks() -> None:
    lo = np.array([1200, 1100, 1090, 800])
    hi = np.array([1300, 1150, 1210, 900])
    # 0 is clear of 1 but overlaps 2; 2 overlaps both 0 and 1; everyone is clear above 3
    assert interval_ranks(lo, hi).tolist() == [1, 2, 1, 4]
    lo2 = np.array([1200, 1000])
    hi2 = np.array([1300, 1100])
    assert interval_ranks(lo2, hi2).tolist() == [1, 2]


def test_overlap_matrix_and_cost() -> None:
    r = compute_ratings([WORKED], {"ra": "A", "rb": "B"}, rounds=10, cost_by_run={"ra": 1.5, "rb": None})
    ov = r["overlap"]
    assert ov["auditors"] == ["A", "B"]
    # A supported I1..I5; B found I1 and I5 (I5 without evidence still counts as found) -> 2/5
    assert ov["values"][0] == [None, 0.4]
    # B supported I1, I6; A found I1 -> 1/2
    assert ov["values"][1] == [0.5, None]
    cost = {x["auditor"]: x["cost_usd"] for x in r["leaderboard"]}
    assert cost == {"A": 1.5, "B": None}


def test_failed_environment_is_left_out_and_flagged() -> None:
    bad = {"env": "env2", "status": "failed", "error": "judge gave garbage", "runs": {"ra": {}, "rb": {}}, "issues": []}
    r = compute_ratings([WORKED, bad], {"ra": "A", "rb": "B"}, rounds=10)
    assert r["flags"]["failed_envs"] == ["env2"]
    assert [e["env"] for e in r["environments"]] == ["env1"]


@pytest.mark.parametrize("weighting", ["points", "unweighted"])
def test_matrix_fast_path_agrees_with_match_rows(weighting: str) -> None:
    """EnvArrays (used for fitting) and env_matches (used for the tables) implement the same rules;
    several runs per auditor included."""
    from benchctl.tournament.matches import EnvArrays, wins_matrix

    rng = np.random.default_rng(5)
    runs = [f"r{k}" for k in range(7)]
    auditor_of = {r: f"A{k % 4}" for k, r in enumerate(runs)}  # A0, A1, A2 have two runs each
    index = {a: k for k, a in enumerate(sorted(set(auditor_of.values())))}
    for _ in range(20):
        issues = [
            (
                f"I{i}",
                ["low", "medium", "high"][int(rng.integers(0, 3))],
                {r: bool(rng.random() < 0.8) for r in runs if rng.random() < 0.5},
            )
            for i in range(1, 8)
        ]
        c = canon("e", runs, issues)
        rows = env_matches(c, auditor_of, weighting=weighting)  # type: ignore[arg-type]
        fast = EnvArrays(c, auditor_of, index, weighting)  # type: ignore[arg-type]
        np.testing.assert_allclose(fast.wins, wins_matrix(rows, index), atol=1e-12)
        live = [m for m in rows if m["share_a"] is not None]
        assert int(fast.counts.sum()) == 2 * len(live)
        assert sorted(fast.match_weights.tolist()) == pytest.approx(sorted(m["weight"] for m in live))


def test_match_rows_can_be_left_out() -> None:
    r = compute_ratings([WORKED], {"ra": "A", "rb": "B"}, rounds=10, match_tables=False)
    assert r["flags"]["match_rows_omitted"] and r["environments"][0]["matches"] == []
    assert r["environments"][0]["issues"][0]["supported_by"] == ["A", "B"]
    assert r["leaderboard"][0]["matches"] == 1 and r["leaderboard"][0]["mean_share"] == pytest.approx(13 / 19, abs=1e-6)


def test_an_auditor_that_played_no_match_gets_no_interval_and_no_rank() -> None:
    """One auditor alone (two seeds of it on one env: no match between them) is not measured: no
    zero-width "(1000-1000)" interval, no rank, and flags say who and which runs."""
    solo = canon("env1", ["s0", "s1"], [("I1", "high", {"s0": True})])
    r = compute_ratings([solo], {"s0": "solo", "s1": "solo"}, rounds=100)
    (row,) = r["leaderboard"]
    assert (row["auditor"], row["matches"], row["lo"], row["hi"], row["rank"]) == ("solo", 0, None, None, None)
    assert r["flags"]["unrated_auditors"] == ["solo"] and r["flags"]["no_match_runs"] == ["s0", "s1"]

    # among rated auditors: X's only match (vs Y on env1) had nothing left, so X is unrated; Y and Z are not
    same = canon("env1", ["x", "y"], [("I1", "high", {"x": True, "y": True})])
    other = canon("env2", ["y2", "z"], [("I1", "high", {"y2": True}), ("I2", "low", {"z": True})])
    other2 = canon("env3", ["y3", "z3"], [("I1", "medium", {"y3": True}), ("I2", "medium", {"z3": True})])
    r = compute_ratings(
        [same, other, other2], {"x": "X", "y": "Y", "y2": "Y", "z": "Z", "y3": "Y", "z3": "Z"}, rounds=200
    )
    board = {row["auditor"]: row for row in r["leaderboard"]}
    assert board["X"]["lo"] is None and board["X"]["rank"] is None
    assert all(isinstance(board[a]["lo"], float) and board[a]["lo"] < board[a]["hi"] for a in "YZ")
    assert {board["Y"]["rank"], board["Z"]["rank"]} <= {1, 2}
    assert r["flags"]["unrated_auditors"] == ["X"] and r["flags"]["no_match_runs"] == ["x", "y"]


def test_auditors_with_no_match_leave_the_rated_ones_exactly_as_they_were() -> None:
    """Auditors that played no match (alone on their environment, or every match had nothing left) are
    not in the fit: the rated auditors' Elo, intervals and ranks are what they are without them, the
    prior stays off and the match graph stays connected; the others are listed, unrated."""
    two = {"ra": "A", "rb": "B", "ra2": "A", "rb2": "B"}
    second = canon("env2", ["ra2", "rb2"], [("I1", "high", {"ra2": True}), ("I2", "medium", {"rb2": True})])
    alone = r = compute_ratings([WORKED, second], two, rounds=200)
    assert not r["flags"]["prior_used"] and not r["flags"]["disconnected"]

    solo = canon("demo", ["c0", "c1"], [("I1", "high", {"c0": True})])  # one auditor: no match
    tie = canon("hb", ["d0", "e0"], [("I1", "low", {"d0": True, "e0": True})])  # nothing left: skipped
    extra = {**two, "c0": "C", "c1": "C", "d0": "D", "e0": "E"}
    mixed = compute_ratings([WORKED, second, solo, tie], extra, rounds=200)

    def rated(ratings: dict) -> dict:
        return {row["auditor"]: row for row in ratings["leaderboard"] if row["auditor"] in "AB"}

    assert rated(mixed) == rated(alone)
    assert [row["auditor"] for row in mixed["leaderboard"][:2]] == ["A", "B"]
    flags = mixed["flags"]
    assert flags["unrated_auditors"] == ["C", "D", "E"]
    assert not flags["prior_used"] and flags["prior_weight"] == 0.0 and flags["bootstrap_rounds_with_prior"] == 0
    assert not flags["disconnected"] and flags["components"] == [["A", "B"]] and flags["mle_exists"]
    unrated = {row["auditor"]: row for row in mixed["leaderboard"] if row["auditor"] in "CDE"}
    assert all((row["rank"], row["lo"], row["hi"], row["matches"]) == (None, None, None, 0) for row in unrated.values())


def test_one_environment_gives_differences_but_no_interval_and_no_p() -> None:
    """Every bootstrap resample of a single environment is that environment: the percentiles would
    collapse onto the estimate (a zero-width interval) and the bootstrap p would be its floor,
    2/(rounds+1), calling any difference significant. With one environment there is nothing to
    resample: the Elo and the difference stay, the interval, standard error and p are null."""
    r = compute_ratings([WORKED], {"ra": "A", "rb": "B"}, rounds=1000)
    top, bottom = r["leaderboard"]
    assert (top["lo"], top["hi"], bottom["lo"], bottom["hi"]) == (None, None, None, None)
    assert top["rank"] == bottom["rank"] == 1  # nothing separates them
    (pw,) = r["pairwise"]
    assert (pw["a"], pw["b"]) == ("A", "B")
    assert pw["diff"] == pytest.approx(bottom["elo"] - top["elo"], abs=0.01) and pw["diff"] < 0
    assert (pw["lo"], pw["hi"], pw["se"], pw["p"]) == (None, None, None, None)

    # a second environment brings the bootstrap back
    second = canon("env2", ["ra2", "rb2"], [("I1", "high", {"ra2": True}), ("I2", "low", {"rb2": True})])
    r2 = compute_ratings([WORKED, second], {"ra": "A", "rb": "B", "ra2": "A", "rb2": "B"}, rounds=200)
    (pw2,) = r2["pairwise"]
    assert pw2["lo"] is not None and pw2["lo"] <= pw2["diff"] <= pw2["hi"] and pw2["p"] is not None
