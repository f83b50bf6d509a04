"""``agentrl.compat`` in agentrl_tool_agent, through verl's AgentLoopWorker with scripted turns and the real tool:
open_agentrl ends a trajectory on a turn of only malformed calls and runs the released tool; in both modes a valid
call of the turn is the one that runs (the released code's verl parser kept it; our feedback used to take its slot)."""

from __future__ import annotations

import pytest
from loop_helpers import call, row, with_updates
from transformers import AutoTokenizer

from agentrl_recipe.offline.rollout import arollout
from verl_client.token_output import ContextLimits
from verl_cpu.scripted import ScriptedClient, turns

ANSWER = "The answer is \\boxed{42}."
BROKEN = '<tool_call>\n{"name": "code_interpreter", "arguments": {"code": "print(1)"\n</tool_call>'


@pytest.fixture(scope="module")
def tokenizer(tiny_model_dir):
    return AutoTokenizer.from_pretrained(tiny_model_dir)


async def run_one(tokenizer, cfg, script):
    limits = ContextLimits.from_rollout_config(cfg.actor_rollout_ref.rollout)
    client = ScriptedClient(tokenizer, script, limits=limits, record_calls=True)
    (record,) = (await arollout([row("What is 6*7?")], client, cfg, progress=False)).records
    return record, client


async def test_open_agentrl_a_malformed_call_ends_the_trajectory(tokenizer, base_cfg):
    cfg = with_updates(base_cfg, agentrl__compat="open_agentrl")
    record, client = await run_one(tokenizer, cfg, turns(BROKEN, ANSWER))
    assert len(client.calls) == 1 and record.num_turns == 2 and record.termination == "no_tool_call"
    assert record.malformed_tool_calls == 1


async def test_open_agentrl_runs_the_released_tool(tokenizer, base_cfg):
    cfg = with_updates(base_cfg, agentrl__compat="open_agentrl")
    _record, client = await run_one(tokenizer, cfg, turns(call("x = 6 * 7"), ANSWER))
    assert "TypeError: 'x' is an invalid keyword argument for print()" in client.calls[1].prompt_text


@pytest.mark.parametrize("mode", ["open_agentrl", "agentrl"])
async def test_a_valid_second_call_runs_when_the_first_is_malformed(tokenizer, base_cfg, mode):
    cfg = with_updates(base_cfg, agentrl__compat=mode)
    record, client = await run_one(tokenizer, cfg, turns(BROKEN + "\n" + call("print(6*7)"), ANSWER))
    assert "<tool_response>\n42\n" in client.calls[1].prompt_text
    assert (record.tool_calls, record.tool_statuses, record.malformed_tool_calls) == (1, ["ok"], 1)
    assert record.termination == "answer" and record.num_turns == 4


@pytest.mark.parametrize(
    ("error_text", "answer"),
    [
        ("released", "<tool_response>\nError when executing tool: 'python'\n"),  # [code] tool_agent_loop.py:235+242
        ("explain", "<tool_response>\nUnknown function 'python'. Available tools: ['code_interpreter']\n"),  # verl
    ],
)
async def test_an_unknown_tool_is_answered_in_the_chosen_words(tokenizer, base_cfg, error_text, answer):
    # open_agentrl: the unknown call is no malformed call answered by the loop; it reaches the tool dispatch
    cfg = with_updates(base_cfg, agentrl__compat="open_agentrl", agentrl__agent_loop__error_text=error_text)
    record, client = await run_one(tokenizer, cfg, turns(call("print(6*7)", name="python"), ANSWER))
    assert answer in client.calls[1].prompt_text
    assert record.tool_calls == 1 and record.termination == "answer"
    assert record.tool_statuses == ["unknown_tool"]


async def test_open_agentrl_answers_a_missing_code_argument_as_released(tokenizer, base_cfg):
    cfg = with_updates(base_cfg, agentrl__compat="open_agentrl")
    no_code = '<tool_call>\n{"name": "code_interpreter", "arguments": {"src": "print(1)"}}\n</tool_call>'
    record, client = await run_one(tokenizer, cfg, turns(no_code, ANSWER))
    assert "<tool_response>\nError when executing tool: 'code'\n" in client.calls[1].prompt_text
    assert record.tool_statuses == ["invalid_arguments"]


def test_loop_settings_resolve_from_compat_and_explicit_keys_win():
    from agentrl_recipe.training.recipe_config import resolve

    def settings(mode: str, **keys) -> tuple:
        s = resolve({"agentrl": {"compat": mode, "agent_loop": keys}}).settings("agent_loop")
        return s.malformed_call_feedback, s.tool_turn_newline, s.error_text

    assert settings("open_agentrl") == (False, False, "released")
    assert settings("agentrl") == (True, True, "explain")
    assert settings("open_agentrl", tool_turn_newline=True, error_text="explain") == (False, True, "explain")
    with pytest.raises(ValueError, match="error_text must be one of"):
        settings("agentrl", error_text="verbose")
    with pytest.raises(TypeError, match="tool_turn_newline must be true/false"):
        settings("agentrl", tool_turn_newline="yes")
