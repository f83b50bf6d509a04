"""verl's hermes parser: the ERROR for a malformed call the loop handles is dropped and counted; others stay."""

from __future__ import annotations

import asyncio
import logging
from pathlib import Path

import pytest
from transformers import AutoTokenizer
from verl.experimental.agent_loop.tool_parser import HermesToolParser

import agentrl_recipe.training.agent_loop.loop  # noqa: F401  (importing the loop installs the filter, as in every Ray worker)
from agentrl_recipe.training import log_filters

MALFORMED = '<tool_call>\n{"name": "code_interpreter", "arguments": {"code": "print(1)"\n</tool_call>'


def test_the_agent_loop_installs_the_filter_on_verls_parser_logger() -> None:
    parser_logger = log_filters.install()
    assert sum(isinstance(f, log_filters.HandledToolParseErrors) for f in parser_logger.filters) == 1


def test_malformed_call_error_is_counted_not_logged(tiny_model_dir: Path, caplog: pytest.LogCaptureFixture) -> None:
    tokenizer = AutoTokenizer.from_pretrained(tiny_model_dir)
    parser = HermesToolParser(tokenizer)
    before = log_filters.SUPPRESSED["Failed to decode tool call"]
    with caplog.at_level(logging.ERROR):
        _, calls = asyncio.run(parser.extract_tool_calls(tokenizer.encode(MALFORMED)))
    assert calls == []  # verl really failed to decode it
    assert log_filters.SUPPRESSED["Failed to decode tool call"] == before + 1
    assert not [r for r in caplog.records if "Failed to decode tool call" in r.getMessage()]


def test_other_errors_of_the_parser_logger_stay_visible(caplog: pytest.LogCaptureFixture) -> None:
    parser_logger = log_filters.install()
    with caplog.at_level(logging.ERROR):
        parser_logger.error("Failed to parse something else")
    assert [r.getMessage() for r in caplog.records] == ["Failed to parse something else"]
