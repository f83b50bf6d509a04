"""Metrics against hand-computed values."""

from __future__ import annotations

import math

import pytest

from agentrl_recipe.eval import estimators as metrics


@pytest.mark.parametrize(
    ("n", "c", "k", "expected"),
    [
        (4, 1, 1, 0.25),
        (4, 1, 2, 1 - 3 / 6),  # 1 - C(3,2)/C(4,2)
        (5, 2, 2, 1 - 3 / 10),  # 1 - C(3,2)/C(5,2)
        (10, 3, 4, 1 - math.comb(7, 4) / math.comb(10, 4)),
        (32, 5, 8, 1 - math.comb(27, 8) / math.comb(32, 8)),
        (4, 4, 3, 1.0),  # n = c
        (4, 0, 3, 0.0),  # c = 0
        (4, 1, 4, 1.0),  # k = n: any correct sample is in the only subset
        (4, 2, 3, 1.0),  # n - c < k
    ],
)
def test_pass_at_k_matches_combinatorial_formula(n: int, c: int, k: int, expected: float) -> None:
    assert metrics.pass_at_k(n, c, k) == pytest.approx(expected, abs=1e-12)


def test_pass_at_k_rejects_k_above_n_with_a_clear_error() -> None:
    with pytest.raises(ValueError, match=r"k=5 exceeds the n=4 samples"):
        metrics.pass_at_k(4, 1, 5)


@pytest.mark.parametrize(("n", "c", "k"), [(0, 0, 1), (3, 4, 1), (3, -1, 1), (3, 1, 0)])
def test_pass_at_k_rejects_invalid_counts(n: int, c: int, k: int) -> None:
    with pytest.raises(ValueError):
        metrics.pass_at_k(n, c, k)


def test_pass_at_k_rejects_non_integers() -> None:
    with pytest.raises(TypeError):
        metrics.pass_at_k(4.0, 1, 1)  # type: ignore[arg-type]


def test_mean_pass_at_k_and_avg() -> None:
    correct = [[True, False, False, False], [True, True, True, True], [False] * 4]
    assert metrics.mean_pass_at_k(correct, 1) == pytest.approx((0.25 + 1 + 0) / 3)
    assert metrics.mean_pass_at_k(correct, 2) == pytest.approx((0.5 + 1 + 0) / 3)
    assert metrics.avg_at_k(correct) == pytest.approx((0.25 + 1 + 0) / 3)
    # avg@n equals pass@1 averaged over problems
    assert metrics.avg_at_k(correct) == pytest.approx(metrics.mean_pass_at_k(correct, 1))
    # ragged: a problem with fewer samples than k is rejected
    with pytest.raises(ValueError, match="exceeds"):
        metrics.mean_pass_at_k([[True, False], [True]], 2)


def test_correctness_must_be_boolean() -> None:
    with pytest.raises(TypeError):
        metrics.avg_at_k([[0.5, 1.0]])  # a fractional score is not a correctness flag


def test_majority_vote() -> None:
    assert metrics.majority_answer(["1", "2", "2"]) == ("2", 1)
    assert metrics.majority_answer(["3", "1", "1", "3"]) == ("3", 0)  # tie -> first seen
    assert metrics.majority_answer([None, None, "7"]) == ("7", 2)  # no-answer samples do not vote
    assert metrics.majority_answer([None, None]) == (None, -1)

    answers = [["1", "2", "2"], ["5", "5", None], [None, None, None]]
    correct = [[True, False, False], [True, True, False], [False, False, False]]
    assert metrics.per_problem_maj_at_k(answers, correct, 3) == [0.0, 1.0, 0.0]
    assert metrics.per_problem_maj_at_k(answers, correct, 1) == [1.0, 1.0, 0.0]
    assert metrics.maj_at_k(answers, correct, 3) == pytest.approx(1 / 3)
    with pytest.raises(ValueError, match="only 3 samples"):
        metrics.maj_at_k(answers, correct, 4)


def test_bootstrap_ci_is_seeded_and_brackets_the_mean() -> None:
    values = [0.0, 1.0, 0.5, 0.25, 1.0, 0.0, 0.75, 1.0]
    a = metrics.bootstrap_ci(values, seed=3)
    b = metrics.bootstrap_ci(values, seed=3)
    c = metrics.bootstrap_ci(values, seed=4)
    assert a == b
    assert a != c
    mean = sum(values) / len(values)
    assert a[0] < mean < a[1]
    assert a[0] >= 0.0 and a[1] <= 1.0
    assert metrics.bootstrap_ci([0.4], seed=0) == (0.4, 0.4)
    # a wider confidence level never gives a narrower interval
    lo90, hi90 = metrics.bootstrap_ci(values, seed=3, confidence=0.9)
    assert lo90 >= a[0] and hi90 <= a[1]
    with pytest.raises(ValueError):
        metrics.bootstrap_ci([], seed=0)


def test_default_ks() -> None:
    assert metrics.default_ks(1) == [1]
    assert metrics.default_ks(32) == [1, 2, 4, 8, 16, 32]
    assert metrics.default_ks(5) == [1, 2, 4, 5]


def test_summarize() -> None:
    correct = [[True, False], [False, False], [True, True]]
    answers = [["a", "b"], ["x", "x"], ["c", "c"]]
    s = metrics.summarize(correct, answers, n_resamples=200, seed=1)
    assert s["num_problems"] == 3 and s["num_samples"] == 6
    assert s["avg@n"]["value"] == pytest.approx(0.5)
    assert s["pass@k"]["2"]["value"] == pytest.approx(2 / 3)
    assert s["maj@k"]["2"]["value"] == pytest.approx(2 / 3)
    assert set(s["pass@k"]) == {"1", "2"}
    with pytest.raises(ValueError, match="exceed"):
        metrics.summarize(correct, ks=[4])
