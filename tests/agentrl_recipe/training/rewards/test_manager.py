"""agentrl_reward through verl's own machinery: load_reward_manager, RewardLoopWorker, run_single on 1-row batches."""

from __future__ import annotations

import asyncio
import copy
import dataclasses
import decimal
import json
import os
import time

import numpy as np
import pytest
import torch
import verl
from omegaconf import OmegaConf, open_dict
from verl import DataProto
from verl.trainer.ppo.reward import load_reward_manager

from agentrl_recipe import fields, names
from agentrl_recipe.training.rewards import manager as manager_module
from agentrl_recipe.training.rewards import scoring
from agentrl_recipe.training.rewards.code import io_tests
from agentrl_recipe.training.rewards.code import scorer as code_scorer
from agentrl_recipe.training.rewards.isolation import GraderTimeout
from agentrl_recipe.training.rewards.manager import REWARD_INFO_KEYS, AgentRLRewardManager
from agentrl_recipe.training.rewards.step_metrics import reward_metrics
from agentrl_recipe.training.sandbox_routes import server_metrics
from agentrl_sandbox.types import Route

MAX_RESP = 64  # data.max_response_length of these tests
BUFFER = 16  # overlong buffer: the penalty runs from 48 to 64 tokens
PROMPT_LEN = 4
DOUBLE_GT = json.dumps({"inputs": ["1\n", "2\n"], "outputs": ["2\n", "4\n"], "fn_name": None})
GOOD_CODE = "```python\nprint(int(input()) * 2)\n```"
HALF_CODE = "```python\nn = int(input())\nprint(2 if n == 1 else 0)\n```"


@pytest.fixture(scope="module")
def base_config(tiny_model_dir):
    """verl's own ppo_trainer composed with the manager selected, as a user's command line would."""
    from hydra import compose, initialize_config_dir

    config_dir = os.path.join(os.path.dirname(verl.__file__), "trainer", "config")
    with initialize_config_dir(config_dir=config_dir, version_base=None):
        cfg = compose(
            "ppo_trainer",
            overrides=[
                "reward.reward_manager.source=importlib",  # as verl_configs/recipe/grpo_tcr.yaml loads it
                f"reward.reward_manager.name={names.REWARD_MANAGER_CLASS}",
                f"reward.reward_manager.module.path={names.REWARD_MANAGER_MODULE}",
                f"data.max_response_length={MAX_RESP}",
                f"actor_rollout_ref.model.path={tiny_model_dir}",
                f"+reward.reward_kwargs.overlong_buffer_cfg.len={BUFFER}",
                "+reward.reward_kwargs.code_timeout_s_per_test=2.0",
                "+reward.reward_kwargs.tool_bonus_count=turns",  # these rows carry __num_turns__ only
                "+agentrl.sandbox.backend=local",
                "+agentrl.sandbox.pool_size=2",
            ],
        )
    return cfg


def config_with(base, **reward_kwargs):
    cfg = copy.deepcopy(base)
    with open_dict(cfg):
        for key, value in reward_kwargs.items():
            OmegaConf.update(cfg, f"reward.reward_kwargs.{key}", value, force_add=True)
    return cfg


@pytest.fixture
def use_test_sandbox(sandbox, monkeypatch):
    """Route the manager's code rows to the reward tests' sandbox (same backend choice as the other reward tests)."""
    monkeypatch.setattr(manager_module, "get_sandbox", lambda _cfg: sandbox)
    return sandbox


