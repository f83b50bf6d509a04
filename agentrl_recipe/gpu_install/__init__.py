"""``make install-gpu``: pick the torch/vLLM/flash-attn builds this node's driver runs, and install them.

Run as ``python -m agentrl_recipe.gpu_install.install``; :mod:`.variants` holds the build table.
"""
