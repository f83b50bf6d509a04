"""agentrl_tool_agent through verl's AgentLoopWorker with scripted turns and the real code_interpreter tool."""

from __future__ import annotations

import json

import pytest
from loop_helpers import call, row, with_updates
from transformers import AutoTokenizer

from agentrl_recipe import fields
from agentrl_recipe.offline.rollout import Rollout, arollout
from agentrl_recipe.training.metrics import batch_metrics
from agentrl_recipe.training.rewards.answer_source import last_model_run
from verl_client.token_output import ContextLimits
from verl_cpu.scripted import ScriptedClient, ScriptedTurn, ScriptRequest, turns

ANSWER = "The answer is \\boxed{42}."


@pytest.fixture(scope="module")
def tokenizer(tiny_model_dir):
    return AutoTokenizer.from_pretrained(tiny_model_dir)


def scripted(tokenizer, cfg, script) -> ScriptedClient:
    return ScriptedClient(
        tokenizer, script, limits=ContextLimits.from_rollout_config(cfg.actor_rollout_ref.rollout), record_calls=True
    )


async def run_one(tokenizer, cfg, script, question: str = "What is 6*7?"):
    client = scripted(tokenizer, cfg, script)
    result = await arollout([row(question)], client, cfg, progress=False)
    (record,) = result.records
    return record, client


async def test_valid_call_puts_tool_output_in_context(tokenizer, base_cfg):
    record, client = await run_one(tokenizer, base_cfg, turns("Let me compute.\n" + call("print(6*7)"), ANSWER))
    second_prompt = client.calls[1].prompt_text
    assert second_prompt.endswith("<tool_response>\n42\n\n</tool_response><|im_end|>\n<|im_start|>assistant\n")
    assert (record.tool_calls, record.tool_statuses, record.tool_failures) == (1, ["ok"], 0)
    assert len(record.tool_latency_s) == 1 and record.tool_latency_s[0] > 0
    assert record.num_turns == 4 and record.extra_fields[fields.NUM_TURNS.column] == 4
    assert record.extra_fields[fields.ASSISTANT_TURNS.column] == 2
    assert (record.malformed_tool_calls, record.void_turn, record.termination) == (0, False, "answer")
    assert record.response.endswith(ANSWER)
    # the tool's output is context (mask 0), the two turns are the model's (mask 1)
    masked = [t for t, m in zip(record.response_ids, record.response_mask, strict=True) if m == 1]
    assert tokenizer.decode(masked) == "Let me compute.\n" + call("print(6*7)") + "<|im_end|>" + ANSWER + "<|im_end|>"
    assert record.extra_fields[fields.MODEL_TOKENS.column] == sum(record.response_mask)
    # where the final turn starts (answer_source=final_turn without a response_mask): the last run of model tokens
    assert record.extra_fields[fields.FINAL_TURN_START.column] == last_model_run(record.response_mask)[0] > 0
    assert record.messages[-2] == {"role": "tool", "content": "42\n"}


async def test_bad_json_gets_an_error_and_another_turn(tokenizer, base_cfg):
    broken = '<tool_call>\n{"name": "code_interpreter", "arguments": {"code": "print(6*7)"}\n</tool_call>'
    record, client = await run_one(tokenizer, base_cfg, turns(broken, call("print(6*7)"), ANSWER))
    assert "not valid JSON" in client.calls[1].prompt_text  # the error came back as the tool response
    assert len(client.calls) == 3
    assert record.malformed_tool_calls == 1 and record.extra_fields[fields.MALFORMED_KINDS.column] == ["bad_json"]
    assert record.tool_calls == 1  # only the valid call ran
    assert record.num_turns == 6 and record.extra_fields[fields.ASSISTANT_TURNS.column] == 3
    assert record.void_turn is True and record.extra_fields[fields.NUM_VOID_TURNS.column] == 1
    # the conversation keeps what the model wrote, so it still renders to the same tokens
    assert record.messages[1] == {"role": "assistant", "content": broken}
    assert record.messages[2]["role"] == "tool" and record.messages[2]["content"].startswith("Error:")


