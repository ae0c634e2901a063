"""The block around attention: residual sum and layer-norm slips (problem set 9).

:func:`block_row_steps` follows 補償's row through the residual sum and the layer norm with one slip
made, for the hand answers; :func:`layer_norm_with_slip` is the student's ``layer_norm`` written
with one, for the function check. Every later step follows from the slipped one.
"""

from __future__ import annotations

import numpy as np

from qkv.block import layer_norm

from ..slips import STANDARD_DEVIATION_GIVEN, Slip


RESIDUAL_NOT_ADDED = Slip(
    "residual_not_added",
    "the residual sum adds the token's own vector to what attention brings, entry by entry: r = x + a.",
)

SUM_NOT_MEAN = Slip(
    "sum_not_mean",
    "that is the sum of the entries; the mean divides it by their number, d = 4.",
)

VARIANCE_WITHOUT_MEAN = Slip(
    "variance_without_mean",
    "the variance is the mean of the squared DEVIATIONS (r_c - mean)^2: subtract the mean before squaring.",
)

VARIANCE_OVER_D_MINUS_1 = Slip(
    "variance_over_d_minus_1",
    "layer norm divides the sum of squared deviations by d, not by d - 1 (np.var(r) is right, "
    "np.var(r, ddof=1) is not).",
)

DIVIDED_BY_VARIANCE = Slip(
    "divided_by_variance",
    "divide the deviations by the standard deviation, sqrt(variance + eps), not by the variance itself.",
)

MEAN_NOT_SUBTRACTED = Slip(
    "mean_not_subtracted",
    "subtract the mean first: (r_c - mean) / sqrt(variance + eps).",
)

GAMMA_BETA_LEFT_OUT = Slip(
    "gamma_beta_left_out",
    "that is the normalised row itself; the layer norm then scales it by gamma and shifts it by beta, "
    "feature by feature: gamma_c * n_c + beta_c.",
)

GAMMA_BETA_SWAPPED = Slip(
    "gamma_beta_swapped",
    "gamma scales and beta shifts: gamma * n + beta, not beta * n + gamma.",
)

SHIFTED_BEFORE_SCALING = Slip(
    "shifted_before_scaling",
    "scale first, then shift: gamma * n + beta, not gamma * (n + beta).",
)

NORMALISED_OVER_TOKENS = Slip(
    "normalised_over_tokens",
    "did you normalise over the tokens (down each column, axis 0)? Layer norm takes the mean and variance "
    "of each token's own features: along the last axis, with keepdims=True.",
)

EPS_OUTSIDE_ROOT = Slip(
    "eps_outside_root",
    "eps goes under the square root: divide by sqrt(variance + eps), not by sqrt(variance) + eps.",
)

EPS_LEFT_OUT = Slip(
    "eps_left_out",
    "did you leave out eps? Divide by sqrt(variance + eps): a row of equal entries has variance 0, and "
    "eps keeps the division finite.",
)

EPS_NOT_PASSED = Slip(
    "eps_not_passed",
    "use the eps the function is given (its argument eps), not a number of your own.",
)

STATISTICS_WITHOUT_KEEPDIMS = Slip(
    "statistics_without_keepdims",
    "did you leave out keepdims=True? X.mean(axis=-1) has one entry per row; with keepdims=True it keeps "
    "its axis, shape (..., n, 1), and X - mean subtracts each row's own mean (the same for the variance).",
)

VARIANCE_FROM_SQUARES = Slip(
    "variance_from_squares",
    "mean(x**2) - mean(x)**2 loses every digit when the entries are large (two huge, nearly equal "
    "numbers are subtracted): compute the deviations x - mean first, then average their squares.",
)

BLOCK_ROW_SLIPS = (RESIDUAL_NOT_ADDED, SUM_NOT_MEAN, VARIANCE_WITHOUT_MEAN, VARIANCE_OVER_D_MINUS_1,
                   STANDARD_DEVIATION_GIVEN, DIVIDED_BY_VARIANCE, MEAN_NOT_SUBTRACTED, GAMMA_BETA_LEFT_OUT,
                   GAMMA_BETA_SWAPPED, SHIFTED_BEFORE_SCALING)

LAYER_NORM_SLIPS = (VARIANCE_OVER_D_MINUS_1, DIVIDED_BY_VARIANCE, MEAN_NOT_SUBTRACTED, GAMMA_BETA_LEFT_OUT,
                    GAMMA_BETA_SWAPPED, SHIFTED_BEFORE_SCALING, NORMALISED_OVER_TOKENS, EPS_OUTSIDE_ROOT,
                    EPS_LEFT_OUT, EPS_NOT_PASSED, VARIANCE_FROM_SQUARES)


