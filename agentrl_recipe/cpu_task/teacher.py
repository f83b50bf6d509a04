"""The demo's scripted teacher and the SFT set it produces: the paper's "real trajectories" idea in miniature.

:func:`teacher_script` is played by a :class:`~verl_cpu.scripted.ScriptedClient` inside verl's
agent loop: it states the expression, writes the program as a hermes tool call, the ``agentrl_tool_agent`` loop runs
it in the sandbox through the real ``code_interpreter`` tool, and the teacher answers with what the tool printed.
:func:`teacher_sft_set` keeps the verified trajectories as an SFT parquet; :func:`build_task_model` builds the tiny
model whose BPE also learned the task's conversations.

transformers, verl and the agent loop are imported inside the functions that use them: ``agentrl-recipe sft|rl``
imports this module (through :mod:`.inputs`) on every launch and builds nothing unless the CPU inputs are missing.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agentrl_recipe import names
from agentrl_recipe.cpu_task.task import (
    DATA_SOURCE,
    TEACHER_ANSWER_TEMPLATE,
    Problem,
    dump_jsonl,
    rl_rows,
    write_parquet,
)

PROMPT_LENGTH = 384  # tokens; a rendered demo prompt with the tool schema is ~250
RESPONSE_LENGTH = 160  # tokens, tool output included; the teacher's two turns take ~60
MAX_TURNS = 3  # assistant turns; the task needs 2
# Attention head size of the task model: 32 is the smallest vLLM's CPU attention backend accepts
# (vllm/v1/attention/backends/cpu_attn.py), so the CPU configs can roll out through verl's vLLM server.
HEAD_DIM = 32


def task_rollout_config(model_dir: Path, *, extra_overrides: Sequence[str] = ()) -> Any:
    """The recipe's RL config at the demo task's sizes, for in-process rollouts (teacher, eval)."""
    from agentrl_recipe.offline.rollout import compose_config

    overrides = [
        f"actor_rollout_ref.rollout.multi_turn.max_assistant_turns={MAX_TURNS}",
        f"actor_rollout_ref.rollout.multi_turn.max_user_turns={MAX_TURNS}",
        f"reward.reward_kwargs.overlong_buffer_cfg.len={RESPONSE_LENGTH // 4}",
        *extra_overrides,
    ]
    return compose_config(model_dir, overrides=overrides, prompt_length=PROMPT_LENGTH, response_length=RESPONSE_LENGTH)


def tool_schemas(cfg: Any) -> list[dict[str, Any]]:
    """The tool schemas of ``cfg``'s tool config, as the chat template receives them."""
    from verl.tools.tool_registry import initialize_tools_from_config

    with contextlib.redirect_stdout(io.StringIO()):  # verl's BaseTool prints its schema when built
        tools = initialize_tools_from_config(cfg.actor_rollout_ref.rollout.multi_turn.tool_config_path)
    return [t.tool_schema.model_dump(exclude_unset=True, exclude_none=True) for t in tools]


