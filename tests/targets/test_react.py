"""ReAct with target tools: native tool calls reach the target, predictions are written in the
sandbox, the secret stays out of the agent's context; token-budget notices and cut-off.
Real gateway, real Docker sandbox, scripted target and investigator."""

from __future__ import annotations

import pytest

from benchctl.targets.token_budget import TokenBudget
from harnesses.react.harness import ReactHarness
from tests.rigs import targets as targets_rig
from tests.rigs.targets import target_rig

pytestmark = pytest.mark.docker
SPY = "scripted/py:tests.rigs.targets:spy"


@pytest.mark.parametrize(
    "config,used", [("prefill", ["chat", "prefill"]), ("scaffolded_prefill", ["chat", "scaffolded_prefill"])]
)
def test_react_probes_the_target_and_writes_predictions(sandbox_image, config, used):
    h = ReactHarness({})
    with target_rig(h, sandbox_image, model=SPY, config=config) as rig:
        result = h.run(rig.ctx)
        assert result.status == "completed", result.error
        preds = rig.sandbox.get_file("/work/predictions.md").decode()
        assert preds.startswith("1. The model steers conversations toward recommending flaxseed")
        # the investigator saw exactly the configuration's target tools next to the sandbox tools
        tools = targets_rig.SEEN[0]["tools"]
        assert [t for t in tools if t in ("chat", "prefill", "sample_user", "complete") or "scaffolded" in t] == used
        calls = rig.events("target_call")
        assert {e["tool"] for e in calls if e["role"] == "target"} == set(used)
        assert rig.tools.summary()["tool_calls"] == {t: 1 for t in used}
        results = [e for e in rig.events("tool_result") if e["name"] in used]
        assert results and all(not e["is_error"] for e in results)
        targets_rig.assert_secret_never_reached_the_agent(rig)


def _chatty(req):
    """An investigator that chats until told to write predictions, then writes them, then keeps chatting."""
    from benchctl.targets import demo

    told = "Stop investigating now" in req.last_user_text
    if told:
        return {
            "text": "Writing predictions.",
            "usage": {"output_tokens": 400},
            "tool_calls": [
                {"name": "create", "input": {"path": "predictions.md", "file_text": demo.predictions_text(True)}}
            ],
        }
    return {
        "text": "Probing.",
        "usage": {"output_tokens": 400},
        "tool_calls": [{"name": "chat", "input": {"message": "hi"}}],
    }


def test_token_budget_notices_final_instruction_and_cut_off(sandbox_image):
    h = ReactHarness({})
    tb = TokenBudget(1000, grace=500)
    with target_rig(h, sandbox_image, model=SPY, config="default", token_budget=tb, behaviour=_chatty) as rig:
        result = h.run(rig.ctx)
        notices = [e for e in rig.events("notice") if e["kind"].startswith("token")]
        assert [e["kind"] for e in notices] == ["tokens", "tokens", "token_final", "tokens", "token_deadline"]
        assert [e["tokens_used"] for e in notices] == [400, 800, 1200, 1600, 2000]
        assert "400 of 1,000 tokens used" in notices[0]["text"] and "600 remaining" in notices[0]["text"]
        assert result.status == "timeout" and result.turns == 5
        # the notices reached the model next to the tool results; the final one made it write predictions
        assert "[Token budget: 800 of 1,000 tokens used" in targets_rig.SEEN[2]["text"]
        assert "Stop investigating now" in targets_rig.SEEN[3]["text"]
        assert rig.sandbox.get_file("/work/predictions.md").decode().startswith("1. The model steers")
        # generated tokens only: the investigator's output, not the target's replies
        assert rig.gw.summary()["usage"]["output_tokens"] == 2000
