"""The adapter over ``ContinuousTokenBuilder._render_tokens``: verl's builders still have it with the signature the
render cache replaces, and a changed verl fails naming the symbol. (The cache itself: test_render_cache.py.)"""

from __future__ import annotations

import pytest
from verl.utils.tokenizer import continuous_token
from verl.utils.tokenizer.continuous_token import ContinuousTokenBuilder

from agentrl_recipe.training.verl_adapters import continuous_token_builder as adapter

SYMBOL = r"verl\.utils\.tokenizer\.continuous_token\.ContinuousTokenBuilder\._render_tokens"


def _builder_classes() -> list[type]:
    return [
        value
        for value in vars(continuous_token).values()
        if isinstance(value, type) and issubclass(value, ContinuousTokenBuilder)
    ]


def test_every_verl_builder_renders_as_the_adapter_expects() -> None:
    # If this fails, verl changed ContinuousTokenBuilder._render_tokens: the message names it; update the adapter.
    classes = _builder_classes()
    assert ContinuousTokenBuilder in classes and len(classes) > 1
    for cls in classes:
        adapter.check(cls)


def test_read_and_replace_on_one_instance() -> None:
    builder = ContinuousTokenBuilder(tokenizer=None)
    own = adapter.render_tokens(builder)
    assert own.__func__ is ContinuousTokenBuilder._render_tokens and own.__self__ is builder

    def render(messages, *, add_generation_prompt, tools=None):
        return [len(messages)]

    adapter.replace_render_tokens(builder, render)
    assert builder.build_initial_tokens([{"role": "user", "content": "hi"}]) == [1]  # verl's caller uses ours
    assert ContinuousTokenBuilder(tokenizer=None)._render_tokens.__func__ is ContinuousTokenBuilder._render_tokens


def test_a_changed_verl_fails_naming_the_symbol() -> None:
    class Renamed(ContinuousTokenBuilder):
        _render_tokens = None

    class Changed(ContinuousTokenBuilder):
        def _render_tokens(self, messages, add_generation_prompt, tools=None):  # no longer keyword-only
            return []

    with pytest.raises(RuntimeError, match=rf"{SYMBOL} is gone from .*Renamed"):
        adapter.render_tokens(Renamed(tokenizer=None))
    with pytest.raises(RuntimeError, match=rf"{SYMBOL} of .*Changed changed its signature"):
        adapter.replace_render_tokens(Changed(tokenizer=None), lambda *a, **k: [])
