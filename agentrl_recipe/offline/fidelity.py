"""The fidelity table: every hyperparameter and behaviour switch of the paper-run RL config against the released
scripts ([code], Gen-Verse/Open-AgentRL) and the paper, one row each. ``tests/agentrl_recipe/offline/test_fidelity.py``
asserts every ``ours`` value against the composed ``agentrl_rl_qwen3_4b`` config (behaviour keys after
``agentrl.compat`` resolves them) and that README's table equals :func:`render`, so neither can drift. The
``released_grader:*`` rows are the released code grader's reward hacks, each a property of ``code_rules: open_agentrl``
(the paper-run default); the ``*_fixed`` configs (or ``reward.reward_kwargs.code_rules: lcb`` alone) train without them.
The data rows (:data:`DATA_ROWS`) name the released file and line each value comes from.
"""

from __future__ import annotations

from typing import NamedTuple

from agentrl_recipe.training.rewards.hack_patterns import PATTERNS

CONFIG = "agentrl_rl_qwen3_4b"
SCRIPT = "recipe/demystify/grpo_tcr_qwen3_4b.sh"
README_START = (
    "<!-- fidelity-table:start (rendered by agentrl_recipe/offline/fidelity.py; "
    "tests/agentrl_recipe/offline/test_fidelity.py) -->"
)
README_END = "<!-- fidelity-table:end -->"


class Row(NamedTuple):
    key: str  # config key; "resolved:<name>" = a behaviour key after agentrl.compat resolves it
    paper: str
    released: str
    source: str  # the released file the value comes from
    ours: object  # the value in the composed paper-run config
    why: str  # "" = no deviation


# The last behaviours of the released stack, each a compat switch (issue 28): "resolved:<name>" = the value
# agentrl.compat gives it in the paper-run config; the "why" names our config key. "eval:compat" = EvalConfig's default.
LOOP_050 = "verl/experimental/agent_loop/tool_agent_loop.py"  # the verl 0.5 Open-AgentRL vendored
BEHAVIOUR_ROWS = (
    Row(
        "resolved:tool_turn_newline",
        "–",
        "no `\\n` after the generated `im_end` token before a tool turn (the turn's own render appended)",
        f"{LOOP_050}:193",
        False,
        "agentrl.agent_loop.tool_turn_newline; _fixed: verl 0.9.1's mask-0 `\\n` (the ids equal the template's)",
    ),
    Row(
        "resolved:error_text",
        "–",
        "`Error when executing tool: 'python'` (unknown tool), `… 'code'` (no code), `\"\"` (empty code)",
        f"{LOOP_050}:239",
        "released",
        "agentrl.agent_loop.error_text + the tool's error_text; _fixed: explain",
    ),
    Row(
        "resolved:large_output",
        "–",
        "a stream over 131,072 bytes (its server's Python 3.11; 262,144 on 3.10): SandboxFusion's timeout "
        "(runners/base.py:85), `no stdout here`",
        "verl/tools/sandbox_fusion_tools.py:184",
        "timeout",
        "the tool's large_output; _fixed: keep (verl cuts it to 256 characters)",
    ),
    Row(
        "resolved:prompt_filter_counts_tools",
        "–",
        "the prompt alone (no filter; over 2560 raised, rl_dataset.py:316)",
        "recipe/demystify/reward.py:77",
        False,
        "data.agentrl.prompt_filter_counts_tools; a prompt over only with the tools stops the load; _fixed: verl's",
    ),
    Row(
        "resolved:token_mean_scope",
        "token-level",
        "per micro-batch, × its sequences / the mini-batch's",
        "verl/workers/actor/dp_actor.py:426",
        "micro_batch",
        "actor_rollout_ref.actor.policy_loss.token_mean_scope (micro-batches: resolved:micro_batches); "
        "_fixed: mini_batch",
    ),
    Row(
        "eval:compat",
        "–",
        "eval = validation on the training stack on Open-AgentRL-Eval: the released tool behaviour, AIME/GPQA by the "
        "reward's acc; LCB rollouts graded by the official LiveCodeBench harness (README)",
        "recipe/demystify/eval/eval_qwen3_4b_aime_gpqa.sh:122",
        "open_agentrl",
        "`agentrl-recipe eval run --compat` (EvalConfig.compat): tool behaviour and grading, named in table.md; the "
        "files: `make data-eval-released`; agentrl: our fixes, the ground truth normalized",
    ),
)

