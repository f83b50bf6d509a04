"""Tools the agent calls during rollout (``code_interpreter``) and the sandbox every part of the recipe runs code in."""
