"""One module per data-prep job (``agentrl-recipe data <job>``, ``python -m data_prep.jobs.<job>``, ``make data-*``).

Each has ``add_arguments(parser)`` and ``main(args) -> int``; the helpers they share live in :mod:`data_prep`.
"""
