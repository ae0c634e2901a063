"""Decoding one token at a time: the key-value cache, and what it costs to keep.

A decoder writes its text one token at a time. Under the causal mask the keys and values of the
earlier tokens never change as the text grows (no earlier output depends on a later token), so
they are kept, in a :class:`KVCache`, and each new token adds one key and one value to it. Step
``t`` is then one query against the ``t`` cached keys (:func:`decode_step`): a ``1 x t``
attention instead of the whole ``t x t`` pass again (:func:`decode_without_cache`).
:func:`decode_with_cache` runs the steps over a sequence; its rows are exactly those of
:func:`qkv.self_attention` under :func:`qkv.causal_mask`.

The cache's memory is :func:`kv_cache_bytes`: ``2 * layers * h_kv * d_k * n * bytes``;
:data:`PUBLISHED_SHAPES` holds the shapes of a few published models, each with its source.
Nothing here imports the course's machinery (``qkv_book``, ``qkv_exercises``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .attention import linear, scaled_dot_product_attention
from .grouped import grouped_query_attention
from .validate import (
    as_real_array,
    check_head_params,
    check_positive_int,
    check_tokens,
    shape_str,
)


@dataclass(frozen=True, eq=False)
class KVCache:
    """The keys and values of the ``t`` tokens decoded so far.

    ``K`` has shape ``(..., t, d_k)`` and ``V`` ``(..., t, d_v)``, one row per token
    in the order they were written (``...``: the key/value heads, and a batch). The
    arrays are stored read-only; :meth:`append` returns a new cache one row longer.
    """

    K: np.ndarray
    V: np.ndarray

    def __post_init__(self):
        K = as_real_array("K", self.K, min_ndim=2)
        V = as_real_array("V", self.V, min_ndim=2)
        if K.shape[:-1] != V.shape[:-1]:
            raise ValueError(
                f"the cache's K has shape {shape_str(K.shape)} and V "
                f"{shape_str(V.shape)}; they need the same leading axes and one "
                "value row per key row"
            )
        for name, value in (("K", K), ("V", V)):
            value = value.copy()
            value.flags.writeable = False
            object.__setattr__(self, name, value)

    @property
    def length(self) -> int:
        """``t``, the number of tokens whose key and value are cached."""
        return self.K.shape[-2]

    def append(self, k, v) -> KVCache:
        """The cache with the new token's key ``k`` ``(..., 1, d_k)`` and value ``v``
        ``(..., 1, d_v)`` added as its last row."""
        k, v = _check_new_row("k", k, self.K), _check_new_row("v", v, self.V)
        K = np.concatenate([self.K, k], axis=-2)  # (..., t + 1, d_k)
        V = np.concatenate([self.V, v], axis=-2)  # (..., t + 1, d_v)
        return KVCache(K, V)


def decode_step(q, k, v, cache=None):
    r"""One decoding step: the new token joins the cache, then its query reads it.

    .. math::
        K_{1:t} = \begin{bmatrix} K_{1:t-1} \\ k_t \end{bmatrix},\quad
        V_{1:t} = \begin{bmatrix} V_{1:t-1} \\ v_t \end{bmatrix},

        o_t = \mathrm{softmax}\!\left(\frac{q_t K_{1:t}^\top}{\sqrt{d_k}}\right)
              V_{1:t}

    The key and value of token ``t`` are added *before* its query attends: a token may
    attend to itself, as the causal mask allows. No mask is needed, since the cache
    holds no later token. With ``h`` query heads over ``g`` cached key/value heads
    (axis -3), query head ``i`` reads cached head ``i // (h / g)``, as in
    :func:`qkv.grouped_query_attention`.

    Args:
        q: the new token's query, shape ``(..., 1, d_k)``; ``(..., h, 1, d_k)`` with
            heads.
        k: its key, shape ``(..., 1, d_k)``; ``(..., g, 1, d_k)`` with heads.
        v: its value, shape ``(..., 1, d_v)``; ``(..., g, 1, d_v)`` with heads.
        cache: the :class:`KVCache` of the ``t - 1`` tokens before it, or None at the
            first token.

    Returns:
        ``(output, weights, cache)``: ``o_t`` of shape ``(..., 1, d_v)``, the
        weights over the ``t`` cached tokens ``(..., 1, t)`` and the cache of ``t``
        tokens.

    Raises:
        ValueError: if ``q``, ``k`` or ``v`` is not one row, or their shapes do not
            fit each other or the cache.
    """
    q = _check_one_row("q", q)
    k, v = _check_one_row("k", k), _check_one_row("v", v)
    cache = KVCache(k, v) if cache is None else _check_cache(cache).append(k, v)
    if q.ndim >= 3 and cache.K.ndim >= 3 and q.shape[-3] != cache.K.shape[-3]:
        # h query heads over g cached key/value heads
        output, weights = grouped_query_attention(q, cache.K, cache.V)
    else:
        output, weights = scaled_dot_product_attention(q, cache.K, cache.V)
    return output, weights, cache  # (..., 1, d_v), (..., 1, t)


def decode_with_cache(X, W_Q, W_K, W_V, b_Q=None, b_K=None, b_V=None):
    r"""One head over ``X`` written token by token, with a key-value cache.

    For ``t = 1, ..., n``: project token ``t`` alone to ``q_t, k_t, v_t`` and take
    :func:`decode_step`. Row ``t`` of the result equals row ``t`` of
    ``self_attention(X, ..., mask=causal_mask(n))``: the same numbers, one step at a
    time.

    .. math:: q_t = x_t W_Q + b_Q,\ k_t = x_t W_K + b_K,\ v_t = x_t W_V + b_V

    Args:
        X: the tokens in the order they are written, shape ``(..., n, d_model)``.
        W_Q, W_K: shape ``(d_model, d_k)``.  W_V: shape ``(d_model, d_v)``.
        b_Q, b_K: shape ``(d_k,)`` or None.  b_V: shape ``(d_v,)`` or None.

    Returns:
        ``(output, weights)``: the outputs ``(..., n, d_v)`` and the weights
        ``(..., n, n)``, row ``t`` holding step ``t``'s weights over tokens ``1..t``
        and 0 for the later ones.

    Raises:
        ValueError: naming the argument whose shape does not fit the others.
    """
    W_Q, W_K, W_V, b_Q, b_K, b_V = check_head_params(W_Q, W_K, W_V, b_Q, b_K, b_V)
    X = check_tokens(X, W_Q.shape[0], "W_Q")
    n = X.shape[-2]
    output = np.empty((*X.shape[:-1], W_V.shape[1]))  # (..., n, d_v)
    weights = np.zeros((*X.shape[:-1], n))  # (..., n, n): the later tokens stay 0
    cache = None
    for t in range(n):
        x_t = X[..., t:t + 1, :]  # (..., 1, d_model): only the new token is projected
        q, k, v = linear(x_t, W_Q, b_Q), linear(x_t, W_K, b_K), linear(x_t, W_V, b_V)
        o_t, a_t, cache = decode_step(q, k, v, cache)
        output[..., t, :], weights[..., t, :t + 1] = o_t[..., 0, :], a_t[..., 0, :]
    return output, weights


def decode_without_cache(X, W_Q, W_K, W_V, b_Q=None, b_K=None, b_V=None):
    r"""The steps of :func:`decode_with_cache`, recomputing everything at every step.

    At step ``t`` the tokens ``1..t`` are projected again and the whole ``t x t``
    causal pass is run, of which only the last row is new. This is what a generator
    without a cache does (the Annotated Transformer's ``greedy_decode``): ``t`` times
    the projections and ``t^2`` scores at step ``t``, against one projection and ``t``
    scores with the cache.

    Args and Returns: as :func:`decode_with_cache`.
    """
    W_Q, W_K, W_V, b_Q, b_K, b_V = check_head_params(W_Q, W_K, W_V, b_Q, b_K, b_V)
    X = check_tokens(X, W_Q.shape[0], "W_Q")
    n = X.shape[-2]
    output = np.empty((*X.shape[:-1], W_V.shape[1]))  # (..., n, d_v)
    weights = np.zeros((*X.shape[:-1], n))  # (..., n, n)
    for t in range(1, n + 1):
        X_t = X[..., :t, :]  # (..., t, d_model): every token so far, again
        Q, K, V = linear(X_t, W_Q, b_Q), linear(X_t, W_K, b_K), linear(X_t, W_V, b_V)
        causal = np.tril(np.ones((t, t), dtype=bool))  # (t, t)
        O_t, A_t = scaled_dot_product_attention(Q, K, V, causal)  # (..., t, d_v), (..., t, t)
        output[..., t - 1, :], weights[..., t - 1, :t] = O_t[..., -1, :], A_t[..., -1, :]
    return output, weights


@dataclass(frozen=True)
class ModelShape:
    """The sizes of a published Transformer that set its key-value cache.

    ``layers``: attention layers; ``heads``: query heads per layer; ``kv_heads``:
    key/value heads per layer (``heads`` for multi-head attention, fewer with
    grouped-query attention); ``d_k``: the width of one head; ``context``: the longest
    input it was trained on, in tokens; ``source``: where the numbers are published.
    """

    name: str
    layers: int
    heads: int
    kv_heads: int
    d_k: int
    context: int
    source: str


#: The shapes of a few published models, by name, each with its source: the numbers that set
#: their key-value caches.
PUBLISHED_SHAPES = {
    "all-MiniLM-L6-v2": ModelShape(
        "all-MiniLM-L6-v2", layers=6, heads=12, kv_heads=12, d_k=32, context=512,
        source="the model's config.json (num_hidden_layers 6, num_attention_heads 12, hidden_size "
               "384, max_position_embeddings 512), the model of the course's trained-model chapter"),
    "Llama 2 7B": ModelShape(
        "Llama 2 7B", layers=32, heads=32, kv_heads=32, d_k=128, context=4096,
        source="Touvron et al. 2023, Llama 2, Table 1 and §2.2 (d_model 4096 = 32 heads x 128)"),
    "Llama 2 70B": ModelShape(
        "Llama 2 70B", layers=80, heads=64, kv_heads=8, d_k=128, context=4096,
        source="Touvron et al. 2023, Llama 2, Table 1 (GQA) and the released config.json "
               "(num_hidden_layers 80, num_attention_heads 64, num_key_value_heads 8, "
               "hidden_size 8192)"),
    "Mistral 7B": ModelShape(
        "Mistral 7B", layers=32, heads=32, kv_heads=8, d_k=128, context=8192,
        source="Jiang et al. 2023, Mistral 7B, Table 1 (n_layers 32, n_heads 32, n_kv_heads 8, "
               "head_dim 128, window_size 4096, context_len 8192)"),
}


def kv_cache_bytes(layers, kv_heads, d_k, n, bytes_per_number=2, batch=1):
    r"""The memory of a key-value cache: a key and a value per token, head and layer.

    .. math:: \text{bytes} = 2 \cdot L \cdot h_{kv} \cdot d_k \cdot n \cdot b \cdot B

    (the 2 counts the keys and the values; ``b`` bytes per number, ``B`` sequences).

    Args:
        layers: ``L``, the attention layers.
        kv_heads: ``h_kv``, the key/value heads per layer.
        d_k: the width of one key (and one value).
        n: the tokens cached per sequence.
        bytes_per_number: ``b``: 2 for 16-bit numbers (the usual case), 4 for float32.
        batch: ``B``, the sequences decoded at once.

    Returns:
        The number of bytes, an int.

    Raises:
        ValueError: if an argument is not a positive whole number.
    """
    counts = {"layers": layers, "kv_heads": kv_heads, "d_k": d_k, "n": n,
              "bytes_per_number": bytes_per_number, "batch": batch}
    checked = [check_positive_int(name, value) for name, value in counts.items()]
    return 2 * int(np.prod(checked, dtype=object))


def _check_one_row(name: str, row) -> np.ndarray:
    """A query, key or value of the one new token: shape (..., 1, d)."""
    row = as_real_array(name, row, min_ndim=2)
    if row.shape[-2] != 1:
        raise ValueError(
            f"{name} has shape {shape_str(row.shape)}, {row.shape[-2]} rows; a decoding step "
            f"takes the one new token's {name}, shape (..., 1, d)"
        )
    return row


def _check_new_row(name: str, row, cached: np.ndarray) -> np.ndarray:
    """The new token's key or value must be one row that fits the cached ones."""
    row = _check_one_row(name, row)
    if row.shape[:-2] != cached.shape[:-2] or row.shape[-1] != cached.shape[-1]:
        raise ValueError(
            f"{name} has shape {shape_str(row.shape)} but the cache holds rows of shape "
            f"{shape_str((*cached.shape[:-2], 1, cached.shape[-1]))}; the new row needs the "
            "cache's leading axes and width"
        )
    return row


def _check_cache(cache) -> KVCache:
    if not isinstance(cache, KVCache):
        raise TypeError(f"cache must be a KVCache (or None at the first token), got "
                        f"{type(cache).__name__}")
    return cache
