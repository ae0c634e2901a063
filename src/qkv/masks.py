"""Padding masks: a batch of sentences of different lengths, padded to one length ``n``.

Every mask in ``qkv`` is boolean with True = may attend, the convention of
``torch.nn.functional.scaled_dot_product_attention``; :func:`qkv.causal_mask` makes
the decoder's mask. Masks combine with ``&``: a pair is allowed when every mask allows it.
"""

from __future__ import annotations

import numpy as np

from .validate import check_positive_int, shape_str


def padding_mask(lengths, n):
    r"""Boolean ``(batch, 1, n)`` mask that hides padding tokens as keys.

    Sentence ``b`` holds ``lengths[b]`` real tokens, then ``n - lengths[b]``
    padding tokens; key ``j`` may be attended to when it is a real token:

    .. math:: M_{b,\,j} = \mathrm{True} \iff j < \ell_b

    The middle axis has size 1, so the mask broadcasts over the queries:
    every query, padding queries included, attends to the real tokens only,
    and no row is fully masked. The outputs at padding positions are
    computed but mean nothing; later steps ignore them. A decoder's mask
    is ``padding_mask(lengths, n) & causal_mask(n)``, ``(batch, n, n)``.

    Args:
        lengths: the number of real tokens of each sentence, shape
            ``(batch,)``, whole numbers from 1 to ``n``.
        n: the padded length, the number of tokens of every sentence.

    Returns:
        Boolean array of shape ``(batch, 1, n)``.

    Raises:
        ValueError: if ``n`` is not a positive integer, ``lengths`` is not a
            vector of whole numbers, or a length is below 1 (a sentence
            with no token) or above ``n``.
    """
    n = check_positive_int("n (the padded length)", n)
    lengths = _check_lengths(lengths, n)
    key_positions = np.arange(n)  # (n,)
    is_real = key_positions < lengths[:, None]  # (batch, n): j < length
    return is_real[:, None, :]  # (batch, 1, n): one row for every query


def _check_lengths(lengths, n: int) -> np.ndarray:
    """lengths must be a vector of whole numbers, each from 1 to n."""
    raw = np.asarray(lengths)
    if raw.ndim != 1 or raw.size == 0:
        raise ValueError(
            "lengths must be a vector with one length per sentence, "
            f"got shape {shape_str(raw.shape)}"
        )
    if raw.dtype == np.bool_ or raw.dtype.kind not in "iu":
        raise ValueError(
            f"lengths must be whole numbers (an integer array), "
            f"got dtype {raw.dtype}: {raw.tolist()}"
        )
    for b, length in enumerate(raw.tolist()):
        if length < 1:
            raise ValueError(
                f"lengths[{b}] is {length}: sentence {b} has no real token, "
                "so its queries could attend to nothing"
            )
        if length > n:
            raise ValueError(
                f"lengths[{b}] is {length} but the padded length n is {n}; "
                f"pad every sentence to n >= {length}"
            )
    return raw
