"""Row, tool-call and config helpers of the agent-loop tests (uniquely named: the tests are not a package)."""

from __future__ import annotations

import copy
import json
from typing import Any

from omegaconf import DictConfig, OmegaConf, open_dict

from agentrl_recipe import names


def with_updates(cfg: DictConfig, **updates: Any) -> DictConfig:
    """A copy of ``cfg`` with dotted keys set (``__`` in a keyword stands for ``.``)."""
    cfg = copy.deepcopy(cfg)
    with open_dict(cfg):
        for key, value in updates.items():
            OmegaConf.update(cfg, key.replace("__", "."), value, force_add=True)
    return cfg


def row(question: str, *, data_source: str = "aime2024", agent: str = names.AGENT_LOOP, answer: str = "42") -> dict:
    return {
        "data_source": data_source,
        "prompt": [{"role": "user", "content": question}],
        "ability": "math",
        "reward_model": {"ground_truth": answer, "style": "rule"},
        "extra_info": {},
        "agent_name": agent,
    }


def call(code: str, name: str = names.TOOL_NAME) -> str:
    """A well-formed hermes tool call, as a Qwen model writes it."""
    return "<tool_call>\n" + json.dumps({"name": name, "arguments": {"code": code}}) + "\n</tool_call>"