ROWS: tuple[Row, ...] = (
    Row("algorithm.adv_estimator", "GRPO", "grpo", SCRIPT, "agentrl_grpo", "verl's grpo + masks (all off: equal)"),
    Row("algorithm.norm_adv_by_std_in_grpo", "yes", "True (default)", SCRIPT, True, ""),
    Row(
        "actor_rollout_ref.actor.loss_agg_mode",
        "token-level",
        "token-mean",
        SCRIPT,
        "token-mean",
        "verl 0.5's scope (each micro-batch's tokens): resolved:token_mean_scope",
    ),
    Row("actor_rollout_ref.actor.clip_ratio_low", "0.2", "0.2", SCRIPT, 0.2, ""),
    Row(
        "actor_rollout_ref.actor.clip_ratio_high",
        "0.315 (§6)",
        "0.28",
        SCRIPT,
        0.315,
        "the paper's DemyAgent-4B value; _eps028 runs the script's",
    ),
    Row("actor_rollout_ref.actor.clip_ratio_c", "–", "10.0", SCRIPT, 10.0, ""),
    Row("actor_rollout_ref.actor.use_kl_loss", "no KL", "False", SCRIPT, False, ""),
    Row("actor_rollout_ref.actor.entropy_coeff", "0", "unset (0)", SCRIPT, 0, ""),
    Row("actor_rollout_ref.actor.optim.lr", "1e-6", "1e-6", SCRIPT, 1.0e-6, ""),
    Row("actor_rollout_ref.actor.grad_clip", "–", "1.0", SCRIPT, 1.0, ""),
    Row("actor_rollout_ref.actor.ppo_mini_batch_size", "–", "16", SCRIPT, 16, ""),
    Row("data.train_batch_size", "64", "64", SCRIPT, 64, ""),
    Row("data.max_prompt_length", "–", "2560", SCRIPT, 2560, ""),
    Row("data.max_response_length", "16384 (App. A, 2nd-hand)", "20480", SCRIPT, 20480, "the script's value"),
    Row("actor_rollout_ref.rollout.n", "16", "16", SCRIPT, 16, ""),
    Row("actor_rollout_ref.rollout.temperature", "1.0", "unset (1.0)", SCRIPT, 1.0, ""),
    Row("actor_rollout_ref.rollout.val_kwargs.n", "32", "32", SCRIPT, 32, ""),
    Row("actor_rollout_ref.rollout.val_kwargs.top_p", "0.6", "0.6", SCRIPT, 0.6, ""),
    Row("actor_rollout_ref.rollout.multi_turn.max_assistant_turns", "–", "16", SCRIPT, 16, ""),
    Row("actor_rollout_ref.rollout.multi_turn.max_parallel_calls", "–", "unset (1)", SCRIPT, 1, ""),
    Row("actor_rollout_ref.rollout.multi_turn.max_tool_response_length", "–", "unset (256)", SCRIPT, 256, ""),
    Row("reward.reward_kwargs.overlong_buffer_cfg.len", "Eq. 9", "4096", SCRIPT, 4096, ""),
    Row("reward.reward_kwargs.overlong_buffer_cfg.penalty_factor", "Eq. 9", "1.0", SCRIPT, 1.0, ""),
    Row("algorithm.filter_groups.enable", "no", "set, never passed", SCRIPT, False, ""),
    Row("trainer.total_epochs", "–", "3", SCRIPT, 3, ""),
    Row("trainer.save_freq", "–", "30", SCRIPT, 30, ""),
    Row("agentrl.compat", "–", "–", "agentrl_recipe/training/compat.py", "open_agentrl", ""),
    Row(
        "resolved:tool_bonus", "Eq. 8 bonus", "constant −1.1", "recipe/demystify/reward.py", "released", "_fixed: paper"
    ),
    Row(
        "resolved:answer_source",
        "–",
        "the whole decoded response: a `\\boxed{}` printed by a program, in tool-call code or in `<think>` scores",
        "verl/workers/reward_manager/dapo.py",
        "response",
        "reward.reward_kwargs.answer_source; _fixed: final_turn (the model's last turn, no think or tool call)",
    ),
    Row(
        "resolved:code_rules",
        "–",
        "code_math.py",
        "verl/utils/reward_score/livecodebench/code_math.py",
        "open_agentrl",
        "_fixed: lcb",
    ),
    Row("resolved:code_timeout_s_per_test", "–", "30", "code_math.py", 30.0, "_fixed: 6 (LCB)"),
    Row(
        "resolved:malformed_call_feedback",
        "–",
        "trajectory ends",
        "verl/experimental/agent_loop/tool_parser.py",
        False,
        "_fixed: answered",
    ),
    Row(
        "resolved:auto_print",
        "–",
        "print(<last line>)",
        "recipe/demystify/reward.py",
        "last_line",
        "_fixed: expression (ast)",
    ),
    Row(
        "resolved:failure_reply",
        "–",
        "no stdout here",
        "verl/tools/sandbox_fusion_tools.py",
        "no_stdout",
        "_fixed: explain",
    ),
    *BEHAVIOUR_ROWS,
    Row(
        "reward.reward_kwargs.grader_timeout_s",
        "–",
        "none",
        "code_math.py",
        120.0,
        "ours: a stuck grade cannot stall a batch",
    ),
)


