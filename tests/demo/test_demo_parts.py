"""The demo's task, teacher and CPU training steps, checked against verl's own conventions."""

from __future__ import annotations

import json
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from agentrl_recipe import demo_task, names


def test_splits_are_deterministic_disjoint_and_correct() -> None:
    train, heldout = demo_task.make_splits(200, 30, seed=3)
    again_train, again_heldout = demo_task.make_splits(200, 30, seed=3)
    assert train == again_train and heldout == again_heldout
    assert len(train) == 200 and len(heldout) == 30
    assert not {p.key for p in train} & {p.key for p in heldout}
    for p in [*train[:50], *heldout]:
        assert str(eval(p.code.removeprefix("print(").removesuffix(")"))) == p.answer  # the program prints the answer
        assert int(p.answer) >= 0
    with pytest.raises(ValueError, match="distinct held-out problems"):
        demo_task.make_splits(10, 10_000)


def test_rl_rows_follow_the_row_contract() -> None:
    _, heldout = demo_task.make_splits(1, 3)
    rows = demo_task.rl_rows(heldout, split="heldout")
    assert [r["extra_info"]["index"] for r in rows] == [0, 1, 2]
    for row, p in zip(rows, heldout, strict=True):
        assert row["agent_name"] == names.AGENT_LOOP and row["data_source"] == demo_task.DATA_SOURCE
        assert row["reward_model"] == {"ground_truth": p.answer, "style": "rule"}
        assert row["prompt"] == [{"role": "user", "content": f"{p.question} {demo_task.INSTRUCTION}"}]
    from agentrl_recipe.rewards.scoring import task_kind

    assert task_kind(demo_task.DATA_SOURCE) == "math"


def _request(tokenizer, text: str, turn: int) -> SimpleNamespace:
    return SimpleNamespace(turn=turn, prompt_text=text, prompt_ids=tokenizer.encode(text), tokenizer=tokenizer)


def test_teacher_turns_render_exactly_like_the_sft_conversation(tiny_tokenizer) -> None:
    """The scripted turns are the chat template's own rendering of the SFT messages (SFT text == rollout tokens)."""
    _, (problem, *_) = demo_task.make_splits(1, 2)
    tools = [{"type": "function", "function": {"name": names.TOOL_NAME, "description": "run", "parameters": {}}}]
    script = demo_task.teacher_script([problem])
    prompt = tiny_tokenizer.apply_chat_template(problem.prompt, tools=tools, tokenize=False, add_generation_prompt=True)
    call = script(_request(tiny_tokenizer, prompt, 0))
    observation = f"{problem.answer}\n"
    with_tool = prompt + call.text + "<|im_end|>\n<|im_start|>user\n<tool_response>\n" + observation
    with_tool += "\n</tool_response><|im_end|>\n<|im_start|>assistant\n"
    answer = script(_request(tiny_tokenizer, with_tool, 1))
    assert answer.text == f"The answer is \\boxed{{{problem.answer}}}."
    rendered = tiny_tokenizer.apply_chat_template(
        demo_task.teacher_messages(problem, observation), tools=tools, tokenize=False
    )
    assert rendered == with_tool + answer.text + "<|im_end|>\n"
    assert script(_request(tiny_tokenizer, with_tool, 2)) is None  # no third turn
    assert script(_request(tiny_tokenizer, prompt.replace(problem.question, "unknown"), 0)) is None


def test_sft_messages_normalise_recorded_conversations() -> None:
    recorded = [
        {"role": "user", "content": "q", "tool_calls": None},
        {
            "role": "assistant",
            "content": "Let me compute it.\n",
            "tool_calls": [
                {"type": "function", "function": {"name": "code_interpreter", "arguments": '{"code": "1"}'}}
            ],
        },
        {"role": "tool", "content": "1\n"},
        {"role": "assistant", "content": "The answer is \\boxed{1}.", "tool_calls": []},
    ]
    out = demo_task.sft_messages(recorded)
    assert out[0] == {"role": "user", "content": "q"}
    assert out[1]["content"] == "Let me compute it."
    assert out[1]["tool_calls"][0]["function"]["arguments"] == {"code": "1"}
    assert out[2] == {"role": "tool", "content": "1\n"} and "tool_calls" not in out[3]
    assert demo_task.answer_from_observation("x\n\n 42 \n") == "42" and demo_task.answer_from_observation("") == ""


def test_write_parquet_is_atomic_and_round_trips(tmp_path: Path) -> None:
    import pandas as pd

    path = demo_task.write_parquet([{"a": 1, "m": [{"role": "user", "content": "x"}]}], tmp_path / "d" / "x.parquet")
    assert not list(path.parent.glob("*.tmp")) and pd.read_parquet(path)["a"].tolist() == [1]


# ---------------------------------------------------------------------------------------------------- trainer


@pytest.fixture(scope="module")
def tiny_model(tiny_model_dir: Path):
    from transformers import AutoModelForCausalLM

    torch.manual_seed(0)
    return AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32).eval()


