"""Cheaper patterns of attention: masks that keep a few keys per query, and how far a token can reach.

Full attention compares every query with every key, ``n^2`` pairs. A *pattern* keeps fewer: a
sliding window of nearby keys (:func:`sliding_window_mask`: Longformer, Mistral), every
``stride``-th key (:func:`strided_mask`: the Sparse Transformer), or a few global tokens that
see and are seen by every token (:func:`global_tokens_mask`: Longformer, BigBird). They are
masks like :func:`qkv.causal_mask` (boolean, True = may attend) and combine with ``&`` (both
allow) and ``|`` (either allows). What a pattern gives up is reach: :func:`path_length` counts
the layers after which the last token's output can depend on the first token.
"""

from __future__ import annotations

import numpy as np

from .validate import check_positive_int, shape_str


def sliding_window_mask(n, window):
    r"""Boolean ``(n, n)`` mask: query ``i`` may attend to the keys ``|i - j| < w``.

    .. math:: M_{ij} = \mathrm{True} \iff \lvert i - j \rvert < w

    Alone it keeps ``2w - 1`` keys around each query (fewer at the ends). With the
    causal mask, ``sliding_window_mask(n, w) & causal_mask(n)``, query ``i`` keeps
    keys ``i - w + 1 .. i``: itself and the ``w - 1`` before it, ``w`` keys, so a
    decoder's cache needs only its last ``w`` entries (Mistral 7B: ``w = 4096``).

    Args:
        n: the number of tokens.
        window: ``w``, a positive integer; ``w = 1`` keeps only the diagonal,
            ``w >= n`` every pair.

    Returns:
        Boolean array of shape ``(n, n)``.

    Raises:
        ValueError: if ``n`` or ``window`` is not a positive integer.
    """
    n = check_positive_int("n (the number of tokens)", n)
    window = check_positive_int("window", window)
    positions = np.arange(n)
    distance = np.abs(positions[:, None] - positions[None, :])  # (n, n): |i - j|
    return distance < window


def strided_mask(n, stride):
    r"""Boolean ``(n, n)`` mask: token ``i`` may attend to every ``stride``-th token.

    .. math:: M_{ij} = \mathrm{True} \iff (i - j) \bmod s = 0

    The Sparse Transformer's strided pattern (Child et al. 2019) gives one head
    ``sliding_window_mask(n, s)`` and another this mask, both under the causal mask:
    in two steps any earlier token is within reach, with at most ``s + n / s`` keys
    per query in place of ``n``; ``s`` near :math:`\sqrt n` makes that
    :math:`O(n\sqrt n)` pairs in all.

    Args:
        n: the number of tokens.
        stride: ``s``, a positive integer.

    Returns:
        Boolean array of shape ``(n, n)``; the diagonal is always True.

    Raises:
        ValueError: if ``n`` or ``stride`` is not a positive integer.
    """
    n = check_positive_int("n (the number of tokens)", n)
    stride = check_positive_int("stride", stride)
    positions = np.arange(n)
    return (positions[:, None] - positions[None, :]) % stride == 0  # (n, n)


def global_tokens_mask(n, tokens):
    r"""Boolean ``(n, n)`` mask: global tokens see, and are seen by, every token.

    .. math:: M_{ij} = \mathrm{True} \iff i \in G \ \text{or}\ j \in G

    Combined with a window, ``sliding_window_mask(n, w) | global_tokens_mask(n, G)``,
    it is Longformer's pattern: a few tokens (a ``[CLS]``, a question) with a global
    view, every other token with a local one.

    Args:
        n: the number of tokens.
        tokens: the positions of the global tokens ``G``, whole numbers from 0 to
            ``n - 1``.

    Returns:
        Boolean array of shape ``(n, n)``.

    Raises:
        ValueError: if ``n`` is not a positive integer, ``tokens`` is empty or a
            position lies outside ``0 .. n - 1``.
    """
    n = check_positive_int("n (the number of tokens)", n)
    G = np.asarray(tokens)
    if G.ndim != 1 or G.size == 0 or G.dtype == np.bool_ or G.dtype.kind not in "iu":
        raise ValueError(f"tokens must be a non-empty vector of positions (whole "
                         f"numbers), got {np.asarray(tokens).tolist()!r}")
    outside = G[(G < 0) | (G >= n)]
    if outside.size:
        raise ValueError(f"tokens holds position {int(outside[0])}, outside "
                         f"0 .. {n - 1}")
    is_global = np.zeros(n, dtype=bool)
    is_global[G] = True
    return is_global[:, None] | is_global[None, :]  # (n, n)


def path_length(mask):
    r"""The fewest layers with this mask after which the last token reads the first.

    One layer lets information pass from key ``j`` to query ``i`` where ``M_ij``
    holds; ``L`` layers where the boolean product :math:`M^L` holds. The result is the
    smallest ``L`` with :math:`(M^L)_{n-1,\,0}` True: 1 for full attention, about
    ``n / (w - 1)`` for a sliding window of ``w``, and ``n - 1`` for ``w = 2``, the
    reach of a recurrent layer, which passes one step per token.

    Args:
        mask: boolean ``(n, n)``, True = may attend, with a True diagonal (every token
            keeps what it has, as a residual connection does).

    Returns:
        The number of layers, an int.

    Raises:
        ValueError: if ``mask`` is not a square boolean matrix with a True diagonal,
            or the last token never reaches the first.
    """
    M = _check_square_mask(mask)
    n = M.shape[0]
    reached = M[n - 1].copy()  # (n,): the tokens the last one reads after one layer
    newest, layers = reached.copy(), 1
    while not reached[0]:
        # one layer more: what the newly reached tokens read (the rest were followed)
        newest = M[newest].any(axis=0) & ~reached  # (n,)
        if not newest.any():
            raise ValueError("the last token never reaches the first through this "
                             "mask, however many layers: no chain of allowed pairs "
                             "joins them")
        reached |= newest
        layers += 1
    return layers


def _check_square_mask(mask) -> np.ndarray:
    M = np.asarray(mask)
    if M.dtype != np.bool_:
        raise TypeError(f"mask must be boolean (True = may attend), got dtype {M.dtype}")
    if M.ndim != 2 or M.shape[0] != M.shape[1]:
        raise ValueError(f"mask must be square (n, n), got shape {shape_str(M.shape)}")
    if not M.diagonal().all():
        i = int(np.argmin(M.diagonal()))
        raise ValueError(f"mask[{i}, {i}] is False; path_length needs every token to keep its "
                         "own position, as a residual connection does")
    return M