def block_row_steps(x, attended, gamma, beta, eps, slip: Slip | None = None) -> dict[str, np.ndarray]:
    """``r`` (the residual sum), its ``mean`` and ``variance``, the ``normalised`` row and the ``scaled`` one
    (gamma and beta applied), with ``slip`` made; the steps after a slipped one follow from it.

    Without a slip, ``normalised`` and ``scaled`` are :func:`qkv.layer_norm` of the residual sum, with
    gamma = 1, beta = 0 and with the given gamma and beta.
    """
    x, attended, gamma, beta = (np.asarray(v, dtype=float) for v in (x, attended, gamma, beta))
    r = attended if slip == RESIDUAL_NOT_ADDED else x + attended  # (d_model,)
    steps = {"r": r}
    steps["mean"] = np.array(r.sum() if slip == SUM_NOT_MEAN else r.mean())
    deviations = r - steps["mean"]
    if slip == VARIANCE_WITHOUT_MEAN:
        variance = (r ** 2).mean()
    elif slip == VARIANCE_OVER_D_MINUS_1:
        variance = (deviations ** 2).sum() / (len(r) - 1)
    else:
        variance = (deviations ** 2).mean()
    steps["variance"] = np.array(np.sqrt(variance) if slip == STANDARD_DEVIATION_GIVEN else variance)
    if slip == STANDARD_DEVIATION_GIVEN:
        return {"variance": steps["variance"]}  # what follows is computed from the right variance
    if slip is None:
        steps["normalised"] = layer_norm(r[None, :], np.ones(len(r)), np.zeros(len(r)), eps)[0]
        steps["scaled"] = layer_norm(r[None, :], gamma, beta, eps)[0]
        return steps
    steps["normalised"] = _normalised_with_slip(r, deviations, variance, eps, slip)
    steps["scaled"] = _scaled_with_slip(steps["normalised"], gamma, beta, slip)
    slipped_from = {RESIDUAL_NOT_ADDED: "r", SUM_NOT_MEAN: "mean", VARIANCE_WITHOUT_MEAN: "variance",
                    VARIANCE_OVER_D_MINUS_1: "variance", DIVIDED_BY_VARIANCE: "normalised",
                    MEAN_NOT_SUBTRACTED: "normalised"}.get(slip, "scaled")
    names = list(steps)
    return {name: steps[name] for name in names[names.index(slipped_from):]}


def _normalised_with_slip(r, deviations, variance, eps, slip):
    if slip == DIVIDED_BY_VARIANCE:
        return deviations / (variance + eps)
    if slip == MEAN_NOT_SUBTRACTED:
        return r / np.sqrt(variance + eps)
    return deviations / np.sqrt(variance + eps)


def _scaled_with_slip(normalised, gamma, beta, slip):
    if slip == GAMMA_BETA_LEFT_OUT:
        return normalised
    if slip == GAMMA_BETA_SWAPPED:
        return beta * normalised + gamma
    if slip == SHIFTED_BEFORE_SCALING:
        return gamma * (normalised + beta)
    return gamma * normalised + beta


def layer_norm_with_slip(X, gamma, beta, eps, slip: Slip) -> np.ndarray | None:
    """:func:`qkv.layer_norm` of ``X`` ``(..., n, d_model)`` computed with ``slip``, or None if it does not apply."""
    X, gamma, beta = (np.asarray(v, dtype=float) for v in (X, gamma, beta))
    if slip == NORMALISED_OVER_TOKENS:
        if X.ndim < 2 or X.shape[-2] < 2:
            return None
        mean = X.mean(axis=-2, keepdims=True)  # (..., 1, d_model): over the tokens
        variance = ((X - mean) ** 2).mean(axis=-2, keepdims=True)
        return gamma * (X - mean) / np.sqrt(variance + eps) + beta
    mean = X.mean(axis=-1, keepdims=True)  # (..., n, 1)
    deviations = X - mean
    with np.errstate(all="ignore"):
        if slip == VARIANCE_FROM_SQUARES:
            variance = (X ** 2).mean(axis=-1, keepdims=True) - mean ** 2
        elif slip == VARIANCE_OVER_D_MINUS_1:
            variance = (deviations ** 2).sum(axis=-1, keepdims=True) / (X.shape[-1] - 1)
        else:
            variance = (deviations ** 2).mean(axis=-1, keepdims=True)
        if slip == EPS_OUTSIDE_ROOT:
            normalised = deviations / (np.sqrt(variance) + eps)
        elif slip == EPS_LEFT_OUT:
            normalised = deviations / np.sqrt(variance)
        elif slip == EPS_NOT_PASSED:
            if eps == 1e-5:
                return None  # the default: a fixed 1e-5 gives the right answer
            normalised = deviations / np.sqrt(variance + 1e-5)
        else:
            normalised = _normalised_with_slip(X, deviations, variance, eps, slip)
        return _scaled_with_slip(normalised, gamma, beta, slip)
