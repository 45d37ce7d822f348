"""The small NNLS solver against answers known in advance and against brute force."""

from __future__ import annotations

import itertools

import numpy as np
import pytest

from emulator.analysis.nnls import nnls


def _brute_force(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The best feasible least-squares solution over every support (small n only)."""
    n = a.shape[1]
    best, best_cost = np.zeros(n), float(b @ b)
    for k in range(1, n + 1):
        for support in itertools.combinations(range(n), k):
            cols = list(support)
            sol = np.linalg.lstsq(a[:, cols], b, rcond=None)[0]
            if (sol < 0).any():
                continue
            x = np.zeros(n)
            x[cols] = sol
            cost = float(np.sum((a @ x - b) ** 2))
            if cost < best_cost - 1e-12:
                best, best_cost = x, cost
    return best


def test_it_recovers_an_exact_non_negative_answer_with_zeros() -> None:
    rng = np.random.default_rng(1)
    a = rng.random((30, 5))
    truth = np.array([2.0, 0.0, 0.5, 0.0, 3.0])
    np.testing.assert_allclose(nnls(a, a @ truth), truth, atol=1e-10)


def test_it_clamps_a_coefficient_least_squares_would_make_negative() -> None:
    # b = 1 - t, fitted by c0 + c1 t: least squares says c1 = -1; NNLS must give c1 = 0
    # and c0 = mean(b).
    t = np.linspace(0, 1, 11)
    a = np.column_stack([np.ones_like(t), t])
    b = 1.0 - t
    np.testing.assert_allclose(nnls(a, b), [b.mean(), 0.0], atol=1e-12)


@pytest.mark.parametrize("seed", range(25))
def test_it_matches_brute_force_on_random_problems(seed: int) -> None:
    rng = np.random.default_rng(seed)
    m, n = int(rng.integers(4, 20)), int(rng.integers(2, 6))
    a = rng.standard_normal((m, n))
    b = rng.standard_normal(m)
    got, want = nnls(a, b), _brute_force(a, b)
    assert (got >= 0).all()
    assert np.sum((a @ got - b) ** 2) == pytest.approx(np.sum((a @ want - b) ** 2), rel=1e-9, abs=1e-12)


def test_it_copes_with_columns_of_very_different_scale_and_a_zero_column() -> None:
    p = np.array([128.0, 512, 2048, 8192])
    a = np.column_stack([np.ones(4), p, p * p, np.zeros(4)])
    truth = np.array([0.03, 1e-4, 2e-9, 0.0])
    np.testing.assert_allclose(nnls(a, a @ truth), truth, rtol=1e-8, atol=1e-15)
