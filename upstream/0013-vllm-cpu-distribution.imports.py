# ruff: noqa: F401
# What the tests 0013 adds to tests/utils/test_import_utils_on_cpu.py take from that file's imports
# (run without the file against the wheel, which ships no tests).
import pytest
