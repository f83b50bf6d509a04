# ruff: noqa: F401
# What the test 0011 adds to tests/utils/test_fsdp2_model_transfer_on_cpu.py takes from that file's imports
# (run without the file against the wheel, which ships no tests).
from verl.utils import fsdp_utils
