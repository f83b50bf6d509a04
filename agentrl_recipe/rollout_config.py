"""The verl config of an in-process rollout: the recipe's RL config (``verl_configs/agentrl_rl.yaml`` on verl's
``ppo_trainer``) composed with hydra for one model, so every rollout uses exactly the training run's multi-turn limits,
tool and agent loop (:func:`compose_config`; :mod:`agentrl_recipe.rollout` runs it)."""

from __future__ import annotations

from collections.abc import Sequence
from contextlib import contextmanager
from pathlib import Path

from hydra import compose, initialize_config_dir
from hydra.core.global_hydra import GlobalHydra
from omegaconf import DictConfig, OmegaConf, open_dict

from agentrl_recipe import names
from agentrl_recipe.config_paths import config_dir as shipped_config_dir

DEFAULT_CONFIG_NAME = "agentrl_rl"


@contextmanager
def _hydra(config_dir: Path):
    if GlobalHydra.instance().is_initialized():  # compose inside a hydra app or after a test that left it set up
        GlobalHydra.instance().clear()
    with initialize_config_dir(config_dir=str(config_dir), version_base=None):
        yield


def compose_config(
    model_path: str | Path,
    *,
    overrides: Sequence[str] = (),
    config_name: str = DEFAULT_CONFIG_NAME,
    config_dir: str | Path | None = None,
    prompt_length: int | None = None,
    response_length: int | None = None,
    record_messages: bool = True,
) -> DictConfig:
    """The recipe's verl config for an in-process rollout of ``model_path``.

    ``config_dir`` defaults to the shipped ``verl_configs/`` (``$AGENTRL_CONFIG_DIR``, else the checkout of an editable
    install). ``overrides`` are hydra overrides applied last (``key=value``, ``+key=value``). ``prompt_length`` /
    ``response_length`` set ``data.max_prompt_length`` / ``data.max_response_length``, which verl's rollout config
    and the reward's ``max_resp_len`` follow. A relative ``multi_turn.tool_config_path`` is resolved against the
    current directory, then the checkout holding ``config_dir``, as verl would resolve it launched from there.
    """
    if config_dir is None:
        config_dir = shipped_config_dir()  # $AGENTRL_CONFIG_DIR, else the checkout
    config_dir = Path(config_dir)
    if not (config_dir / f"{config_name}.yaml").is_file():
        raise FileNotFoundError(f"no config {config_name}.yaml in {config_dir}")
    base = [
        f"actor_rollout_ref.model.path={Path(model_path).resolve() if Path(model_path).exists() else model_path}",
        # AgentLoopWorker needs a rollout name; nothing on the in-process path imports vLLM (the client replaces it).
        "actor_rollout_ref.rollout.name=vllm",
        "actor_rollout_ref.rollout.calculate_log_probs=true",
        "actor_rollout_ref.rollout.agent.num_workers=1",
        f"++{names.CONFIG_NAMESPACE}.agent_loop.record_messages={str(record_messages).lower()}",  # add or override
    ]
    if prompt_length is not None:
        base.append(f"data.max_prompt_length={int(prompt_length)}")
    if response_length is not None:
        base.append(f"data.max_response_length={int(response_length)}")
    with _hydra(config_dir):
        cfg = compose(config_name=config_name, overrides=[*base, *overrides])
    multi_turn = cfg.actor_rollout_ref.rollout.multi_turn
    with open_dict(cfg):
        for key in ("tool_config_path", "function_tool_path"):
            multi_turn[key] = _resolve_repo_path(multi_turn.get(key), config_dir.parent)
    return cfg


def _resolve_repo_path(path: str | None, root: Path) -> str | None:
    """``path`` as verl would open it from ``root`` (the checkout holding verl_configs/), unless it exists here."""
    if not path or Path(path).is_absolute() or Path(path).exists():
        return path
    candidate = root / path
    return str(candidate) if candidate.exists() else path


def to_yaml(cfg: DictConfig) -> str:
    """The composed config as YAML (for logs and reproducibility)."""
    return OmegaConf.to_yaml(cfg, resolve=True)
