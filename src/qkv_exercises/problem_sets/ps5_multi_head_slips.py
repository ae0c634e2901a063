"""Joining the heads: the slips of problem set 5 (multi-head attention), with the steps they give.

:func:`multi_head_steps` runs seed 000's two heads with one slip made, within every head (the shared
slips of :mod:`qkv_exercises.slips`) or in how the heads' outputs are put together (the ones here),
for :func:`qkv_exercises.expectations.expect_multi_head_step`.
"""

from __future__ import annotations

import numpy as np

from qkv.attention import linear
from qkv.multihead import Head

from ..slips import HEAD_SLIPS, W_O_TRANSPOSED, Slip, head_steps, remembered


HEADS_IN_WRONG_ORDER = Slip(
    "heads_in_wrong_order",
    "did you concatenate the heads in the wrong order? Head 1's output comes first (the left columns), "
    "then head 2's.",
)

HEADS_STACKED_AS_ROWS = Slip(
    "heads_stacked_as_rows",
    "did you put the heads' outputs one below the other? Concat places them side by side: "
    "one row per token, the heads' columns next to each other.",
)

MULTI_HEAD_SLIPS = (HEADS_IN_WRONG_ORDER, HEADS_STACKED_AS_ROWS, W_O_TRANSPOSED) + HEAD_SLIPS


@remembered
def multi_head_steps(X, heads, W_O, b_O=None, slip: Slip | None = None) -> dict[str, np.ndarray]:
    """``O_concat`` and ``Y`` of multi-head attention on ``X``, with ``slip`` made.

    Without a slip they are what :func:`qkv.trace_multi_head` gives: each head's output
    (:func:`qkv.trace_head`), side by side, projected by ``W_O``. A slip within one head
    (for example :data:`NO_SQRT_DK`) is made in every head.
    """
    heads = tuple(h if isinstance(h, Head) else Head(*h) for h in heads)
    within_head = slip not in (None, HEADS_IN_WRONG_ORDER, HEADS_STACKED_AS_ROWS, W_O_TRANSPOSED)
    outputs = [head_steps(X, head, slip if within_head else None).get("O") for head in heads]  # each (n, d_v)
    if any(O is None for O in outputs):
        return {}
    if slip == HEADS_STACKED_AS_ROWS:
        return {"O_concat": np.concatenate(outputs, axis=0)}  # (h * n, d_v)
    O_concat = np.concatenate(outputs[::-1] if slip == HEADS_IN_WRONG_ORDER else outputs, axis=-1)  # (n, h * d_v)
    if slip == W_O_TRANSPOSED:
        W_O = np.asarray(W_O, dtype=float)
        return {"Y": linear(O_concat, W_O.T, b_O)} if W_O.shape[0] == W_O.shape[1] else {}
    return {"O_concat": O_concat, "Y": linear(O_concat, W_O, b_O)}
