"""File formats of tournament grading: the contract between the grader and `benchctl report`.

Everything lives under ``results/<sweep>/grades/tournament/``::

    grades/tournament/
      ratings.json                 Ratings            (this module; what `report` reads)
      canonical/<env>.json         CanonicalList      one per environment; hand-editable
      extracted/<run_id>.json      ExtractedIssues    issues the judge pulled out of a markdown report
      judge_log/<env>.json         the judge exchanges of the dedup pass (format: benchctl.grading.judge,
                                   write_judge_log), for auditing
      judge_log/<run_id>~extract.json   ... of extracting a markdown report's issues
      judge_log/spend.jsonl        every judge call's and verifier model call's cost (grading/spend.py)
      verify/runs/<id>/            verifier runs (verify = "agent"): meta.json, transcript.jsonl,
                                   artifacts/verdict.json -- a results layout (benchctl/tournament/verify.py)
      <run_id>.json                layout.GradeRecord per run (grader "tournament"; score = the run's
                                   mean match share; items = canonical issues it found)

``ratings.json`` is NOT a GradeRecord (it has no ``run_id``); generic readers of
``grades/<grader>/*.json`` should skip files without ``run_id``.

Words used here:

* **auditor** -- what the leaderboard groups by, built from meta.json fields named by the
  auditor key: ``"model"`` (default), ``"model+harness"``, ``"model+budget"``, ... The label joins
  the field values with ``" + "`` (e.g. ``"anthropic/claude-x + claude_code"``).
* **environment** (env) -- one thing being audited: the run's ``task``, plus ``"~<variant>"`` when
  the run has a variant. All runs on one env are deduplicated together.
* **canonical issue** -- one real issue after the judge merged duplicates across all runs of an env;
  importance low/medium/high = 1/3/6 points.
* **supported** -- the run backed the issue with evidence; only supported issues earn credit.
* **verify** -- the task's ``[grading.tournament] verify``: ``"none"`` (every issue a run found earns),
  ``"judge"`` (default: only supported ones), ``"agent"`` (supported ones whose verifier verdict earns:
  ``"confirmed"``, or with ``verify_credit = "not_refuted"`` also ``"unverifiable"``). Stored in each
  canonical list, so a refit needs no task file.
* **match** -- two runs of different auditors on the same env. Issues both supported cancel; each side
  scores its share of the remaining points (13 vs 6 of 19 -> 13/19 and 6/19). A pair with nothing left
  (identical supported sets, including both empty) is **skipped**: it says nothing about who is
  stronger, and under points-weighting it would carry zero weight anyway. A superset wins 1-0.
  When an auditor has several runs on one env (seeds, budgets), every cross pair is played and each
  gets weight 1/(n_a*n_b), so an auditor pair counts once per env however many seeds it ran.
* **weighting** -- default ``"points"``: a match counts in the Bradley-Terry likelihood with weight =
  points at stake (13/19 -> 13 points won, 6 lost), so a match over one low issue moves ratings less
  than one over three high issues. ``"unweighted"``: every match weighs 1.

Elo scale: strengths s fitted on the natural-log scale, shown as ``1000 + 400*log10(e)*(s - mean s)``:
mean 1000; +100 Elo = 64 % expected share, +200 = 76 %. Intervals: bootstrap over environments
(matches in one env are correlated), 2.5-97.5 percentiles. Rank = 1 + number of auditors whose lower
bound is above this auditor's upper bound (so auditors with overlapping intervals share ranks).
"""

from __future__ import annotations

from typing import Literal, NotRequired, TypedDict

RATINGS_SCHEMA = 1
CANONICAL_SCHEMA = 1

TOURNAMENT = "tournament"  # grader name: grades/tournament/
RATINGS_FILE = "ratings.json"
CANONICAL_DIR = "canonical"
EXTRACTED_DIR = "extracted"
VERIFY_DIR = "verify"  # verifier runs: a results layout (runs/<id>/) of its own

Importance = Literal["low", "medium", "high"]
POINTS: dict[str, int] = {"low": 1, "medium": 3, "high": 6}
Weighting = Literal["points", "unweighted"]
VerifyMode = Literal["none", "judge", "agent"]
VERIFY_MODES: tuple[str, ...] = ("none", "judge", "agent")
VerifyCredit = Literal["confirmed", "not_refuted"]
Verdict = Literal["confirmed", "refuted", "unverifiable"]
VERDICTS: tuple[str, ...] = ("confirmed", "refuted", "unverifiable")
CREDITED: dict[str, frozenset[str]] = {  # verify_credit -> the verdicts that earn
    "confirmed": frozenset({"confirmed"}),
    "not_refuted": frozenset({"confirmed", "unverifiable"}),
}
MatchOutcome = Literal["a", "b", "split", "skipped"]  # a/b = outright (1-0) win


