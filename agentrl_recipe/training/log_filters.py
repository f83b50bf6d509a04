"""Quiet the ERROR lines verl logs for conditions the recipe handles, keep every other error visible.

verl's hermes parser (``verl/experimental/agent_loop/tool_parser.py``) logs ``ERROR Failed to decode tool call: …``
for every tool call whose JSON does not parse. ``agentrl_tool_agent`` handles exactly that case (it answers the call
with an error message, or ends the trajectory as verl does when ``malformed_call_feedback`` is off) and counts it per
kind in the tracker (``agentrl_tools/malformed/*``), so at ERROR level it reads like a failure of the run. The
filter drops only that message, only from that logger, and counts what it dropped in :data:`SUPPRESSED`; any other
record of the parser's logger, and every other logger, is untouched.
"""

from __future__ import annotations

import logging
from collections import Counter

HANDLED_PREFIXES = ("Failed to decode tool call",)  # verl tool_parser.py:124 and :181
SUPPRESSED: Counter[str] = Counter()  # message prefix -> records dropped in this process


class HandledToolParseErrors(logging.Filter):
    """Drops verl's parser errors for malformed tool calls (the agent loop answers and counts them)."""

    def filter(self, record: logging.LogRecord) -> bool:
        message = record.getMessage()
        for prefix in HANDLED_PREFIXES:
            if message.startswith(prefix):
                SUPPRESSED[prefix] += 1
                return False
        return True


def install() -> logging.Logger:
    """Attach the filter to verl's tool-parser logger once per process; returns that logger."""
    from verl.experimental.agent_loop import tool_parser

    parser_logger = tool_parser.logger
    if not any(isinstance(f, HandledToolParseErrors) for f in parser_logger.filters):
        parser_logger.addFilter(HandledToolParseErrors())
    return parser_logger
