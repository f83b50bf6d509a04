"""The demo's synthetic task: word problems, the splits, and the RL rows (the teacher is in ``demo_teacher``).

Task: one-step arithmetic word problems with single-digit operands ("Tom has 3 apples and buys 5 more..."), to be
solved by calling ``code_interpreter``. Single digits keep the copying a ~0.2M-parameter model must learn to one
token per operand (cpu-feasibility: tiny models learn the tool-call format long before they learn to copy
multi-digit numbers).

Teacher (:mod:`agentrl_recipe.cpu_task.teacher`): a scripted client inside verl's agent loop whose program runs
in the sandbox through the real ``code_interpreter`` tool; the demo keeps its trajectories whose answers the tool really
printed — the paper's filter on real trajectories, in miniature.

The held-out split is disjoint from training by (template, a, b), so evaluation measures generalisation rather than
recall of seen problems.
"""

from __future__ import annotations

import dataclasses
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from agentrl_recipe import names
from agentrl_recipe.atomic_io import atomic_path, atomic_write_jsonl

DATA_SOURCE = "agentrl_demo_arith"  # no "code"/"gpqa" in it -> agentrl_recipe.tasks routes it to the math scorer
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


def write_parquet(rows: Sequence[dict[str, Any]], path: Path) -> Path:
    """Atomic parquet write (temp + rename). Nested columns stay nested; tool-call arguments are JSON objects."""
    import pandas as pd

    with atomic_path(path) as tmp:
        pd.DataFrame(list(rows)).to_parquet(tmp, index=False)
    return Path(path)


def dump_jsonl(rows: Sequence[dict[str, Any]], path: Path) -> Path:
    atomic_write_jsonl(path, rows, ensure_ascii=True, default=None)
    return Path(path)
