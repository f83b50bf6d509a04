"""``make gpu-check``: the paper's actor update, shape for shape, on one bare GPU (docs/cluster.md, "GPU check").

A bare GPU machine has torch (CUDA) and transformers but no verl, vLLM or Ray, and takes at most 64 MiB of files.
:mod:`.bundle` lists and downloads the pure-Python wheels of verl 0.9.1 and its small dependencies (``make
gpu-check-bundle``); :mod:`.__main__` installs them into ``.gpu_check/site`` and starts :mod:`.check` in a child
process, which runs one actor update of a Qwen3-4B-shaped model through verl's own actor worker with our registered
loss and advantage estimator and writes ``gpu_check_report.json``. :mod:`.stubs` stands in, import-only, for the
packages too big to bring (Ray, datasets, pandas, Pillow). ``--dry`` runs the same code on CPU with tiny dimensions.

This package's modules import only the standard library at module level, except :mod:`.check` (verl, torch), which
runs only after the stubs are installed.
"""
