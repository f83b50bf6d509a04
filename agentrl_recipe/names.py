"""Every name this plugin registers with verl, and the per-trajectory field names its parts exchange.

verl's registries are flat and some overwrite silently (``register_policy_loss``), so every registered
name carries the ``agentrl_`` prefix. Plugin, configs, tests and docs import these constants; nothing
spells the strings twice.
"""

# --- names registered in verl's registries (see agentrl_recipe/plugin.py) ---
AGENT_LOOP = "agentrl_tool_agent"  # verl.experimental.agent_loop registry
POLICY_LOSS = "agentrl_tcr"  # verl.trainer.ppo.core_algos.register_policy_loss
ADV_ESTIMATOR = "agentrl_grpo"  # verl.trainer.ppo.core_algos.register_adv_est

COMPAT_RESOLVER = "agentrl_compat"  # OmegaConf resolver: ${agentrl_compat:token_mean_scope}
CONFIG_PATH_RESOLVER = "agentrl_config_path"  # OmegaConf resolver: ${agentrl_config_path:tools/code_interpreter.yaml}

REGISTERED = {
    "agent_loop": AGENT_LOOP,
    "policy_loss": POLICY_LOSS,
    "adv_estimator": ADV_ESTIMATOR,
    "compat_resolver": COMPAT_RESOLVER,
    "config_path_resolver": CONFIG_PATH_RESOLVER,
}

# --- loaded by path (reward.reward_manager.source: importlib): the graders load in the reward workers only ---
REWARD_MANAGER = "agentrl_reward"  # the component's name in markers and logs
REWARD_MANAGER_MODULE = "pkg://agentrl_recipe.training.rewards.manager"
REWARD_MANAGER_CLASS = "AgentRLRewardManager"

# --- loaded by path (trainer.v1.sampler.custom_sampler: verl imports the module in its trainer) ---
SAMPLER_PATH = "pkg://agentrl_recipe.training.algos.sampler"
SYNC_SAMPLER = "AgentRLReplayBuffer"  # the sync trainer's replay buffer
ASYNC_SAMPLER = "AgentRLReplayBufferAsync"  # colocate_async / separate_async

# --- the tool (resolved by class path from verl_configs/tools/*.yaml, not a registry) ---
TOOL_NAME = "code_interpreter"
TOOL_CLASS = "agentrl_recipe.training.agent_loop.code_interpreter.CodeInterpreterTool"

# --- per-trajectory fields: declared once, in agentrl_recipe/fields.py ---

# --- top-level config namespace owned by the plugin (validated by `agentrl-recipe configs check`) ---
CONFIG_NAMESPACE = "agentrl"

# --- environment variables ---
ENV_TRACE_DIR = (
    "AGENTRL_TRACE_DIR"  # where each component marks the processes it ran in (agentrl_recipe/training/trace.py)
)

# --- data_source values written by data prep (agentrl_recipe.tasks routes on them: "code"/"livecodebench" → code) ---
DS_AIME24 = "aime2024"
DS_AIME25 = "aime2025"
DS_GPQA = "gpqa_diamond"
DS_LCB_V6 = "livecodebench_v6"
DS_DAPO = "math_dapo"
DS_MEGASCIENCE = "mega-science"
DS_SKYWORK_MATH = "skywork_math"
DS_SKYWORK_CODE = "skywork_code"
RL_DATA_SOURCES = (DS_DAPO, DS_SKYWORK_MATH, DS_SKYWORK_CODE, DS_MEGASCIENCE)
EVAL_DATA_SOURCES = (DS_AIME24, DS_AIME25, DS_GPQA, DS_LCB_V6)