# ----------------------------------------------------------------------------- input artifact
class AuditorIssue(TypedDict, total=False):
    """One entry of a run's ``artifacts/issues.json`` (a JSON list of these, or ``{"issues": [...]}``).

    ``title`` is required; the rest are optional but ``evidence`` is what the judge looks at when
    deciding whether the issue is *supported*."""

    title: str
    description: str
    evidence: str  # file paths, line numbers, commands run and their output, ...
    reproduction: str  # commands that show the issue in a fresh sandbox (what a verifier runs first)
    severity: str  # the auditor's own label; informative only, the judge decides importance


class ExtractedIssues(TypedDict, total=False):
    """grades/tournament/extracted/<run_id>.json: issues read from a run (JSON or judge-extracted)."""

    schema: int
    run_id: str
    source: str | None  # artifact file name, e.g. "issues.json" or "report.md"; None: the run has none
    method: Literal["json", "judge", "none"]
    status: Literal["ok", "failed"]
    error: str | None
    issues: list[AuditorIssue]
    judge: str | None
    cost_usd: float | None


# ----------------------------------------------------------------------------- canonical lists
class Finding(TypedDict, total=False):
    """How one run reported one canonical issue (entry of CanonicalIssue.found_by, keyed by run_id)."""

    supported: bool  # backed by evidence -> earns credit; hand-edit to override the judge
    items: list[int]  # indices into that run's extracted issue list (0-based)
    note: str  # judge's reason (optional)


class VerifierCommand(TypedDict):
    """One tool call of a verifier run, as its transcript holds it (output cut to a few KB)."""

    tool: str  # bash, python, create, ...
    command: str  # the command line, the program, or the tool's input as JSON
    exit_code: int | None
    output: str


class Verification(TypedDict):
    """What the verifier found for one canonical issue (verify = "agent"); hand-editable like the rest.
    verdict None: not verified (the verifier failed, wrote no usable verdict, or the cost cap kept it
    from running; `reason` says which); its environment is left out of the ratings until a rerun
    verifies it."""

    verdict: Verdict | None
    reason: str
    verifier_run: str | None  # run id under grades/tournament/verify/runs/
    commands: list[VerifierCommand]


class CanonicalIssue(TypedDict, total=False):
    id: str  # "I1", "I2", ... stable within the file
    title: str
    description: str
    importance: Importance  # authoritative: points are always derived as POINTS[importance]
    found_by: dict[str, Finding]  # run_id -> Finding; a run not listed did not find it
    verification: Verification  # verify = "agent" only


class CanonicalList(TypedDict, total=False):
    """grades/tournament/canonical/<env>.json. Hand-edit ``issues`` freely (importance, supported,
    merge or split issues) and run ``rate_from_canonical``; no judge call is needed."""

    schema: int  # CANONICAL_SCHEMA
    env: str
    status: Literal["ok", "failed"]  # failed = judge never gave a valid answer; env is left out
    error: str | None
    judge: str | None
    runs: dict[str, dict]  # run_id -> {"task","harness","model","budget","variant","tools","seed",
    #            "source": artifact name or None, "n_issues"}
    excluded_runs: dict[str, str]  # run_id -> why it was left out (its markdown could not be extracted)
    issues: list[CanonicalIssue]
    input_hash: str  # hash of the submissions the judge saw (re-judge when it changes)
    content_hash: str  # hash of `issues` as the judge wrote it (detects hand edits)
    created_at: float
    cost_usd: float | None  # the judge's extraction and dedup calls (verifier runs: their meta.json)
    verify: VerifyMode  # absent = "judge"
    verify_credit: VerifyCredit  # absent = "confirmed"


# ----------------------------------------------------------------------------- ratings.json
class LeaderboardRow(TypedDict):
    rank: int | None  # 1 + #auditors whose lo > this hi; None when unrated (no match played)
    auditor: str
    elo: float  # full-data fit, mean over rated auditors = 1000; an unrated one is not in the fit: 1000, no measurement
    lo: float | None  # 2.5 percentile of bootstrap; None when unrated or without bootstrap rounds
    hi: float | None  # 97.5 percentile of bootstrap; None likewise
    matches: int  # non-skipped run-vs-run matches played
    environments: int  # environments with at least one run of this auditor
    runs: int  # runs of this auditor that entered the tournament
    mean_share: float | None  # unweighted mean share over its non-skipped matches
    points_won: float  # sum of weight*share (in the fit's weighting)
    points_at_stake: float  # sum of weight
    cost_usd: float | None  # sum of meta.json cost_usd over its runs; None if any is unknown


