"""With Qwen3's real tokenizer (151,643 BPE ranks + Qwen3's added tokens, agentrl_recipe/cpu_task/qwen_vocab.py) and
the Qwen3-2507 Instruct template, the ids the agent loop builds turn by turn for a multi-turn tool trajectory equal
``apply_chat_template`` over the conversation it recorded, token for token, and equal tiktoken's ids of that text.

The tiny model's 3k-token BPE (test_token_exactness.py) cannot show a merge across a turn boundary that the real
vocabulary makes (e.g. ``\\n\\n`` or ``.\\n`` pieces next to a tool turn): here the loop's turn-by-turn encoding meets
the real merges. verl picks its Qwen3 continuous-token builder from the folder's Qwen3-4B-Instruct-2507 config.
"""

from __future__ import annotations

from pathlib import Path

from loop_helpers import call, row

from agentrl_recipe import names
from agentrl_recipe.cpu_task.qwen_vocab import tiktoken_ids
from agentrl_recipe.offline.rollout import Rollout, compose_config
from verl_client.token_output import ContextLimits
from verl_cpu.scripted import ScriptedClient, turns

SYSTEM = {"role": "system", "content": "You are a careful solver. Use the code tool.\n\n"}
CODE = "import math\nprint(math.comb(10, 3))"
# What Qwen3-4B-Instruct-2507 writes: prose ending in a newline or blank line before a call, Chinese, a think block
# left in the content (the Instruct template does not parse it), and a final boxed answer.
SCRIPT = [
    "<think>\n先算组合数。\n</think>\n\nLet me compute C(10, 3).\n\n" + call(CODE),
    "It printed 120.\n" + call("print(120 // 2)"),
    "So the answer is $\\boxed{60}$.",
]


async def test_real_vocabulary_ids_equal_the_2507_template(
    qwen3_vocab_dir: Path, qwen3_tokenizer, tool_config_path: Path
) -> None:
    cfg = compose_config(
        qwen3_vocab_dir,
        prompt_length=1024,
        response_length=1024,
        overrides=[f"actor_rollout_ref.rollout.multi_turn.tool_config_path={tool_config_path}"],
    )
    client = ScriptedClient(
        qwen3_tokenizer, turns(*SCRIPT), limits=ContextLimits.from_rollout_config(cfg.actor_rollout_ref.rollout)
    )
    runner = await Rollout.create(cfg, client)
    task = row("What is C(10, 3) / 2? 请用工具。")
    task["prompt"] = [SYSTEM, *task["prompt"]]
    (record,) = (await runner.run([task], progress=False)).records
    assert record.termination == "answer" and record.tool_calls == 2 and record.malformed_tool_calls == 0
    assert [m["content"] for m in record.messages if m["role"] == "tool"] == ["120\n", "60\n"]

    schemas = [t.tool_schema.model_dump(exclude_unset=True, exclude_none=True) for t in runner.worker.tools]

    def template(messages: list[dict], **kwargs) -> list[int]:
        return list(
            qwen3_tokenizer.apply_chat_template(messages, tools=schemas, tokenize=True, return_dict=False, **kwargs)
        )

    assert record.prompt_ids == template(task["prompt"], add_generation_prompt=True)
    ids = record.prompt_ids + record.response_ids
    newline = qwen3_tokenizer.encode("\n", add_special_tokens=False)
    assert newline == [198]
    rendered = template(record.messages)  # ends "<|im_end|>\n"; generation stopped at "<|im_end|>"
    assert ids + newline == rendered
    text = qwen3_tokenizer.apply_chat_template(record.messages, tools=schemas, tokenize=False)
    assert rendered == tiktoken_ids(text)  # the HF build and tiktoken agree on the whole trajectory
    assert record.messages[-1] == {"role": "assistant", "content": SCRIPT[-1]}
    assert sum(1 for m in record.messages if m["role"] == "assistant" and names.TOOL_NAME in str(m)) == 2

    # The mask is exactly the generated turns, eos included.
    generated = [qwen3_tokenizer.encode(t, add_special_tokens=False) + [qwen3_tokenizer.eos_token_id] for t in SCRIPT]
    masked = [t for t, m in zip(record.response_ids, record.response_mask, strict=True) if m]
    assert masked == [t for turn in generated for t in turn]
