"""Random weights as a layer has them before training.

A projection ``X W`` with ``d_in`` inputs sums ``d_in`` products. If the entries of ``X``
have variance 1 and those of ``W`` variance ``sigma^2``, each output has variance
``d_in * sigma^2``. Drawing ``W`` with ``sigma^2 = 1 / d_in`` (LeCun's initialisation)
keeps the outputs at variance 1, whatever the width: the same reasoning as the
division of the scores by ``sqrt(d_k)``.
"""

from __future__ import annotations

import numpy as np


def lecun_normal(d_in, d_out, rng):
    r"""A weight matrix with entries drawn from :math:`\mathcal{N}(0, 1/d_{in})`.

    .. math:: W_{ij} \sim \mathcal{N}\!\left(0, \tfrac{1}{d_{\mathrm{in}}}\right)

    Args:
        d_in: rows of ``W``, the width of what is projected (``d_model``).
        d_out: columns of ``W``, the width of the result (``d_k`` or ``d_v``).
        rng: a ``numpy.random.Generator``, for example ``np.random.default_rng(0)``.

    Returns:
        Array of shape ``(d_in, d_out)``.

    Raises:
        ValueError: if ``d_in`` or ``d_out`` is not a positive whole number.
        TypeError: if ``rng`` is not a ``numpy.random.Generator``.
    """
    for name, size in (("d_in", d_in), ("d_out", d_out)):
        whole = isinstance(size, (int, np.integer)) and not isinstance(size, bool)
        if not whole or size < 1:
            raise ValueError(
                f"lecun_normal: {name} must be a positive whole number, "
                f"got {size!r}")
    if not isinstance(rng, np.random.Generator):
        raise TypeError(
            "lecun_normal: rng must be a numpy.random.Generator "
            f"(np.random.default_rng(seed)), got {type(rng).__name__}"
        )
    std = 1.0 / np.sqrt(d_in)
    return rng.normal(0.0, std, size=(d_in, d_out))  # (d_in, d_out)
