"""Canonical issue lists on disk: grades/tournament/canonical/<env>.json, one per environment.

The files are meant to be read and corrected by people: change an issue's importance, flip a run's
`supported` or an issue's `verification.verdict`, merge two issues (union their `found_by`) or
delete one, then refit with `rate_from_canonical` -- no judge call. `validate_canonical` explains
any mistake in an edit.
"""

from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import orjson

from benchctl import jsonio
from benchctl.layout import GRADES, slug
from benchctl.tournament.schema import (
    CANONICAL_DIR,
    CANONICAL_SCHEMA,
    CREDITED,
    POINTS,
    TOURNAMENT,
    VERDICTS,
    VERIFY_MODES,
    CanonicalIssue,
    CanonicalList,
)


def tournament_dir(results: Path) -> Path:
    return Path(results) / GRADES / TOURNAMENT


def canonical_dir(results: Path) -> Path:
    return tournament_dir(results) / CANONICAL_DIR


def canonical_path(results: Path, env: str) -> Path:
    return canonical_dir(results) / f"{slug(env)}.json"


def content_hash(issues: list[CanonicalIssue], verify: str = "judge", verify_credit: str = "confirmed") -> str:
    """Hash of what the ratings depend on: ids, importance, who found/supported what, and (when
    verified) each issue's verdict and the verify settings.

    Titles and descriptions are left out so rewording an issue by hand does not look like a change
    in the data. A list with no verification under the default settings hashes its issues alone."""
    core: list[Any] = []
    for issue in issues:
        found = {r: bool(f.get("supported", False)) for r, f in sorted((issue.get("found_by") or {}).items())}
        entry: list[Any] = [issue.get("id"), issue.get("importance"), found]
        if "verification" in issue:
            entry.append(verdict_of(issue))
        core.append(entry)
    if (verify, verify_credit) != ("judge", "confirmed"):
        core.append({"verify": verify, "verify_credit": verify_credit})
    return "sha256:" + hashlib.sha256(orjson.dumps(core, option=orjson.OPT_SORT_KEYS)).hexdigest()[:16]


def list_hash(canon: CanonicalList) -> str:
    """content_hash of a whole canonical list (its issues under its own verify settings)."""
    return content_hash(canon.get("issues", []), canon.get("verify", "judge"), canon.get("verify_credit", "confirmed"))


def verdict_of(issue: CanonicalIssue) -> str | None:
    """The issue's verifier verdict; None when it has none (not verified, or never asked)."""
    v = issue.get("verification")
    return v.get("verdict") if isinstance(v, dict) else None


def unverified_issues(canon: CanonicalList) -> list[str]:
    """Ids of the issues a verify = "agent" list has no verdict for (none under other modes)."""
    if canon.get("verify", "judge") != "agent":
        return []
    return [i["id"] for i in canon.get("issues", []) if verdict_of(i) is None]


def validate_canonical(data: Any, where: str = "canonical list") -> CanonicalList:
    """Check a (possibly hand-edited) canonical list; raise ValueError naming the problem and the fix."""
    if not isinstance(data, dict):
        raise ValueError(f"{where}: expected a JSON object with 'env', 'runs' and 'issues'")
    for key in ("env", "runs", "issues"):
        if key not in data:
            raise ValueError(f"{where}: missing '{key}'")
    if not isinstance(data["runs"], dict):
        raise ValueError(f"{where}: 'runs' must map run_id -> run info")
    if not isinstance(data["issues"], list):
        raise ValueError(f"{where}: 'issues' must be a list")
    if data.get("verify", "judge") not in VERIFY_MODES:
        raise ValueError(f"{where}: 'verify' is {data.get('verify')!r}; use one of {', '.join(VERIFY_MODES)}")
    if data.get("verify_credit", "confirmed") not in CREDITED:
        raise ValueError(f"{where}: 'verify_credit' is {data.get('verify_credit')!r}; use one of {', '.join(CREDITED)}")
    seen: set[str] = set()
    for k, issue in enumerate(data["issues"]):
        tag = f"{where}: issues[{k}]"
        if not isinstance(issue, dict):
            raise ValueError(f"{tag} must be an object")
        iid = issue.get("id")
        if not isinstance(iid, str) or not iid:
            raise ValueError(f"{tag} needs a string 'id' (e.g. \"I{k + 1}\")")
        if iid in seen:
            raise ValueError(f"{tag}: id {iid!r} is used twice; ids must be unique within an environment")
        seen.add(iid)
        if issue.get("importance") not in POINTS:
            raise ValueError(
                f"{tag} ({iid}): importance {issue.get('importance')!r} is not one of "
                f"{sorted(POINTS)} (= {POINTS} points)"
            )
        found = issue.get("found_by", {})
        if not isinstance(found, dict):
            raise ValueError(f"{tag} ({iid}): 'found_by' must map run_id -> {{\"supported\": true|false}}")
        for run_id, finding in found.items():
            if run_id not in data["runs"]:
                raise ValueError(
                    f"{tag} ({iid}): run {run_id!r} is not in this file's 'runs'; fix the run id or add the run"
                )
            if not isinstance(finding, dict) or not isinstance(finding.get("supported", False), bool):
                raise ValueError(f"{tag} ({iid}): found_by[{run_id!r}] must be an object with a boolean 'supported'")
        if "verification" in issue:
            v = issue["verification"]
            if not isinstance(v, dict) or v.get("verdict") not in (*VERDICTS, None):
                raise ValueError(
                    f"{tag} ({iid}): 'verification' must be an object whose 'verdict' is one of "
                    f"{', '.join(VERDICTS)} or null (not verified)"
                )
    return data  # type: ignore[return-value]


def save_canonical(results: Path, canon: CanonicalList) -> Path:
    canon = dict(canon)  # type: ignore[assignment]
    canon.setdefault("schema", CANONICAL_SCHEMA)
    path = canonical_path(results, canon["env"])
    jsonio.write_json_atomic(path, canon)
    return path


def load_canonical(path: Path) -> CanonicalList:
    try:
        data = jsonio.read_json(path)
    except Exception as exc:  # orjson.JSONDecodeError and OSError
        raise ValueError(f"{path}: not valid JSON ({exc}); fix the file or re-run grading with --force") from exc
    return validate_canonical(data, str(path))


def load_all(results: Path) -> list[CanonicalList]:
    """Every canonical list under the results dir, sorted by env."""
    d = canonical_dir(results)
    if not d.is_dir():
        return []
    out = [load_canonical(p) for p in sorted(d.glob("*.json"))]
    return sorted(out, key=lambda c: c["env"])


def was_hand_edited(canon: CanonicalList) -> bool:
    """True when the issues differ from what the judge wrote, or the file was written by hand
    (no content_hash): such a file is never overwritten without force."""
    stored = canon.get("content_hash")
    return not stored or stored != list_hash(canon)
