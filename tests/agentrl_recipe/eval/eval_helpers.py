"""Helpers of the eval tests: the small eval parquet and a scripted generator (no model) with known answers.

A uniquely named module (not conftest) so that `from eval_helpers import …` cannot pick up another test
directory's conftest when the whole suite runs in one session."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path

from agentrl_recipe.eval.eval_set import EvalProblem
from agentrl_recipe.training.agent_loop.trajectory import Trajectory

FIXTURES = Path(__file__).parent / "fixtures"
EVAL_PARQUET = FIXTURES / "eval_small.parquet"

CORRECT_CODE = {
    None: "n = int(input())\nprint(sum(map(int, input().split())))",
    "addLists": "class Solution:\n    def addLists(self, a, b):\n        return [x + y for x, y in zip(a, b)]",
}


def scripted_answer(problem: EvalProblem, sample: int) -> tuple[str, bool]:
    """Even samples answer correctly, odd samples wrongly; returns (final assistant text, correct?)."""
    correct = sample % 2 == 0
    if problem.task == "code":
        tests = json.loads(problem.ground_truth)
        code = CORRECT_CODE[tests["fn_name"]] if correct else "print('nope')"
        return f"Final program:\n```python\n{code}\n```", correct
    gold = str(problem.ground_truth)
    answer = gold if correct else ("A" if problem.task == "gpqa" and gold != "A" else "999999")
    return f"The answer is \\boxed{{{answer}}}", correct


class ScriptedGenerator:
    """Stands in for the agent-loop rollout: sample s makes s % 3 tool calls, then answers (see scripted_answer)."""

    def __init__(self, fail_after_batches: int | None = None) -> None:
        self.calls: list[tuple[str, int]] = []
        self.batches = 0
        self.fail_after_batches = fail_after_batches
        self.closed = False

    async def generate(self, problems: Sequence[EvalProblem], samples: Sequence[Sequence[int]]) -> list[Trajectory]:
        if self.fail_after_batches is not None and self.batches >= self.fail_after_batches:
            raise KeyboardInterrupt("simulated kill")
        self.batches += 1
        out = []
        for i, (p, wanted) in enumerate(zip(problems, samples, strict=True)):
            for s in wanted:
                self.calls.append((p.prompt_id, s))
                text, _ = scripted_answer(p, s)
                calls = s % 3
                statuses = ["ok"] * calls
                if calls == 2:
                    statuses[-1] = "runtime_error"
                messages = [*p.row["prompt"]]
                for _ in range(calls):
                    messages += [
                        {"role": "assistant", "content": "<tool_call>...</tool_call>"},
                        {"role": "tool", "content": "out"},
                    ]
                messages.append({"role": "assistant", "content": text})
                out.append(
                    Trajectory(
                        row_index=i,
                        sample_index=s,
                        response=text,
                        messages=messages,
                        num_turns=2 + 2 * calls,
                        tool_calls=calls,
                        tool_failures=statuses.count("runtime_error"),
                        tool_statuses=statuses,
                        tool_latency_s=[0.01 * (i + 1) for i in range(calls)],
                        prompt_tokens=100,
                        response_tokens=50 + 10 * s,
                    )
                )
        return out

    async def aclose(self) -> None:
        self.closed = True