def _left_right_batch(prompts: list[list[int]], responses: list[list[int]], masks: list[list[int]], pad: int):
    """A verl rollout-shaped batch: left-padded prompts, right-padded responses."""
    from tensordict import TensorDict
    from verl.protocol import DataProto

    p_len, r_len, n = max(map(len, prompts)), max(map(len, responses)), len(prompts)
    prompt_t = torch.full((n, p_len), pad)
    resp_t = torch.full((n, r_len), pad)
    attn = torch.zeros(n, p_len + r_len, dtype=torch.long)
    rmask = torch.zeros(n, r_len, dtype=torch.long)
    for i, (p, r, m) in enumerate(zip(prompts, responses, masks, strict=True)):
        prompt_t[i, p_len - len(p) :] = torch.tensor(p)
        resp_t[i, : len(r)] = torch.tensor(r)
        attn[i, p_len - len(p) : p_len + len(r)] = 1
        rmask[i, : len(m)] = torch.tensor(m)
    position = (attn.cumsum(-1) - 1).clamp(min=0)
    batch = TensorDict(
        {
            "prompts": prompt_t,
            "responses": resp_t,
            "input_ids": torch.cat([prompt_t, resp_t], dim=1),
            "attention_mask": attn,
            "position_ids": position,
            "response_mask": rmask,
        },
        batch_size=[n],
    )
    return DataProto(batch=batch, non_tensor_batch={}, meta_info={})


def _direct_response_log_probs(model, prompt: list[int], response: list[int]) -> torch.Tensor:
    ids = torch.tensor([prompt + response])
    with torch.no_grad():
        logp = torch.log_softmax(model(input_ids=ids).logits[0].float(), dim=-1)
    return torch.stack([logp[len(prompt) - 1 + j, t] for j, t in enumerate(response)])


def test_forward_log_probs_match_verls_no_padding_convention(tiny_model, tiny_tokenizer) -> None:
    """log_probs[t] = log p(token t+1): verl's no_padding_2_padding then yields each response token's log-prob."""
    from verl.workers.utils.padding import left_right_2_no_padding, no_padding_2_padding

    from agentrl_recipe.demo_trainer import forward_log_probs

    prompts = [tiny_tokenizer.encode("What is 2 + 3?"), tiny_tokenizer.encode("Hi")]
    responses = [tiny_tokenizer.encode("The answer is 5."), tiny_tokenizer.encode("ok then")]
    data = _left_right_batch(prompts, responses, [[1] * len(r) for r in responses], tiny_tokenizer.pad_token_id)
    td = left_right_2_no_padding(data.batch.clone())
    with torch.no_grad():
        flat, entropy = forward_log_probs(tiny_model, td["input_ids"], td["position_ids"], with_entropy=True)
    assert flat.shape == entropy.shape == (sum(map(len, prompts)) + sum(map(len, responses)),)
    padded = no_padding_2_padding(flat, td)
    for i, (p, r) in enumerate(zip(prompts, responses, strict=True)):
        torch.testing.assert_close(padded[i, : len(r)], _direct_response_log_probs(tiny_model, p, r), atol=1e-4, rtol=0)
    assert torch.all(entropy >= 0)


def test_ppo_update_raises_the_likelihood_of_the_advantaged_response(tiny_model_dir: Path, tiny_tokenizer) -> None:
    from transformers import AutoModelForCausalLM
    from verl.utils.config import omega_conf_to_dataclass

    from agentrl_recipe.demo_trainer import ppo_update
    from agentrl_recipe.rollout import compose_config

    cfg = compose_config(tiny_model_dir, overrides=["actor_rollout_ref.actor.ppo_mini_batch_size=1"])
    actor_config = omega_conf_to_dataclass(cfg.actor_rollout_ref.actor)
    assert actor_config.policy_loss.loss_mode == names.POLICY_LOSS
    torch.manual_seed(0)
    model = AutoModelForCausalLM.from_pretrained(tiny_model_dir, dtype=torch.float32)
    prompt = tiny_tokenizer.encode("What is 2 + 3?")
    good, bad = tiny_tokenizer.encode(" 5"), tiny_tokenizer.encode(" 7")
    tool = tiny_tokenizer.encode(" <tool_response>")
    responses = [good + tool + good, bad + tool + bad]
    masks = [[1] * len(good) + [0] * len(tool) + [1] * len(good), [1] * len(bad) + [0] * len(tool) + [1] * len(bad)]
    data = _left_right_batch([prompt, prompt], responses, masks, tiny_tokenizer.pad_token_id)
    old = [_direct_response_log_probs(model, prompt, r) for r in responses]
    width = data.batch["responses"].shape[1]
    data.batch["rollout_log_probs"] = torch.stack([torch.nn.functional.pad(o, (0, width - len(o))) for o in old])
    data.batch["advantages"] = torch.tensor([[1.0], [-1.0]]).expand(2, width) * data.batch["response_mask"]
    optimizer = torch.optim.SGD(model.parameters(), lr=0.5)
    metrics = ppo_update(
        model, optimizer, data, actor_config, mini_batch_size=2, pad_token_id=tiny_tokenizer.pad_token_id
    )
    for key in ("actor/pg_loss", "actor/pg_clipfrac_low", "actor/pg_clipfrac_high", "actor/entropy_loss"):
        assert key in metrics, key
    new = [_direct_response_log_probs(model, prompt, r) for r in responses]
    gen_good = torch.tensor(masks[0], dtype=torch.bool)
    assert new[0][gen_good].sum() > old[0][gen_good].sum()  # A > 0: more likely
    assert new[1][gen_good].sum() < old[1][gen_good].sum()  # A < 0: less likely
    assert json.dumps(metrics)  # plain floats
