"""Memoized chat-template renders for verl's Continuous-Token builder (an upstream candidate, see UPSTREAM.md).

A verl gap kept here: the upstream patch was dropped (UPSTREAM.md, 0003: ~0.35 ms per tool turn on a real tokenizer).

On every tool turn verl's ``ContinuousTokenBuilder.merge_context_tokens`` renders *and tokenizes* a constant
synthetic prefix (system + user + an assistant with dummy tool calls, with the tool schemas in the system prompt)
and then that prefix plus the new tool messages, to diff the two. Tokenizing the tools system prompt dominates: on
the tiny model one render is ~0.8 ms, of which the Jinja part is ~0.06 ms, so the constant prefix alone costs
~0.8 ms per turn per trajectory. A render is a pure function of (tokenizer, chat template, messages, generation
prompt flag, tools, template kwargs), so it can be memoized; the prefix then hits the cache on every turn. The key is
their JSON with the keys in their given order: templates write tools and tool-call arguments with ``tojson``, which
keeps that order, so two renders differing only in key order differ (a sorted-keys key served one for the other).

:func:`memoize_renders` wraps one builder's ``_render_tokens`` (the single place verl's text builders tokenize; read
and replaced only through :mod:`agentrl_recipe.training.verl_adapters.continuous_token_builder`, which checks it); the
cache is shared by all builders of the same tokenizer (verl builds one per trajectory) and bounded (LRU).
Multimodal builders are left alone (their renders depend on images).
"""

from __future__ import annotations

import json
import threading
import weakref
from collections import OrderedDict
from typing import Any

from agentrl_recipe.training.verl_adapters import continuous_token_builder

DEFAULT_MAXSIZE = 512

_lock = threading.Lock()  # verl calls the builder from executor threads
_caches: weakref.WeakKeyDictionary[Any, OrderedDict[str, tuple[int, ...]]] = weakref.WeakKeyDictionary()
stats = {"hits": 0, "misses": 0}


def _key(tokenizer: Any, messages: Any, add_generation_prompt: bool, tools: Any, kwargs: Any) -> str | None:
    try:
        return json.dumps(
            [getattr(tokenizer, "chat_template", None), messages, add_generation_prompt, tools, kwargs],
            ensure_ascii=False,
        )
    except (TypeError, ValueError):  # not JSON-able (e.g. PIL images): do not cache
        return None


def memoize_renders(builder: Any, maxsize: int = DEFAULT_MAXSIZE) -> Any:
    """Make ``builder``'s renders memoized (in place; returns it). Idempotent; skips multimodal builders."""
    if getattr(builder, "_agentrl_memoized", False) or builder.supports_multimodal():
        return builder
    render = continuous_token_builder.render_tokens(builder)
    tokenizer = builder.tokenizer

    def cached_render(messages: list[dict[str, Any]], *, add_generation_prompt: bool, tools: Any = None) -> list[int]:
        key = _key(tokenizer, messages, add_generation_prompt, tools, builder.chat_template_kwargs)
        if key is None:
            return render(messages, add_generation_prompt=add_generation_prompt, tools=tools)
        with _lock:
            cache = _caches.setdefault(tokenizer, OrderedDict())
            hit = cache.get(key)
            if hit is not None:
                cache.move_to_end(key)
                stats["hits"] += 1
                return list(hit)
        ids = render(messages, add_generation_prompt=add_generation_prompt, tools=tools)
        with _lock:
            stats["misses"] += 1
            cache[key] = tuple(ids)
            while len(cache) > maxsize:
                cache.popitem(last=False)
        return list(ids)

    continuous_token_builder.replace_render_tokens(builder, cached_render)
    builder._agentrl_memoized = True
    return builder
