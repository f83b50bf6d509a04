"""The ``code_interpreter`` tool (a verl ``BaseTool``): the paper's single tool, run in our sandbox.

Loaded by verl from ``verl_configs/tools/code_interpreter.yaml`` (``actor_rollout_ref.rollout.multi_turn.
tool_config_path``), once per AgentLoopWorker. Behaviour (paper: ``CustomSandboxFusionTool`` in
``recipe/demystify/reward.py``): strip ```python fences, print the last value, run with a 30 s timeout and 2 GB of
memory, return stdout + stderr. Two behaviours follow ``agentrl.compat`` unless set in the tool YAML:
``auto_print`` (``last_line``: the released ``print(<last line>)``; ``expression``: a final bare expression, with
``ast``; see :mod:`agentrl_recipe.training.agent_loop.code_prep`) and ``failure_reply`` (``no_stdout``: the released
bare "no stdout here" on a timeout or sandbox failure, partial output dropped; ``explain``: the partial output and why),
``error_text`` (``released``: a missing or non-string ``code`` answers the released tool's exception text, e.g.
``Error when executing tool: 'code'``, and empty code runs, answering ``""``; ``explain``: one sentence saying what
is wrong) and ``large_output`` (``timeout``: a stream over :data:`SANDBOX_FUSION_PIPE_BYTES` is the timeout it was
on SandboxFusion; ``keep``: returned, for verl to cut to ``max_tool_response_length``).
The tool YAML is loaded apart from the trainer config, so ``agentrl_tool_agent`` hands the tool the trainer's
resolved ``agentrl`` block (:meth:`CodeInterpreterTool.use_recipe`): its compat mode sets the behaviour keys left
null in the YAML, and its sandbox (url, backend, token file, ...; the ``AGENTRL_SANDBOX_*`` environment variables win)
is the one the code reward of the same process uses. Under verl's stock ``tool_agent`` loop nothing hands it over:
the tool runs in the plugin's default mode with the environment's sandbox, and ``configs check`` refuses a config
whose ``agentrl.compat`` would differ.
verl's ``max_tool_response_length`` truncation stays in the agent loop config.

Every call returns metrics ``{"status", "latency_s", ...}`` (the agent loop logs them); ``status`` is the sandbox
status, so ``infra_error`` (the sandbox failed, not the code) is visible to the loop and the trainer.

Concurrency: ``max_concurrency`` calls in flight per worker (an asyncio semaphore) and, when Ray is up,
``global_max_concurrency`` across all workers (one named Ray actor) — the paper's ``num_workers`` / ``rate_limit``.

Stateful mode (``stateful: true``; off by default, as in the paper): each trajectory (``agent_data.request_id``) keeps
its interpreter state across calls. verl calls create/execute/release around EVERY call, so state is keyed by the
request id, not the instance id, and lives in an LRU/TTL store. State is rebuilt by replaying the trajectory's earlier
successful cells with their output suppressed before the new cell (:mod:`agentrl_recipe.training.agent_loop.code_prep`)
— which works on every backend (the local pool and any SandboxFusion server, which has no sessions).
"""

from __future__ import annotations

import asyncio
import dataclasses
import logging
import re
import time
from collections import OrderedDict
from typing import Any

from verl.tools.base_tool import BaseTool
from verl.tools.schemas import OpenAIFunctionToolSchema, ToolResponse

from agentrl_recipe import names
from agentrl_recipe.training import recipe_config, sandbox_routes, trace
from agentrl_recipe.training.agent_loop.call_arguments import CALL_ARGUMENTS, call_plan
from agentrl_recipe.training.agent_loop.code_prep import build_run, extract_code, released_prep
from agentrl_recipe.training.agent_loop.rate_limit import GlobalLimiter
from agentrl_recipe.training.recipe_config import RecipeConfig, from_mapping
from agentrl_sandbox import ExecResult, Sandbox, get_sandbox
from agentrl_sandbox.config import SandboxConfig

logger = logging.getLogger(__name__)

