"""Task packages written for the import tests, in a local git repository, and scripted auditors.

The Harbor suite (tasks/):
- `shipped-answer`: a planted *packaging* bug: environment/Dockerfile does `COPY . /app/`, and the
  environment directory holds expected_answer.txt (which tests/test.sh compares against), so the
  agent's image contains the answer key: `cp /app/expected_answer.txt /app/answer.txt` gets reward 1
  without doing the task. Its image also removes tini, as most task images lack it.
- `word-count`: a plain task whose tests compare against /tests/expected.txt.
The Inspect task (inspect/arith/): a json_dataset with a FieldSpec, and an `includes()` scorer (a
planted scorer bug: "12" contains the target "2").

Scripted auditors (`scripted/py:tests.rigs.task_import:<name>`):
- `open_book_auditor` uses run_task_tests when it has it (reference solution, then the hack), reads
  the files, and reports what it could show;
- `static_auditor` reads the instruction and reports one low issue.
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
from pathlib import Path
from typing import Any

INPUT = "benchctl\n"
ANSWER = hashlib.sha256(INPUT.encode()).hexdigest()

SHIPPED_ANSWER = {
    "task.toml": """version = "1.0"

[task]
name = "benchctl-tests/shipped-answer"
description = "Hash a file"

[metadata]
difficulty = "easy"

[verifier]
timeout_sec = 60.0
env = { EXPECTED_FILE = "/app/expected_answer.txt", TOKEN = "${HOST_TOKEN}" }

[agent]
timeout_sec = 120.0

[environment]
build_timeout_sec = 300.0
""",
    "instruction.md": "Compute the SHA-256 of /app/input.txt and write the hex digest to /app/answer.txt.\n",
    "environment/Dockerfile": "FROM benchctl-sandbox:latest\nUSER root\nRUN rm -f /usr/bin/tini\nWORKDIR /app\nCOPY . /app/\n",
    "environment/input.txt": INPUT,
    "environment/expected_answer.txt": ANSWER + "\n",
    "tests/test.sh": """#!/bin/bash
# compare the agent's answer with the expected one
mkdir -p /logs/verifier
if [ "$(cat /app/answer.txt 2>/dev/null)" = "$(cat "$EXPECTED_FILE")" ]; then
  echo 1 > /logs/verifier/reward.txt
else
  echo 0 > /logs/verifier/reward.txt
