"""Reading a trained model's heads from their weights: which pattern a head follows, and how much
of what it reads actually arrives (the values and ``W_O``, which an attention map does not draw)."""

from __future__ import annotations

import numpy as np

from ..attention import linear
from ..multihead import multi_head_attention
from ..validate import as_real_array, shape_str

SPECIAL_TOKENS = ("[CLS]", "[SEP]")


TEXT_PATTERNS = ("previous token", "next token", "itself", "same word", "[CLS]", "[SEP]")


def pattern_targets(tokens, patterns=TEXT_PATTERNS):
    """For each pattern, the keys each query would read if the head followed that pattern exactly.

    Patterns: ``previous token``, ``next token``, ``itself``, ``same word`` (the other places where the
    query's word piece occurs, special tokens excepted), ``[CLS]`` (the first token), ``[SEP]`` (the
    last), and ``induction``: the token just after an earlier occurrence of the query's token, the
    one that came next last time (``... A B ... A`` reads ``B``; Olsson et al., 2022). The first six,
    the patterns of a text encoder, are the default.

    Returns:
        ``{pattern: targets}`` for the patterns asked for, each a boolean ``(n, n)``: ``targets[i, j]``
        is True when key ``j`` is where query ``i`` looks under that pattern. A row with no True has no
        target (the first token has no previous token).

    Raises:
        ValueError: for fewer than 2 tokens or a pattern not listed above.
    """
    tokens = [str(token) for token in tokens]
    n = len(tokens)
    if n < 2:
        raise ValueError(f"pattern_targets needs at least 2 tokens, got {n}")
    unknown = [p for p in patterns if p not in (*TEXT_PATTERNS, "induction")]
    if unknown:
        raise ValueError(f"unknown pattern(s) {unknown}; "
                         f"the patterns are {', '.join(TEXT_PATTERNS)}, induction")
    index = np.arange(n)
    word = np.array(tokens)
    same = (word[:, None] == word[None, :]) & (index[:, None] != index[None, :])  # (n, n)
    same &= ~np.isin(word, SPECIAL_TOKENS)[:, None]
    first, last = np.zeros((n, n), dtype=bool), np.zeros((n, n), dtype=bool)
    first[:, 0] = True
    last[:, -1] = True
    # key j follows an earlier occurrence (at j - 1) of query i's token
    after_earlier = np.zeros((n, n), dtype=bool)
    after_earlier[:, 1:] = (word[:, None] == word[None, :-1]) & (index[None, :-1] < index[:, None])
    targets = {
        "previous token": index[None, :] == index[:, None] - 1,
        "next token": index[None, :] == index[:, None] + 1,
        "itself": np.eye(n, dtype=bool),
        "same word": same,
        "[CLS]": first,
        "[SEP]": last,
        "induction": after_earlier,
    }
    return {pattern: targets[pattern] for pattern in patterns}


def head_pattern_scores(weights, tokens, patterns=TEXT_PATTERNS):
    r"""How closely each head follows each of the patterns.

    .. math::
        \mathrm{score}_p = \frac{1}{|Q_p|} \sum_{i \in Q_p}
        \sum_{j \in T_p(i)} A_{ij}

    :math:`T_p(i)` are the keys pattern :math:`p` names for query :math:`i`,
    :math:`Q_p` the queries that have any. A score of 1 means every such
    query puts all its weight there; an even spread over ``n`` keys scores
    about :math:`1/n`.

    Args:
        weights: ``(..., n, n)``, e.g. every head of every layer
            ``(L, h, n, n)``.
        tokens: the ``n`` tokens.
        patterns: which patterns of :func:`pattern_targets` to score
            (by default the six of a text encoder).

    Returns:
        ``{pattern: scores}``, scores of shape ``(...)``; NaN where no query
        has a target (``same word`` when no word occurs twice).

    Raises:
        ValueError: if ``weights`` is not ``(..., n, n)`` for ``n`` tokens.
    """
    weights = as_real_array("weights", weights, min_ndim=2)
    n = len(tokens)
    if weights.shape[-2:] != (n, n):
        raise ValueError(f"weights have shape {shape_str(weights.shape)} "
                         f"but there are {n} tokens; "
                         f"expected (..., {n}, {n})")
    scores = {}
    for pattern, targets in pattern_targets(tokens, patterns).items():
        queries = targets.any(axis=1)  # (n,): queries with a target
        on_targets = (weights * targets).sum(axis=-1)  # (..., n)
        scores[pattern] = (on_targets[..., queries].mean(axis=-1)
                           if queries.any()
                           else np.full(weights.shape[:-2], np.nan))
    return scores


def value_output_norms(X, layer):
    r"""The length of what each key hands a query per unit of weight, in each head.

    Head :math:`h` turns key :math:`j`'s value into
    :math:`v^{(h)}_j W_O^{(h)}`, where :math:`W_O^{(h)}` are the rows of
    :math:`W_O` that multiply head :math:`h`'s output; a query that puts
    weight :math:`A^{(h)}_{ij}` on the key receives that vector times the
    weight.

    .. math::
        \lVert v^{(h)}_j\, W_O^{(h)} \rVert

    Args:
        X: the tokens the layer's heads read, ``(n, d_model)``.
        layer: a :class:`qkv.EncoderLayer`.

    Returns:
        ``(h, n)``: entry ``[h, j]`` is the length for key ``j`` in head ``h``.
    """
    attention = layer.self_attention
    lengths, first_row = [], 0
    for head in attention.heads:
        V = linear(X, head.W_V, head.b_V)  # (n, d_v)
        # (d_v, d_model): the rows of W_O for this head
        W_O = attention.W_O[first_row:first_row + head.d_v]
        lengths.append(np.linalg.norm(V @ W_O, axis=-1))  # (n,): |v_j W_O^(h)|
        first_row += head.d_v
    return np.stack(lengths)  # (h, n)


def head_contribution_norms(X, layer):
    r"""The size of what each head moves from key ``j`` into query ``i``.

    Head :math:`h` adds :math:`\sum_j A^{(h)}_{ij}\, v^{(h)}_j W_O^{(h)}` to
    query :math:`i`. A map draws only :math:`A^{(h)}_{ij}`; this measures the
    vector itself (Kobayashi et al., 2020), the weight times
    :func:`value_output_norms`:

    .. math::
        N^{(h)}_{ij} = \big\lVert A^{(h)}_{ij}\; v^{(h)}_j\,
        W_O^{(h)} \big\rVert

    Args:
        X: the tokens the layer's heads read, ``(n, d_model)``.
        layer: a :class:`qkv.EncoderLayer`.

    Returns:
        ``(norms, weights)``, both ``(h, n, n)``.
    """
    _, weights = multi_head_attention(X, *layer.self_attention)  # (h, n, n)
    lengths = value_output_norms(X, layer)  # (h, n): one length per key
    return weights * lengths[:, None, :], weights  # (h, n, n) each
