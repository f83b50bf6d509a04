"""verl_client: what a generation client outside verl's own vLLM server must honour to serve verl's agent loops.

The token budget, stop tokens and ``TokenOutput`` of ``verl/workers/rollout/vllm_rollout/vllm_async_server.py``, shared
by the CPU replicas (:mod:`verl_cpu`) and the recipe's OpenAI-server client (GPU eval), so neither goes through the
other. Imports only verl.
"""