AUTO_PRINT_MODES = ("last_line", "expression", "off")
FAILURE_REPLIES = ("no_stdout", "explain")
ERROR_TEXTS = ("released", "explain")
LARGE_OUTPUTS = ("timeout", "keep")
RELEASED_NO_OUTPUT = "no stdout here"  # [code] verl/tools/sandbox_fusion_tools.py, verbatim
RELEASED_TOOL_ERROR = "Error when executing tool: "  # [code] verl 0.5 tool_agent_loop.py:239-243
# SandboxFusion awaits the program's exit (sandbox/runners/base.py:85) and reads its pipes after. asyncio's
# StreamReader stops reading a pipe once it holds over 2 x 64 KiB, and from Python 3.11 on Process.wait() returns
# only when every pipe reached EOF: a stream over 131,072 bytes hangs the call until the run's timeout
# (TimeLimitExceeded, then the released tool's "no stdout here"). On a 3.10 server wait() returns at the exit and the
# program blocks only once the pipe (64 KiB) is full too: up to 262,144 bytes finish (one write; fewer with many
# small writes, 228,933 with 1 KiB ones). SandboxFusion's server runs Python 3.11 (pyproject `python = "^3.11"`,
# scripts/Dockerfile.base: miniconda 3.11). Measured with our own minimal copy of the pattern (create_subprocess_shell,
# wait_for(p.wait()), then read): the largest stream that finished was 131,072 bytes on 3.11.2, 3.11.7 and 3.12.1,
# 262,144 on 3.10.13. After the timeout the reply carries what the reader held: 196,608 bytes.
SANDBOX_FUSION_FINISH_BYTES = {"3.10": 262_144, "3.11": 131_072}  # by the server's Python (3.12+: as 3.11)
SANDBOX_FUSION_PIPE_BYTES = SANDBOX_FUSION_FINISH_BYTES["3.11"]  # the released server's
SANDBOX_FUSION_KEPT_BYTES = 196_608  # what get_output_non_blocking read back after a timeout (3 reads of 64 KiB)
_RELEASED_FENCE_CALL = re.compile(r"```python(.*?)```", re.DOTALL)  # [code] reward.py:42, findall on the argument

DEFAULT_SCHEMA = {
    "type": "function",
    "function": {
        "name": names.TOOL_NAME,
        "description": "A tool for executing code.",  # the paper's wording
        "parameters": {
            "type": "object",
            "properties": {"code": {"type": "string", "description": "The code to execute."}},
            "required": ["code"],
        },
    },
}


@dataclasses.dataclass
class CodeInterpreterConfig:
    """The ``config:`` block of the tool YAML (every key documented there)."""

    type: str = "native"  # verl's ToolType; only "native" exists in 0.9.1
    timeout_s: float = 30.0  # paper: default_timeout 30
    memory_mb: int = 2048  # paper: memory_limit_mb 2048
    max_concurrency: int = 128  # per AgentLoopWorker; paper: num_workers 128
    global_max_concurrency: int | None = 128  # all workers (Ray actor); paper: rate_limit 128; None = off
    # null = from compat. "last_line" (open_agentrl, [code]): print(<last non-empty line>) unless it starts with
    # print. "expression" (agentrl): print a final bare expression's value (ast). "off". true/false = expression/off.
    auto_print: str | bool | None = None
    # null = from compat. "no_stdout" (open_agentrl, [code]): a timeout or sandbox failure answers "no stdout here",
    # partial output dropped. "explain" (agentrl): the partial output, then what happened.
    failure_reply: str | None = None
    # null = from compat. "released" (open_agentrl, [code]): a missing `code` answers "Error when executing tool:
    # 'code'" (the KeyError's text), a non-string one the TypeError's, empty code runs (""). "explain" (agentrl).
    error_text: str | None = None
    # null = from compat. "timeout" (open_agentrl, [code] on SandboxFusion): stdout or stderr over 131,072 bytes is a
    # timeout ("no stdout here"). "keep" (agentrl): the output is returned (verl cuts it to 256 characters).
    large_output: str | None = None
    # large_output timeout: the Python of the SandboxFusion server being reproduced, "3.11" (the released server's:
    # over 131,072 bytes) or "3.10" (over 262,144). See SANDBOX_FUSION_FINISH_BYTES.
    large_output_server_python: str = "3.11"
    # null = from compat. The model-supplied `timeout` and `language` (agent_loop/call_arguments.py). "released"
    # (open_agentrl, [code] reward.py:61-62): a number is the run's timeout, however large; a string timeout or a
    # language other than python answers "no stdout here". "bounded" (agentrl): a timeout only shortens timeout_s.
    call_arguments: str | None = None
    stateful: bool = False  # keep interpreter state per trajectory (paper: no)
    max_sessions: int = 1024  # stateful: trajectories remembered per worker (LRU)
    session_ttl_s: float = 1800.0  # stateful: forget a trajectory idle this long
    max_history_cells: int = 32  # stateful: cells replayed at most (the oldest are dropped)


