"""One transformer encoder layer: multi-head attention and a feed-forward network, each added to
the residual stream, with LayerNorm after (BERT) or before (ViT) each of them.

The layer's parameters are held in the course's convention, ``Y = X W + b`` with ``W`` of shape
``(d_in, d_out)``; PyTorch stores ``W^T``, and the loaders of :mod:`qkv.models` transpose it.
"""

from __future__ import annotations

from dataclasses import dataclass, fields

import numpy as np

from ..multihead import Head, fused_multi_head_attention, split_heads
from ..validate import as_matrix, shape_str
from .blocks import feed_forward, layer_norm


@dataclass(frozen=True, eq=False)
class EncoderLayer:
    """The parameters of one encoder layer, as read-only float64 arrays.

    Attention: ``W_Q, W_K, W_V`` ``(d_model, h * d_k)``, ``W_O`` ``(h * d_v, d_model)`` and their
    biases, with ``num_heads`` heads (head ``i`` owns columns ``i*d_k .. (i+1)*d_k - 1``).
    Feed-forward: ``W_1`` ``(d_model, d_ff)``, ``W_2`` ``(d_ff, d_model)`` and their biases.
    LayerNorms: ``norm_1`` goes with attention, ``norm_2`` with the feed-forward network, each a
    ``(gamma, beta)`` pair of shape ``(d_model,)``; ``eps`` is their epsilon.
    """

    W_Q: np.ndarray
    b_Q: np.ndarray
    W_K: np.ndarray
    b_K: np.ndarray
    W_V: np.ndarray
    b_V: np.ndarray
    W_O: np.ndarray
    b_O: np.ndarray
    norm_1_gamma: np.ndarray
    norm_1_beta: np.ndarray
    W_1: np.ndarray
    b_1: np.ndarray
    W_2: np.ndarray
    b_2: np.ndarray
    norm_2_gamma: np.ndarray
    norm_2_beta: np.ndarray
    num_heads: int
    eps: float

    def __post_init__(self):
        freeze_arrays(self)
        d_model = self.W_Q.shape[0]
        for name in ("W_Q", "W_K", "W_V", "W_1"):
            if as_matrix(name, getattr(self, name)).shape[0] != d_model:
                raise ValueError(f"{name} has shape {shape_str(getattr(self, name).shape)}; "
                                 f"every projection of the layer reads d_model={d_model} columns")
        if self.W_Q.shape[1] % self.num_heads:
            raise ValueError(f"W_Q has {self.W_Q.shape[1]} columns, not divisible by num_heads={self.num_heads}")

    @property
    def norm_1(self) -> tuple[np.ndarray, np.ndarray]:
        """``(gamma, beta)`` of the LayerNorm that goes with attention."""
        return self.norm_1_gamma, self.norm_1_beta

    @property
    def norm_2(self) -> tuple[np.ndarray, np.ndarray]:
        """``(gamma, beta)`` of the LayerNorm that goes with the feed-forward network."""
        return self.norm_2_gamma, self.norm_2_beta

    @property
    def ffn(self) -> tuple[np.ndarray, ...]:
        """``(W_1, b_1, W_2, b_2)``, the feed-forward network's parameters."""
        return self.W_1, self.b_1, self.W_2, self.b_2

    @property
    def d_model(self) -> int:
        return self.W_Q.shape[0]

    @property
    def d_k(self) -> int:
        return self.W_Q.shape[1] // self.num_heads

    def heads(self) -> tuple[Head, ...]:
        """The layer's heads one by one, for :func:`qkv.multi_head_attention`: head ``i`` is
        columns ``i*d_k .. (i+1)*d_k - 1`` of ``W_Q, W_K, W_V`` and of their biases."""
        def per_head(name):
            value = getattr(self, name)
            if value.ndim == 1:  # a bias (h * d_k,) -> (h, d_k)
                return value.reshape(self.num_heads, -1)
            return split_heads(value, self.num_heads)  # (d_model, h * d_k) -> (h, d_model, d_k)

        names = ("W_Q", "W_K", "W_V", "b_Q", "b_K", "b_V")
        return tuple(Head(*params) for params in zip(*(per_head(name) for name in names)))