def make_row(
    tokenizer,
    text,
    data_source,
    ground_truth,
    *,
    num_turns=2,
    length=None,
    response_mask=None,
    extra=None,
    final_turn_start=0,
):
    """One trajectory as verl's AgentLoopWorker sends it to the reward loop (response right-padded to MAX_RESP).
    ``final_turn_start``: where agentrl_tool_agent says the final turn starts (0: ``text`` is that turn; None: not
    said, as by another agent loop)."""
    ids = tokenizer(text, add_special_tokens=False)["input_ids"]
    if length is not None:  # left-fill with a filler token so the answer stays at the end
        filler = tokenizer(" x", add_special_tokens=False)["input_ids"][-1]
        assert len(ids) <= length, (len(ids), length)
        ids = [filler] * (length - len(ids)) + ids
    assert len(ids) <= MAX_RESP
    responses = torch.zeros(1, MAX_RESP, dtype=torch.long)
    responses[0, : len(ids)] = torch.tensor(ids)
    prompts = torch.ones(1, PROMPT_LEN, dtype=torch.long)
    response_attention = (torch.arange(MAX_RESP) < len(ids)).long()[None]
    tensors = {
        "prompts": prompts,
        "responses": responses,
        "input_ids": torch.cat([prompts, responses], dim=1),
        "attention_mask": torch.cat([torch.ones_like(prompts), response_attention], dim=1),
    }
    if response_mask is not None:
        tensors["response_mask"] = response_mask
    loop_fields = dict(extra or {})
    if final_turn_start is not None:
        loop_fields.setdefault(fields.FINAL_TURN_START.column, final_turn_start)
    non_tensors = {
        "data_source": np.array([data_source], dtype=object),
        "reward_model": np.array([{"ground_truth": ground_truth, "style": "rule"}], dtype=object),
        "extra_info": np.array([{"index": 0}], dtype=object),
        "tool_extra_fields": np.array([loop_fields], dtype=object),
    }
    if num_turns is not None:
        non_tensors["__num_turns__"] = np.array([num_turns])
    return DataProto.from_dict(tensors=tensors, non_tensors=non_tensors)


def run(manager, row) -> dict:
    return asyncio.run(manager.run_single(row))


def test_load_reward_manager_builds_agentrl_reward(base_config, tiny_tokenizer) -> None:
    manager = load_reward_manager(base_config, tiny_tokenizer)
    assert isinstance(manager, AgentRLRewardManager)
    assert manager.settings.max_resp_len == MAX_RESP  # taken from data.max_response_length
    assert manager.settings.overlong_buffer_cfg.len == BUFFER
    assert manager.settings.tool_bonus == "paper"
    assert manager.custom_score_fn is None  # verl's default_compute_score is replaced by ours
    assert manager.sandbox_config.backend == "local"


def test_mixed_batch_through_verls_reward_loop_worker(base_config, tiny_tokenizer, use_test_sandbox) -> None:
    """verl's RewardLoopWorker scores rows concurrently; the batch stacks their infos the way compute_rm_score does."""
    from verl.experimental.reward_loop.reward_loop import RewardLoopWorker

    rows = [  # a code row first: the original dispatched every row on the first row's data_source
        (GOOD_CODE, names.DS_LCB_V6, DOUBLE_GT, 1.0),
        (HALF_CODE, names.DS_SKYWORK_CODE, DOUBLE_GT, 0.5),
        ("no code here", names.DS_SKYWORK_CODE, DOUBLE_GT, -1.0),
        ("so \\boxed{34}", names.DS_AIME24, "34", 1.0),
        ("so \\boxed{35}", names.DS_DAPO, "34", -1.0),
        ("\\boxed{B}", names.DS_GPQA, "B", 1.0),
        ("\\boxed{(B)}", names.DS_GPQA, "B", -1.0),
    ]
    batch = DataProto.concat([make_row(tiny_tokenizer, text, ds, gt) for text, ds, gt, _ in rows])
    worker = RewardLoopWorker(base_config)
    assert isinstance(worker.reward_manager, AgentRLRewardManager)
    outputs = asyncio.run(worker.compute_score_batch(batch))
    assert [float(o["reward_score"]) for o in outputs] == [r[3] for r in rows]

    infos = [o["reward_extra_info"] for o in outputs]
    keys = list(infos[0])  # verl takes the key set from the first row and indexes every row with it
    assert set(keys) == set(REWARD_INFO_KEYS)
    columns = {key: np.array([info[key] for info in infos]) for key in keys}
    assert list(columns["task_kind"]) == ["code", "code", "code", "math", "math", "gpqa", "gpqa"]
    assert list(columns["tests_passed"][:3]) == [2, 1, 0]
    assert list(columns["pred"][3:]) == ["34", "35", "B", "(B)"]
    rm_scores = AgentRLRewardManager.assemble_rm_scores(batch, [o["reward_score"] for o in outputs])
    assert rm_scores.sum(dim=1).tolist() == [r[3] for r in rows]

    metrics = reward_metrics([r[1] for r in rows], columns)
    assert metrics[f"reward/{names.DS_GPQA}/acc"] == 0.5
    assert metrics[f"reward/{names.DS_SKYWORK_CODE}/score"] == pytest.approx(-0.25)
    assert metrics["reward/grader_timeout_ratio"] == 0.0


