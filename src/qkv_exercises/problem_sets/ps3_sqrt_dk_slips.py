"""The slips of problem set 3 (why sqrt(d_k)): the variance of q . k and its typical size.

Each names a hand answer of :mod:`qkv_exercises.problem_sets.ps3_sqrt_dk` that squared what it
should not, or forgot a square: :func:`qkv_exercises.expectations.expect_dot_product_variance`
offers them as the values a wrong answer may match.
"""

from __future__ import annotations

from ..slips import Slip


VARIANCE_NOT_SQUARED = Slip(
    "variance_not_squared",
    "each product q_i k_i has variance Var(q_i) Var(k_i) = sigma^2 * sigma^2 (the variances multiply), "
    "and the d_k products add up.",
)

SCALING_NOT_APPLIED = Slip(
    "scaling_not_applied",
    "dividing q.k by sqrt(d_k) divides its variance by (sqrt(d_k))^2 = d_k.",
)

SCALED_BY_SQRT_ONCE = Slip(
    "variance_divided_by_sqrt_dk",
    "dividing q.k by c divides its variance by c^2: here by (sqrt(d_k))^2 = d_k, not by sqrt(d_k).",
)

VARIANCE_GIVEN = Slip(
    "variance_given",
    "that is the variance; the typical size is the standard deviation, its square root.",
)