class OverlapMatrix(TypedDict):
    """values[i][j] = share of row auditor i's supported issues that column auditor j also found
    (found at all, supported or not), pooled over environments, each env's run pairs weighted
    1/(n_i*n_j). None on the diagonal and where i has no supported issue in envs shared with j."""

    auditors: list[str]
    values: list[list[float | None]]


class MatchRow(TypedDict):
    a: str  # auditor label
    b: str
    run_a: str
    run_b: str
    cancelled: list[str]  # canonical issue ids both supported
    a_only: list[str]  # supported by a, not by b
    b_only: list[str]
    points_a: float  # points of a_only
    points_b: float
    share_a: float | None  # points_a/(points_a+points_b); None when skipped
    outcome: MatchOutcome
    weight: float  # weight in the fit (points at stake or 1) x 1/(n_a*n_b)


class EnvTable(TypedDict):
    env: str
    canonical_hash: str
    issues: list[dict]  # {"id","title","importance","points","supported_by":[auditors] (the auditors it earned
    #                      credit for),"found_by":[auditors], "verdict", "reason", "verifier_run" (verify = "agent")}
    verify: VerifyMode
    matches: list[MatchRow]  # empty when flags.match_rows_omitted


class Flags(TypedDict):
    disconnected: bool  # the match graph (non-skipped matches) of the rated auditors has >1 component
    components: list[list[str]]  # rated auditors by connected component (one entry when connected)
    mle_exists: bool  # every rated auditor both won and lost points inside a strongly connected graph
    prior_used: bool  # a small prior (virtual draws vs a 1000-rated anchor) was added
    prior_weight: float  # per auditor, in the fit's weight units; 0 when unused
    bootstrap_rounds_with_prior: int  # resamples that needed the prior (disconnected/separated)
    failed_envs: list[str]  # envs whose canonical list failed (left out of the fit)
    no_issue_runs: list[str]  # runs that entered with no issues artifact (they score 0)
    excluded_runs: list[str]  # runs left out because the judge could not extract their issues
    match_rows_omitted: bool  # environments[].matches left empty: too many matches to list
    # (> ratings.MAX_TABLE_MATCHES run-vs-run matches); issues are still listed
    # auditors that played no match (e.g. the only one): left out of the fit (so they never move the rated
    # ones nor call for the prior), no interval, no rank
    unrated_auditors: list[str]
    no_match_runs: list[str]  # runs that played no match: their grade record is unscored
    unverified_envs: list[str]  # verify = "agent" envs with an issue not verified (left out of the fit)


class VerifySummary(TypedDict):
    """How the rated environments' issues earned credit (ratings.json `verify`)."""

    mode: str  # the environments' verify mode, or "mixed" (each EnvTable has its own)
    credit: str  # verify_credit of the agent-verified environments ("confirmed" when none), or "mixed"
    confirmed: int  # canonical issues by verdict (agent-verified environments, unverified ones too)
    refuted: int
    unverifiable: int
    unverified: int  # no verdict yet


class PairwiseRow(TypedDict):
    """Elo of `b` minus Elo of `a` (rated auditors, a before b in name order) with its bootstrap
    interval over environments (the same rounds as the ratings' intervals), its bootstrap standard
    error, and the two-sided bootstrap p: 2·(min(#rounds ≤ 0, #rounds ≥ 0) + 1) / (rounds + 1).
    lo, hi, se and p are null when fewer than two environments were played: there is nothing to resample."""

    a: str
    b: str
    diff: float
    lo: float | None
    hi: float | None
    se: float | None
    p: float | None


class Ratings(TypedDict):
    schema: int  # RATINGS_SCHEMA
    grader: str  # "tournament"
    judge: str | None  # dedup judge model (None when every canonical list was hand-made)
    auditor_key: str  # e.g. "model" or "model+harness"
    weighting: Weighting
    bootstrap_rounds: int
    seed: int
    ci: list[float]  # [2.5, 97.5]
    leaderboard: list[LeaderboardRow]  # rated auditors by elo, descending, then the unrated ones
    overlap: OverlapMatrix
    environments: list[EnvTable]
    canonical_hashes: dict[str, str]  # env -> content hash of the canonical list used
    flags: Flags
    verify: VerifySummary
    created_at: float
    pairwise: NotRequired[list[PairwiseRow]]  # absent in ratings written before it existed
