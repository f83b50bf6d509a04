"""Evaluation metrics as pure functions: avg@k, unbiased pass@k, maj@k, bootstrap confidence intervals.

Every function takes per-problem lists of per-sample outcomes (ordered by sample index) and returns plain floats, so
the same code scores a JSONL dump, a unit-test table or another project's rollouts.

- ``avg@k``: mean over problems of the mean correctness of the problem's samples (the paper's "average@32").
- ``pass@k``: the unbiased estimator of Chen et al. 2021 (HumanEval), ``1 - C(n-c, k) / C(n, k)`` computed as a stable
  product, averaged over problems — the estimator LiveCodeBench reports. verl's validation ``best@k`` is a bootstrap
  estimate instead and runs slightly low.
- ``maj@k``: majority vote over the extracted answers of the first ``k`` samples; a problem counts as solved when the
  winning answer is a correct one.
- Confidence intervals: percentile bootstrap over *problems* (the unit that was sampled from the benchmark), seeded.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Hashable, Sequence

import numpy as np

DEFAULT_BOOTSTRAP_RESAMPLES = 1000
DEFAULT_CONFIDENCE = 0.95


def _check_counts(n: int, c: int, k: int) -> None:
    for name, value in (("n", n), ("c", c), ("k", k)):
        if isinstance(value, bool) or not isinstance(value, (int, np.integer)):
            raise TypeError(f"pass@k: {name} must be an int, got {type(value).__name__} {value!r}")
    if n < 1:
        raise ValueError(f"pass@k: n (samples) must be >= 1, got n={n}")
    if not 0 <= c <= n:
        raise ValueError(f"pass@k: c (correct samples) must be in [0, n]; got c={c}, n={n}")
    if k < 1:
        raise ValueError(f"pass@k: k must be >= 1, got k={k}")
    if k > n:
        raise ValueError(
            f"pass@k: k={k} exceeds the n={n} samples drawn for this problem; the unbiased estimator needs k <= n "
            f"(sample at least {k} per problem, or report a smaller k)"
        )


def pass_at_k(n: int, c: int, k: int) -> float:
    """Unbiased pass@k for one problem with ``c`` correct out of ``n`` samples (Chen et al. 2021, eq. 1).

    ``1 - C(n-c, k) / C(n, k)``, evaluated as ``1 - prod_{i=n-c+1}^{n} (1 - k/i)`` to avoid huge binomials.
    Raises ``ValueError`` when ``k > n`` (the estimator is undefined) or ``c`` is outside ``[0, n]``.
    """
    _check_counts(n, c, k)
    if n - c < k:  # every k-subset contains a correct sample
        return 1.0
    return float(1.0 - np.prod(1.0 - k / np.arange(n - c + 1, n + 1, dtype=np.float64)))


def _as_bools(samples: Sequence[bool], where: str) -> list[bool]:
    out = []
    for value in samples:
        if isinstance(value, (bool, np.bool_)) or (isinstance(value, (int, np.integer)) and value in (0, 1)):
            out.append(bool(value))
        else:
            raise TypeError(f"{where}: per-sample correctness must be bool (or 0/1), got {value!r}")
    return out


def per_problem_pass_at_k(correct: Sequence[Sequence[bool]], k: int) -> list[float]:
    """pass@k of each problem; ``correct[i]`` lists problem i's per-sample correctness."""
    values = []
    for i, samples in enumerate(correct):
        flags = _as_bools(samples, f"pass@{k} problem {i}")
        if not flags:
            raise ValueError(f"pass@{k}: problem {i} has no samples")
        values.append(pass_at_k(len(flags), sum(flags), k))
    return values


def mean_pass_at_k(correct: Sequence[Sequence[bool]], k: int) -> float:
    """pass@k averaged over problems (every problem needs at least ``k`` samples)."""
    values = per_problem_pass_at_k(correct, k)
    if not values:
        raise ValueError("pass@k over zero problems is undefined")
    return float(np.mean(values))


def per_problem_avg(correct: Sequence[Sequence[bool]]) -> list[float]:
    """Mean correctness of each problem's samples."""
    values = []
    for i, samples in enumerate(correct):
        flags = _as_bools(samples, f"avg@k problem {i}")
        if not flags:
            raise ValueError(f"avg@k: problem {i} has no samples")
        values.append(sum(flags) / len(flags))
    return values


def avg_at_k(correct: Sequence[Sequence[bool]]) -> float:
    """avg@k: mean over problems of per-problem sample accuracy (equals mean pass@1)."""
    values = per_problem_avg(correct)
    if not values:
        raise ValueError("avg@k over zero problems is undefined")
    return float(np.mean(values))


def majority_answer(answers: Sequence[Hashable | None]) -> tuple[Hashable | None, int]:
    """The most frequent non-None answer and the index of its first occurrence (-1 when all are None).

    Ties go to the answer that appeared first, so the vote is deterministic given sample order. Samples without an
    extracted answer (None) do not vote: "no answer" must not win a vote against a real answer.
    """
    counts = Counter(a for a in answers if a is not None)
    if not counts:
        return None, -1
    first_seen = {}
    for i, a in enumerate(answers):
        if a is not None and a not in first_seen:
            first_seen[a] = i
    best = max(counts, key=lambda a: (counts[a], -first_seen[a]))
    return best, first_seen[best]


