"""Multi-turn tool-use SFT rows: normalising the shapes trajectories come in, and checking them with verl's dataset.

Accepted input shapes for an assistant tool call (all normalised to verl's structured form, ``arguments`` a dict):
  - structured: ``tool_calls: [{"type": "function", "function": {"name", "arguments": dict | JSON string}}]``
  - OpenAI without the wrapper: ``tool_calls: [{"name", "arguments"}]``
  - qwen-agent: ``function_call: {"name", "arguments"}`` on the assistant, ``role: "function"`` for the result
  - inline hermes text: ``<tool_call>{"name": ..., "arguments": ...}</tool_call>`` inside the assistant content
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf

from agentrl_recipe import names
from agentrl_recipe.config_paths import tool_config_dir
from data_prep.rows import ConvertError

INLINE_TOOL_CALL = re.compile(r"<tool_call>\s*(.*?)\s*</tool_call>", re.DOTALL)
DEFAULT_TOOL_CONFIG = tool_config_dir() / "code_interpreter.yaml"


def load_tool_schemas(tool_config: str | Path | None = None) -> list[dict[str, Any]]:
    """The OpenAI tool schemas from a verl tool-config YAML — the same file the RL rollout uses, so SFT and RL
    render the identical tools block in the system prompt."""
    path = Path(tool_config or DEFAULT_TOOL_CONFIG)
    if not path.exists():
        raise FileNotFoundError(f"tool config {path} not found (pass --tool-config)")
    cfg = OmegaConf.to_container(OmegaConf.load(path), resolve=True)
    schemas = [t["tool_schema"] for t in cfg.get("tools", []) if "tool_schema" in t]  # type: ignore[union-attr]
    if not schemas:
        raise ValueError(f"{path}: no tools[].tool_schema entries")
    return schemas


def _arguments(value: Any, where: str) -> dict[str, Any]:
    if isinstance(value, str):
        try:
            value = json.loads(value)
        except json.JSONDecodeError as e:
            raise ConvertError(where, f"tool-call arguments are not JSON ({e.msg})") from e
    if not isinstance(value, dict):
        raise ConvertError(where, f"tool-call arguments must be an object, got {type(value).__name__}")
    return {k: v for k, v in value.items() if v is not None}


def tool_call(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"type": "function", "function": {"name": name, "arguments": arguments}}


def _normalize_call(call: Any, where: str) -> dict[str, Any]:
    if not isinstance(call, dict):
        raise ConvertError(where, "a tool call must be an object")
    function = call.get("function")
    fn: dict[str, Any] = function if isinstance(function, dict) else call
    name = fn.get("name")
    if not isinstance(name, str) or not name:
        raise ConvertError(f"{where}.function.name", "missing tool name")
    return tool_call(name, _arguments(fn.get("arguments", {}), f"{where}.function.arguments"))


def split_inline_tool_calls(content: str, where: str) -> tuple[str, list[dict[str, Any]]]:
    """Hermes ``<tool_call>{json}</tool_call>`` blocks out of assistant text → (remaining text, structured calls)."""
    calls = []
    for i, m in enumerate(INLINE_TOOL_CALL.finditer(content)):
        try:
            payload = json.loads(m.group(1))
        except json.JSONDecodeError as e:
            raise ConvertError(f"{where}.content", f"inline <tool_call> is not JSON ({e.msg})") from e
        calls.append(_normalize_call(payload, f"{where}.content<tool_call {i}>"))
    return INLINE_TOOL_CALL.sub("", content).strip(), calls


def normalize_messages(messages: Any) -> list[dict[str, Any]]:
    """Messages in verl's multi-turn form: ``{role, content[, tool_calls]}`` with structured calls only."""
    if not isinstance(messages, list):
        raise ConvertError("messages", f"must be a list, got {type(messages).__name__}")
    out: list[dict[str, Any]] = []
    for i, msg in enumerate(messages):
        where = f"messages[{i}]"
        if not isinstance(msg, dict):
            raise ConvertError(where, "must be an object")
        role = msg.get("role")
        content = msg.get("content")
        if content is None:
            content = ""
        if not isinstance(content, str):
            raise ConvertError(f"{where}.content", f"must be a string, got {type(content).__name__}")
        if role == "function":  # qwen-agent's name for a tool result
            role = "tool"
        if role == "assistant":
            calls = [_normalize_call(c, f"{where}.tool_calls[{j}]") for j, c in enumerate(msg.get("tool_calls") or [])]
            if isinstance(msg.get("function_call"), dict):
                calls.append(_normalize_call(msg["function_call"], f"{where}.function_call"))
            if not calls and "<tool_call>" in content:
                content, calls = split_inline_tool_calls(content, where)
            new: dict[str, Any] = {"role": "assistant", "content": content.strip() if calls else content}
            if calls:
                new["tool_calls"] = calls
            out.append(new)
        elif role in ("system", "user", "tool"):
            out.append({"role": role, "content": content})
        else:
            raise ConvertError(f"{where}.role", f"unknown role {role!r}")
    return out


def sft_row(messages: list[dict[str, Any]], tools: list[dict[str, Any]], **extra: Any) -> dict[str, Any]:
    return {"messages": messages, "tools": tools, **extra}


def code_call(code: str) -> dict[str, Any]:
    return tool_call(names.TOOL_NAME, {"code": code})


# ----------------------------------------------------------------------------------------------- verl check
def check_with_verl_dataset(parquet: Path, tokenizer_path: str | Path, *, max_length: int = 32768) -> dict[int, str]:
    """Load ``parquet`` with verl's ``MultiTurnSFTDataset`` and check every row; returns {row: error}.

    Checks: the row tokenises (including verl's per-turn vs whole-conversation sanity check); the loss mask covers
    assistant text and tool calls only — each assistant message's content lies inside the masked text, while user
    and tool content does not.
    """
    from transformers import AutoTokenizer  # transformers and verl's dataset: seconds to import, only --tokenizer
    from verl.utils.dataset.multiturn_sft_dataset import MultiTurnSFTDataset

    tok = AutoTokenizer.from_pretrained(str(tokenizer_path))
    config = {
        "max_length": max_length,
        "truncation": "error",
        "pad_mode": "no_padding",
        "messages_key": "messages",
        "tools_key": "tools",
    }
    # transformers types AutoTokenizer as its backends union, verl annotates one of them; verl reads a DictConfig
    ds = MultiTurnSFTDataset([str(parquet)], tok, OmegaConf.create(config))  # type: ignore[arg-type]
    errors: dict[int, str] = {}
    for i in range(len(ds)):
        try:
            item = ds[i]
        except (AssertionError, ValueError, TypeError, KeyError) as e:
            errors[i] = f"verl MultiTurnSFTDataset: {type(e).__name__}: {str(e).splitlines()[0][:200]}"
            continue
        ids, mask = item["input_ids"], item["loss_mask"]
        trained = tok.decode(ids[mask.bool()].tolist(), skip_special_tokens=False)
        untrained = tok.decode(ids[~mask.bool()].tolist(), skip_special_tokens=False)
        for j, msg in enumerate(ds.messages[i]):
            text = (msg.get("content") or "").strip()
            if len(text) < 4:
                continue
            if msg["role"] == "assistant" and text not in trained:
                errors[i] = f"messages[{j}] (assistant) is not covered by the loss mask"
                break
            if msg["role"] in ("user", "tool") and text in trained and text not in untrained:
                errors[i] = f"messages[{j}] ({msg['role']}) is inside the loss mask"
                break
        if i not in errors and int(mask.sum()) == 0:
            errors[i] = "no token is trained (empty loss mask)"
    return errors
