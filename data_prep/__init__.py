"""Data preparation for the DemyAgent recipe: RL mix, eval sets, SFT trajectories, model-aware RL set.

Every command is exposed as ``agentrl-recipe data <cmd>`` (see :mod:`data_prep.cli`) and ``make data-<cmd>``.
Outputs are verl parquet files written atomically; rows that fail validation go to a ``*.rejects.jsonl`` file next
to the output, with the file, row and field named.
"""
