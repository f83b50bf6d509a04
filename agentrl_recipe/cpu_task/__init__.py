"""The offline CPU task: a tiny Qwen2-architecture model, a one-step arithmetic task, its scripted teacher, and the
inputs the CPU configs (``agentrl_sft_cpu``, ``agentrl_rl_cpu``) train on. Nothing downloads; the demo
(``demo/``, run from a clone) and the tests build on it."""
