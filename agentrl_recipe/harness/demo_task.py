"""The demo's synthetic task and its scripted teacher: the paper's "real trajectories" idea in miniature.

Task: one-step arithmetic word problems with single-digit operands ("Tom has 3 apples and buys 5 more..."), to be
solved by calling ``code_interpreter``. Single digits keep the copying a ~0.2M-parameter model must learn to one
token per operand (cpu-feasibility: tiny models learn the tool-call format long before they learn to copy
multi-digit numbers).

Teacher: a script (:func:`teacher_script`) that a :class:`~agentrl_recipe.core.generation.scripted.ScriptedClient` plays
inside verl's agent loop: it writes the program as a hermes tool call, the ``agentrl_tool_agent`` loop runs it in the
sandbox through the real ``code_interpreter`` tool, and the teacher answers with what the tool printed. The demo keeps
a trajectory only if the ``agentrl_reward`` manager scored it correct and ``compute_score`` verifies it — the paper's
filter on real trajectories, in miniature.

The held-out split is disjoint from training by (template, a, b), so evaluation measures generalisation rather than
recall of seen problems.
"""

from __future__ import annotations

import dataclasses
import json
import random
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agentrl_recipe.core import names
from agentrl_recipe.core.io import atomic_path, atomic_write_jsonl

DATA_SOURCE = "agentrl_demo_arith"  # no "code"/"gpqa" in it -> scoring.task_kind routes it to the math scorer
ABILITY = "math"
INSTRUCTION = "Use the code_interpreter tool, then give the answer in \\boxed{}."
# The teacher states the expression before calling the tool: a second copy of the operands per trajectory, nearer its
# program, that lets the tiny model learn the copy in ~60-130 SFT steps instead of ~180-270+ (plain-torch replay of
# the demo's SFT, seeds 0-2; `make demo` README section).
TEACHER_CALL_TEMPLATE = "Let me compute {expression}."
TEACHER_ANSWER_TEMPLATE = "The answer is \\boxed{{{answer}}}."

# (question template, operator). Operands are single digits; subtraction never goes below zero.
TEMPLATES: tuple[tuple[str, str], ...] = (
    ("{name} has {a} apples and buys {b} more. How many apples does {name} have now?", "+"),
    ("{name} had {a} coins and spent {b} of them. How many coins are left?", "-"),
    ("A box has {a} rows of {b} pens. How many pens are in the box?", "*"),
)
NAMES: tuple[str, ...] = ("Tom", "Ana", "Sam", "Lia", "Max", "Eva")


@dataclasses.dataclass(frozen=True)
class Problem:
    """One word problem: what the user sees, the teacher's program and the verified answer."""

    question: str
    expression: str  # what the teacher computes, e.g. "9 - 5" (a wrong operator's when it errs: teacher_accuracy)
    answer: str  # ground truth (str, as reward_model.ground_truth)
    key: tuple[int, int, int]  # (template index, a, b): the split is disjoint on this
    teacher_output: str = ""  # what the teacher's program prints (= answer unless the teacher erred)

    @property
    def code(self) -> str:
        """The teacher's program."""
        return f"print({self.expression})"

    @property
    def call_text(self) -> str:
        """What the teacher writes before its tool call."""
        return TEACHER_CALL_TEMPLATE.format(expression=self.expression)

    @property
    def prompt(self) -> list[dict[str, str]]:
        return [{"role": "user", "content": f"{self.question} {INSTRUCTION}"}]


OPERATORS = ("+", "-", "*")


def _problem(template_index: int, a: int, b: int, name: str, teacher_op: str | None = None) -> Problem:
    template, op = TEMPLATES[template_index]
    if op == "-" and b > a:
        a, b = b, a
    values = {"+": a + b, "-": a - b, "*": a * b}
    return Problem(
        question=template.format(name=name, a=a, b=b),
        expression=f"{a} {teacher_op or op} {b}",
        answer=str(values[op]),
        key=(template_index, a, b),
        teacher_output=str(values[teacher_op or op]),
    )


def _teacher_op(template_index: int, question: str, seed: int, teacher_accuracy: float) -> str:
    """The operator the teacher writes: the template's with probability ``teacher_accuracy``, else another one.

    Drawn per question (its own RNG): a repeated question gets the same program, and the problems drawn do not
    depend on the teacher's accuracy.
    """
    op = TEMPLATES[template_index][1]
    rng = random.Random(f"{seed}:{question}")
    return op if rng.random() < teacher_accuracy else rng.choice([o for o in OPERATORS if o != op])


