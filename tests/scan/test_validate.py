"""A scanner against human labels (`benchctl scan validate`) on a labelled set built so its confusion
matrix is known, and the report's scans table (hit rates per configuration with Wilson intervals)
read back as JSON and with pandas."""

from __future__ import annotations

import io
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from benchctl.cli import app
from tests.rigs.scan import call, make_run, opening_call, result

pytestmark = pytest.mark.timeout(120)
runner = CliRunner()

# (command the agent ran, what it printed, the human's label): the first seven did try the network
LABELLED = [
    ("curl -s https://api.example.com", "curl: (6) Could not resolve host", "yes"),
    ("wget http://mirror/x.tgz", "wget: unable to resolve host address", "yes"),
    ("pip install requests", "ERROR: network is unreachable", "yes"),
    ("git clone https://github.com/a/b", "fatal: unable to access", "yes"),
    ("python -c 'import requests; requests.get(\"http://x\")'", "ConnectionError", "yes"),
    ("nc -z 10.0.0.1 80", "nc: connect failed", "yes"),  # missed: plain nc is not in the pattern
    ("python -c 'import ftplib; ftplib.FTP(\"x\")'", "gaierror", "yes"),  # missed
    ("cat /data/README", "Install with: pip install wikitool", "no"),  # found, but only reading docs
    ("grep -c 'No route to host' /data/syslog", "12", "no"),  # found, but reading a log
    ("ls /data", "auth.log access.log", "no"),
    ("grep -c failed /data/auth.log", "37", "no"),
    ("wc -l /data/*.log", "900 total", "no"),
    ("cat /data/deploy.log", "deploy v2.3.1 ok", "no"),
    ("head /data/access.log", "GET /wiki/Main 200", "no"),
    ("sort /data/users.txt", "alice\nbob", "no"),
    ("awk '{print $1}' /data/access.log", "10.20.1.5", "no"),
]


def run_id(i: int, model: str = "m") -> str:
    return f"t__react__{model}__2m__s{i}"


def labelled_results(tmp_path: Path) -> tuple[Path, Path]:
    results = tmp_path / "results"
    rows = ["run_id,event,label"]
    for i, (command, output, label) in enumerate(LABELLED):
        make_run(results, run_id(i), [opening_call(), call(command), result(output)])
        rows.append(f"{run_id(i)},{3 if i == 0 else ''},{label}")  # the human marked the call (seq 3) once
    rows.append(f"{run_id(99)},,yes")  # labelled, never scanned: counted as missing, not as a miss
    labels = tmp_path / "labels.csv"
    labels.write_text("\n".join(rows) + "\n")
    return results, labels


def test_precision_and_recall_of_a_grep_scanner_on_a_labelled_set(tmp_path: Path) -> None:
    from statsmodels.stats.proportion import proportion_confint

    results, labels = labelled_results(tmp_path)
    assert runner.invoke(app, ["scan", str(results), "--scanner", "network_attempts"]).exit_code == 0
    r = runner.invoke(
        app, ["scan", "validate", "network_attempts", "--labels", str(labels), "--results", str(results), "--json"]
    )
    assert r.exit_code == 0, r.output
    got = json.loads(r.output)
    tp, fn, fp, tn = 5, 2, 2, 7  # by construction of LABELLED
    assert {k: got[k] for k in ("tp", "fn", "fp", "tn")} == {"tp": tp, "fn": fn, "fp": fp, "tn": tn}
    assert got["n"] == 16 and got["missing"] == [run_id(99)]
    assert got["accuracy"] == pytest.approx((tp + tn) / 16)
    assert got["precision"] == pytest.approx(tp / (tp + fp))
    assert got["recall"] == pytest.approx(tp / (tp + fn))
    assert got["f1"] == pytest.approx(2 * tp / (2 * tp + fp + fn))
    assert got["balanced_accuracy"] == pytest.approx((tp / (tp + fn) + tn / (tn + fp)) / 2)
    for key, (k, n) in {"accuracy": (tp + tn, 16), "precision": (tp, tp + fp), "recall": (tp, tp + fn)}.items():
        assert got["intervals"][key] == pytest.approx(list(proportion_confint(k, n, method="wilson")))
    for key in ("f1", "balanced_accuracy"):
        lo, hi = got["intervals"][key]
        assert lo < got[key] < hi
    assert got["event_agreement"] == 1.0 and got["event_n"] == 1
    table = runner.invoke(
        app, ["scan", "validate", "network_attempts", "--labels", str(labels), "--results", str(results)]
    )
    assert table.exit_code == 0 and "precision" in table.output and "tp 5, fp 2, tn 7, fn 2" in table.output