@dataclasses.dataclass
class _History:
    cells: list[str] = dataclasses.field(default_factory=list)
    last_used: float = 0.0


class CodeInterpreterTool(BaseTool):
    config_class = CodeInterpreterConfig  # the keys its YAML `config:` block accepts
    recipe: RecipeConfig  # the trainer's agentrl block (use_recipe); standalone until the loop hands one over
    sandbox_config: SandboxConfig  # recipe.sandbox: the same object the code reward of this process uses

    def __init__(self, config: dict, tool_schema: OpenAIFunctionToolSchema | None = None) -> None:
        self.settings = from_mapping(
            CodeInterpreterConfig, config or {}, where=f"tool {names.TOOL_NAME} config (verl_configs/tools/*.yaml)"
        )
        if tool_schema is None:
            tool_schema = OpenAIFunctionToolSchema.model_validate(DEFAULT_SCHEMA)
        super().__init__(config or {}, tool_schema)
        s = self.settings
        if s.timeout_s <= 0 or s.memory_mb <= 0 or s.max_concurrency < 1:
            raise ValueError(f"{names.TOOL_NAME}: timeout_s, memory_mb and max_concurrency must be positive")
        if s.large_output_server_python not in SANDBOX_FUSION_FINISH_BYTES:
            raise ValueError(
                f"{names.TOOL_NAME}: large_output_server_python must be one of {sorted(SANDBOX_FUSION_FINISH_BYTES)}, "
                f"got {s.large_output_server_python!r}"
            )
        self._sandbox: Sandbox | None = None
        self.use_recipe(recipe_config.standalone())
        self._sem = asyncio.Semaphore(s.max_concurrency)
        self._global = GlobalLimiter.maybe(s.global_max_concurrency)
        self._histories: OrderedDict[str, _History] = OrderedDict()

    # verl's BaseTool prints the schema at construction; get_openai_tool_schema is inherited.

    def use_recipe(self, recipe: RecipeConfig) -> None:
        """Take the trainer's resolved ``agentrl`` block: the behaviours the YAML leaves null, and the sandbox.

        The agent loop calls this for every trajectory with the same object (a no-op then). Another sandbox once the
        sandbox has started is refused (it would run calls somewhere the config no longer says)."""
        if recipe is getattr(self, "recipe", None):
            return
        if self._sandbox is not None and recipe.sandbox != self.sandbox_config:
            raise RuntimeError(f"{names.TOOL_NAME}: agentrl.sandbox changed after the sandbox started")
        s = self.settings
        auto = {True: "expression", False: "off"}.get(s.auto_print, s.auto_print)  # type: ignore[arg-type]
        self.auto_print = recipe.behaviour("auto_print", auto)
        self.failure_reply = recipe.behaviour("failure_reply", s.failure_reply)
        self.error_text = recipe.behaviour("error_text", s.error_text)
        self.large_output = recipe.behaviour("large_output", s.large_output)
        self.call_arguments = recipe.behaviour("call_arguments", s.call_arguments)
        if self.call_arguments not in CALL_ARGUMENTS:
            raise ValueError(
                f"{names.TOOL_NAME}: call_arguments must be one of {CALL_ARGUMENTS}, got {s.call_arguments!r}"
            )
        if self.auto_print not in AUTO_PRINT_MODES or self.failure_reply not in FAILURE_REPLIES:
            raise ValueError(
                f"{names.TOOL_NAME}: auto_print must be one of {AUTO_PRINT_MODES} (or true/false) and failure_reply "
                f"one of {FAILURE_REPLIES}; got {s.auto_print!r}, {s.failure_reply!r}"
            )
        if self.error_text not in ERROR_TEXTS or self.large_output not in LARGE_OUTPUTS:
            raise ValueError(
                f"{names.TOOL_NAME}: error_text must be one of {ERROR_TEXTS} and large_output one of {LARGE_OUTPUTS}; "
                f"got {s.error_text!r}, {s.large_output!r}"
            )
        self.recipe, self.sandbox_config = recipe, recipe.sandbox

    @property
    def sandbox(self) -> Sandbox:
        if self._sandbox is None:  # first use, inside the AgentLoopWorker process (never pickled with the tool)
            self._sandbox = get_sandbox(self.sandbox_config)
        return self._sandbox

    async def execute(
        self, instance_id: str, parameters: dict[str, Any], **kwargs: Any
    ) -> tuple[ToolResponse, float, dict]:
        started = time.perf_counter()
        code, error = released_argument(parameters) if self.error_text == "released" else checked_argument(parameters)
        if code is None:
            return ToolResponse(text=error), 0.0, {"status": "invalid_arguments", "latency_s": 0.0}
        plan = call_plan(parameters, self.call_arguments, self.settings.timeout_s)
        if plan.refusal is not None:  # the released client refused it before any request
            text = RELEASED_NO_OUTPUT if self.failure_reply == "no_stdout" else f"Error: {plan.refusal}."
            return ToolResponse(text=text), 0.0, {"status": "invalid_arguments", "latency_s": 0.0}
        timeout_s = plan.timeout_s
        last_line = self.auto_print == "last_line"
        cell = released_prep(code) if last_line else extract_code(code)
        key = self._history_key(kwargs.get("agent_data"))
        history = self._history(key) if key is not None else None
        program, files = build_run(
            cell, auto_print=self.auto_print == "expression", history=history.cells if history else None
        )
        queued = time.perf_counter()
        async with self._sem, self._global.slot():
            waited = time.perf_counter() - queued
            try:  # a sandbox that cannot start (its first use builds it) is an infra_error too, never the code's
                sandbox = self.sandbox
                trace.mark(names.TOOL_NAME, sandbox=type(sandbox).__name__)
                res = (
                    await sandbox.arun(program, timeout_s=timeout_s, memory_mb=self.settings.memory_mb, files=files)
                    if timeout_s > 0
                    else ExecResult("timeout", message=f"timeout {timeout_s:g} s: SandboxFusion's wait_for expires")
                )
            except Exception as exc:  # start-up failure of the sandbox (fail-closed): report it, do not crash
                res = ExecResult.infra(f"{type(exc).__name__}: {exc}")
        if history is not None and res.status == "ok":
            history.cells = [*history.cells, cell][-self.settings.max_history_cells :]
        metrics = {
            "status": res.status,
            "latency_s": time.perf_counter() - started,
            "queue_s": waited,
            "run_s": res.duration_s,
            "exit_code": res.exit_code,
            **sandbox_routes.route_metrics(res.route),  # which sandbox server answered (sandbox_fusion)
        }
        if res.infra_error:
            logger.warning("%s: sandbox infra_error: %s", names.TOOL_NAME, res.message)
        if self.large_output == "timeout":
            finish_bytes = SANDBOX_FUSION_FINISH_BYTES[self.settings.large_output_server_python]
            res = sandbox_fusion_pipe_limit(res, timeout_s, finish_bytes)
        if self.failure_reply == "no_stdout":
            return ToolResponse(text=format_result_released(res)), 0.0, metrics
        return ToolResponse(text=format_result(res, timeout_s, self.settings.memory_mb)), 0.0, metrics

    # ------------------------------------------------------------------ stateful mode
    def _history_key(self, agent_data: Any) -> str | None:
        if not self.settings.stateful:
            return None
        key = getattr(agent_data, "request_id", None)
        if key is None:
            logger.warning("%s: stateful mode needs agent_data.request_id; running this call stateless", self.name)
        return key

    def _history(self, key: str) -> _History:
        now = time.monotonic()
        ttl = self.settings.session_ttl_s
        while self._histories:  # TTL: the oldest-used entries are at the front
            oldest_key, oldest = next(iter(self._histories.items()))
            if now - oldest.last_used <= ttl:
                break
            del self._histories[oldest_key]
        hist = self._histories.pop(key, None) or _History()
        hist.last_used = now
        self._histories[key] = hist
        while len(self._histories) > self.settings.max_sessions:  # LRU
            self._histories.popitem(last=False)
        return hist

    def forget(self, request_id: str) -> None:
        """Drop a trajectory's state (e.g. when its rollout ends)."""
        self._histories.pop(request_id, None)


