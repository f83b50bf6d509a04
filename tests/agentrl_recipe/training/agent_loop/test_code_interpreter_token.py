"""The trainer's ``agentrl.sandbox`` (backend sandbox_fusion, url, token_file) reaches every tool call and every code
reward: verl's AgentLoopWorker and reward loop in-process (agentrl_recipe/offline/rollout.py), a token-protected sandbox
server on 127.0.0.1 (``sandbox serve``'s app and guard), a scripted model. Issue 29: the tool got ``token None``
(401)."""

from __future__ import annotations

import json

import pytest
from loop_helpers import call, with_updates
from omegaconf import OmegaConf
from sandbox_test_helpers import serve
from transformers import AutoTokenizer

from agentrl_recipe import fields, names
from agentrl_recipe.offline.rollout import arollout
from agentrl_recipe.training import sandbox_routes
from agentrl_recipe.training.agent_loop.code_interpreter import CodeInterpreterTool
from agentrl_recipe.training.recipe_config import resolve
from agentrl_sandbox.config import (
    ENV_SANDBOX_BACKEND,
    ENV_SANDBOX_TOKEN,
    ENV_SANDBOX_TOKEN_FILE,
    ENV_SANDBOX_URL,
    SandboxConfig,
    redacted,
)
from agentrl_sandbox.guard import ServerLimits
from agentrl_sandbox.server import create_app
from data_prep.rows import rl_row
from verl_client.token_output import ContextLimits
from verl_cpu.scripted import ScriptedClient, turns

TOKEN = "trainer-config-token"
PROGRAM = "```python\nn = int(input())\nprint(n + 1)\n```"


@pytest.fixture(scope="module")
def guarded_url(pool):
    with serve(create_app(pool, limits=ServerLimits(token=TOKEN))) as url:
        yield url


@pytest.fixture(scope="module")
def small_url(pool):
    """A server that takes at most 256 bytes of code (the reward's test driver is over it too)."""
    with serve(create_app(pool, limits=ServerLimits(token=TOKEN, max_code_bytes=256))) as url:
        yield url


@pytest.fixture(autouse=True)
def no_sandbox_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for key in (ENV_SANDBOX_URL, ENV_SANDBOX_BACKEND, ENV_SANDBOX_TOKEN, ENV_SANDBOX_TOKEN_FILE):
        monkeypatch.delenv(key, raising=False)


def code_row() -> dict:
    tests = {"inputs": ["4\n"], "outputs": ["5\n"], "fn_name": None}
    prompt = "Read an integer n and print n + 1. Answer in ```python```."
    return rl_row(names.DS_SKYWORK_CODE, prompt, "code", json.dumps(tests), {"source_id": "token-0"})


async def roll(tiny_model_dir, base_cfg, sandbox: dict, tool_code: str = "print(6*7)"):
    cfg = with_updates(base_cfg, agentrl__sandbox=sandbox, reward__reward_kwargs__overlong_buffer_cfg__len=256)
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    limits = ContextLimits.from_rollout_config(cfg.actor_rollout_ref.rollout)
    client = ScriptedClient(tokenizer, turns(call(tool_code), PROGRAM), limits=limits)
    (record,) = (await arollout([code_row()], client, cfg, score=True, progress=False)).records
    return record


async def test_the_trainer_token_file_reaches_the_tool_and_the_code_reward(
    tiny_model_dir, base_cfg, guarded_url, tmp_path
):
    token_file = tmp_path / "sandbox.token"
    token_file.write_text(TOKEN + "\n")
    sandbox = {"backend": "sandbox_fusion", "url": guarded_url, "token_file": str(token_file)}
    record = await roll(tiny_model_dir, base_cfg, sandbox)
    assert (record.tool_calls, record.tool_statuses, record.tool_failures) == (1, ["ok"], 0)
    assert record.messages[2] == {"role": "tool", "content": "42\n"}
    assert record.sandbox_servers == [guarded_url]  # the call went to the trainer's server, not a local pool
    routes = json.loads(record.reward_extra_info[fields.REWARD_SANDBOX_ROUTES.column])
    assert [r[sandbox_routes.SERVER] for r in routes] == [guarded_url]  # the grade ran there too
    assert record.reward_extra_info[fields.GRADER_INFRA_FAILURE.column] is False
    assert record.score == pytest.approx(1.0)


async def test_code_over_the_servers_limit_is_the_models_error(tiny_model_dir, base_cfg, small_url, tmp_path):
    """A 413 (code over --max-code-bytes) comes back to the model as a tool reply with status too_large: a failed
    call, not an infra failure (no infra mask, no infra-guard count, no failed server); in grading, not infra either."""
    token_file = tmp_path / "sandbox.token"
    token_file.write_text(TOKEN)
    sandbox = {"backend": "sandbox_fusion", "url": small_url, "token_file": str(token_file)}
    record = await roll(tiny_model_dir, base_cfg, sandbox, tool_code="x = 1\n" * 50 + "print(x)")
    assert (record.tool_calls, record.tool_statuses, record.tool_failures) == (1, ["too_large"], 1)
    assert record.tool_infra_failure is False and record.sandbox_failed == []
    reason = "request code is 308; this server accepts at most 256 (--max-code-bytes)"
    note = f"Error: the code is too large to run ({reason}). Send shorter code."
    assert record.messages[2] == {"role": "tool", "content": note}
    assert record.reward_extra_info[fields.GRADER_INFRA_FAILURE.column] is False


async def test_without_the_token_every_call_is_refused(tiny_model_dir, base_cfg, guarded_url):
    """The control: the same server without the token answers 401, which the tool reports as infra_error."""
    record = await roll(tiny_model_dir, base_cfg, {"backend": "sandbox_fusion", "url": guarded_url})
    assert (record.tool_calls, record.tool_statuses, record.tool_failures) == (1, ["infra_error"], 1)
    assert record.reward_extra_info[fields.GRADER_INFRA_FAILURE.column] is True


def test_the_tool_and_the_reward_share_one_sandbox_config() -> None:
    block = {"agentrl": {"sandbox": {"backend": "sandbox_fusion", "url": "http://trainer:1", "token_file": "/t"}}}
    recipe = resolve(block)
    assert resolve(OmegaConf.create(block)) is recipe  # one object per process for the same block
    tool = CodeInterpreterTool({})
    tool.use_recipe(recipe)
    cfg = tool.sandbox_config
    assert cfg is recipe.sandbox  # what the reward manager of this process takes (RecipeConfig.sandbox)
    assert (cfg.backend, cfg.urls, cfg.token_file, cfg.token) == ("sandbox_fusion", ["http://trainer:1"], "/t", None)
    tool._sandbox = object()  # type: ignore[assignment]  # started: the same block again is fine, another is not
    tool.use_recipe(resolve(block))
    with pytest.raises(RuntimeError, match=r"agentrl\.sandbox changed after the sandbox started"):
        tool.use_recipe(resolve({"agentrl": {"sandbox": {"backend": "sandbox_fusion", "token_file": "/other"}}}))
    with pytest.raises(ValueError, match=r"unknown key\(s\) \['sandbox'\]"):  # one place: the trainer's block
        CodeInterpreterTool({"sandbox": {"url": "http://tool:1"}})


def test_a_token_is_not_in_the_config_repr() -> None:
    assert "hidden" not in repr(SandboxConfig(token="hidden")) and redacted({"token": "hidden"}) == {"token": "***"}
    assert redacted({"token": None, "url": "u"}) == {"token": None, "url": "u"}
