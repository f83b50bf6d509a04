# ruff: noqa: F401
# What the tests 0017 adds to tests/utils/test_continuous_token_on_cpu.py take from that file's imports
# (run without the file against the wheel, which ships no tests).
from verl.utils.tokenizer.continuous_token import ContinuousTokenBuilder
