"""The environment of a launch: verl's platform for a CPU config, where verl's file logger writes, and for RL the
plugin every worker must load (``VERL_USE_EXTERNAL_MODULES``), the variables forwarded to the workers, and the
sandbox's url, backend, pool size and token FILE (never the token: a Ray runtime env is printed, and so is the trainer
config by verl's ``main_ppo``, which is why a literal ``agentrl.sandbox.token`` stops an RL launch)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import psutil

from agentrl_recipe import names
from agentrl_recipe.training import recipe_config as agentrl_config
from agentrl_sandbox.config import (
    ENV_SANDBOX_BACKEND,
    ENV_SANDBOX_POOL_SIZE,
    ENV_SANDBOX_PROCESSES_PER_NODE,
    ENV_SANDBOX_RUNTIME,
    ENV_SANDBOX_TOKEN_FILE,
    ENV_SANDBOX_URL,
    SandboxConfig,
)
from verl_cpu import names as cpu_names

PLUGIN_MODULE = "agentrl_recipe.plugin"
FORWARDED_ENV = (names.ENV_TRACE_DIR, "VERL_FILE_LOGGER_PATH", "VERL_FILE_LOGGER_ROOT")


TQ_THREADS_ENV = "TQ_NUM_THREADS"  # transfer_queue's torch threads per put/get (default 8)
# OpenMP threads that wait for work sleep instead of spinning. On CPU the trainer, vLLM's engine, Ray's workers and the
# sandbox share the cores, and libgomp's default spin-wait (torch's OpenMP) holds a core another process needs: two SFT
# runs side by side on 2 cores took 414 s each, 51 s alone, 67 s with PASSIVE (docs/cpu.md).
OMP_WAIT_ENV = "OMP_WAIT_POLICY"
OMP_WAIT_ON_CPU = "PASSIVE"
# What a CPU launch sets unless the environment already does.
CPU_ENV_DEFAULTS = {
    OMP_WAIT_ENV: OMP_WAIT_ON_CPU,
    # Ray starts idle Python workers ahead of need (on raylet start and for the first driver). verl's actors carry a
    # runtime env of their own, so they cannot use them; on 2 cores each costs ~1 s of CPU at the run's start.
    "RAY_enable_worker_prestart": "0",
    "RAY_prestart_worker_first_driver": "0",
}


def platform_env(cfg: Any) -> dict[str, str]:
    """For a config whose ``trainer.device`` is ``cpu``: ``VERL_PLATFORM``, the plugin's CPU platform everywhere;
    ``CPU_ENV_DEFAULTS`` (OpenMP's passive wait, no prestarted Ray workers); and TransferQueue's threads capped at the
    host's physical cores (its default 8 on a 2-core host logs "target_num_threads 8 should not exceed total physical
    CPU cores" at every put and get). A value already in the environment wins."""
    if str(cfg.trainer.get("device", "")) != "cpu":
        return {}
    env = {cpu_names.PLATFORM_ENV: cpu_names.PLATFORM}
    env.update({key: value for key, value in CPU_ENV_DEFAULTS.items() if not os.environ.get(key)})
    if not os.environ.get(TQ_THREADS_ENV):
        env[TQ_THREADS_ENV] = str(min(8, psutil.cpu_count(logical=False) or 1))
    return env


def file_logger_env(cfg: Any) -> dict[str, str]:
    """Where verl's ``file`` logger writes: under the run's checkpoint dir, not ``./<project_name>/`` (verl's default,
    which from the repo root is the package folder). An explicit ``VERL_FILE_LOGGER_PATH``/``_ROOT`` wins."""
    loggers = cfg.trainer.get("logger") or []
    if "file" not in loggers or os.environ.get("VERL_FILE_LOGGER_PATH") or os.environ.get("VERL_FILE_LOGGER_ROOT"):
        return {}
    return {"VERL_FILE_LOGGER_ROOT": str(Path(str(cfg.trainer.default_local_dir)).resolve())}


def rl_env(cfg: Any, sandbox_url: str | None) -> dict[str, str]:
    """The environment of an RL launch: the plugin for every worker, the platform, verl's file logger, the
    variables to forward, and the sandbox's url, backend and pool size."""
    modules = [m for m in os.environ.get("VERL_USE_EXTERNAL_MODULES", "").split(",") if m]
    env = {"VERL_USE_EXTERNAL_MODULES": ",".join(dict.fromkeys([*modules, PLUGIN_MODULE]))}
    env.update(platform_env(cfg))
    env.update(file_logger_env(cfg))
    # Variables the workers read that a remote cluster's workers would not inherit: component markers
    # (agentrl_recipe/training/trace.py) and verl's file logger, which runs in the TaskRunner worker.
    for key in FORWARDED_ENV:
        if os.environ.get(key):
            env[key] = os.environ[key]
    sandbox = agentrl_config.section(cfg, "sandbox")
    env.update(sandbox_pool_env(cfg, sandbox))
    env.update(sandbox_env(cfg, sandbox_url))
    return env


def sandbox_env(cfg: Any, sandbox_url: str | None) -> dict[str, str]:
    """The sandbox overrides every worker gets: ``SANDBOX_URL=`` (``sandbox_url``) and this shell's
    ``AGENTRL_SANDBOX_*`` overrides (a remote worker does not inherit them), and the token FILE made absolute (a
    worker's directory is not the launch's). ``agentrl.sandbox`` itself reaches every worker with the trainer config
    (agentrl_recipe/training/recipe_config.py), tool and reward alike."""
    env = {
        key: os.environ[key] for key in (ENV_SANDBOX_URL, ENV_SANDBOX_BACKEND, ENV_SANDBOX_RUNTIME) if key in os.environ
    }
    if sandbox_url:
        env[ENV_SANDBOX_URL] = sandbox_url
    env.update(sandbox_token_env(agentrl_config.section(cfg, "sandbox")))
    return env


def worker_sandbox_config(cfg: Any, sandbox_url: str | None) -> SandboxConfig:
    """The sandbox the run's workers will use: ``agentrl.sandbox`` with this environment's overrides and then the
    launch's own variables (:func:`sandbox_env`) applied, as a worker's ``SandboxConfig.from_dict`` does — a url from
    ``SANDBOX_URL=`` or the config selects the ``sandbox_fusion`` backend unless a backend is named. What preflight
    health-checks. ValueError for a literal ``agentrl.sandbox.token`` (:data:`TOKEN_IN_CONFIG`)."""
    workers_env = {**os.environ, **sandbox_env(cfg, sandbox_url)}
    return SandboxConfig.from_dict(agentrl_config.section(cfg, "sandbox")).with_env_overrides(workers_env)


TOKEN_IN_CONFIG = (
    "agentrl.sandbox.token is set: verl's main_ppo prints the whole trainer config, token included. Write the token "
    f"to a file (chmod 600) and set agentrl.sandbox.token_file=<path> or {ENV_SANDBOX_TOKEN_FILE}=<path> instead"
)


def sandbox_token_env(sandbox: dict[str, Any]) -> dict[str, str]:
    """The token FILE's absolute path for every worker (``$AGENTRL_SANDBOX_TOKEN_FILE`` wins over
    ``agentrl.sandbox.token_file``); a literal ``agentrl.sandbox.token`` is refused (ValueError)."""
    if sandbox.get("token"):
        raise ValueError(TOKEN_IN_CONFIG)
    path = os.environ.get(ENV_SANDBOX_TOKEN_FILE) or sandbox.get("token_file")
    return {ENV_SANDBOX_TOKEN_FILE: str(Path(path).resolve())} if path else {}


def sandbox_pool_env(cfg: Any, sandbox: dict[str, Any]) -> dict[str, str]:
    """Size each worker's local sandbox pool for its node: the config's ``agentrl.sandbox.pool_size`` when set (the
    tool reads only its own YAML, so it travels as an environment variable), else the node's CPUs shared by the
    sandbox-using processes on it (agent-loop + reward workers spread over the nodes; local.default_pool_size)."""
    workers = int(cfg.actor_rollout_ref.rollout.agent.get("num_workers", 8)) + int(cfg.reward.get("num_workers", 8))
    per_node = -(-workers // max(1, int(cfg.trainer.get("nnodes", 1))))
    env = {ENV_SANDBOX_PROCESSES_PER_NODE: str(per_node)}
    if sandbox.get("pool_size"):
        env[ENV_SANDBOX_POOL_SIZE] = str(int(sandbox["pool_size"]))
    return env
