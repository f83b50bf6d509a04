"""The eval protocol on the recipe's verl config, and the client each backend gets (no model, no server)."""

from __future__ import annotations

from pathlib import Path

import pytest
from omegaconf import OmegaConf

from agentrl_recipe.eval.protocol import EvalConfig
from agentrl_recipe.eval.sampling import compose_eval_config, make_client


def test_protocol_lands_in_the_composed_verl_config(tiny_model_dir: Path, tmp_path: Path) -> None:
    cfg = EvalConfig(
        model=str(tiny_model_dir),
        data=["x.parquet"],
        out_dir=str(tmp_path),
        n_samples=5,
        temperature=0.8,
        top_p=0.7,
        max_prompt_length=1000,
        max_response_length=3000,
        max_assistant_turns=4,
        max_user_turns=5,
        max_tool_response_length=128,
        tool_timeout_s=7.0,
        overrides=["actor_rollout_ref.rollout.multi_turn.tool_response_truncate_side=left"],
    )
    verl_cfg = compose_eval_config(cfg)
    rollout = verl_cfg.actor_rollout_ref.rollout
    assert (rollout.val_kwargs.n, rollout.val_kwargs.temperature, rollout.val_kwargs.top_p) == (5, 0.8, 0.7)
    assert rollout.val_kwargs.do_sample is True and rollout.val_kwargs.top_k == -1
    assert (rollout.prompt_length, rollout.response_length) == (1000, 3000)
    mt = rollout.multi_turn
    assert (mt.max_assistant_turns, mt.max_user_turns, mt.max_tool_response_length) == (4, 5, 128)
    assert mt.max_parallel_calls == 1 and mt.tool_response_truncate_side == "left"
    tool_yaml = Path(mt.tool_config_path)  # the recipe's tool YAML with the protocol's timeout, in the run folder
    assert tool_yaml.parent == tmp_path
    from omegaconf import OmegaConf

    tool = OmegaConf.load(tool_yaml).tools[0]
    assert tool.class_name == "agentrl_recipe.training.agent_loop.code_interpreter.CodeInterpreterTool"
    assert tool.config.timeout_s == 7.0 and tool.config.memory_mb == 2048
    assert rollout.agent.default_agent_loop == "agentrl_tool_agent"  # the training loop, not verl's tool_agent


def test_paper_defaults_match_the_recipe_validation_settings(tiny_model_dir: Path, tmp_path: Path) -> None:
    verl_cfg = compose_eval_config(EvalConfig(model=str(tiny_model_dir), data=["x"], out_dir=str(tmp_path)))
    rollout = verl_cfg.actor_rollout_ref.rollout
    assert (rollout.val_kwargs.n, rollout.val_kwargs.temperature, rollout.val_kwargs.top_p) == (32, 1.0, 0.6)
    assert (rollout.prompt_length, rollout.response_length) == (4096, 20480)
    assert (rollout.multi_turn.max_assistant_turns, rollout.multi_turn.max_tool_response_length) == (16, 256)


def test_openai_backend_client(tiny_model_dir: Path, tmp_path: Path) -> None:
    from agentrl_recipe.offline.openai_client import OpenAICompletionsClient

    cfg = EvalConfig(
        model=str(tiny_model_dir),
        data=["x"],
        out_dir=str(tmp_path),
        backend="openai",
        server_url="http://gpu-node:8000/v1",
        served_model_name="demyagent",
    )
    client = make_client(cfg, compose_eval_config(cfg))
    assert isinstance(client, OpenAICompletionsClient) and client.model == "demyagent"
    payload = client.request_payload([1, 2, 3], {"temperature": 1.0, "top_p": 0.6, "top_k": -1})
    assert payload["max_tokens"] == 20480 and payload["top_p"] == 0.6 and payload["prompt"] == [1, 2, 3]
    with pytest.raises(ValueError, match="needs server_url"):
        EvalConfig(model="m", data=["x"], out_dir="o", backend="openai")


def tool_yaml_path(verl_cfg) -> str:
    return str(verl_cfg.actor_rollout_ref.rollout.multi_turn.tool_config_path)


