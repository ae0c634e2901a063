"""Position in the scores: ALiBi's linear biases, T5's relative buckets, and RoPE's long-term decay.

:mod:`qkv.position` puts position into the token vectors (sinusoidal, learned) or rotates the
queries and keys (RoPE). The methods here leave the vectors alone and add a number to each score
that depends on how far apart the query and the key stand:

- ALiBi (Press et al. 2022): head ``h`` adds ``-m_h |i - j|``, a fixed penalty that grows with
  the distance, with the slopes ``m_h`` of :func:`alibi_slopes`; :func:`alibi_bias`.
- T5 (Raffel et al. 2020): a learned number per head and per *bucket* of offsets, exact for near
  offsets and logarithmic for far ones; :func:`relative_position_bucket`, :func:`t5_position_bias`.

:func:`attention_with_bias` adds such a bias to the scaled scores. :func:`rope_decay_bound` is
RoFormer's bound on how much a rotated score can keep at a distance (Su et al. 2021, §3.4.3).
"""

from __future__ import annotations

import math

import numpy as np

from .attention import _check_qkv, softmax
from .validate import as_mask, as_real_array, check_positive_int, shape_str


def alibi_slopes(h):
    r"""ALiBi's slope of each of ``h`` heads: a geometric sequence, as in the paper.

    For ``h`` a power of two the slopes start at :math:`2^{-8/h}` and each is that
    much smaller than the one before:

    .. math:: m_k = 2^{-8k/h}, \qquad k = 1, \dots, h

    (8 heads: 1/2, 1/4, ..., 1/256). For other ``h`` the paper's code takes the slopes
    of the largest power of two :math:`p < h`, then every other slope of :math:`2p`
    heads (the ones that fall between them), the first :math:`h - p` of those.

    Args:
        h: the number of heads, a positive integer.

    Returns:
        Array of shape ``(h,)``, every slope in (0, 1).

    Raises:
        ValueError: if ``h`` is not a positive integer.
    """
    h = check_positive_int("h (the number of heads)", h)
    p = 2 ** int(math.floor(math.log2(h)))  # the largest power of two <= h
    slopes = 2.0 ** (-8.0 * np.arange(1, p + 1) / p)  # (p,)
    if p == h:
        return slopes
    # (p,): the odd-numbered slopes of 2p heads, which fall between those of p
    between = 2.0 ** (-8.0 * np.arange(1, 2 * p + 1, 2) / (2 * p))
    return np.concatenate([slopes, between[: h - p]])  # (h,)


def alibi_bias(slopes, n_q, n_k=None):
    r"""ALiBi's bias of every head: minus the slope times the query-key distance.

    .. math:: B^{(h)}_{ij} = -\,m_h\, \lvert p_i - j \rvert,
              \qquad p_i = n_k - n_q + i

    The queries are the last ``n_q`` of the ``n_k`` positions (``p_i = i`` when
    ``n_q = n_k``; one query at position ``n_k - 1`` in a decoding step). The nearer a
    key, the smaller the penalty; a key at the query's own position gets 0. Under a
    causal mask only ``j <= p_i`` counts, where the bias is ``-m_h (p_i - j)``, the
    paper's form.

    Args:
        slopes: one slope per head, shape ``(h,)``, positive (see
            :func:`alibi_slopes`).
        n_q: the number of queries.
        n_k: the number of keys, at least ``n_q``; None means ``n_q``.

    Returns:
        Array of shape ``(h, n_q, n_k)``, every entry <= 0, added to the scaled scores
        (:func:`attention_with_bias`).

    Raises:
        ValueError: if ``slopes`` is not a vector of positive numbers, or ``n_q``,
            ``n_k`` are not positive integers with ``n_q <= n_k``.
    """
    slopes = _check_slopes(slopes)
    n_q = check_positive_int("n_q", n_q)
    n_k = n_q if n_k is None else check_positive_int("n_k", n_k)
    if n_q > n_k:
        raise ValueError(f"n_q={n_q} queries but n_k={n_k} keys: the queries are the "
                         "last n_q of the n_k positions, so n_q <= n_k")
    query_positions = np.arange(n_k - n_q, n_k)  # (n_q,)
    key_positions = np.arange(n_k)  # (n_k,)
    distance = np.abs(query_positions[:, None] - key_positions[None, :])  # (n_q, n_k)
    return slopes[:, None, None] * -distance  # (h, n_q, n_k); 0, not -0, at j = p_i


