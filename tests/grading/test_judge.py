"""The one Judge: ask_structured's ask-then-re-ask-once loop, refusals and failed calls as
JudgeFailed, per-ask max_tokens, and the judge-log writer. Judges are scripted models driven
through benchctl.gateway.complete, as in grading."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest

from benchctl.grading.judge import Judge, JudgeFailed, Tally, judge_log_path, write_judge_log
from benchctl.grading.judge_json import JudgeParseError
from benchctl.jsonio import read_json

pytestmark = pytest.mark.timeout(60)

TURNS: list[dict[str, Any]] = []
SEEN: list[Any] = []


def scripted(request: Any) -> dict[str, Any]:
    """Gives TURNS in order, then repeats the last one; notes every request."""
    SEEN.append(request)
    return TURNS.pop(0) if len(TURNS) > 1 else TURNS[0]


def judge_with(*turns: dict[str, Any], **kw: Any) -> tuple[Judge, Tally]:
    TURNS[:] = list(turns)
    SEEN.clear()
    return Judge("scripted/py:tests.grading.test_judge:scripted", **kw), Tally()


def number(answer: str) -> int:
    try:
        return int(answer.strip())
    except ValueError:
        raise JudgeParseError(f"{answer.strip()!r} is not a number") from None


def ask(judge: Judge, tally: Tally, **kw: Any) -> Any:
    return asyncio.run(
        judge.ask_structured(
            "How many?", number, lambda e: f"Again, a number please ({e}).", system="sys", tally=tally, **kw
        )
    )


def test_usable_first_answer_is_one_call() -> None:
    judge, tally = judge_with({"text": "42"})
    got = ask(judge, tally, label="count")
    assert (got.value, got.error, got.answer) == (42, None, "42")
    assert judge.calls == tally.calls == len(SEEN) == 1
    ex = tally.exchanges[0]
    assert ex["ask"] == "count" and ex["attempt"] == 1 and ex["answer"] == "42" and ex["refusal"] is False
    assert ex["prompt_sha256"].startswith("sha256:") and ex["prompt_chars"] == len("How many?")
    assert "prompt" not in ex  # the graded text is not stored again in the log


def test_unusable_answer_is_sent_back_once_with_the_reask_prompt() -> None:
    judge, tally = judge_with({"text": "lots"}, {"text": "7"})
    got = ask(judge, tally)
    assert got.value == 7 and judge.calls == 2
    assert [m["role"] for m in SEEN[1].messages] == ["user", "assistant", "user"]
    assert SEEN[1].messages[1]["text"] == "lots"
    assert SEEN[1].last_user_text == "Again, a number please ('lots' is not a number)."
    first, second = tally.exchanges
    assert first["error"] == "'lots' is not a number" and second["prompt"] == SEEN[1].last_user_text


def test_unusable_twice_gives_no_value_and_the_last_reason() -> None:
    judge, tally = judge_with({"text": "lots"}, {"text": "many"})
    got = ask(judge, tally)
    assert got.value is None and got.error == "'many' is not a number" and got.answer == "many"
    assert judge.calls == 2  # never a third ask


def test_empty_answer_is_sent_back_as_a_placeholder() -> None:
    """An empty assistant message is rejected by vendor APIs: the re-ask would fail for that alone."""
    judge, tally = judge_with({"tool_calls": [{"name": "count", "input": {}}]}, {"text": "3"})  # no text
    assert ask(judge, tally).value == 3
    assert SEEN[1].messages[1]["text"] == "(empty)"


def test_refusal_is_judge_failed_and_never_reasked() -> None:
    judge, tally = judge_with({"refusal": True, "text": "I can't help with that."}, {"text": "5"})
    with pytest.raises(JudgeFailed, match="refused"):
        ask(judge, tally)
    assert judge.calls == 1 and len(SEEN) == 1
    assert tally.exchanges[0]["refusal"] is True and tally.exchanges[0]["error"] == "the judge refused to answer"


def test_failed_call_is_judge_failed_after_retries() -> None:
    judge, tally = judge_with({"error": {"status": 500, "message": "judge down", "retry_after": 0}})
    with pytest.raises(JudgeFailed, match="judge call failed after retries.*judge down"):
        ask(judge, tally)
    assert len(SEEN) > 1  # retried by benchctl.gateway.complete first
    assert judge.calls == tally.calls == 1 and "judge down" in tally.exchanges[0]["error"]


def test_max_tokens_per_ask_and_cut_off_answers_say_so() -> None:
    judge, tally = judge_with({"text": "12", "stop_reason": "max_tokens"}, max_tokens=1000)
    ask(judge, tally)
    ask(judge, tally, max_tokens=20000)
    assert [r.body["max_tokens"] for r in SEEN] == [1000, 20000]
    assert [e["max_tokens"] for e in tally.exchanges] == [1000, 20000]
    judge, tally = judge_with({"text": '{"scores": [', "stop_reason": "max_tokens"})
    got = ask(judge, tally, max_tokens=300)
    assert got.value is None and "cut off at max_tokens=300" in got.error


def test_judge_log_format(tmp_path: Path) -> None:
    judge, tally = judge_with({"text": "x"}, {"text": "9"})
    ask(judge, tally, label="count")
    path = judge_log_path(tmp_path, "coverage", "run1~followup-1")
    assert path == tmp_path / "grades" / "coverage" / "judge_log" / "run1~followup-1.json"
    write_judge_log(path, grader="coverage", subject="run1~followup-1", judge=judge.model, tally=tally)
    log = read_json(path)
    assert {k: log[k] for k in ("schema", "grader", "subject", "judge", "calls", "cost_usd")} == {
        "schema": 1,
        "grader": "coverage",
        "subject": "run1~followup-1",
        "judge": judge.model,
        "calls": 2,
        "cost_usd": 0.0,
    }
    assert [(e["ask"], e["attempt"], e["answer"]) for e in log["exchanges"]] == [("count", 1, "x"), ("count", 2, "9")]
    assert log["exchanges"][1]["usage"]["output_tokens"] > 0 and log["exchanges"][1]["stop_reason"] == "end_turn"