# The released grader's reward hacks (issue 34): properties of code_rules=open_agentrl, live in every paper-run config.
# "released_grader:<name>" rows resolve to the config's code_rules; reward/hack_pattern/<name> counts them per step.
GRADER_SOURCE = "sandbox_fusion/utils.py"
HACK_ROWS = tuple(
    Row(
        f"released_grader:{name}",
        "–",
        f"{what}: {effect}",
        GRADER_SOURCE,
        "open_agentrl",
        f"faithful, reward-hackable; _fixed (code_rules: lcb) passes none; counted: reward/hack_pattern/{name}",
    )
    for name, (what, effect) in PATTERNS.items()
) + (
    Row(
        "released_grader:prelude_fn_name",
        "–",
        "`globals()[fn_name]` finds the star-imported `add`/`gcd` first: any `def add` 1.0",
        GRADER_SOURCE,
        "open_agentrl",
        "faithful; _fixed resolves only the program's own function; data prep reports such rows",
    ),
)
ROWS = ROWS + HACK_ROWS

# What the run trains on and how its ground truth is graded (issue 28). Each source is the released file:line;
# "data:templating" resolves to the templating of the file data.train_files names (`make data-rl-released`),
# "ground_truth:<quirk>" rows to reward_kwargs.ground_truth_form after agentrl.compat resolves it.
CODE_MATH = "verl/utils/reward_score/livecodebench/code_math.py"
DATA_ROWS = (
    Row(
        "data.train_files",
        "diverse 30K mix (§3.2)",
        "Open-AgentRL-30K.parquet",
        "recipe/demystify/grpo_tcr_qwen3_4b.sh:5",
        "data/rl/open_agentrl_30k.parquet",
        "the published file (`make data-rl-released`); our rebuild of the mix: ablations/rl_data_diverse",
    ),
    Row(
        "data:templating",
        "–",
        "one map function for the file, from row 0's data_source",
        "recipe/demystify/reward.py:83",
        "first_row",
        "faithful; TEMPLATING=per_row templates each row by its own source",
    ),
    Row(
        "resolved:leetcode_tests",
        "–",
        "each assert run: exit code 0 passes",
        f"{CODE_MATH}:197",
        "asserts",
        "_fixed: call (the rebuilt mix's call-based conversion, extra_info.call_tests)",
    ),
    Row(
        "ground_truth:fn_name_null",
        "–",
        '`"fn_name": null` kept: no function named None, every response −1',
        f"{CODE_MATH}:281",
        "published",
        "_fixed: normalized (the null key dropped: stdin tests)",
    ),
    Row(
        "ground_truth:list_answers",
        "–",
        "`'[\"15625\"]'` compared as text: `\\boxed{15625}` −1",
        "verl/utils/reward_score/math_dapo.py:217",
        "published",
        "_fixed: normalized (graded as its element)",
    ),
)
ROWS = ROWS + DATA_ROWS

# What model-written code imports, in the tool and the code reward alike (issue 28): the released run's sandbox was
# SandboxFusion, whose Python runtime pins these versions; ours is agentrl_sandbox/runtime_requirements.txt.
RUNTIME_ROWS = (
    Row(
        "agentrl.sandbox.runtime",
        "–",
        "SandboxFusion's Python 3.10: numpy 1.26.3, pandas 2.2.0, scipy 1.11.4, sympy 1.14.0, matplotlib, statsmodels, "
        "cvxpy, pulp, numba, xgboost",
        "bytedance/SandboxFusion runtime/python/requirements.txt:72",
        "sandboxfusion",
        "faithful pins on Debian 12's Python 3.11 (3.13: numpy 2.1; preflight warns); modern: numpy 2.3.5",
    ),
)
ROWS = ROWS + RUNTIME_ROWS