def attention_with_bias(Q, K, V, bias, mask=None):
    r"""Scaled dot-product attention with a bias added to every scaled score.

    .. math::
        \mathrm{Attention}(Q, K, V; B)
        = \mathrm{softmax}\!\left(\frac{Q K^\top}{\sqrt{d_k}} + B\right) V

    ``B`` carries position (ALiBi, T5); a mask still blocks what it blocks.

    Args:
        Q: queries, shape ``(..., n_q, d_k)``.
        K: keys, shape ``(..., n_k, d_k)``.
        V: values, shape ``(..., n_k, d_v)``.
        bias: finite numbers broadcastable to ``(..., n_q, n_k)``; per head
            ``(h, n_q, n_k)``.
        mask: optional boolean array broadcastable to ``(..., n_q, n_k)``, True = may
            attend.

    Returns:
        ``(output, weights)`` with shapes ``(..., n_q, d_v)`` and ``(..., n_q, n_k)``.

    Raises:
        ValueError: as :func:`qkv.scaled_dot_product_attention`, or if ``bias`` does
            not broadcast to the scores.
        TypeError: if ``mask`` is not boolean.
    """
    Q, K, V = _check_qkv(Q, K, V)
    scores = Q @ K.swapaxes(-1, -2) / np.sqrt(Q.shape[-1])  # (..., n_q, n_k)
    bias = as_real_array("bias", bias)
    try:
        scores = scores + bias  # (..., n_q, n_k)
    except ValueError:
        raise ValueError(f"bias has shape {shape_str(bias.shape)} but the scores "
                         f"have shape {shape_str(scores.shape)} (..., n_q, n_k); the "
                         "bias must broadcast to them") from None
    if mask is not None:
        scores = np.where(as_mask(mask, scores.shape), scores, -np.inf)
    weights = softmax(scores, axis=-1)  # (..., n_q, n_k)
    return weights @ V, weights


def relative_position_bucket(relative_position, bidirectional=True, num_buckets=32,
                             max_distance=128):
    r"""T5's bucket of each offset ``j - i`` (key position minus query position).

    Near offsets get a bucket each; farther ones share buckets whose widths grow
    logarithmically up to ``max_distance``, and every offset beyond it shares the last
    bucket. With ``bidirectional`` the buckets are halved between keys before the
    query and keys after it (an encoder); without it, keys after the query all fall in
    bucket 0 (a decoder, whose mask blocks them anyway). With ``N`` buckets per
    direction and ``N_e = N / 2`` exact ones, a distance ``r >= 0`` falls in

    .. math:: b(r) = \begin{cases} r & r < N_e \\
        \min\!\Big(N - 1,\ N_e + \Big\lfloor \dfrac{\log(r / N_e)}{\log(D / N_e)}
        (N - N_e) \Big\rfloor\Big) & r \ge N_e \end{cases}

    with ``D = max_distance`` (plus ``N`` for keys after the query, when
    bidirectional).

    Args:
        relative_position: whole numbers ``j - i``, any shape.
        bidirectional: True for an encoder (offsets of both signs), False for a
            decoder.
        num_buckets: the buckets in all, even when bidirectional; 32 in T5.
        max_distance: the distance from which on every offset shares one bucket; 128
            in T5.

    Returns:
        Integer array of the shape of ``relative_position``, from 0 to
        ``num_buckets - 1``.

    Raises:
        ValueError: if the offsets are not whole numbers, ``num_buckets`` is too small
            for its exact and logarithmic halves, or ``max_distance`` does not lie
            beyond the exact ones.
    """
    offsets = _check_offsets(relative_position)
    num_buckets = check_positive_int("num_buckets", num_buckets)
    max_distance = check_positive_int("max_distance", max_distance)
    buckets = np.zeros(offsets.shape, dtype=np.int64)
    if bidirectional:
        num_buckets = _check_bucket_count(num_buckets, per_direction=2)
        buckets += (offsets > 0) * num_buckets  # keys after the query: the upper half
        distance = np.abs(offsets)
    else:
        num_buckets = _check_bucket_count(num_buckets, per_direction=1)
        distance = np.maximum(-offsets, 0)  # keys after the query count as distance 0
    exact = num_buckets // 2
    if max_distance <= exact:
        raise ValueError(f"max_distance={max_distance} must exceed the {exact} exact "
                         "buckets")
    far = np.maximum(distance, exact)  # (...): log of the far distances only
    # float32, as T5 and its ports compute it: a boundary offset's floor depends on it
    logarithmic = exact + (np.log(far.astype(np.float32) / np.float32(exact))
                           / np.float32(math.log(max_distance / exact))
                           * np.float32(num_buckets - exact)).astype(np.int64)
    logarithmic = np.minimum(logarithmic, num_buckets - 1)
    return buckets + np.where(distance < exact, distance, logarithmic)


