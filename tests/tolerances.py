"""Tolerances derived from float32 arithmetic, for values that two compiled programs compute separately.

Two programs (a fit's step and a polish, a vmapped and a single member) may order their float32 operations
differently, so a value both compute is equal only up to rounding, and how much rounding depends on the
value's arithmetic, not on the machine that last ran the suite. Compare what is the same by construction
exactly; use these for the rest.
"""

import math

import numpy as np

EPS32 = float(np.finfo(np.float32).eps)  # 2^-23: one ulp of 1.0


def mse_tolerance(loss: float, count: int, ulps: int = 64) -> float:
    """Absolute bound on the difference of one mean squared error L of `count` residuals computed by two float32
    programs: each residual (pixel values in [0, 1]) within `ulps` ulps of 1 (delta = ulps eps), so
    |delta mean(r^2)| <= 2 delta mean|r| <= 2 delta sqrt(L); the mean's own summation (a tree reduction)
    adds log2(count) eps L."""
    delta = ulps * EPS32
    return 2.0 * delta * math.sqrt(max(loss, 0.0)) + math.log2(max(count, 2)) * EPS32 * loss


def sum_rtol(count: int) -> float:
    """Relative bound on a float32 sum of `count` terms of one sign computed in two orders: (count - 1) eps
    (each addition rounds by at most half an ulp of the partial sum, in either program)."""
    return max(count - 1, 1) * EPS32
