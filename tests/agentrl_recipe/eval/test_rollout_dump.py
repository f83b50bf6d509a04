"""The eval dump's token sidecar: a record's token ids go to rollouts.tokens.jsonl, the record stays as it was."""

from __future__ import annotations

import json
from pathlib import Path

from agentrl_recipe.eval.dump import TOKEN_KEYS, RolloutDump, tokens_path
from agentrl_recipe.eval.eval_set import EvalProblem
from agentrl_recipe.eval.grading import SampleGrade
from agentrl_recipe.eval.records import make_record
from agentrl_recipe.training.agent_loop.trajectory import Trajectory

PROBLEM = EvalProblem(
    prompt_id="toy/0", data_source="toy", task="math", ground_truth="4", row={}, file="toy.parquet", row_number=0
)
GRADE = SampleGrade(final_answer="4", correct=True, score=1.0, detail={}, infra_failure=False)


def _trajectory(sample: int, ids: list[int]) -> Trajectory:
    return Trajectory(
        sample_index=sample,
        response="r",
        messages=[{"role": "assistant", "content": "r"}],
        prompt_ids=[1, 2],
        response_ids=ids,
        response_mask=[1] * len(ids),
    )


def test_token_ids_go_to_the_sidecar(tmp_path: Path) -> None:
    dump = RolloutDump(tmp_path / "rollouts.jsonl")
    assert dump.tokens_path == tmp_path / "rollouts.tokens.jsonl" == tokens_path(dump.path)
    assert dump.append([make_record(PROBLEM, _trajectory(s, [10 + s, 11]), GRADE) for s in range(2)]) == 2
    records = dump.load()
    assert set(records) == {("toy/0", 0), ("toy/0", 1)}
    assert not any(k in r for r in records.values() for k in TOKEN_KEYS)  # resume and the report never read them
    assert records[("toy/0", 1)]["correct"] is True
    assert dump.load_tokens() == {
        ("toy/0", 0): {"prompt_ids": [1, 2], "response_ids": [10, 11], "response_mask": [1, 1]},
        ("toy/0", 1): {"prompt_ids": [1, 2], "response_ids": [11, 11], "response_mask": [1, 1]},
    }
    first = json.loads(dump.tokens_path.read_text().splitlines()[0])
    assert list(first) == ["prompt_id", "sample", *TOKEN_KEYS]

    # a sample generated again (its record was lost to a crash) replaces its tokens; a torn sidecar line is cut
    dump.append([make_record(PROBLEM, _trajectory(0, [99]), GRADE)])
    with open(dump.tokens_path, "a", encoding="utf-8") as f:
        f.write('{"prompt_id": "toy/0", "sample": 1, "prompt_')
    tokens = dump.load_tokens()
    assert tokens[("toy/0", 0)]["response_ids"] == [99] and tokens[("toy/0", 1)]["response_ids"] == [11, 11]
    assert dump.tokens_path.read_text().endswith("}\n")


def test_records_without_token_ids_write_no_sidecar(tmp_path: Path) -> None:
    dump = RolloutDump(tmp_path / "rollouts.jsonl")
    record = make_record(PROBLEM, Trajectory(sample_index=0, response="r"), GRADE)
    assert not any(k in record for k in TOKEN_KEYS)
    dump.append([record])
    assert len(dump.load()) == 1 and not dump.tokens_path.exists() and dump.load_tokens() == {}