def t5_position_bias(table, n_q, n_k=None, bidirectional=True, max_distance=128):
    r"""T5's bias of every head: the learned number of each offset's bucket.

    .. math:: B^{(h)}_{ij} = T_{\,b(j - i),\ h}

    with ``b`` from :func:`relative_position_bucket`. The queries are the last ``n_q``
    of the ``n_k`` positions, as in :func:`alibi_bias`. T5 shares one table across its
    layers and learns it with the rest of the model.

    Args:
        table: the learned biases, shape ``(num_buckets, h)``.
        n_q: the number of queries.
        n_k: the number of keys, at least ``n_q``; None means ``n_q``.
        bidirectional, max_distance: as :func:`relative_position_bucket`.

    Returns:
        Array of shape ``(h, n_q, n_k)``.

    Raises:
        ValueError: if ``table`` is not a matrix, or the sizes are not as
            :func:`relative_position_bucket` and :func:`alibi_bias` need.
    """
    table = as_real_array("table", table, min_ndim=2)
    if table.ndim != 2:
        raise ValueError(f"table must be (num_buckets, h), got shape "
                         f"{shape_str(table.shape)}")
    n_q = check_positive_int("n_q", n_q)
    n_k = n_q if n_k is None else check_positive_int("n_k", n_k)
    if n_q > n_k:
        raise ValueError(f"n_q={n_q} queries but n_k={n_k} keys; n_q <= n_k")
    query_positions = np.arange(n_k - n_q, n_k)  # (n_q,)
    offsets = np.arange(n_k)[None, :] - query_positions[:, None]  # (n_q, n_k): j - i
    buckets = relative_position_bucket(offsets, bidirectional, table.shape[0],
                                       max_distance)  # (n_q, n_k)
    return np.moveaxis(table[buckets], -1, 0)  # (n_q, n_k, h) -> (h, n_q, n_k)


def rope_decay_bound(offsets, d, base=10000.0):
    r"""RoFormer's relative upper bound of a rotated score at each offset (§3.4.3).

    Writing the score of a rotated query and key as a sum over the ``d/2`` pairs of
    :math:`h_i\, e^{\mathrm{i}\, t\,\omega_i}` (``t`` the offset) and summing by
    parts, its size is at most :math:`\max_i |h_{i+1} - h_i|` times
    :math:`\sum_j |S_j|`, with the partial sums
    :math:`S_j = \sum_{k < j} e^{\mathrm{i}\, t\,\omega_k}`. The relative bound

    .. math:: \frac{1}{d/2} \sum_{j=1}^{d/2} \Big\lvert \sum_{k=0}^{j-1}
              e^{\mathrm{i}\, t\, \omega_k} \Big\rvert ,
              \qquad \omega_k = \mathrm{base}^{-2k/d}

    is ``(d/2 + 1) / 2`` at ``t = 0`` and shrinks, with ripples, as ``|t|`` grows: far
    keys can score less.

    Args:
        offsets: the offsets ``t``, shape ``(n,)``.
        d: the rotated width, even.
        base: greater than 1; 10000 in RoPE.

    Returns:
        Array of shape ``(n,)``.

    Raises:
        ValueError: if ``offsets`` is not a vector of finite numbers, ``d`` not a
            positive even integer, or ``base`` not greater than 1.
    """
    from .position import position_angles  # the angles t w_k that RoPE turns by

    angles = position_angles(offsets, d, base)  # (n, d/2): t w_k
    partial_sums = np.cumsum(np.exp(1j * angles), axis=-1)  # (n, d/2): S_1 .. S_{d/2}
    return np.abs(partial_sums).mean(axis=-1)  # (n,)


def _check_slopes(slopes) -> np.ndarray:
    slopes = as_real_array("slopes", slopes)
    if slopes.ndim != 1:
        raise ValueError(f"slopes must be a vector, one slope per head (h,), got shape "
                         f"{shape_str(slopes.shape)}")
    if (slopes <= 0).any():
        k = int(np.argmax(slopes <= 0))
        raise ValueError(f"slopes[{k}] is {slopes[k]}; ALiBi's slopes are positive (the bias "
                         "-m |i - j| is a penalty that grows with the distance)")
    return slopes


def _check_offsets(relative_position) -> np.ndarray:
    raw = np.asarray(relative_position)
    if raw.dtype == np.bool_ or raw.dtype.kind not in "iu":
        if raw.dtype.kind == "f" and np.isfinite(raw).all() and (raw == np.round(raw)).all():
            return raw.astype(np.int64)
        raise ValueError(f"relative_position must hold whole numbers (offsets j - i), got dtype "
                         f"{raw.dtype}")
    return raw.astype(np.int64)


def _check_bucket_count(num_buckets: int, per_direction: int) -> int:
    """The buckets of one direction: at least 2 (one exact and one logarithmic)."""
    if num_buckets % per_direction or num_buckets // per_direction < 2:
        need = "an even number, at least 4" if per_direction == 2 else "at least 2"
        raise ValueError(f"num_buckets={num_buckets}: {need} (half exact, half logarithmic"
                         f"{', in each direction' if per_direction == 2 else ''})")
    return num_buckets // per_direction
