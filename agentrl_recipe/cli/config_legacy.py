"""Config keys of the original scripts that verl 0.9.1 ignores (silently: ``reward_model.reward_manager=dapo`` trains
with the naive manager), each with the key that replaced it."""

from __future__ import annotations

# (legacy key prefix, replacement). Longest prefix wins: a prefix comes before any shorter one it extends. The rest of
# the key is appended to the replacement, unless the replacement is prose (it has a space).
LEGACY: dict[str, list[tuple[str, str]]] = {
    "rl": [
        ("reward_model.reward_manager", "reward.reward_manager.name"),
        ("reward_model.reward_kwargs", "reward.reward_kwargs"),
        ("reward_model.reward_loop_source", "reward.reward_manager.source"),
        ("reward_model.reward_loop_module_path", "reward.reward_manager.module.path"),
        ("reward_model.reward_loop_class_name", "reward.reward_manager.module.name"),
        ("reward_model.num_workers", "reward.num_workers"),
        ("reward_model.model.path", "reward.reward_model.model_path"),
        ("reward_model", "reward.reward_model"),
        ("custom_reward_function", "reward.custom_reward_function"),
        ("sandbox_fusion.url", "agentrl.sandbox.url (with agentrl.sandbox.backend=sandbox_fusion)"),
        ("sandbox_fusion.max_concurrent", "agentrl.sandbox.max_concurrency"),
        ("sandbox_fusion.memory_limit_mb", "agentrl.sandbox.memory_mb"),
        ("sandbox_fusion", "agentrl.sandbox"),
        ("trainer.val_generations_to_log_to_wandb", "trainer.log_val_generations"),
    ],
    "sft": [
        ("data.multiturn.messages_key", "data.messages_key"),
        ("data.multiturn.tools_key", "data.tools_key"),
        ("data.multiturn.enable_thinking_key", "data.enable_thinking_key"),
        ("data.multiturn", "data.messages_key / data.tools_key (multi-turn is verl 0.9.1's only SFT dataset)"),
        ("data.prompt_key", "data.messages_key (prompt/response SFT is gone: store rows as messages)"),
        ("data.response_key", "data.messages_key (prompt/response SFT is gone: store rows as messages)"),
        ("data.micro_batch_size", "data.micro_batch_size_per_gpu"),
        ("model.partial_pretrain", "model.path"),
        ("model.strategy", "engine.strategy"),
        ("model.fsdp_config", "engine"),
        ("ulysses_sequence_parallel_size", "engine.ulysses_sequence_parallel_size"),
        ("use_remove_padding", "model.use_remove_padding"),
        ("optim.warmup_steps_ratio", "optim.lr_warmup_steps_ratio"),
        ("optim.lr_scheduler", "optim.lr_scheduler_type"),
    ],
}


def legacy(kind: str, key: str) -> str | None:
    """The replacement of ``key`` when it is a legacy key of an ``kind`` (rl / sft) config, else None."""
    for prefix, replacement in LEGACY[kind]:
        if key == prefix or key.startswith(prefix + "."):
            rest = key[len(prefix) :]
            return replacement + rest if rest and " " not in replacement else replacement
    return None