def per_problem_maj_at_k(
    answers: Sequence[Sequence[Hashable | None]], correct: Sequence[Sequence[bool]], k: int
) -> list[float]:
    """1.0/0.0 per problem: is the majority answer of the first ``k`` samples correct?

    The winning answer's correctness is taken from its first sample (the grader is a function of the answer for
    math/GPQA). Problems with fewer than ``k`` samples raise, like pass@k.
    """
    if len(answers) != len(correct):
        raise ValueError(f"maj@{k}: {len(answers)} answer lists but {len(correct)} correctness lists")
    if k < 1:
        raise ValueError(f"maj@k: k must be >= 1, got k={k}")
    values = []
    for i, (ans, cor) in enumerate(zip(answers, correct, strict=True)):
        flags = _as_bools(cor, f"maj@{k} problem {i}")
        if len(ans) != len(flags):
            raise ValueError(f"maj@{k}: problem {i} has {len(ans)} answers but {len(flags)} correctness values")
        if k > len(flags):
            raise ValueError(f"maj@{k}: problem {i} has only {len(flags)} samples (k must be <= n)")
        _, idx = majority_answer(ans[:k])
        values.append(1.0 if idx >= 0 and flags[idx] else 0.0)
    return values


def maj_at_k(answers: Sequence[Sequence[Hashable | None]], correct: Sequence[Sequence[bool]], k: int) -> float:
    """maj@k averaged over problems."""
    values = per_problem_maj_at_k(answers, correct, k)
    if not values:
        raise ValueError("maj@k over zero problems is undefined")
    return float(np.mean(values))


def bootstrap_ci(
    values: Sequence[float],
    *,
    statistic: Callable[[np.ndarray], float] = np.mean,
    n_resamples: int = DEFAULT_BOOTSTRAP_RESAMPLES,
    confidence: float = DEFAULT_CONFIDENCE,
    seed: int = 0,
) -> tuple[float, float]:
    """Percentile bootstrap CI of ``statistic`` over per-problem ``values`` (resampled with replacement).

    Deterministic for a given ``seed``. A single problem gives a zero-width interval.
    """
    if not 0.0 < confidence < 1.0:
        raise ValueError(f"bootstrap_ci: confidence must be in (0, 1), got {confidence}")
    if n_resamples < 1:
        raise ValueError(f"bootstrap_ci: n_resamples must be >= 1, got {n_resamples}")
    arr = np.asarray(values, dtype=np.float64)
    if arr.ndim != 1 or arr.size == 0:
        raise ValueError("bootstrap_ci needs a non-empty 1-D sequence of per-problem values")
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, arr.size, size=(n_resamples, arr.size))
    stats = np.apply_along_axis(statistic, 1, arr[idx]) if statistic is not np.mean else arr[idx].mean(axis=1)
    alpha = (1.0 - confidence) / 2.0
    low, high = np.quantile(stats, [alpha, 1.0 - alpha])
    return float(low), float(high)


def default_ks(n: int) -> list[int]:
    """Powers of two up to ``n`` plus ``n`` itself (1, 2, 4, ..., n): the k values reported for n samples."""
    if n < 1:
        return []
    ks = [2**i for i in range(int(math.log2(n)) + 1)]
    if ks[-1] != n:
        ks.append(n)
    return ks


def summarize(
    correct: Sequence[Sequence[bool]],
    answers: Sequence[Sequence[Hashable | None]] | None = None,
    *,
    ks: Sequence[int] | None = None,
    n_resamples: int = DEFAULT_BOOTSTRAP_RESAMPLES,
    confidence: float = DEFAULT_CONFIDENCE,
    seed: int = 0,
) -> dict:
    """Every metric for one group of problems, each with its bootstrap CI.

    ``ks`` defaults to :func:`default_ks` of the smallest per-problem sample count; a k above that count is
    rejected (pass@k is undefined there). Returns ``{"num_problems", "num_samples", "samples_per_problem",
    "avg@n": {...}, "pass@k": {...}, "maj@k": {...}}`` where every metric is ``{"value", "ci_low", "ci_high"}``.
    """
    if not correct:
        raise ValueError("summarize: no problems")
    counts = [len(c) for c in correct]
    n_min = min(counts)
    if n_min == 0:
        raise ValueError("summarize: a problem has no samples")
    ks = list(ks) if ks is not None else default_ks(n_min)
    too_big = [k for k in ks if k > n_min]
    if too_big:
        raise ValueError(f"summarize: k={too_big} exceed the smallest per-problem sample count {n_min}")

    def with_ci(values: list[float]) -> dict:
        low, high = bootstrap_ci(values, n_resamples=n_resamples, confidence=confidence, seed=seed)
        return {"value": float(np.mean(values)), "ci_low": low, "ci_high": high}

    out: dict = {
        "num_problems": len(correct),
        "num_samples": int(sum(counts)),
        "samples_per_problem": {"min": n_min, "max": max(counts)},
        "avg@n": with_ci(per_problem_avg(correct)),
        "pass@k": {str(k): with_ci(per_problem_pass_at_k(correct, k)) for k in ks},
    }
    if answers is not None:
        out["maj@k"] = {str(k): with_ci(per_problem_maj_at_k(answers, correct, k)) for k in ks}
    return out