# Below the reward (issue 45): the data order, the updates, the sandbox's answers, and the two rules the suite pins.
STACK_ROWS = (
    Row(
        "data.seed",
        "–",
        'unset: the sampler\'s `data.get("seed", 1)`',
        "verl/trainer/main_ppo.py:380",
        1,
        "",
    ),
    Row(
        "resolved:call_arguments",
        "–",
        "the model's `timeout` as sent (any size); a string timeout or a language SandboxFusion lacks: "
        "`no stdout here`",
        "recipe/demystify/reward.py:61",
        "released",
        "the tool's call_arguments; a listed non-Python language (bash, cpp) ran there, here `no stdout here`; "
        "_fixed: bounded (a timeout only shortens timeout_s)",
    ),
    Row(
        "agentrl.sandbox.backend",
        "–",
        "SandboxFusion: a fresh `python <tmpfile>` per call: its own string-hash seed (set order varies), pandas "
        "2.2.0's pyarrow DeprecationWarning printed, tracebacks name the temp file",
        "bytedance/SandboxFusion sandbox/runners/major.py:79",
        "local",
        "the pool forks each run from one warm interpreter: one hash seed per pool start (a fresh seed per run "
        "breaks the forked interpreter, tests/agentrl_sandbox/test_hash_seed.py), preloaded pandas/sklearn hide "
        "their import warnings, `/tmp/main.py`, the IndentationError caret differs; url: a SandboxFusion server",
    ),
    Row(
        "resolved:batch_partition",
        "–",
        "balance_batch (default on): 8 (world size) length-balanced partitions in index order; update i = partition i "
        "of each dp rank (1,024 lengths: 4 × 8473.1 mean)",
        "verl/trainer/ppo/ray_trainer.py:978",
        "released",
        "trainer.v1.sampler.sampler_kwargs.batch_partition (the buffer gives its trainer the order, "
        "verl_adapters/balance_batch.py); _fixed: verl (0.9.1's 2 workload halves: 8696.8 / 8003.0 / 8873.5 / 8319.2)",
    ),
    Row(
        "resolved:micro_batches",
        "–",
        "per rank ceil(tokens / (23040 × SP 4)) micro-batches (the max over ranks), balanced by token count, no size "
        "check",
        "verl/utils/seqlen_balancing.py:283",
        "released",
        "actor_rollout_ref.actor.policy_loss.micro_batches (installed in the actor worker, "
        "verl_adapters/micro_batches.py); _fixed: verl (workload-balanced, added until each fits: token weights under "
        "the micro_batch scope 0.842-1.112 of the released on 128 trajectories)",
    ),
    Row(
        "resolved:keep_released_rows",
        "–",
        "every published row loaded: an unknown label graded as math (reward.py:168), a code ground truth in neither "
        "test form as a boxed math answer (code_math.py:319: −1)",
        "recipe/demystify/reward.py:95",
        True,
        "data.agentrl.keep_released_rows (rows flagged extra_info.released_only by `data rl-released`, which prints "
        "the count); _fixed: dropped at load, counted per reason",
    ),
    Row(
        "agentrl.sandbox.memory_mb",
        "–",
        "2048 MB per call; SandboxFusion images from 2025-06-17 also set the stack limit to it (deep recursion runs), "
        "the 2025-06-09 image did not; which one the run used is not recorded",
        "bytedance/SandboxFusion sandbox/runners/base.py:135",
        2048,
        "the stack keeps the inherited limit (8 MiB as shipped: deep recursion segfaults, as on the 2025-06-09 image)",
    ),
    Row(
        "actor_rollout_ref.rollout.max_num_seqs",
        "–",
        "1024 (verl 0.5's default)",
        "verl/trainer/config/ppo_trainer.yaml:59",
        256,
        "verl 0.9.1's default: how many sequences vLLM batches at once, performance only",
    ),
    Row(
        "agentrl.infra_guard.max_rate",
        "–",
        "none (trained on whatever the sandbox returned)",
        "recipe/demystify/reward.py",
        0.2,
        "ours: a run whose sandbox fails for over 1 in 5 trajectories (5 steps) stops",
    ),
)
ROWS = ROWS + STACK_ROWS


def render() -> str:
    """The README's table (markdown)."""
    lines = [
        "| key | paper | released code | source | ours | deviation, why |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for row in ROWS:
        lines.append(f"| `{row.key}` | {row.paper} | {row.released} | `{row.source}` | `{row.ours}` | {row.why} |")
    return "\n".join(lines)
