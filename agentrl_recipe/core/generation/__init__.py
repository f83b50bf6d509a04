"""Generation clients that stand in for verl's ``LLMServerClient`` (the agent loop's ``server_manager``).

- :mod:`.hf_client` — in-process Hugging Face model (CPU tests, demo, data prep without a GPU);
- :mod:`.scripted` — fixed responses, no model (deterministic tests, loop-overhead benchmark);
- :mod:`agentrl_recipe.harness.openai_client` (harness, not here) — a real vLLM server over its OpenAI-compatible
  HTTP API (token in, token out), and a chat client for teacher models;
- :mod:`.hf_replica`, :mod:`.hf_rollout`, :mod:`.checkpoint_engine` — the replica side verl runs in its workers.

All of them implement ``async generate(request_id, *, prompt_ids, sampling_params, **kwargs) -> TokenOutput`` with
the budget and stop-token semantics of verl's vLLM server (:mod:`.common`).
"""

# Import verl before any module of this package: verl's plugin loader imports agentrl_recipe.core.plugin, which imports
# .checkpoint_engine. A process whose first import is that module (the Ray worker of its mailbox actor) would
# otherwise meet it half-initialised.
import verl  # noqa: F401