def test_the_code_grades_sandbox_servers_reach_the_step_metrics(base_config, tiny_tokenizer, sandbox, monkeypatch):
    """A sandbox_fusion fleet tags every result with the server that answered; the reward path must carry those
    routes to the per-server metrics as the tool path does (one JSON string per row: verl stacks the values)."""

    class Fleet:
        async def arun(self, *args, **kwargs):
            result = await sandbox.arun(*args, **kwargs)
            return dataclasses.replace(result, route=Route(server="http://sb-1:8080", latency_s=0.02, failed=("x:1",)))

    monkeypatch.setattr(manager_module, "get_sandbox", lambda _cfg: Fleet())
    manager = load_reward_manager(base_config, tiny_tokenizer)
    rows = [(GOOD_CODE, names.DS_LCB_V6, DOUBLE_GT), ("so \\boxed{34}", names.DS_AIME24, "34")]
    infos = [run(manager, make_row(tiny_tokenizer, *row))["reward_extra_info"] for row in rows]
    routes = np.array([info[fields.REWARD_SANDBOX_ROUTES.column] for info in infos])
    assert routes.shape == (2,) and json.loads(routes[1]) == []  # a math row reaches no sandbox
    metrics = server_metrics(infos)
    assert metrics["agentrl_sandbox/server/sb-1_8080/calls"] == 1.0  # LCB grading: one execution runs every test
    assert metrics["agentrl_sandbox/server/sb-1_8080/latency_p50_ms"] == pytest.approx(20.0)
    assert metrics["agentrl_sandbox/server/x_1/failures"] == 1.0


WRONG_MATH = ("so \\boxed{35}", names.DS_AIME24, "34")
RIGHT_MATH = ("so \\boxed{34}", names.DS_AIME24, "34")
NO_CODE = ("no code", names.DS_LCB_V6, DOUBLE_GT)
HALF = (HALF_CODE, names.DS_LCB_V6, DOUBLE_GT)


@pytest.mark.parametrize(
    ("mode", "row", "num_turns", "reward"),
    [
        ("paper", WRONG_MATH, 2, -1.0),  # no tool call: (2 − 2)/2 = 0
        ("paper", WRONG_MATH, 6, -0.8),  # 2 tool calls: +0.2
        ("paper", WRONG_MATH, 12, -0.6),  # 5 calls would give −0.5; capped at −0.6
        ("paper", RIGHT_MATH, 6, 1.0),  # correct answers are not shaped
        ("paper", NO_CODE, 4, -0.9),
        ("paper", HALF, 6, 0.5),  # a failing but parseable program scores ≥ 0: never shaped
        ("released", WRONG_MATH, 6, -1.1),  # the released bug: num_turns = 0 → −1.1 for every wrong answer
        ("released", WRONG_MATH, 2, -1.1),
        ("released", NO_CODE, 12, -1.1),
        ("released", RIGHT_MATH, 6, 1.0),
        ("off", WRONG_MATH, 12, -1.0),
        ("off", NO_CODE, 12, -1.0),
    ],
)
def test_tool_bonus_modes(mode, row, num_turns, reward, base_config, tiny_tokenizer, use_test_sandbox) -> None:
    manager = load_reward_manager(config_with(base_config, tool_bonus=mode), tiny_tokenizer)
    out = run(manager, make_row(tiny_tokenizer, *row, num_turns=num_turns))
    assert out["reward_score"] == pytest.approx(reward)
    info = out["reward_extra_info"]
    assert info["num_turns"] == num_turns
    assert info["tool_bonus"] == pytest.approx(reward - info["score"])


def test_paper_tool_bonus_needs_num_turns(base_config, tiny_tokenizer) -> None:
    row = make_row(tiny_tokenizer, *WRONG_MATH, num_turns=None)
    with pytest.raises(ValueError, match="__num_turns__"):
        run(load_reward_manager(base_config, tiny_tokenizer), row)
    released = load_reward_manager(config_with(base_config, tool_bonus="released"), tiny_tokenizer)
    assert run(released, row)["reward_score"] == pytest.approx(-1.1)


