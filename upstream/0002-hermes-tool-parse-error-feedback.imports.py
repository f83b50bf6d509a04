# ruff: noqa: F401
# What the test 0002 adds to tests/experimental/agent_loop/test_call_tool_on_cpu.py takes from that file's imports
# (run without the file against the wheel, which ships no tests).
import unittest
from unittest.mock import MagicMock
