"""math-verify answer equivalence, run in the isolated grader worker (so this module must not import verl: start-up)."""

from __future__ import annotations

import threading

from math_verify import parse, verify


def math_verify_equal(pred: str, gold: str, timeout_s: float = 10.0) -> bool:
    """math-verify equivalence of two answers, each parsed as ``\\boxed{...}`` (``0.5`` equals ``\\frac{1}{2}``).

    math-verify's own SIGALRM timeouts are used only in a main thread (the isolated worker's case); anywhere else they
    would raise, so they are off and the caller's hard kill (:mod:`agentrl_recipe.training.rewards.isolation`) is the
    bound.
    """
    timeout = max(1, int(timeout_s)) if threading.current_thread() is threading.main_thread() else None
    gold_parsed = parse("\\boxed{" + gold + "}", parsing_timeout=timeout)
    pred_parsed = parse("\\boxed{" + pred + "}", parsing_timeout=timeout)
    if not gold_parsed or not pred_parsed:
        return False
    return bool(verify(gold_parsed, pred_parsed, timeout_seconds=timeout))