def attention_sublayer(X, layer):
    r"""The layer's multi-head self-attention: the course's fused form.

    .. math::
        \mathrm{MHA}(X) = \mathrm{Concat}(\mathrm{head}^{(1)}, \dots,
        \mathrm{head}^{(h)})\, W_O + b_O

    Args:
        X: the tokens the heads read, ``(..., n, d_model)``.
        layer: an :class:`EncoderLayer`.

    Returns:
        ``(output, weights)``: ``(..., n, d_model)`` and ``(..., h, n, n)``.
    """
    return fused_multi_head_attention(
        X, layer.W_Q, layer.W_K, layer.W_V, layer.W_O, layer.num_heads,
        layer.b_Q, layer.b_K, layer.b_V, layer.b_O)


def post_norm_layer(X, layer):
    r"""One BERT encoder layer: add each sublayer's output, then normalise.

    .. math::
        A = \mathrm{LayerNorm}_1\big(X + \mathrm{MHA}(X)\big), \qquad
        Y = \mathrm{LayerNorm}_2\big(A + \mathrm{FFN}(A)\big)

    Args:
        X: ``(..., n, d_model)``, the output of the layer below.
        layer: an :class:`EncoderLayer`.

    Returns:
        ``(Y, weights)``: ``(..., n, d_model)`` and the heads' weights
        ``(..., h, n, n)``.
    """
    attention, weights = attention_sublayer(X, layer)  # (..., n, d_model)
    A = layer_norm(X + attention, *layer.norm_1, layer.eps)
    Y = layer_norm(A + feed_forward(A, *layer.ffn), *layer.norm_2, layer.eps)
    return Y, weights


def pre_norm_layer(X, layer):
    r"""One ViT encoder layer: each sublayer reads a normalised copy; add.

    .. math::
        A = X + \mathrm{MHA}\big(\mathrm{LayerNorm}_1(X)\big), \qquad
        Y = A + \mathrm{FFN}\big(\mathrm{LayerNorm}_2(A)\big)

    Args:
        X: ``(..., n, d_model)``, the output of the layer below.
        layer: an :class:`EncoderLayer`.

    Returns:
        ``(Y, weights)``: ``(..., n, d_model)`` and the heads' weights
        ``(..., h, n, n)``.
    """
    attention, weights = attention_sublayer(
        layer_norm(X, *layer.norm_1, layer.eps), layer)  # (..., n, d_model)
    A = X + attention
    Y = A + feed_forward(layer_norm(A, *layer.norm_2, layer.eps), *layer.ffn)
    return Y, weights


def run_layers(X, layers, layer_function):
    """Run ``X`` through every layer, keeping each layer's input and output and every head's weights.

    Returns:
        ``(hidden_states, weights)``: ``(L + 1, ..., n, d_model)`` (the input first, then each layer's
        output) and ``(L, ..., h, n, n)``.
    """
    hidden_states, weights = [np.asarray(X, dtype=np.float64)], []
    for layer in layers:
        Y, layer_weights = layer_function(hidden_states[-1], layer)
        hidden_states.append(Y)
        weights.append(layer_weights)
    return np.stack(hidden_states), np.stack(weights)


def read_only(array, dtype=np.float64):
    """A row-major (fast ``X @ W``), read-only copy of ``array``; ``dtype=None`` keeps its type."""
    array = np.array(array, dtype=dtype, order="C")
    array.flags.writeable = False
    return array


def freeze_arrays(instance):
    """Replace every array field of a frozen dataclass by a read-only copy (float64 if it holds floats)."""
    for field in fields(instance):
        value = getattr(instance, field.name)
        if isinstance(value, np.ndarray):
            object.__setattr__(instance, field.name, read_only(value, np.float64 if value.dtype.kind == "f" else None))


def read_safetensors(path):
    """The tensors of a safetensors file as numpy arrays, and the file's metadata (a dict of str).

    Raises:
        ImportError: if the ``safetensors`` package is not installed, saying how to install it.
        FileNotFoundError: if ``path`` does not exist.
    """
    try:
        from safetensors import safe_open
    except ImportError:  # pragma: no cover - installed from requirements.txt
        raise ImportError("reading a trained model needs the safetensors package: "
                          "pip install -r requirements.txt") from None
    with safe_open(str(path), framework="numpy") as file:
        return {name: file.get_tensor(name) for name in file.keys()}, dict(file.metadata() or {})