def test_the_tool_bonus_counts_only_calls_that_ran(base_config, tiny_tokenizer) -> None:
    """Issue 40 item 5: tool_bonus_count=tool_calls (compat agentrl) counts the calls whose program ran, not
    invalid_arguments / tool_exception calls (the loop's agentrl_tool_calls counts every answered call)."""
    statuses = ["invalid_arguments", "tool_exception", "ok", "unknown_tool", "runtime_error", "infra_error"]
    extra = {fields.TOOL_CALLS.column: len(statuses), fields.TOOL_STATUSES.column: np.array(statuses, dtype=object)}
    manager = load_reward_manager(config_with(base_config, tool_bonus_count="tool_calls"), tiny_tokenizer)
    out = run(manager, make_row(tiny_tokenizer, *WRONG_MATH, num_turns=14, extra=extra))
    assert out["reward_extra_info"]["tool_bonus"] == pytest.approx(0.2)  # 2 calls ran (ok, runtime_error)
    assert out["reward_score"] == pytest.approx(-0.8)
    with pytest.raises(ValueError, match=fields.TOOL_STATUSES.column):  # no statuses: refused, never guessed
        run(manager, make_row(tiny_tokenizer, *WRONG_MATH, num_turns=14, extra={fields.TOOL_CALLS.column: 6}))


# --- answer_source (issue 40, item 3): the final assistant turn only in compat agentrl ---------------------------
def call_text(code: str) -> str:
    return "<tool_call>\n" + json.dumps({"name": "code_interpreter", "arguments": {"code": code}}) + "\n</tool_call>"


TOOL_TURN = "\n<|im_start|>user\n<tool_response>\n{}\n</tool_response><|im_end|>\n<|im_start|>assistant\n"
COMPUTED_BOXED = "print('\\\\boxed{' + str(30 + 4) + '}')"  # its source holds no \boxed{34}: only its output does
ANSWER_CASES = {  # (segments: (text, 1 = the model's / 0 = tool and template), released score, final-turn score)
    "a program printed the answer, the final turn did not": (
        [(call_text(COMPUTED_BOXED) + "<|im_end|>", 1), (TOOL_TURN.format("\\boxed{34}"), 0),
         ("I am not sure.<|im_end|>", 1)], 1.0, -1.0,
    ),
    "the answer only in the code of a final tool call": (
        [("Let me check.\n" + call_text("print(34)  # \\boxed{34}") + "<|im_end|>", 1)], 1.0, -1.0,
    ),
    "the answer only in <think>": ([("<think>so \\boxed{34}</think>I am not sure.<|im_end|>", 1)], 1.0, -1.0),
    "the answer after a tool call, outside <think>": (
        [(call_text("print(34)") + "<|im_end|>", 1), (TOOL_TURN.format("34"), 0),
         ("<think>it printed 34</think>so \\boxed{34}<|im_end|>", 1)], 1.0, 1.0,
    ),
    "the final turn answers wrong, a program printed the right one": (
        [(call_text(COMPUTED_BOXED) + "<|im_end|>", 1), (TOOL_TURN.format("\\boxed{34}"), 0),
         ("so \\boxed{35}<|im_end|>", 1)], -1.0, -1.0,
    ),
}  # fmt: skip
TURNS_WIDTH = 256  # response width of these rows


def turns_row(tokenizer, segments, data_source, ground_truth, *, carries: str):
    """A multi-turn trajectory as verl hands it to the reward: with its response_mask (``carries="mask"``), or as the
    streaming reward path does, without one but with agentrl_tool_agent's fields (``"loop_field"``)."""
    ids: list[int] = []
    mask: list[int] = []
    final_turn_start = 0
    for text, model in segments:
        final_turn_start = len(ids) if model else final_turn_start
        piece = tokenizer(text, add_special_tokens=False)["input_ids"]
        ids, mask = ids + piece, mask + [model] * len(piece)
    assert len(ids) <= TURNS_WIDTH, len(ids)
    responses = torch.zeros(1, TURNS_WIDTH, dtype=torch.long)
    responses[0, : len(ids)] = torch.tensor(ids)
    prompts = torch.ones(1, PROMPT_LEN, dtype=torch.long)
    tensors = {
        "prompts": prompts,
        "responses": responses,
        "input_ids": torch.cat([prompts, responses], dim=1),
        "attention_mask": torch.cat([torch.ones_like(prompts), (torch.arange(TURNS_WIDTH) < len(ids)).long()[None]], 1),
    }
    loop_fields = {}
    if carries == "mask":
        tensors["response_mask"] = torch.zeros(1, TURNS_WIDTH, dtype=torch.long)
        tensors["response_mask"][0, : len(ids)] = torch.tensor(mask)
    else:
        loop_fields[fields.FINAL_TURN_START.column] = final_turn_start
    non_tensors = {
        "data_source": np.array([data_source], dtype=object),
        "reward_model": np.array([{"ground_truth": ground_truth, "style": "rule"}], dtype=object),
        "extra_info": np.array([{"index": 0}], dtype=object),
        "tool_extra_fields": np.array([loop_fields], dtype=object),
        "__num_turns__": np.array([1 + len(segments)]),
    }
    return DataProto.from_dict(tensors=tensors, non_tensors=non_tensors)