def checked_argument(parameters: Any) -> tuple[str | None, str | None]:
    """``(code, None)``, or ``(None, text)`` telling the model its call lacks a non-empty string ``code``."""
    code = parameters.get("code") if isinstance(parameters, dict) else None
    if isinstance(code, str) and code.strip():
        return code, None
    return None, f"Error: {names.TOOL_NAME} needs a non-empty string argument `code`."


def released_argument(parameters: Any) -> tuple[str | None, str | None]:
    """``(code, None)``, or ``(None, text)``: what the released tool did with its arguments before it ran anything.

    [code] ``CustomSandboxFusionTool.execute`` (recipe/demystify/reward.py:46-47) read ``parameters["code"]`` and
    ``findall`` on it; verl 0.5's loop answered their exception as ``Error when executing tool: <e>``
    (tool_agent_loop.py:239-243). The same operations run here, so the text is Python's own. Empty code ran (``""``).
    """
    try:
        code = parameters["code"]
        _RELEASED_FENCE_CALL.findall(code)
    except Exception as exc:  # what the released loop caught: KeyError('code') -> 'code', TypeError, ...
        return None, RELEASED_TOOL_ERROR + str(exc)
    return code, None


def sandbox_fusion_pipe_limit(
    res: ExecResult, timeout_s: float, finish_bytes: int = SANDBOX_FUSION_PIPE_BYTES
) -> ExecResult:
    """``res`` as SandboxFusion returned it: a stream over ``finish_bytes`` hung the call until the timeout (the wait
    is not reproduced: the result is), and the reply kept :data:`SANDBOX_FUSION_KEPT_BYTES` of each stream."""
    if res.status in ("timeout", "infra_error", "too_large"):  # it never finished, or never ran
        return res
    sizes = (len(stream.encode("utf-8", "surrogateescape")) for stream in (res.stdout, res.stderr))
    if res.status != "output_truncated" and max(sizes) <= finish_bytes:
        return res
    keep = SANDBOX_FUSION_KEPT_BYTES
    return dataclasses.replace(
        res,
        status="timeout",
        stdout=res.stdout.encode("utf-8", "surrogateescape")[:keep].decode("utf-8", "replace"),
        stderr=res.stderr.encode("utf-8", "surrogateescape")[:keep].decode("utf-8", "replace"),
        exit_code=None,
        message=f"output over {finish_bytes} bytes: on SandboxFusion the run blocked until its {timeout_s:g} s timeout",
    )


