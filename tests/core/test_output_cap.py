"""benchctl/output_cap.py: the head-and-tail cap on what a model is shown, and its three users
(ReAct tools, target tools, open-book task tests) each with its own limit."""

from __future__ import annotations

from benchctl.output_cap import head_and_tail


def test_text_within_the_limit_is_untouched() -> None:
    assert head_and_tail("", 10) == ("", False)
    assert head_and_tail("x" * 10, 10) == ("x" * 10, False)


def test_longer_text_keeps_its_head_and_tail_and_says_how_much_was_cut() -> None:
    text = "a" * 10 + "b" * 10 + "c" * 10
    assert head_and_tail(text, 10) == ("aaaaa\n[... 20 characters cut ...]\nccccc", True)
    out, cut = head_and_tail(text, 11)  # an odd limit keeps limit // 2 at each end
    assert cut and out.startswith("aaaaa\n") and out.endswith("\nccccc") and "[... 19 characters" in out


def test_each_user_caps_at_its_own_limit() -> None:
    from benchctl.targets import tools as target_tools
    from benchctl.task_import import open_book

    for limit, cap in [(target_tools.MAX_OUTPUT_CHARS, target_tools._cap), (open_book.SECTION_CHARS, open_book._cap)]:
        assert cap("y" * limit) == "y" * limit
        assert cap("y" * (limit + 7)).count("[... 7 characters cut ...]") == 1


def test_a_react_command_shows_the_start_of_its_output_and_its_exit_code() -> None:
    from benchctl.sandbox.base import ExecResult
    from harnesses.react.tools import MAX_OUTPUT_CHARS, ToolBox
    from tests.rigs.fake_sandbox import FakeSandbox

    box = ToolBox(FakeSandbox(lambda cmd: ExecResult(3, "start " + "y" * MAX_OUTPUT_CHARS, "")))  # type: ignore[arg-type]
    out = box.run("bash", {"command": "make"}, time_left=60)
    assert out.truncated and out.output.startswith("start yyy") and out.output.endswith("yyy\n[exit code: 3]")
    assert out.output.count(" characters cut ...]") == 1 and len(out.output) < MAX_OUTPUT_CHARS + 50