@pytest.mark.parametrize("data_source", [names.DS_AIME24, names.DS_GPQA])
@pytest.mark.parametrize("carries", ["mask", "loop_field"])
@pytest.mark.parametrize("case", ANSWER_CASES.values(), ids=ANSWER_CASES.keys())
def test_the_answer_comes_from_the_final_turn_in_agentrl_mode(case, carries, data_source, base_config, tiny_tokenizer):
    segments, released_score, final_turn_score = case
    gold = "34"
    if data_source == names.DS_GPQA:  # the same cases with an option letter
        segments = [(text.replace("34", "B").replace("35", "C"), model) for text, model in segments]
        segments = [(text.replace("str(30 + 4)", "chr(66)"), model) for text, model in segments]
        gold = "B"
    cfg = config_with(base_config, **{"overlong_buffer_cfg.enable": False, "tool_bonus": "off"})
    row = turns_row(tiny_tokenizer, segments, data_source, gold, carries=carries)
    final_turn = run(load_reward_manager(cfg, tiny_tokenizer), row)
    released = run(load_reward_manager(config_with(cfg, answer_source="response"), tiny_tokenizer), row)
    assert (released["reward_score"], final_turn["reward_score"]) == (released_score, final_turn_score)


def test_a_multi_turn_row_without_mask_or_loop_field_is_refused_in_final_turn_mode(base_config, tiny_tokenizer):
    row = make_row(tiny_tokenizer, *RIGHT_MATH, num_turns=4, final_turn_start=None)
    with pytest.raises(ValueError, match=fields.FINAL_TURN_START.column):
        run(load_reward_manager(base_config, tiny_tokenizer), row)
    whole = load_reward_manager(config_with(base_config, answer_source="response"), tiny_tokenizer)
    assert run(whole, row)["reward_score"] == 1.0
    single_turn = make_row(tiny_tokenizer, *RIGHT_MATH, num_turns=2, final_turn_start=None)
    assert run(load_reward_manager(base_config, tiny_tokenizer), single_turn)["reward_score"] == 1.0