fi
""",
    "solution/solve.sh": "#!/bin/bash\nsha256sum /app/input.txt | cut -d' ' -f1 > /app/answer.txt\n",
}

WORD_COUNT = {
    "task.toml": 'version = "1.0"\n\n[verifier]\ntimeout_sec = 30.0\n',
    "instruction.md": "Count the words in /app/text.txt and write the number to /app/count.txt.\n",
    "environment/Dockerfile": "FROM benchctl-sandbox:latest\nUSER root\nWORKDIR /app\nCOPY text.txt /app/text.txt\n",
    "environment/text.txt": "one two three four five\n",
    "tests/test.sh": "#!/bin/bash\nmkdir -p /logs/verifier\n"
    'if [ "$(cat /app/count.txt)" = "$(cat /tests/expected.txt)" ]; then r=1; else r=0; fi\n'
    'echo "{\\"reward\\": $r}" > /logs/verifier/reward.json\n',
    "tests/expected.txt": "5\n",
    "solution/solve.sh": "#!/bin/bash\nwc -w < /app/text.txt > /app/count.txt\n",
}

ARITH_PY = '''"""Arithmetic questions."""
from inspect_ai import Task, task
from inspect_ai.dataset import FieldSpec, json_dataset
from inspect_ai.scorer import includes
from inspect_ai.solver import generate

DATA = "arith.jsonl"


@task
def arith():
    """Sums, scored by substring match."""
    return Task(dataset=json_dataset(DATA, FieldSpec(input="question", target="answer", id="qid",
                                                     metadata=["level"])),
                solver=generate(), scorer=includes())
'''
ARITH_JSONL = (
    '{"qid": "q1", "question": "What is 1+1?", "answer": "2", "level": 1, "note": "x"}\n'
    '{"qid": "q2", "question": "What is 10+5?", "answer": "15", "level": 2}\n'
)


def write_files(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        p = root / rel
        p.parent.mkdir(parents=True, exist_ok=True)
        p.write_text(text)
        if rel.endswith(".sh"):
            p.chmod(0o755)


def git(repo: Path, *args: str) -> str:
    return subprocess.run(
        ["git", "-c", "user.email=t@example.org", "-c", "user.name=t", *args],
        cwd=repo,
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()


def make_repo(root: Path) -> tuple[Path, str]:
    """A git repository with the Harbor suite and the Inspect task; returns (repo, first commit)."""
    repo = root / "upstream"
    repo.mkdir(parents=True)
    git(repo, "init", "-q")
    write_files(repo / "tasks" / "shipped-answer", SHIPPED_ANSWER)
    write_files(repo / "tasks" / "word-count", WORD_COUNT)
    write_files(repo / "inspect" / "arith", {"arith.py": ARITH_PY, "arith.jsonl": ARITH_JSONL})
    (repo / "README.md").write_text("tasks for the benchctl import tests\n")
    git(repo, "add", "-A")
    git(repo, "commit", "-qm", "tasks")
    return repo, git(repo, "rev-parse", "HEAD")


def commit_change(repo: Path, rel: str, text: str) -> str:
    (repo / rel).write_text(text)
    git(repo, "commit", "-qam", f"change {rel}")
    return git(repo, "rev-parse", "HEAD")


# ---------------------------------------------------------------- scripted auditors


def _tool(req: Any, name: str) -> str | None:
    return next((t for t in req.tool_names if t == name or t.endswith("__" + name)), None)


def _tool_side(req: Any) -> str:
    from benchctl.targets.demo import _tool_side

    return _tool_side(req)


def _write(req: Any, issues: list[dict[str, str]]) -> dict[str, Any]:
    text = json.dumps(issues, indent=1)
    if _tool(req, "create"):
        return {"name": "create", "input": {"path": "/work/issues.json", "file_text": text}}
    return {"name": "Write", "input": {"file_path": "/work/issues.json", "content": text}}


def _finish(req: Any) -> dict[str, Any]:
    if _tool(req, "submit"):
        return {"text": "Audit written.", "tool_calls": [{"name": "submit", "input": {"summary": "issues written"}}]}
    return {"text": "Audit written."}


def _written(done: str) -> bool:
    return bool(re.search(r"(Wrote \d+ bytes to|File created successfully at:) /work/issues\.json", done))


def open_book_auditor(req: Any) -> dict[str, Any]:
    done = _tool_side(req)
    tests = _tool(req, "run_task_tests")
    harbor = "packaged for the Harbor framework" in req.full_text
    if tests and "run_task_tests #1" not in done:
        return {
            "text": "Does the reference solution pass?",
            "tool_calls": [{"name": tests, "input": {"run_solution": True}}],
        }
    if tests and "run_task_tests #2" not in done:
        return {
            "text": "Can the answer key in the image get the reward?",
            "tool_calls": [{"name": tests, "input": {"setup": "cp /app/expected_answer.txt /app/answer.txt"}}],
        }
    if "== packaging ==" not in done:
        cat = "echo '== packaging =='; " + (
            "cat /data/environment/Dockerfile /data/tests/test.sh" if harbor else "cat /data/source/*.py"
        )
        call = (
            {"name": "bash", "input": {"command": cat}}
            if _tool(req, "bash")
            else {"name": "Bash", "input": {"command": cat, "description": "read the packaging"}}
        )
        return {"text": "Reading the packaging.", "tool_calls": [call]}
    if not _written(done):
        issues = [
            {
                "title": "Instruction does not say how the answer is checked",
                "evidence": "/data/instruction.md has no format requirement",
                "severity": "low",
            }
        ]
        if re.search(r"== reward \(/logs/verifier/reward\.txt\) ==\n1\b", done.split("run_task_tests #2", 1)[-1]):
            issues.insert(
                0,
                {
                    "title": "Answer key ships in the agent's image",
                    "description": "environment/Dockerfile copies expected_answer.txt into /app",
                    "evidence": "COPY . /app/ in environment/Dockerfile; run_task_tests with setup "
                    "`cp /app/expected_answer.txt /app/answer.txt` gave reward 1",
                    "severity": "high",
                },
            )
        if "COPY . /app/" in done:
            issues.append(
                {
                    "title": "Dockerfile copies the whole build context",
                    "evidence": "environment/Dockerfile: COPY . /app/",
                    "severity": "medium",
                }
            )
        if "scorer=includes()" in done:
            issues.insert(
                0,
                {
                    "title": "Scorer accepts any answer containing the target",
                    "evidence": "/data/source/arith.py: scorer=includes(); '12' contains target '2'",
                    "severity": "high",
                },
            )
        return {"text": "Writing the issues.", "tool_calls": [_write(req, issues)]}
    return _finish(req)


def static_auditor(req: Any) -> dict[str, Any]:
    done = _tool_side(req)
    if not _written(done):
        issues = [
            {
                "title": "Instruction does not say how the answer is checked",
                "evidence": "/data/instruction.md has no format requirement",
                "severity": "low",
            }
        ]
        return {"text": "Writing the issues.", "tool_calls": [_write(req, issues)]}
    return _finish(req)