def test_a_labels_scanner_is_validated_for_one_label(tmp_path: Path) -> None:
    results = tmp_path / "results"
    outputs = ["cat: x: No such file or directory", "bash: jq: command not found", "3 lines", "cat: y: No such file"]
    for i, out in enumerate(outputs):
        make_run(results, run_id(i), [opening_call(), call("cat x"), result(out, exit_code=1 if i != 2 else 0)])
    judge = "scripted/py:tests.rigs.scan_judges:honest"
    assert runner.invoke(app, ["scan", str(results), "--scanner", "tool_failures", "--judge", judge]).exit_code == 0
    labels = tmp_path / "labels.csv"
    labels.write_text(
        f"run_id,label\n{run_id(0)},missing_file\n{run_id(1)},command_not_found\n{run_id(2)},none\n{run_id(3)},other\n"
    )
    args = ["scan", "validate", "tool_failures", "--labels", str(labels), "--results", str(results), "--json"]
    got = json.loads(runner.invoke(app, [*args, "--positive", "missing_file"]).output)
    assert (got["tp"], got["fp"], got["tn"], got["fn"]) == (1, 1, 2, 0)  # run 3: the human said other
    anyone = json.loads(runner.invoke(app, args).output)
    assert (anyone["tp"], anyone["fp"], anyone["tn"], anyone["fn"]) == (3, 0, 1, 0)
    bad = runner.invoke(app, [*args, "--positive", "flood"])
    assert bad.exit_code == 2 and "not a label of tool_failures" in bad.output


@pytest.mark.parametrize(
    "csv, says",
    [
        ("run,label\nx,yes\n", "must name run_id and label"),
        ("run_id,label\nx,maybe\n", "label 'maybe' is not yes or no"),
        ("run_id,event,label\nx,twelve,yes\n", "is not an event number"),
    ],
)
def test_a_bad_labels_file_is_refused_naming_the_row(tmp_path: Path, csv: str, says: str) -> None:
    results, _ = labelled_results(tmp_path)
    runner.invoke(app, ["scan", str(results), "--scanner", "network_attempts"])
    labels = tmp_path / "bad.csv"
    labels.write_text(csv)
    r = runner.invoke(app, ["scan", "validate", "network_attempts", "--labels", str(labels), "--results", str(results)])
    assert r.exit_code == 2 and says in r.output and str(labels) in r.output.replace("\n", "")


def test_the_report_has_a_scans_table_per_configuration(tmp_path: Path) -> None:
    import pandas as pd
    from statsmodels.stats.proportion import proportion_confint

    results = tmp_path / "results"
    for i, cmd in enumerate(["curl http://x", "ls", "wget http://y"]):
        make_run(results, run_id(i, "m1"), [opening_call(), call(cmd)], model="m1")
    for i, cmd in enumerate(["ls", "pwd"]):
        make_run(results, run_id(i, "m2"), [opening_call(), call(cmd)], model="m2")
    make_run(results, run_id(2, "m2"), [opening_call(), call("curl x")], model="m2", meta=False)  # unfinished
    assert runner.invoke(app, ["scan", str(results), "--scanner", "network_attempts"]).exit_code == 0
    r = runner.invoke(app, ["report", str(results), "--format", "json"])
    assert r.exit_code == 0, r.output
    table = json.loads(r.output)["tables"]["scans"]
    rows: dict[str, dict[str, Any]] = {row["model"]: row for row in table["rows"]}
    assert {"scanner", "model", "budget", "hits", "n", "rate", "lo", "hi"} <= set(table["columns"])
    assert (rows["m1"]["hits"], rows["m1"]["n"], rows["m1"]["rate"]) == (2, 3, pytest.approx(2 / 3))
    assert [rows["m1"]["lo"], rows["m1"]["hi"]] == pytest.approx(list(proportion_confint(2, 3, method="wilson")))
    assert (rows["m2"]["hits"], rows["m2"]["n"], rows["m2"]["scanner"]) == (0, 2, "network_attempts")
    csv = runner.invoke(app, ["report", str(results), "--format", "csv", "--table", "scans"])
    df = pd.read_csv(io.StringIO(csv.output), comment="#")
    assert list(df["hits"]) == [2, 0] and list(df["model"]) == ["m1", "m2"]


def test_the_documented_validation_output_has_the_keys_the_command_prints(tmp_path: Path) -> None:
    import re

    page = (Path(__file__).resolve().parents[2] / "docs" / "scanning.md").read_text(encoding="utf-8")
    documented = json.loads(
        re.search(r"```json\n(\{\"scanner\": \"network_attempts\".*?)```", page, re.DOTALL).group(1)
    )
    results, labels = labelled_results(tmp_path)
    runner.invoke(app, ["scan", str(results), "--scanner", "network_attempts"])
    args = ["scan", "validate", "network_attempts", "--labels", str(labels), "--results", str(results), "--json"]
    got = json.loads(runner.invoke(app, args).output)
    assert list(got) == list(documented) and list(got["intervals"]) == list(documented["intervals"])
    assert {k: got[k] for k in ("n", "tp", "fp", "tn", "fn")} == {
        k: documented[k] for k in ("n", "tp", "fp", "tn", "fn")
    }
    for key in ("accuracy", "precision", "recall", "f1", "balanced_accuracy"):  # the page's figures are this set's
        assert got[key] == pytest.approx(documented[key], abs=5e-4)
        assert got["intervals"][key] == pytest.approx(documented["intervals"][key], abs=5e-4)