def format_result_released(res: ExecResult) -> str:
    """The released tool's reply: stdout + stderr when the run finished (SandboxFusion ``Finished``: any exit code,
    a memory kill, our output cap), else — a timeout or a sandbox failure — the bare "no stdout here"."""
    if res.status == "too_large":  # not in the released code (its server had no size limit): say what happened
        return too_large_note(res)
    return RELEASED_NO_OUTPUT if res.status in ("timeout", "infra_error") else res.stdout + res.stderr


def too_large_note(res: ExecResult) -> str:
    """The reply to code a sandbox server refused as too large (HTTP 413): the model's error, told to the model."""
    return f"Error: the code is too large to run ({res.message}). Send shorter code."


def format_result(res: ExecResult, timeout_s: float, memory_mb: int) -> str:
    """What the model sees: stdout + stderr, plus a plain sentence when the run did not finish normally."""
    text = res.stdout + res.stderr
    note = {
        "timeout": f"Execution timed out after {timeout_s:g} seconds.",
        "memory_exceeded": f"Execution ran out of memory (limit {memory_mb} MB).",
        "output_truncated": "Output too long: truncated, and the execution was stopped.",
        "infra_error": "Sandbox error: the code could not be run (a sandbox failure, not an error in the code).",
        "too_large": too_large_note(res),
    }.get(res.status)
    if note is None:
        return text
    return f"{text.rstrip()}\n{note}" if text.strip() else note
