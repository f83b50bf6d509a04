"""The shipped verl configs (YAML), installed as package data: ``pkg://verl_configs`` for hydra,
:func:`agentrl_recipe.config_paths.config_dir` for a path."""