MALFORMED = {
    "unknown_tool": call("print(1)", name="python"),
    "missing_argument": '<tool_call>\n{"name": "code_interpreter", "arguments": {}}\n</tool_call>',
    "arguments_not_object": '<tool_call>\n{"name": "code_interpreter", "arguments": "print(1)"}\n</tool_call>',
    "missing_keys": '<tool_call>\n{"name": "code_interpreter"}\n</tool_call>',
    "unclosed": '<tool_call>\n{"name": "code_interpreter", "arguments": {"code": "print(1)"}}',
}


async def test_every_malformed_kind_is_answered_and_counted(tokenizer, base_cfg):
    kinds = list(MALFORMED)

    def script(request: ScriptRequest) -> str:
        kind = next(k for k in kinds if f"case {k}" in request.prompt_text)
        return MALFORMED[kind] if request.turn == 0 else ANSWER

    client = scripted(tokenizer, base_cfg, script)
    result = await arollout([row(f"case {k}") for k in kinds], client, base_cfg, progress=False)
    for kind, record in zip(kinds, result.records, strict=True):
        assert record.extra_fields[fields.MALFORMED_KINDS.column] == [kind], kind
        assert record.tool_calls == 0 and record.num_turns == 4, kind
        assert record.messages[2]["content"].startswith("Error:"), kind
        assert record.response.endswith(ANSWER), kind
    metrics = batch_metrics(result.batches[0].non_tensor_batch)
    assert all(metrics[f"agentrl_tools/malformed/{k}"] == 1.0 for k in kinds)
    assert metrics["agentrl_tools/void_turn_frac"] == 1.0


async def test_feedback_off_is_verls_behaviour(tokenizer, base_cfg):
    cfg = with_updates(base_cfg, agentrl__agent_loop__malformed_call_feedback=False)
    broken = '<tool_call>\n{"name": "code_interpreter", "arguments": {"code": "print(1)"\n</tool_call>'
    record, client = await run_one(tokenizer, cfg, turns(broken, ANSWER))
    assert len(client.calls) == 1 and record.num_turns == 2  # the bad block is dropped and the trajectory ends
    assert record.malformed_tool_calls == 1 and record.termination == "no_tool_call"


async def test_sixteen_turn_limit(tokenizer, base_cfg):
    multi_turn = base_cfg.actor_rollout_ref.rollout.multi_turn
    assert (multi_turn.max_assistant_turns, multi_turn.max_user_turns) == (16, 16)  # the paper's limits
    cfg = with_updates(base_cfg, data__max_response_length=2048)
    record, client = await run_one(tokenizer, cfg, lambda request: call(f"print({request.turn})"))
    assert len(client.calls) == 16
    assert record.extra_fields[fields.ASSISTANT_TURNS.column] == 16 and record.tool_calls == 15
    assert record.termination == "max_assistant_turns"
    assert record.num_turns == 15 + 16 + 1
    assert record.void_turn is False  # every turn, the last included, made a complete call


async def test_response_length_reached_inside_a_tool_response(tokenizer, base_cfg):
    cfg = with_updates(base_cfg, data__max_response_length=64)
    code = "print(list(range(300)))"  # 256 characters of digits after truncation: far more than 64 tokens
    record, client = await run_one(tokenizer, cfg, turns(call(code), ANSWER))
    assert len(client.calls) == 1
    assert record.termination == "tool_response_overflow"
    assert record.tool_calls == 1 and record.num_turns == 2
    assert record.response_tokens <= 64 and all(m == 1 for m in record.response_mask)  # ends on the model's turn


async def test_response_length_reached_while_generating(tokenizer, base_cfg):
    cfg = with_updates(base_cfg, data__max_response_length=32)
    record, _ = await run_one(tokenizer, cfg, turns(ScriptedTurn(text="let me think " * 40, stop=False)))
    assert record.termination == "response_length" and record.response_tokens == 32
    assert record.void_turn is False and record.malformed_tool_calls == 0  # cut off, not ended by the model


