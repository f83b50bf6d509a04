"""The model-supplied ``timeout`` and ``language`` of a ``code_interpreter`` call (behaviour ``call_arguments``).

The tool's schema offers ``code`` only, but the model may add keys. The released tool read two of them
(Open-AgentRL ``recipe/demystify/reward.py:61-62``: ``parameters.get("timeout", 30)``, ``parameters.get("language",
"python")``) and sent both to SandboxFusion (``verl/utils/reward_score/sandbox_fusion/utils.py:303-307``: the timeout as
compile and run timeout):

- ``released`` (compat open_agentrl): a number is the run's timeout, whatever its size (≤ 0: the run times out at
  once); anything else (a string, null, a list) raised ``TypeError`` in ``compile_timeout + run_timeout + API_TIMEOUT``
  (utils.py:115), which the released code caught (utils.py:319) and answered "no stdout here". A language outside
  SandboxFusion's list (utils.py:34-64) was refused the same way (utils.py:96-99). A listed language other than
  ``python`` ran in that language on SandboxFusion; our sandbox runs Python only, so it is refused too (a documented
  deviation: the fidelity table's ``resolved:call_arguments`` row).
- ``bounded`` (compat agentrl): a positive finite number shortens the run's timeout, never lengthens it past the
  configured ``timeout_s``; any other ``timeout`` and every ``language`` are ignored (the tool runs Python).
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Mapping
from typing import Any

CALL_ARGUMENTS = ("released", "bounded")
RELEASED_LANGUAGE = "python"  # [code] sandbox_fusion_tools.py:137 default_language
# [code] verl/utils/reward_score/sandbox_fusion/utils.py:34-64, SandboxFusion's languages as the released client
# listed them (anything else was refused before the request).
SANDBOX_FUSION_LANGUAGES = frozenset(
    (
        "python cpp nodejs go go_test java php csharp bash typescript sql rust cuda lua R perl D_ut ruby scala julia "
        "pytest junit kotlin_script jest verilog python_gpu lean swift racket"
    ).split()
)


@dataclasses.dataclass(frozen=True)
class CallPlan:
    """How one call runs: its timeout, or why it is not run (``refusal``: the sentence our fixed replies give)."""

    timeout_s: float
    refusal: str | None = None


def call_plan(parameters: Mapping[str, Any], mode: str, configured_timeout_s: float) -> CallPlan:
    """The run's timeout for ``parameters`` under ``mode`` (:data:`CALL_ARGUMENTS`), or a refusal."""
    if mode == "bounded":
        return CallPlan(bounded_timeout(parameters.get("timeout"), configured_timeout_s))
    if mode != "released":
        raise ValueError(f"call_arguments must be one of {CALL_ARGUMENTS}, got {mode!r}")
    return released_plan(parameters, configured_timeout_s)


def released_plan(parameters: Mapping[str, Any], configured_timeout_s: float) -> CallPlan:
    language = parameters.get("language", RELEASED_LANGUAGE)
    if language != RELEASED_LANGUAGE:
        listed = isinstance(language, str) and language in SANDBOX_FUSION_LANGUAGES
        why = "this sandbox runs Python only" if listed else "SandboxFusion does not know it"
        return CallPlan(configured_timeout_s, f"language {language!r} is not run: {why}")
    timeout = parameters.get("timeout", configured_timeout_s)
    if not is_number(timeout):  # the released client's TypeError, answered "no stdout here"
        return CallPlan(configured_timeout_s, f"timeout {timeout!r} is not a number")
    if not math.isfinite(timeout):
        return CallPlan(configured_timeout_s, f"timeout {timeout!r} is not a finite number")
    return CallPlan(float(timeout))


def bounded_timeout(timeout: Any, configured_timeout_s: float) -> float:
    """A positive finite number no larger than ``configured_timeout_s``; the configured value otherwise."""
    if is_number(timeout) and not isinstance(timeout, bool) and math.isfinite(timeout) and timeout > 0:
        return min(float(timeout), configured_timeout_s)
    return configured_timeout_s


def is_number(value: Any) -> bool:
    """An int or a float as JSON gives them (``True`` adds as 1 in Python and is sent as ``true``: a number too)."""
    return isinstance(value, (int, float))
