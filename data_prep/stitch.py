"""A long-CoT solution split at its code blocks into tool-call turns: the text side of the stitched SFT baseline.

ReTool-SFT's ``<code>``/``<interpreter>``/``<answer>`` format, or markdown python fences whose output comes from our
sandbox (``data sft-stitched``, :mod:`data_prep.jobs.sft_stitched`).
"""

from __future__ import annotations

import re
from typing import Any

from data_prep.rows import ConvertError, get_field
from data_prep.sft_format import code_call

SEGMENT = re.compile(
    r"<code>(?P<code>.*?)</code>|<interpreter>(?P<out>.*?)</interpreter>|<answer>(?P<answer>.*?)</answer>"
    r"|```(?:python|py)\n(?P<md>.*?)```",
    re.DOTALL,
)
FENCE = re.compile(r"```(?:python|py)?\n?(.*?)```", re.DOTALL)
RETOOL_QUESTION = "*user question:*"


def _strip_fence(code: str) -> str:
    m = FENCE.search(code)
    return (m.group(1) if m else code).strip()


def stitch(problem: str, solution: str, *, run_code: Any, execute: str) -> list[dict[str, Any]]:
    """Split a long-CoT solution at its code blocks into assistant/tool turns.

    ``<code>`` or a python fence → an assistant turn (the text before it) with a code_interpreter call; the tool turn is
    the following ``<interpreter>`` block, or (``execute="missing"`` / ``"all"``) the code's real output from our
    sandbox; ``<answer>`` (or the trailing text) → the final assistant turn.
    """
    messages: list[dict[str, Any]] = [{"role": "user", "content": problem}]
    pos, text_buf, pending_code = 0, "", None
    final = None

    def flush_call(output: str | None) -> None:
        nonlocal text_buf, pending_code
        if output is None and execute == "never":
            raise ConvertError("solution", "code block with no <interpreter> output and --execute never")
        code = pending_code or ""
        if output is None or execute == "all":
            output = run_code(code)
        messages.append({"role": "assistant", "content": text_buf.strip(), "tool_calls": [code_call(code)]})
        messages.append({"role": "tool", "content": output.strip()})
        text_buf, pending_code = "", None

    for m in SEGMENT.finditer(solution):
        between = solution[pos : m.start()]
        pos = m.end()
        if m.group("out") is not None:
            if pending_code is None:
                raise ConvertError("solution", "<interpreter> block without a preceding code block")
            flush_call(m.group("out"))
            continue
        if pending_code is not None:  # a code block not followed by its output: the output comes from our sandbox
            flush_call(None)
        text_buf += between
        if m.group("answer") is not None:
            final = (text_buf + m.group("answer")).strip()
            text_buf = ""
            break
        code = _strip_fence(m.group("code")) if m.group("code") is not None else m.group("md").strip()
        if not code:
            raise ConvertError("solution", "empty code block")
        pending_code = code
    if pending_code is not None:
        flush_call(None)
    if final is None:
        final = (text_buf + solution[pos:]).strip()
    if not final:
        raise ConvertError("solution", "no final answer text after the last tool call")
    messages.append({"role": "assistant", "content": final})
    return messages


def synth_problem_and_solution(row: dict) -> tuple[str, str]:
    """(problem, solution) from a ReTool-SFT row (messages with ``*user question:*``) or a problem/solution row."""
    if "messages" in row:
        msgs = row["messages"]
        user = get_field({"m": msgs}, "m.0.content")
        solution = get_field({"m": msgs}, "m.1.content")
        i = user.find(RETOOL_QUESTION)
        problem = user[i + len(RETOOL_QUESTION) :] if i != -1 else user
        return problem.replace("<answer>", "").replace("</answer>", "").strip(), solution
    for pk in ("problem", "question", "Problem"):
        for sk in ("solution", "answer_cot", "response", "Solution"):
            if isinstance(row.get(pk), str) and isinstance(row.get(sk), str):
                return row[pk].strip(), row[sk]
    raise ConvertError("messages", "need ReTool-style messages or problem/solution columns")