@pytest.mark.parametrize(
    ("length", "penalty"),
    [
        (20, 0.0),
        (MAX_RESP - BUFFER, 0.0),  # the last length without penalty
        (MAX_RESP - BUFFER + 1, -1 / BUFFER),  # first token into the buffer
        (MAX_RESP - BUFFER // 2, -0.5),
        (MAX_RESP, -1.0),  # truncated at max_resp_len: the full penalty factor
    ],
)
def test_overlong_buffer_edges(length, penalty, base_config, tiny_tokenizer) -> None:
    manager = load_reward_manager(base_config, tiny_tokenizer)
    out = run(manager, make_row(tiny_tokenizer, *RIGHT_MATH, length=length))
    info = out["reward_extra_info"]
    assert info["response_tokens"] == length
    assert info["overlong_reward"] == pytest.approx(penalty)
    assert info["overlong"] is (penalty < 0)
    assert out["reward_score"] == pytest.approx(1.0 + penalty)


def test_overlong_penalty_factor_and_disable(base_config, tiny_tokenizer) -> None:
    row = make_row(tiny_tokenizer, *RIGHT_MATH, length=MAX_RESP)
    doubled_cfg = config_with(base_config, **{"overlong_buffer_cfg.penalty_factor": 2.0})
    doubled = load_reward_manager(doubled_cfg, tiny_tokenizer)
    assert run(doubled, row)["reward_score"] == pytest.approx(-1.0)
    off = load_reward_manager(config_with(base_config, **{"overlong_buffer_cfg.enable": False}), tiny_tokenizer)
    assert run(off, row)["reward_score"] == pytest.approx(1.0)


def test_overlong_count_model_tokens_only(base_config, tiny_tokenizer) -> None:
    """The option to count only model tokens (response_mask == 1); tool outputs (mask 0) do not count."""
    mask = torch.zeros(1, MAX_RESP, dtype=torch.long)
    mask[0, :40] = 1  # 40 model tokens, then 24 tool-output tokens
    whole = config_with(base_config, answer_source="response")  # the answer sits in the tool-output part here
    manager = load_reward_manager(config_with(whole, overlong_count="model"), tiny_tokenizer)
    with_mask = run(manager, make_row(tiny_tokenizer, *RIGHT_MATH, length=MAX_RESP, response_mask=mask))
    assert with_mask["reward_extra_info"]["response_tokens"] == 40
    assert with_mask["reward_score"] == pytest.approx(1.0)
    streamed = make_row(tiny_tokenizer, *RIGHT_MATH, length=MAX_RESP, extra={fields.MODEL_TOKENS.column: 56})
    assert run(manager, streamed)["reward_extra_info"]["overlong_reward"] == pytest.approx(-0.5)
    with pytest.raises(ValueError, match=fields.MODEL_TOKENS.column):
        run(manager, make_row(tiny_tokenizer, *RIGHT_MATH, length=MAX_RESP))
    default = load_reward_manager(whole, tiny_tokenizer)  # the paper: all response tokens
    assert run(default, make_row(tiny_tokenizer, *RIGHT_MATH, length=MAX_RESP, response_mask=mask))[
        "reward_score"
    ] == pytest.approx(0.0)


def test_a_stuck_grade_times_out_and_is_flagged(base_config, tiny_tokenizer, use_test_sandbox) -> None:
    cfg = config_with(base_config, grader_timeout_s=1.0, code_timeout_s_per_test=30.0)
    manager = load_reward_manager(cfg, tiny_tokenizer)
    row = make_row(tiny_tokenizer, "```python\nwhile True:\n    pass\n```", names.DS_LCB_V6, DOUBLE_GT)
    start = time.monotonic()
    out = run(manager, row)
    assert time.monotonic() - start < 10
    info = out["reward_extra_info"]
    assert info[fields.GRADER_TIMEOUT.column] is True
    assert info["acc"] is False
    assert out["reward_score"] == 0.0  # a code row that timed out counts as "no test passed"


def test_infra_failure_is_flagged_and_not_shaped(base_config, tiny_tokenizer, infra_failing_sandbox, monkeypatch):
    monkeypatch.setattr(code_scorer, "_resolve_sandbox", lambda _cfg: infra_failing_sandbox)
    out = run(load_reward_manager(base_config, tiny_tokenizer), make_row(tiny_tokenizer, *HALF, num_turns=6))
    info = out["reward_extra_info"]
    assert info[fields.GRADER_INFRA_FAILURE.column] is True
    assert info["acc"] is None
    assert (out["reward_score"], info["tool_bonus"]) == (0.0, 0.0)


class CountingSandbox:
    """Delegates to a real sandbox and records how many runs were in flight at once."""

    def __init__(self, inner) -> None:
        self.inner, self.in_flight, self.peak = inner, 0, 0

    async def arun(self, code, **kwargs):
        self.in_flight += 1
        self.peak = max(self.peak, self.in_flight)
        try:
            await asyncio.sleep(0.2)
            return await self.inner.arun(code, **kwargs)
        finally:
            self.in_flight -= 1


def test_grading_concurrency_is_bounded(base_config, tiny_tokenizer, sandbox, monkeypatch) -> None:
    counting = CountingSandbox(sandbox)
    monkeypatch.setattr(code_scorer, "_resolve_sandbox", lambda _cfg: counting)
    manager = load_reward_manager(config_with(base_config, max_concurrency=2), tiny_tokenizer)
    rows = [make_row(tiny_tokenizer, GOOD_CODE, names.DS_LCB_V6, DOUBLE_GT) for _ in range(6)]

    async def all_rows():
        return await asyncio.gather(*(manager.run_single(r) for r in rows))

    outs = asyncio.run(all_rows())
    assert [o["reward_score"] for o in outs] == [1.0] * 6
    assert counting.peak == 2


def test_custom_reward_function_is_used_and_shaped(base_config, tiny_tokenizer, tmp_path) -> None:
    path = tmp_path / "my_reward.py"
    path.write_text("def score(data_source, solution_str, ground_truth, extra_info=None, **kw):\n    return -1.0\n")
    cfg = copy.deepcopy(base_config)
    with open_dict(cfg):
        cfg.reward.custom_reward_function.path = str(path)
        cfg.reward.custom_reward_function.name = "score"
    manager = load_reward_manager(cfg, tiny_tokenizer)
    assert manager.custom_score_fn is not None
    out = run(manager, make_row(tiny_tokenizer, *RIGHT_MATH, num_turns=6))
    assert out["reward_score"] == pytest.approx(-0.8)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"tool_bonuss": "paper"}, "unknown key"),
        ({"tool_bonus": "always"}, "tool_bonus must be one of"),
        ({"overlong_count": "tools"}, "overlong_count must be one of"),
        ({"math_verifier": "sympy"}, "math_verifier must be one of"),
        ({"overlong_buffer_cfg.lenght": 3}, "unknown key"),
        ({"max_resp_len": 8}, "must be >= overlong_buffer_cfg.len"),
        ({"grader_timeout_s": 0}, "must be > 0"),
    ],
)
def test_bad_reward_kwargs_fail_loudly(kwargs, message, base_config, tiny_tokenizer) -> None:
    with pytest.raises(ValueError, match=message):
        load_reward_manager(config_with(base_config, **kwargs), tiny_tokenizer)


