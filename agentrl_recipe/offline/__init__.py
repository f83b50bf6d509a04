"""What runs outside the trainer: rollouts for eval and data generation, the vLLM server they start, the fidelity table.

Used by ``agentrl-recipe eval``/``data``, the demo and the benchmarks; never loaded by a verl worker.
"""
