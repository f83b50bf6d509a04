# ruff: noqa: F401
# What the tests 0012 adds to tests/trainer/ppo/v1/test_metrics_aggregator_on_cpu.py take from that file's imports
# (run without the file against the wheel, which ships no tests).
import pytest
from verl.trainer.ppo.v1.utils import MetricsAggregator
