# ruff: noqa: F401
# What the tests 0001 adds to tests/trainer/ppo/v1/test_replay_buffer_on_cpu.py take from that file's imports
# (run without the file against the wheel, which ships no tests).
import uuid

import pytest
import torch
import transfer_queue as tq
