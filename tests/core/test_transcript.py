"""The transcript writer: sequence numbers, torn-line tolerance, and secret redaction."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest

from benchctl.jsonio import read_jsonl
from benchctl.transcript import SCHEMA_VERSION, TranscriptWriter, secret_values


def test_events_are_numbered_without_gaps_across_threads(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    with TranscriptWriter(path) as tw:
        threads = [
            threading.Thread(target=lambda: [tw.emit("notice", "policy", text="x") for _ in range(200)])
            for _ in range(4)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    events = read_jsonl(path)
    assert sorted(e["seq"] for e in events) == list(range(800))
    assert {e["v"] for e in events} == {SCHEMA_VERSION}


def test_credential_like_variables_are_redacted(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("ANTHROPIC_AUTH_TOKEN", "tok-abcdefgh12345")
    monkeypatch.setenv("OPENAI_COMPATIBLE_PRISM_API_KEY", "sk-prism-98765432")
    monkeypatch.setenv("HF_TOKEN", "hf_secretvalue123")
    monkeypatch.setenv("SHORT_TOKEN", "abc")  # too short to be a real secret: left alone
    assert {"tok-abcdefgh12345", "sk-prism-98765432", "hf_secretvalue123"} <= set(secret_values())
    path = tmp_path / "t.jsonl"
    with TranscriptWriter(path) as tw:
        tw.emit(
            "error", message="upstream said: bad key tok-abcdefgh12345 / sk-prism-98765432 / hf_secretvalue123 / abc"
        )
    text = path.read_text()
    assert "tok-abcdefgh12345" not in text and "sk-prism-98765432" not in text and "hf_secretvalue123" not in text
    assert text.count("[REDACTED]") == 3 and "/ abc" in text


def test_a_torn_last_line_is_skipped(tmp_path: Path) -> None:
    path = tmp_path / "t.jsonl"
    with TranscriptWriter(path) as tw:
        tw.emit("run_start")
    with open(path, "ab") as f:
        f.write(b'{"v": 1, "seq": 1, "ty')  # a process killed mid-write
    assert [e["type"] for e in read_jsonl(path)] == ["run_start"]


def test_every_provider_key_variable_is_redacted() -> None:
    """The key names come from provider_env.py's one table: a provider added there is redacted
    and refused in a sandbox's environment without a second list to update."""
    from benchctl.gateway.provider_env import PROVIDERS
    from benchctl.transcript import SECRET_ENV_VARS

    assert {k for env in PROVIDERS.values() for k in env.keys} <= set(SECRET_ENV_VARS)
    assert {"ANTHROPIC_AUTH_TOKEN", "OPENROUTER_API_KEY", "OPENAI_COMPATIBLE_API_KEY"} <= set(SECRET_ENV_VARS)
