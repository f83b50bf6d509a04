"""``agentrl-recipe view``: a trajectory viewer for training runs and evals (docs/view.md).

:mod:`.records` turns each dump's records into one trajectory shape, :mod:`.sources` finds and reads a folder's
inputs (a training run's trajectory dump and file-logger metrics, an eval run, the demo's output folder),
:mod:`.aggregate` computes the run overview and the reasoning-mode tables, :mod:`.page` writes the self-contained HTML
page (data embedded, sampled to a size budget) and :mod:`.serve` serves it with the trajectories read lazily. The
page's HTML, JS and CSS are package data under ``assets/``; every untrusted string reaches the DOM as text only.
"""
