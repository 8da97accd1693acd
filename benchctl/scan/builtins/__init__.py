"""benchctl's built-in scanners, each declared in a TOML file beside this module (the same format
a user's scanner file has) and named here as a `Scanner` object, the shape a plugin's scanner has;
benchctl's pyproject.toml declares each as an entry point (`benchctl.scanners`) as a plugin would.

    eval_awareness          llm   the agent or target says it is being tested or evaluated
    gave_up                 llm   stopped without doing the task, or refused
    tool_failures           llm   tool errors, labelled by cause
    network_attempts        grep  curl / wget / pip / socket attempts and the errors they got
    hallucinated_user_turn  llm   a target reply writing the user's turn (a pattern, then the judge)
    broke_character         llm   the target reveals its hidden instructions
"""

from __future__ import annotations

import tomllib
from importlib import resources

from benchctl.scan.spec import Scanner, parse_scanner


def _load(name: str) -> Scanner:
    text = resources.files(__name__).joinpath(f"{name}.toml").read_text(encoding="utf-8")
    return parse_scanner(tomllib.loads(text), f"built-in scanner {name}")


EVAL_AWARENESS = _load("eval_awareness")
GAVE_UP = _load("gave_up")
TOOL_FAILURES = _load("tool_failures")
NETWORK_ATTEMPTS = _load("network_attempts")
HALLUCINATED_USER_TURN = _load("hallucinated_user_turn")
BROKE_CHARACTER = _load("broke_character")
