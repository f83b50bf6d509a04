# ruff: noqa: F401
# What the tests 0007 adds to tests/trainer/ppo/test_metric_utils_on_cpu.py take from that file's imports
# (run without the file against the wheel, which ships no tests).
import unittest

from verl.utils.metric.utils import AggregationType, Metric
