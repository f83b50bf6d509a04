"""The released SFT-3K and RL-30K fixtures (tests/data/, each in the published schema) through data_prep with Qwen3's
real tokenizer (agentrl_recipe/cpu_task/qwen_vocab.py), as the 4B run would see them: verl's SFT dataset check, token
lengths (equal to tiktoken's over the same ranks), and the RL prompt-length filter at the real lengths.
"""

from __future__ import annotations

import json
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from omegaconf import OmegaConf

from agentrl_recipe import cli
from agentrl_recipe.cpu_task.qwen_vocab import tiktoken_ids
from agentrl_recipe.problems import read_local_file
from agentrl_recipe.training.rl_dataset import AgentRLDataset
from data_prep.jobs import rl_released

TOOL_CONFIG = Path(__file__).resolve().parents[2] / "verl_configs" / "tools" / "code_interpreter.yaml"
# Token counts of the 4 kept SFT-3K rows (chat template with the tool schema), and of the 15 RL-30K prompts (with the
# generation prompt) alone and with the code_interpreter schema: 148 tokens of Qwen3-2507's tools header.
SFT_LENGTHS = [237, 248, 252, 239]
RL_ALONE = [217, 48, 51, 82, 96, 93, 127, 139, 106, 84, 49, 89, 77, 105, 108]
TOOLS_HEADER = 148


@pytest.fixture(scope="module")
def sft_rows(data_dir: Path, qwen3_vocab_dir: Path, tmp_path_factory) -> list[dict]:
    out = tmp_path_factory.mktemp("sft3k") / "sft.parquet"
    argv = ["data", "sft-released", str(data_dir / "open_agentrl_sft_3k.jsonl"), "--out", str(out)]
    assert cli.main([*argv, "--tokenizer", str(qwen3_vocab_dir)]) == 0
    stats = json.loads(out.with_suffix(".stats.json").read_text())
    # verl's MultiTurnSFTDataset took every kept row with the real vocabulary: loss mask on the assistant turns only
    assert stats["verl_check"] == {"tokenizer": str(qwen3_vocab_dir), "failed": 0, "passed": 4}
    return pq.read_table(out).to_pylist()


def test_sft3k_lengths_in_real_tokens(sft_rows: list[dict], qwen3_tokenizer) -> None:
    lengths = []
    for row in sft_rows:
        kwargs = {"tools": row["tools"], "tokenize": True, "return_dict": False}
        ids = list(qwen3_tokenizer.apply_chat_template(row["messages"], **kwargs))
        text = qwen3_tokenizer.apply_chat_template(row["messages"], tools=row["tools"], tokenize=False)
        assert ids == tiktoken_ids(text)
        lengths.append(len(ids))
    assert lengths == SFT_LENGTHS


@pytest.fixture(scope="module")
def rl_parquet(data_dir: Path, parse_args, tmp_path_factory) -> Path:
    where = tmp_path_factory.mktemp("rl30k")
    source = where / "Open-AgentRL-30K.parquet"
    pq.write_table(pa.Table.from_pylist(read_local_file(data_dir / "open_agentrl_30k.jsonl")), source)
    out = where / "rl.parquet"
    assert rl_released.main(parse_args(rl_released, [str(source), "--out", str(out)])) == 0
    return out


def _dataset(parquet: Path, tokenizer, limit: int, *, counts_tools: bool, cache: Path) -> AgentRLDataset:
    config = {
        "max_prompt_length": limit,
        "filter_overlong_prompts": True,
        "filter_overlong_prompts_workers": 1,
        "tool_config_path": str(TOOL_CONFIG),
        "cache_dir": str(cache),
        "agentrl": {"prompt_filter_counts_tools": counts_tools, "keep_released_rows": True},
    }
    return AgentRLDataset(str(parquet), tokenizer, OmegaConf.create(config))


def test_rl30k_prompt_lengths_and_the_filter(rl_parquet: Path, qwen3_tokenizer, tmp_path: Path) -> None:
    rows = pq.read_table(rl_parquet).to_pylist()
    alone = [
        len(qwen3_tokenizer.apply_chat_template(r["prompt"], add_generation_prompt=True, return_dict=False))
        for r in rows
    ]
    assert alone == RL_ALONE
    with_tools = [n + TOOLS_HEADER for n in alone]
    limit = 250
    # verl 0.9.1's rule (the tools counted) keeps exactly the rows whose render with the schema fits
    kept = _dataset(rl_parquet, qwen3_tokenizer, limit, counts_tools=True, cache=tmp_path / "a")
    assert len(kept) == sum(n <= limit for n in with_tools) == 9
    assert sorted(len(kept[i]["raw_prompt"][-1]["content"]) for i in range(len(kept))) == sorted(
        len(r["prompt"][-1]["content"]) for r, n in zip(rows, with_tools, strict=True) if n <= limit
    )
    # the released rule (the prompt alone) refuses rows that fit only without the tools: 6 at 250
    match = rf"^6 prompt\(s\) fit data.max_prompt_length={limit} only without the tool"
    with pytest.raises(ValueError, match=match):
        _dataset(rl_parquet, qwen3_tokenizer, limit, counts_tools=False, cache=tmp_path / "b")
    everything = _dataset(rl_parquet, qwen3_tokenizer, max(with_tools), counts_tools=False, cache=tmp_path / "c")
    assert len(everything) == len(rows) == 15