def test_math_verify_option_through_the_manager(base_config, tiny_tokenizer) -> None:
    row = make_row(tiny_tokenizer, "so \\boxed{0.5}", names.DS_DAPO, "\\frac{1}{2}")
    assert run(load_reward_manager(base_config, tiny_tokenizer), row)["reward_score"] == -1.0  # strict
    manager = load_reward_manager(config_with(base_config, math_verifier="math_verify"), tiny_tokenizer)
    assert run(manager, row)["reward_score"] == 1.0


def test_a_math_verify_hard_timeout_is_reported_as_a_grader_timeout(base_config, tiny_tokenizer, monkeypatch) -> None:
    async def overran(*args, **kwargs):
        raise GraderTimeout("isolated grader exceeded 10 s")

    monkeypatch.setattr(scoring, "ascore_math_verify", overran)
    manager = load_reward_manager(config_with(base_config, math_verifier="math_verify"), tiny_tokenizer)
    out = run(manager, make_row(tiny_tokenizer, "\\boxed{9^{9^{9^{9}}}}", names.DS_DAPO, "1", num_turns=2))
    assert out["reward_extra_info"][fields.GRADER_TIMEOUT.column] is True
    assert out["reward_score"] == -1.0


def test_max_resp_len_interpolation_resolves(base_config, tiny_tokenizer) -> None:
    cfg = config_with(base_config, max_resp_len="${data.max_response_length}")
    assert load_reward_manager(cfg, tiny_tokenizer).settings.max_resp_len == MAX_RESP


# --- issue 34: a hostile program cannot fail the step ---

SNAN = ("```python\nprint('sNaN')\n```", names.DS_LCB_V6, DOUBLE_GT)
GOOD_ROW = (GOOD_CODE, names.DS_LCB_V6, DOUBLE_GT)


@pytest.mark.parametrize("program", ["print('sNaN')", "print('[' * 5000 + ']' * 5000)"], ids=["snan", "deep_json"])
def test_a_program_printing_snan_scores_zero_and_the_step_goes_on(
    program, base_config, tiny_tokenizer, use_test_sandbox
):
    row = (f"```python\n{program}\n```", names.DS_LCB_V6, DOUBLE_GT)
    out = run(load_reward_manager(base_config, tiny_tokenizer), make_row(tiny_tokenizer, *row))
    info = out["reward_extra_info"]
    assert (out["reward_score"], info["acc"], info["tests_passed"]) == (0.0, False, 0)
    assert info[fields.GRADER_ERROR.column] is False  # contained by the grader: a plain wrong answer


def test_an_exception_while_grading_is_a_flagged_wrong_answer(
    base_config, tiny_tokenizer, use_test_sandbox, monkeypatch
):
    """What printing sNaN did before the grader's fix (InvalidOperation out of the comparison), or any grader bug:
    the row scores like a failed program, is flagged, and the step's metrics count it."""

    def trap(*args, **kwargs):
        raise decimal.InvalidOperation([decimal.InvalidOperation])

    monkeypatch.setattr(io_tests, "_judge", trap)
    manager = load_reward_manager(base_config, tiny_tokenizer)
    outs = [run(manager, make_row(tiny_tokenizer, *row)) for row in (SNAN, RIGHT_MATH)]
    infos = [o["reward_extra_info"] for o in outs]
    assert [o["reward_score"] for o in outs] == [0.0, 1.0]
    assert [i[fields.GRADER_ERROR.column] for i in infos] == [True, False]
    assert (infos[0]["acc"], infos[0][fields.GRADER_INFRA_FAILURE.column], infos[0]["task_kind"]) == (
        False,
        False,
        "code",
    )
    columns = {key: [info[key] for info in infos] for key in REWARD_INFO_KEYS}
    assert reward_metrics([SNAN[1], RIGHT_MATH[1]], columns)["reward/grader_error_ratio"] == 0.5


