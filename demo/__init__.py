"""The CPU demo: the recipe end to end with a tiny model through verl's own trainers (:mod:`demo.demo`).

It ships with the repository, not with the installed ``agentrl_recipe`` package: run it from a clone with
``make demo``, ``python -m demo.demo`` or ``python -m demo``, from the clone's root.
"""
