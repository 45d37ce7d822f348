"""Non-negative least squares: the active-set method of Lawson and Hanson (1974).

``nnls(A, b)`` minimises ``||A x - b||`` subject to ``x >= 0``. Written here (about
forty lines of numpy) rather than taking scipy as a dependency for one function.
Columns are scaled to unit norm before solving, so coefficients of very different
magnitudes (a per-step constant next to a per-token-squared term) are treated alike.
"""

from __future__ import annotations

import numpy as np


def nnls(a: np.ndarray, b: np.ndarray, *, max_iter: int | None = None) -> np.ndarray:
    """The ``x >= 0`` minimising ``||a @ x - b||_2`` (Lawson-Hanson active set).

    ``a`` is ``m x n``, ``b`` has ``m`` entries. A column of zeros gets coefficient 0.
    """
    a = np.asarray(a, dtype=np.float64)
    b = np.asarray(b, dtype=np.float64)
    m, n = a.shape
    norms = np.linalg.norm(a, axis=0)
    usable = norms > 0
    scale = np.where(usable, norms, 1.0)
    a = a / scale
    x = np.zeros(n)
    passive = np.zeros(n, dtype=bool)  # the set P of coefficients free to move
    tol = 10 * np.finfo(np.float64).eps * max(m, n) * max(1.0, float(np.abs(a).sum(axis=0).max()))
    limit = max_iter if max_iter is not None else 3 * n + 30
    for _ in range(limit):
        w = a.T @ (b - a @ x)  # the negative gradient: where the residual pulls
        free = ~passive & usable
        if not free.any() or w[free].max() <= tol:
            break
        j = int(np.argmax(np.where(free, w, -np.inf)))
        passive[j] = True
        while True:
            s = np.zeros(n)
            s[passive] = np.linalg.lstsq(a[:, passive], b, rcond=None)[0]
            if s[passive].min() > tol:
                break
            # Step from x towards s as far as feasibility allows; the coefficients that
            # reach zero leave the passive set.
            blocking = passive & (s <= tol)
            alpha = float(np.min(x[blocking] / (x[blocking] - s[blocking])))
            x = x + alpha * (s - x)
            passive &= x > tol
            x[~passive] = 0.0
            if not passive.any():
                s = np.zeros(n)
                break
        x = s
    return x / scale
