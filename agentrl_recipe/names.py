"""Every name this plugin registers with verl, and the per-trajectory field names its parts exchange.

verl's registries are flat and some overwrite silently (``register_policy_loss``), so every registered
name carries the ``agentrl_`` prefix. Plugin, configs, tests and docs import these constants; nothing
spells the strings twice.
"""

# --- names registered in verl's registries (see agentrl_recipe/plugin.py) ---
AGENT_LOOP = "agentrl_tool_agent"  # verl.experimental.agent_loop registry
REWARD_MANAGER = "agentrl_reward"  # verl.experimental.reward_loop.reward_manager registry
POLICY_LOSS = "agentrl_tcr"  # verl.trainer.ppo.core_algos.register_policy_loss
ADV_ESTIMATOR = "agentrl_grpo"  # verl.trainer.ppo.core_algos.register_adv_est

REGISTERED = {
    "agent_loop": AGENT_LOOP,
    "reward_manager": REWARD_MANAGER,
    "policy_loss": POLICY_LOSS,
    "adv_estimator": ADV_ESTIMATOR,
}

# --- the tool (resolved by class path from verl_configs/tools/*.yaml, not a registry) ---
TOOL_NAME = "code_interpreter"
TOOL_CLASS = "agentrl_recipe.training.agent_loop.code_interpreter.CodeInterpreterTool"

# --- per-trajectory fields: AgentLoopOutput.extra_fields -> non_tensor_batch columns and reward extra_info ---
FIELD_NUM_TURNS = "agentrl_num_turns"  # = verl's __num_turns__: prompt + assistant + tool turns (paper bonus: (n-2)/2)
FIELD_TOOL_CALLS = "agentrl_tool_calls"  # tool calls executed
FIELD_TOOL_FAILURES = "agentrl_tool_failures"  # tool calls whose status was not "ok"
FIELD_TOOL_LATENCY_S = "agentrl_tool_latency_s"  # list of per-call latencies (seconds)
FIELD_TOOL_STATUSES = "agentrl_tool_statuses"  # list of per-call sandbox statuses
FIELD_VOID_TURN = "agentrl_void_turn"  # bool: an assistant turn ended with neither a tool call nor an answer
FIELD_MALFORMED_TOOL_CALL = "agentrl_malformed_tool_call"  # int: tool calls that could not be parsed
FIELD_TOOL_INFRA_FAILURE = "agentrl_tool_infra_failure"  # bool: a sandbox infra_error during rollout
FIELD_MODEL_TOKENS = "agentrl_model_tokens"  # int: response tokens the model generated (response_mask == 1)
FIELD_ASSISTANT_TURNS = "agentrl_assistant_turns"  # int: assistant (generation) turns
FIELD_NUM_VOID_TURNS = "agentrl_void_turns"  # int: how many assistant turns were void (see agent_loop/loop.py)
FIELD_MALFORMED_KINDS = (
    "agentrl_malformed_kinds"  # list[str]: kind of each malformed call (agent_loop.turn_checks.MalformedCall)
)
FIELD_TERMINATION = "agentrl_termination"  # str: why the trajectory ended (agent_loop.loop.Termination)
FIELD_MESSAGES = "agentrl_messages"  # list[dict]: the conversation, only with agentrl.agent_loop.record_messages
# sandbox_fusion only (tools/sandbox/sandbox_routes.py): per answered call, the server and its round trip; per failed
# attempt, the server
FIELD_SANDBOX_SERVERS = "agentrl_sandbox_servers"  # list[str]
FIELD_SANDBOX_LATENCY_S = "agentrl_sandbox_latency_s"  # list[float], same order
FIELD_SANDBOX_FAILED = "agentrl_sandbox_failed"  # list[str]

# --- per-trajectory fields written by the reward manager (reward_extra_info -> non_tensor_batch columns) ---
FIELD_GRADER_INFRA_FAILURE = "agentrl_grader_infra_failure"  # bool: sandbox infra_error while grading
# str (JSON list of sandbox_routes.route_metrics): the sandbox_fusion servers the code grade reached; "[]" otherwise
FIELD_REWARD_SANDBOX_ROUTES = "agentrl_reward_sandbox_routes"
FIELD_GRADER_TIMEOUT = "agentrl_grader_timeout"  # bool: the grade hit the per-item timeout
FIELD_GRADER_ERROR = "agentrl_grader_error"  # bool: grading raised (a grader bug): scored as wrong, counted, guarded
# str: the released grader's reward hacks the graded program shows, ","-joined (rewards/hack_patterns.py)
FIELD_REWARD_HACK_PATTERNS = "agentrl_reward_hack_patterns"

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