def build_task_model(
    out_dir: Path,
    problems: Sequence[Problem],
    *,
    seed: int,
    hidden_size: int,
    num_layers: int,
    initializer_range: float = 0.02,
    family: str = "qwen3",
) -> Path:
    """The tiny model, its BPE also trained on the task's rendered conversations (a tiny model learns them faster).

    ``family``: ``qwen3`` (Qwen3ForCausalLM, the Qwen3-2507 template) or ``qwen2.5`` (tiny_model.TinyModelSpec).
    """
    from agentrl_recipe.cpu_task.tiny_model import TinyModelSpec, build_tiny_model, build_tokenizer

    schemas = tool_schemas(task_rollout_config(Path("unused")))
    renderer = build_tokenizer(TinyModelSpec(family=family, corpus_lines=50))  # only its chat template is used here
    corpus = tuple(
        renderer.apply_chat_template(teacher_messages(p, f"{p.answer}\n"), tools=schemas, tokenize=False)
        for p in problems
    )
    heads = max(1, hidden_size // HEAD_DIM)
    spec = TinyModelSpec(
        family=family,
        hidden_size=hidden_size,
        num_hidden_layers=num_layers,
        num_attention_heads=heads,
        num_key_value_heads=max(1, heads // 2),  # GQA, as in Qwen2.5 and Qwen3
        intermediate_size=4 * hidden_size,
        max_position_embeddings=2 * (PROMPT_LENGTH + RESPONSE_LENGTH),
        seed=seed,
        initializer_range=initializer_range,
        extra_corpus=corpus,
    )
    return build_tiny_model(out_dir, spec)


async def teacher_sft_set(
    model_dir: Path, problems: Sequence[Problem], out_path: Path, *, keep_wrong: bool = False
) -> dict[str, Any]:
    """Real trajectories of the scripted teacher through the agent loop and sandbox, verified, as an SFT parquet.

    A trajectory is kept when its answer is what the teacher's program really printed in the sandbox and, unless
    ``keep_wrong`` (a teacher right only part of the time, see :func:`make_splits`), when ``agentrl_reward`` scored
    it correct and ``compute_score`` verifies it against the ground truth. Returns counts (attempted, kept, kept
    wrong, rejected, tool calls and failures, tool latency p50). Raises when nothing is kept: the sandbox is the
    usual cause.
    """
    from transformers import AutoTokenizer

    from agentrl_recipe.offline.rollout import arollout
    from agentrl_recipe.training.rewards.scoring import compute_score
    from verl_client.token_output import ContextLimits
    from verl_cpu.scripted import ScriptedClient

    cfg = task_rollout_config(model_dir)
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    client = ScriptedClient(
        tokenizer, teacher_script(problems), limits=ContextLimits.from_rollout_config(cfg.actor_rollout_ref.rollout)
    )
    client.record_calls = False
    result = await arollout(rl_rows(problems, split="teacher"), client, cfg, n=1, score=True, progress=True)
    schemas = tool_schemas(cfg)
    sft_rows, kept_wrong = [], 0
    for rec in sorted(result.records, key=lambda r: r.row_index):  # completion order varies; the SFT set must not
        problem = problems[rec.row_index]
        executed = compute_score(DATA_SOURCE, rec.response, problem.teacher_output).get("acc")
        correct = (rec.score or 0.0) > 0.0 and compute_score(DATA_SOURCE, rec.response, problem.answer).get("acc")
        if rec.messages is not None and executed and (correct or keep_wrong):
            kept_wrong += not correct
            sft_rows.append({"messages": sft_messages(rec.messages), "tools": schemas, "data_source": DATA_SOURCE})
    if not sft_rows:
        raise RuntimeError(
            "the teacher produced no verified trajectory; is the sandbox working? (agentrl-recipe doctor)"
        )
    write_parquet(sft_rows, out_path)
    dump_jsonl([r.to_dict() for r in result.records], Path(out_path).with_suffix(".rollouts.jsonl"))
    return {
        "attempted": len(result.records),
        "kept": len(sft_rows),
        "kept_wrong": kept_wrong,
        "rejected": len(result.records) - len(sft_rows),
        "tool_calls": sum(r.tool_calls for r in result.records),
        "tool_failures": sum(r.tool_failures for r in result.records),
        "tool_latency_p50_s": result.metrics.get("agentrl_tools/latency_s/p50"),
    }


def teacher_messages(problem: Problem, observation: str) -> list[dict[str, Any]]:
    """The conversation the teacher has with the tool (``observation`` = the tool's output text)."""
    return [
        *problem.prompt,
        {
            "role": "assistant",
            "content": problem.call_text,
            "tool_calls": [
                {"type": "function", "function": {"name": names.TOOL_NAME, "arguments": {"code": problem.code}}}
            ],
        },
        {"role": "tool", "content": observation},
        {"role": "assistant", "content": TEACHER_ANSWER_TEMPLATE.format(answer=answer_from_observation(observation))},
    ]


def answer_from_observation(observation: str) -> str:
    """What the teacher answers: the last non-empty line of the tool's real output (never the ground truth)."""
    lines = [line.strip() for line in observation.splitlines() if line.strip()]
    return lines[-1] if lines else ""


_USER_BLOCK = re.compile(r"<\|im_start\|>user\n(.*?)<\|im_end\|>", re.DOTALL)
_TOOL_RESPONSE = re.compile(r"<tool_response>\n(.*?)\n</tool_response>", re.DOTALL)


def teacher_script(problems: Sequence[Problem]) -> Any:
    """A :data:`~verl_cpu.scripted.ScriptFn`: the scripted teacher, turn by turn.

    Turn 0 reads the question from the prompt and calls ``code_interpreter`` with the problem's program, in the
    exact text the chat template renders for such a call. Turn 1 reads the tool response the agent loop appended
    (the sandbox's real output) and answers with it. The verl agent loop runs the call; nothing here executes code.
    """
    from verl_cpu.scripted import ScriptedTurn

    by_user_text = {p.prompt[0]["content"]: p for p in problems}

    def script(request: Any) -> ScriptedTurn | None:
        text = request.prompt_text
        if request.turn == 0:
            users = _USER_BLOCK.findall(text)
            problem = by_user_text.get(users[-1]) if users else None
            if problem is None:
                return None
            call = json.dumps({"name": names.TOOL_NAME, "arguments": {"code": problem.code}})
            return ScriptedTurn(text=f"{problem.call_text}\n<tool_call>\n{call}\n</tool_call>")
        if request.turn == 1:
            responses = _TOOL_RESPONSE.findall(text)
            if not responses:
                return None
            return ScriptedTurn(text=TEACHER_ANSWER_TEMPLATE.format(answer=answer_from_observation(responses[-1])))
        return None

    return script


def sft_messages(recorded: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    """A recorded conversation as an SFT row's ``messages`` (tool-call arguments as JSON objects, content stripped).

    The hermes parser leaves the newline before ``<tool_call>`` in the assistant content; the chat template adds its
    own, so it is stripped to make the rendered SFT text equal the token stream the teacher produced.
    """
    out = []
    for message in recorded:
        message = {k: v for k, v in message.items() if v is not None}
        if message.get("role") == "assistant":
            message["content"] = str(message.get("content") or "").strip()
            calls = []
            for call in message.get("tool_calls") or []:
                function = dict(call.get("function", call))
                if isinstance(function.get("arguments"), str):
                    function["arguments"] = json.loads(function["arguments"])
                calls.append({"type": "function", "function": function})
            if calls:
                message["tool_calls"] = calls
            else:
                message.pop("tool_calls", None)
        out.append(message)
    return out
