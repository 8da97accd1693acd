"""run -> grade -> report on the demo task: the report reads what the real writers wrote."""
from __future__ import annotations

import json
import statistics
from pathlib import Path

import pytest

from benchctl.jsonio import read_json
from tests._run_helpers import REPO, cli

pytestmark = pytest.mark.docker
FAKE_JUDGE = "scripted/py:benchctl.grading.fake_judge:judge"


def test_run_grade_report_demo(tmp_path: Path) -> None:
    out = tmp_path / "sweep"
    base = ["run", str(REPO / "configs/demo"), "--model", f"scripted/{REPO}/configs/demo/investigator.json",
            "--budget", "2m", "--seeds", "2", "--out", str(out), "-j", "2", "--progress", "quiet"]
    for extra in ([], ["--variant", "contoso"]):          # original data, then the swapped variant
        r = cli(*base, *extra)
        assert r.returncode == 0, r.stderr
    r = cli("grade", str(out), "--judge", FAKE_JUDGE)
    assert r.returncode == 0, r.stderr
    r = cli("report", str(out), "--format", "json", "--html", str(tmp_path / "r.html"))
    assert r.returncode == 0, r.stderr
    doc = json.loads(r.stdout)
    lb = doc["tables"]["leaderboard"]["rows"]
    combined = {p.stem: read_json(p)["score"] for p in (out / "grades" / "combined").glob("*.json")}
    metas = [read_json(p) for p in (out / "runs").glob("*/meta.json")]
    assert len(metas) == 4 and len(lb) == 2
    for row in lb:
        ids = [m["run_id"] for m in metas if (m.get("variant") or "original") == row["variant"]]
        assert row["n_runs"] == 2 and row["n_scored"] == 2
        assert row["score_mean"] == pytest.approx(statistics.mean(combined[i] for i in ids))
    assert "variants" in doc["tables"] and "clusters" in doc["tables"]
    prov = doc["provenance"]
    assert set(prov["task_hashes"]) == {"demo", "demo~contoso"}
    assert prov["judges"]["coverage"] == {FAKE_JUDGE: 4}
    assert "<table>" in (tmp_path / "r.html").read_text()
