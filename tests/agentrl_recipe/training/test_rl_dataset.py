"""AgentRLDataset: the prompt-length filter counts the tool schemas (verl 0.9.1) or the prompt alone (released)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pandas as pd
import pytest
from omegaconf import OmegaConf
from transformers import AutoTokenizer

from agentrl_recipe.training.rl_dataset import AgentRLDataset, DatasetSettings

TOOL_CONFIG = Path(__file__).resolve().parents[3] / "verl_configs" / "tools" / "code_interpreter.yaml"


@pytest.fixture(scope="module")
def lengths(tiny_model_dir):
    """Token counts of prompts of 10, 300 and 2000 words, alone and with the tool schemas."""
    from verl.tools.tool_registry import load_all_tools

    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    schemas = [
        t.tool_schema.model_dump(exclude_unset=True, exclude_none=True)
        for t in load_all_tools(tool_config_path=str(TOOL_CONFIG), function_tool_path=None)
    ]

    def count(words: int, tools) -> int:
        prompt = [{"role": "user", "content": " ".join(["seven"] * words)}]
        return len(
            tokenizer.apply_chat_template(
                prompt, tools=tools, add_generation_prompt=True, tokenize=True, return_dict=False
            )
        )

    return tokenizer, {w: (count(w, None), count(w, schemas)) for w in (10, 300, 2000)}


def dataset(tmp_path: Path, tokenizer, words: list[int], limit: int, **agentrl) -> AgentRLDataset:
    rows = [
        {
            "data_source": "aime2024",
            "prompt": [{"role": "user", "content": " ".join(["seven"] * w)}],
            "ability": "m",
            "reward_model": {"ground_truth": "7", "style": "rule"},
        }
        for w in words
    ]
    path = tmp_path / "rows.parquet"
    pd.DataFrame(rows).to_parquet(path)
    config = OmegaConf.create(
        {
            "max_prompt_length": limit,
            "filter_overlong_prompts": True,
            "filter_overlong_prompts_workers": 1,
            "tool_config_path": str(TOOL_CONFIG),
            "cache_dir": str(tmp_path / "cache"),
            "agentrl": agentrl,
        }
    )
    return AgentRLDataset(str(path), tokenizer, config)


def test_the_two_rules(tmp_path, lengths) -> None:
    tokenizer, n = lengths
    alone, with_tools = n[300]
    assert n[10][1] < alone < with_tools  # 10 words fit with the tools at a limit of `alone`; 300 only alone
    limit = alone
    ours = dataset(tmp_path, tokenizer, [10, 300, 2000], limit, prompt_filter_counts_tools=True)
    assert len(ours) == 1  # verl 0.9.1: only the 10-word prompt fits with the schemas
    explicit = dataset(tmp_path, tokenizer, [10, 2000], limit, prompt_filter_counts_tools=False)
    assert len(explicit) == 1  # 2000 words are over even alone: dropped by both rules
    with pytest.raises(ValueError, match=r"^1 prompt\(s\) fit data.max_prompt_length=\d+ only without the tool"):
        dataset(tmp_path, tokenizer, [10, 300, 2000], limit, prompt_filter_counts_tools=False)
    # the released rule with the limit raised to fit the 300-word prompt with its tools: kept, as in verl's rule
    assert len(dataset(tmp_path, tokenizer, [10, 300], with_tools, prompt_filter_counts_tools=False)) == 2
    pinned = dataset(tmp_path, tokenizer, [10, 300], limit, prompt_filter_counts_tools=True)
    assert len(pinned) == 1


def test_settings_resolution() -> None:
    import verl  # noqa: F401  (loads the plugin: its ${agentrl_compat:...} resolver)

    assert DatasetSettings.from_data_config({}).prompt_filter_counts_tools is True  # no data.agentrl: verl's rule
    for mode, counts in (("open_agentrl", False), ("agentrl", True)):  # what grpo_tcr.yaml writes into data.agentrl
        cfg = OmegaConf.create(
            {
                "agentrl": {"compat": mode},
                "data": {"agentrl": {"prompt_filter_counts_tools": "${agentrl_compat:prompt_filter_counts_tools}"}},
            }
        )
        assert DatasetSettings.from_data_config(cfg.data).prompt_filter_counts_tools is counts
    with pytest.raises(ValueError, match="unknown key"):  # the mode is the trainer's alone: no data.agentrl.compat
        DatasetSettings.from_data_config({"agentrl": {"compat": "open_agentrl"}})
    with pytest.raises(ValueError, match="unknown key"):
        DatasetSettings.from_data_config({"agentrl": {"prompt_filter": True}})
    with pytest.raises(TypeError, match="prompt_filter_counts_tools must be"):
        DatasetSettings.from_data_config({"agentrl": {"prompt_filter_counts_tools": "yes"}})


DEEP = "[" * 100_000 + "]" * 100_000  # json.loads raises RecursionError on it


def test_a_row_the_graders_cannot_parse_stops_the_load_by_number(tmp_path, tiny_model_dir) -> None:
    """Issue 40 item 8: refused at load, naming the row, never a grader_error mid-run."""
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    good_code = json.dumps({"inputs": ["1\n"], "outputs": ["1\n"], "fn_name": None})
    truths = [
        ("aime2024", "7"),
        ("skywork_code", DEEP),  # nested too deeply: RecursionError in json
        ("skywork_code", good_code),
        ("gpqa_diamond", "(B)"),
        ("skywork_code", json.dumps({"inputs": ["1"], "outputs": [DEEP], "fn_name": "f"})),
        ("aime2024", None),
    ]
    rows = [
        {"data_source": source, "prompt": [{"role": "user", "content": "Q?"}], "ability": "m",
         "reward_model": {"ground_truth": truth, "style": "rule"}}
        for source, truth in truths
    ]  # fmt: skip
    path = tmp_path / "rows.parquet"
    pd.DataFrame(rows).to_parquet(path)
    config = OmegaConf.create({"max_prompt_length": 512, "cache_dir": str(tmp_path / "cache"), "agentrl": {}})
    with pytest.raises(ValueError, match="4 row\\(s\\) whose ground truth cannot be graded") as refused:
        AgentRLDataset(str(path), tokenizer, config)
    message = str(refused.value)
    assert re.findall(r"row (\d+) \(", message) == ["1", "3", "4", "5"]
    assert message.count("RecursionError") == 2 and "one uppercase option letter" in message
    good = [row for i, row in enumerate(rows) if i in (0, 2)]
    pd.DataFrame(good).to_parquet(path)
    assert len(AgentRLDataset(str(path), tokenizer, config)) == 2


def test_released_only_rows_are_kept_under_open_agentrl_and_dropped_with_a_count_under_agentrl(
    tmp_path, tiny_model_dir, capsys
) -> None:
    """Issue 45 item 7: a published row flagged released_only (data rl-released) is trained on as the released
    loader did, or dropped at load with the count per reason; compat decides (keep_released_rows)."""
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    form = "reward_model.ground_truth: unknown code-test form"
    rows = [
        {"data_source": source, "prompt": [{"role": "user", "content": "Q?"}], "ability": "m",
         "reward_model": {"ground_truth": truth, "style": "rule"},
         "extra_info": {"index": i, "released_only": reason}}
        for i, (source, truth, reason) in enumerate([
            ("aime2024", "7", ""),
            ("skywork_code", '{"cases": [1]}', form),  # our graders cannot parse it: kept only when flagged
            ("skywork_math", "4", "unknown label 'train-science-physics'"),
            ("skywork_code", '{"cases": [2]}', form),
        ])
    ]  # fmt: skip
    path = tmp_path / "rows.parquet"
    pd.DataFrame(rows).to_parquet(path)

    def load(keep: str) -> list[int]:
        cfg = OmegaConf.create(
            {
                "max_prompt_length": 512,
                "cache_dir": str(tmp_path / "cache"),
                "agentrl": {"keep_released_rows": "${agentrl_compat:keep_released_rows}"},
            }
        )
        root = OmegaConf.create({"data": cfg, "agentrl": {"compat": keep}})
        ds = AgentRLDataset(str(path), tokenizer, root.data)
        return [ds.dataframe[i]["extra_info"]["index"] for i in range(len(ds))]

    assert load("open_agentrl") == [0, 1, 2, 3]
    assert "dropped" not in capsys.readouterr().out
    assert load("agentrl") == [0]
    assert (
        "data.agentrl.keep_released_rows false: dropped 3 published row(s) the released loader kept: "
        f"2 {form}; 1 unknown label 'train-science-physics'" in capsys.readouterr().out
    )