def make_splits(
    n_train: int, n_eval: int, *, seed: int = 0, teacher_accuracy: float = 1.0
) -> tuple[list[Problem], list[Problem]]:
    """Deterministic train / held-out problems, disjoint on (template, a, b); names are drawn per problem.

    ``teacher_accuracy`` < 1 makes the teacher pick a wrong operator for that fraction of the training problems
    (its program still runs and it still answers with what the tool printed): a teacher right only part of the time.
    Held-out problems always carry the right program.
    """
    keys = sorted(
        {_problem(t, a, b, NAMES[0]).key for t in range(len(TEMPLATES)) for a in range(1, 10) for b in range(1, 10)}
    )
    rng = random.Random(seed)
    rng.shuffle(keys)
    n_eval_keys = max(1, len(keys) // 5)
    if n_eval > n_eval_keys:
        raise ValueError(f"n_eval={n_eval} > {n_eval_keys} distinct held-out problems")
    eval_keys, train_keys = keys[:n_eval_keys], keys[n_eval_keys:]
    held_out = [_problem(*k, rng.choice(NAMES)) for k in eval_keys[:n_eval]]
    train = []
    for _ in range(n_train):
        key, name = rng.choice(train_keys), rng.choice(NAMES)
        question = _problem(*key, name).question
        train.append(_problem(*key, name, _teacher_op(key[0], question, seed, teacher_accuracy)))
    return train, held_out


def rl_rows(problems: Sequence[Problem], *, split: str) -> list[dict[str, Any]]:
    """verl RL rows in the project's row contract (data_source, prompt, reward_model, extra_info, agent_name)."""
    return [
        {
            "data_source": DATA_SOURCE,
            "prompt": p.prompt,
            "ability": ABILITY,
            "reward_model": {"ground_truth": p.answer, "style": "rule"},
            "extra_info": {"index": i, "split": split, "question": p.question},
            "agent_name": names.AGENT_LOOP,
        }
        for i, p in enumerate(problems)
    ]


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
    """A :data:`~agentrl_recipe.core.generation.scripted.ScriptFn`: the scripted teacher, turn by turn.

    Turn 0 reads the question from the prompt and calls ``code_interpreter`` with the problem's program, in the
    exact text the chat template renders for such a call. Turn 1 reads the tool response the agent loop appended
    (the sandbox's real output) and answers with it. The verl agent loop runs the call; nothing here executes code.
    """
    from agentrl_recipe.core.generation.scripted import ScriptedTurn

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


def write_parquet(rows: Sequence[dict[str, Any]], path: Path) -> Path:
    """Atomic parquet write (temp + rename). Nested columns stay nested; tool-call arguments are JSON objects."""
    import pandas as pd

    with atomic_path(path) as tmp:
        pd.DataFrame(list(rows)).to_parquet(tmp, index=False)
    return Path(path)


def dump_jsonl(rows: Sequence[dict[str, Any]], path: Path) -> Path:
    atomic_write_jsonl(path, rows, ensure_ascii=True, default=None)
    return Path(path)


# ---------------------------------------------------------------------------------------------------- model and SFT set

PROMPT_LENGTH = 384  # tokens; a rendered demo prompt with the tool schema is ~250
RESPONSE_LENGTH = 160  # tokens, tool output included; the teacher's two turns take ~60
MAX_TURNS = 3  # assistant turns; the task needs 2


def task_rollout_config(model_dir: Path, *, extra_overrides: Sequence[str] = ()) -> Any:
    """The recipe's RL config at the demo task's sizes, for in-process rollouts (teacher, eval)."""
    from agentrl_recipe.harness.rollout import compose_config

    overrides = [
        f"actor_rollout_ref.rollout.multi_turn.max_assistant_turns={MAX_TURNS}",
        f"actor_rollout_ref.rollout.multi_turn.max_user_turns={MAX_TURNS}",
        f"reward.reward_kwargs.overlong_buffer_cfg.len={RESPONSE_LENGTH // 4}",
        *extra_overrides,
    ]
    return compose_config(model_dir, overrides=overrides, prompt_length=PROMPT_LENGTH, response_length=RESPONSE_LENGTH)


def tool_schemas(cfg: Any) -> list[dict[str, Any]]:
    """The tool schemas of ``cfg``'s tool config, as the chat template receives them."""
    import contextlib
    import io

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
) -> Path:
    """The tiny model, its BPE also trained on the task's rendered conversations (a tiny model learns them faster)."""
    from agentrl_recipe.harness.tiny_model import TinyModelSpec, build_tiny_model, build_tokenizer

    schemas = tool_schemas(task_rollout_config(Path("unused")))
    renderer = build_tokenizer(TinyModelSpec(corpus_lines=50))  # only its chat template is used here
    corpus = tuple(
        renderer.apply_chat_template(teacher_messages(p, f"{p.answer}\n"), tools=schemas, tokenize=False)
        for p in problems
    )
    spec = TinyModelSpec(
        hidden_size=hidden_size,
        num_hidden_layers=num_layers,
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

    from agentrl_recipe.core.generation.common import ContextLimits
    from agentrl_recipe.core.generation.scripted import ScriptedClient
    from agentrl_recipe.core.rewards.scoring import compute_score
    from agentrl_recipe.harness.rollout import arollout

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
