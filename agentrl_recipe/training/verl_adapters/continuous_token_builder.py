"""verl's Continuous-Token builder, ``verl.utils.tokenizer.continuous_token.ContinuousTokenBuilder._render_tokens``.

``_render_tokens(messages, *, add_generation_prompt, tools=None) -> list[int]`` is the single place verl's text
builders render and tokenize a chat (private, no hook). :mod:`agentrl_recipe.training.agent_loop.render_cache` replaces
it on one builder instance with a memoized version; this module is the only place that reads or writes the member, and
it checks the builder's class first: a builder whose ``_render_tokens`` is gone or takes other parameters raises,
naming :data:`SYMBOL`, instead of being cached wrongly. On a verl upgrade, this module is the one to change.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

SYMBOL = "verl.utils.tokenizer.continuous_token.ContinuousTokenBuilder._render_tokens"
NAME = SYMBOL.rpartition(".")[2]
# verl 0.9.1's parameters after ``self``: (name, kind, default)
PARAMETERS = (
    ("messages", inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.empty),
    ("add_generation_prompt", inspect.Parameter.KEYWORD_ONLY, inspect.Parameter.empty),
    ("tools", inspect.Parameter.KEYWORD_ONLY, None),
)

RenderTokens = Callable[..., list[int]]  # (messages, *, add_generation_prompt, tools=None) -> token ids


@functools.cache
def check(builder_class: type) -> None:
    """Raise, naming the verl symbol, if ``builder_class._render_tokens`` is not verl 0.9.1's (checked once a class)."""
    method = inspect.getattr_static(builder_class, NAME, None)
    if not inspect.isfunction(method):
        raise RuntimeError(f"{SYMBOL} is gone from {builder_class.__qualname__} in this verl; update {__name__}")
    parameters = list(inspect.signature(method).parameters.values())[1:]
    if tuple((p.name, p.kind, p.default) for p in parameters) != PARAMETERS:
        raise RuntimeError(
            f"{SYMBOL} of {builder_class.__qualname__} changed its signature in this verl "
            f"({inspect.signature(method)}); update {__name__}"
        )


def render_tokens(builder: Any) -> RenderTokens:
    """The builder's own (bound) render."""
    check(type(builder))  # type: ignore[arg-type]  # classes are hashable; typeshed's Hashable misses type[Any]
    return getattr(builder, NAME)


def replace_render_tokens(builder: Any, render: RenderTokens) -> None:
    """Make ``builder`` (this one instance) render with ``render``."""
    check(type(builder))  # type: ignore[arg-type]  # as above
    setattr(builder, NAME, render)
