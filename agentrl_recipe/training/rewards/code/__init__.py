"""Code rewards: a program graded against its tests in the sandbox, never trusted.

I/O tests with LiveCodeBench's rules (:mod:`.io_tests`), LeetCode assert harnesses (:mod:`.assert_tests`), the
released grader rule for rule (:mod:`.released`); both drivers that run inside the sandbox (:mod:`._io_driver`,
:mod:`._assert_driver`) and the host side they share (:mod:`.driver_runs`, :mod:`.grade`).
"""