async def test_truncated_call_is_not_malformed(tokenizer, base_cfg):
    cfg = with_updates(base_cfg, data__max_response_length=24)
    text = call("print(" + "1 + " * 60 + "1)")
    record, _ = await run_one(tokenizer, cfg, turns(ScriptedTurn(text=text, stop=False)))
    assert record.termination == "response_length" and record.malformed_tool_calls == 0


async def test_reward_sees_num_turns_and_tool_fields(tokenizer, base_cfg):
    """agentrl_reward in-process through verl's RewardLoopWorker: the tool bonus needs verl's __num_turns__."""

    def script(request: ScriptRequest) -> str:
        wrong = "case wrong" in request.prompt_text
        return call("print(6*7)") if request.turn == 0 else ("\\boxed{41}" if wrong else ANSWER)

    # overlong_count=model makes the manager read fields.MODEL_TOKENS from tool_extra_fields (the per-trajectory
    # batch verl sends the reward worker has no response_mask)
    cfg = with_updates(
        base_cfg, reward__reward_kwargs__overlong_buffer_cfg__len=256, reward__reward_kwargs__overlong_count="model"
    )
    client = scripted(tokenizer, cfg, script)
    rows = [row("case right"), row("case wrong")]
    result = await arollout(rows, client, cfg, score=True, progress=False)
    right, wrong = result.records
    assert right.score == pytest.approx(1.0)
    assert wrong.score == pytest.approx(-0.9)  # min(-0.6, -1 + 0.1 · 1 tool call) [paper Eq. 8]
    assert wrong.reward_extra_info["num_turns"] == wrong.num_turns == 4
    assert wrong.reward_extra_info["tool_bonus"] == pytest.approx(0.1)
    model_tokens = wrong.extra_fields[fields.MODEL_TOKENS.column]
    assert model_tokens == sum(wrong.response_mask) < wrong.response_tokens  # tool tokens are not the model's
    assert wrong.reward_extra_info["response_tokens"] == model_tokens  # arrived through tool_extra_fields
    assert result.metrics["agentrl_rollout/score_mean"] == pytest.approx(0.05)
    json.dumps([r.to_dict() for r in result.records])  # records are plain JSON


async def test_stateful_sessions_end_with_their_trajectory(tokenizer, base_cfg, tool_config_path, tmp_path):
    """code_interpreter's stateful mode keeps variables per request id; the loop drops them when the trajectory ends,
    so a later trajectory reusing the id (full_determinism: det-<priority>, every step) starts clean."""
    stateful = tmp_path / "code_interpreter_stateful.yaml"
    stateful.write_text(tool_config_path.read_text().replace("stateful: false", "stateful: true"))
    assert "stateful: true" in stateful.read_text()
    cfg = with_updates(
        base_cfg,
        actor_rollout_ref__rollout__multi_turn__tool_config_path=str(stateful),
        actor_rollout_ref__rollout__full_determinism=True,
    )
    first, later = turns(call("x = 6"), call("print(x * 7)"), ANSWER), turns(call("print(x * 7)"), ANSWER)
    runs: list[ScriptRequest] = []

    def script(request: ScriptRequest) -> str:
        if request.turn == 0:
            runs.append(request)
        return (first if len(runs) == 1 else later)(request)

    client = scripted(tokenizer, cfg, script)
    runner = await Rollout.create(cfg, client)
    (record,) = (await runner.run([row("What is 6*7?")], progress=False)).records
    assert record.messages[4] == {"role": "tool", "content": "42\n"}  # x survived from the first call
    (again,) = (await runner.run([row("What is 6*7?")], progress=False)).records
    assert runs[0].request_id == runs[1].request_id == "det-0"  # the id comes back
    assert again.tool_statuses == ["runtime_error"] and "NameError" in again.messages[2]["content"]