def test_a_raising_custom_scorer_is_a_flagged_wrong_answer(base_config, tiny_tokenizer, tmp_path) -> None:
    path = tmp_path / "my_reward.py"
    path.write_text("def score(data_source, solution_str, ground_truth, extra_info=None, **kw):\n    [][0]\n")
    cfg = copy.deepcopy(base_config)
    with open_dict(cfg):
        cfg.reward.custom_reward_function.path = str(path)
        cfg.reward.custom_reward_function.name = "score"
    out = run(load_reward_manager(cfg, tiny_tokenizer), make_row(tiny_tokenizer, *RIGHT_MATH))
    assert (out["reward_score"], out["reward_extra_info"][fields.GRADER_ERROR.column]) == (-1.0, True)


@pytest.mark.parametrize("code_rules", ["lcb", "open_agentrl"])
def test_hack_patterns_are_counted_in_both_modes(code_rules, base_config, tiny_tokenizer, use_test_sandbox) -> None:
    manager = load_reward_manager(config_with(base_config, code_rules=code_rules), tiny_tokenizer)
    rows = [("```python\nimport os\nos._exit(0)\n```", names.DS_LCB_V6, DOUBLE_GT), GOOD_ROW, RIGHT_MATH]
    infos = [run(manager, make_row(tiny_tokenizer, *row))["reward_extra_info"] for row in rows]
    assert [i[fields.REWARD_HACK_PATTERNS.column] for i in infos] == ["exit_at_import", "", ""]
    columns = {key: [info[key] for info in infos] for key in REWARD_INFO_KEYS}
    metrics = reward_metrics([r[1] for r in rows], columns)
    assert metrics["reward/hack_pattern/exit_at_import"] == 1.0
    assert metrics["reward/hack_pattern/exit_at_import/acc"] == 0.0  # stdin tests: exiting prints nothing
    assert metrics["reward/hack_pattern/always_equal"] == 0.0


def test_a_saturated_pool_does_not_count_against_the_grader_budget(base_config, tiny_tokenizer, pool, monkeypatch):
    """Both of the pool's slots are taken by other runs; a program needing half of its 6 s budget waits for a slot,
    then runs: more than 6 s of wall time, and it passes, with the wait reported apart."""
    monkeypatch.setattr(manager_module, "get_sandbox", lambda _cfg: pool)
    cfg = config_with(base_config, grader_timeout_s=6.0, code_timeout_s_per_test=10.0)
    manager = load_reward_manager(cfg, tiny_tokenizer)
    one_test = json.dumps({"inputs": ["1\n"], "outputs": ["2\n"], "fn_name": None})
    slow = "```python\nimport time\ntime.sleep(3)\nprint(int(input()) * 2)\n```"
    row = make_row(tiny_tokenizer, slow, names.DS_LCB_V6, one_test)

    async def behind_a_full_pool():
        others = [asyncio.ensure_future(pool.arun("import time; time.sleep(6.5)", timeout_s=10)) for _ in range(2)]
        while not pool._sem.locked():
            await asyncio.sleep(0.01)
        out = await manager.run_single(row)
        await asyncio.gather(*others)
        return out

    info = asyncio.run(behind_a_full_pool())["reward_extra_info"]
    assert info["acc"] is True and info[fields.GRADER_TIMEOUT.column] is False
    assert info["grade_s"] > 6.0 and info["sandbox_queue_s"] > 0.0  # over the budget on the wall clock: the queue
    assert info["grade_s"] - info["sandbox_queue_s"] < 6.0
    assert reward_metrics([names.DS_LCB_V6], {"sandbox_queue_s": [info["sandbox_queue_s"]]})[
        "reward/sandbox_queue_wait_s/max"
    ] == pytest.approx(info["sandbox_queue_s"])