def test_a_sandbox_token_stays_in_memory(tiny_model_dir: Path, tmp_path: Path) -> None:
    """``eval --sandbox '{"token": ...}'``: the report's protocol shows '***', the run folder's tool YAML has no
    sandbox at all, and the tool gets it from the composed config's agentrl.sandbox (CodeInterpreterTool.use_recipe)."""
    from agentrl_recipe.training import recipe_config
    from agentrl_recipe.training.agent_loop.code_interpreter import CodeInterpreterTool

    sandbox = {"backend": "sandbox_fusion", "url": "http://s:1", "token": "eval-secret"}
    cfg = EvalConfig(model=str(tiny_model_dir), data=["x"], out_dir=str(tmp_path), sandbox=sandbox)
    assert cfg.protocol()["sandbox"] == {"backend": "sandbox_fusion", "url": "http://s:1", "token": "***"}
    verl_cfg = compose_eval_config(cfg)
    assert {k: verl_cfg.agentrl.sandbox[k] for k in sandbox} == sandbox
    tool_yaml = Path(verl_cfg.actor_rollout_ref.rollout.multi_turn.tool_config_path).read_text()
    assert "eval-secret" not in tool_yaml and "sandbox" not in tool_yaml  # one place: agentrl.sandbox
    tool = CodeInterpreterTool(dict(OmegaConf.load(tool_yaml_path(verl_cfg)).tools[0].config))
    tool.use_recipe(recipe_config.resolve(verl_cfg))  # what agentrl_tool_agent does
    assert (tool.sandbox_config.urls, tool.sandbox_config.resolve_token()) == (["http://s:1"], "eval-secret")


@pytest.mark.parametrize(
    ("compat", "released"),
    [({}, True), ({"compat": "open_agentrl"}, True), ({"compat": "agentrl"}, False)],
    ids=["default", "open_agentrl", "agentrl"],
)
def test_compat_reaches_the_agent_loop_and_the_tool(
    tiny_model_dir: Path, tmp_path: Path, compat: dict, released: bool
) -> None:
    """Eval runs the released tool behaviour unless told otherwise: agentrl.compat of the composed config is what
    agentrl_tool_agent resolves its settings from and hands the tool (whose YAML leaves compat null)."""
    from agentrl_recipe.eval.protocol import protocol_deviations
    from agentrl_recipe.training import recipe_config
    from agentrl_recipe.training.agent_loop.code_interpreter import CodeInterpreterTool

    cfg = EvalConfig(model=str(tiny_model_dir), data=["x"], out_dir=str(tmp_path), **compat)
    verl_cfg = compose_eval_config(cfg)
    recipe = recipe_config.resolve(verl_cfg)
    assert recipe.compat == ("open_agentrl" if released else "agentrl")
    loop = recipe.settings("agent_loop")
    assert (loop.malformed_call_feedback, loop.tool_turn_newline, loop.error_text) == (
        (False, False, "released") if released else (True, True, "explain")
    )
    tool = CodeInterpreterTool(
        dict(OmegaConf.load(verl_cfg.actor_rollout_ref.rollout.multi_turn.tool_config_path).tools[0].config)
    )
    tool.use_recipe(recipe)  # what agentrl_tool_agent does with every tool
    assert (tool.auto_print, tool.failure_reply, tool.error_text, tool.large_output) == (
        ("last_line", "no_stdout", "released", "timeout") if released else ("expression", "explain", "explain", "keep")
    )
    deviations = protocol_deviations(cfg.protocol())
    assert deviations.get("compat") == (None if released else {"run": "agentrl", "paper": "open_agentrl"})


def test_compat_is_set_by_its_field_only(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="set the behaviour with compat"):
        EvalConfig(model="m", data=["x"], out_dir=str(tmp_path), overrides=["agentrl.compat=agentrl"])
    with pytest.raises(ValueError, match=r"EvalConfig\.compat must be one of"):
        EvalConfig(model="m", data=["x"], out_dir=str(tmp_path), compat="released")
