# ruff: noqa: F401
# What the test 0016 adds to tests/trainer/ppo/test_loss_aggregation_on_cpu.py takes from that file's imports
# (run without the file against the wheel, which ships no tests).
import pytest
import torch
from verl.trainer.ppo.core_algos import agg_loss
