"""The block around attention: layer normalisation, the feed-forward layer, residual connections,
and the encoder and decoder blocks they make with multi-head attention.

A block keeps the width ``d_model`` of its tokens: ``(..., n, d_model)`` in, the same shape out,
so that blocks can be stacked. Two orders are in use (``norm_first``):

- post-LN (the original Transformer, BERT): ``x <- LayerNorm(x + Sublayer(x))``;
- pre-LN (GPT-2, ViT, T5, LLaMA): ``x <- x + Sublayer(LayerNorm(x))``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from .attention import cross_attention, linear
from .multihead import Head, _check_heads_and_output, _check_multi_head, check_equal_slices, multi_head_attention
from .validate import (as_bias, as_matrix, as_positive_number, as_real_array, check_head_params, check_tokens,
                       shape_str)

ACTIVATIONS = ("relu", "gelu")


def layer_norm(X, gamma, beta, eps=1e-5):
    r"""Normalise each token to mean 0 and variance 1, then scale and shift.

    .. math::
        \mu = \frac{1}{d}\sum_c x_c, \qquad
        \sigma^2 = \frac{1}{d}\sum_c (x_c - \mu)^2,

        \mathrm{LN}(x)_c
        = \gamma_c\,\frac{x_c - \mu}{\sqrt{\sigma^2 + \varepsilon}} + \beta_c

    The mean and the variance are taken over the ``d = d_model`` features of
    one token, never over tokens or over a batch, so every token is
    normalised on its own. The variance divides by ``d`` (not ``d - 1``), as
    ``torch.nn.LayerNorm`` does.

    Args:
        X: token vectors, shape ``(..., n, d_model)``; rows are normalised.
        gamma: scale, shape ``(d_model,)``.
        beta: shift, shape ``(d_model,)``.
        eps: a small positive number: a constant row divides by it, not by 0.

    Returns:
        Array of the shape of ``X``.

    Raises:
        ValueError: if ``gamma`` or ``beta`` does not have one entry per
            feature, or if ``eps`` is not a positive number.
    """
    X = as_real_array("X", X)
    gamma, beta = _check_norm(gamma, beta, X.shape[-1], "X")
    eps = as_positive_number("eps", eps)
    mean = X.mean(axis=-1, keepdims=True)  # (..., n, 1)
    variance = ((X - mean) ** 2).mean(axis=-1, keepdims=True)  # (..., n, 1)
    return gamma * (X - mean) / np.sqrt(variance + eps) + beta  # like X


def _check_norm(gamma, beta, width: int, what: str):
    """gamma and beta must each be a row of ``width`` numbers (the features of ``what``)."""
    gamma = as_real_array("gamma", gamma)
    beta = as_real_array("beta", beta)
    for name, value in (("gamma", gamma), ("beta", beta)):
        if value.shape != (width,):
            raise ValueError(
                f"{name} has shape {shape_str(value.shape)} but {what} has {width} features; "
                f"{name} must have shape ({width},)"
            )
    return gamma, beta


def relu(x):
    r"""The rectified linear unit, entry by entry: :math:`\mathrm{ReLU}(x) = \max(0, x)`."""
    return np.maximum(as_real_array("x", x), 0.0)


def _erf(z: np.ndarray) -> np.ndarray:
    """erf entry by entry: SciPy's (vectorised) where it is installed, as it is with the book's and the
    tests' packages; else :func:`math.erf` on each entry, the same values (to a unit in the last place)
    about eight times slower (the trained models' feed-forward layers compute millions of them)."""
    try:
        from scipy.special import erf
    except ImportError:
        return np.vectorize(math.erf, otypes=[float])(z)
    return erf(z)


def gelu(x):
    r"""The Gaussian error linear unit, entry by entry, in its exact form.

    .. math::
        \mathrm{GELU}(x) = x\,\Phi(x)
        = \frac{x}{2}\Big(1 + \mathrm{erf}\big(x / \sqrt 2\big)\Big)

    :math:`\Phi` is the standard normal distribution function: a positive
    input passes almost unchanged, a negative one is scaled down smoothly
    towards 0.
    BERT and ViT use this form; ``torch.nn.functional.gelu`` computes it too.
    """
    x = as_real_array("x", x)
    return 0.5 * x * (1.0 + _erf(x / math.sqrt(2.0)))


def feed_forward(X, W_1, b_1, W_2, b_2, activation="relu"):
    r"""The position-wise feed-forward layer: linear, nonlinearity, linear.

    .. math::
        \mathrm{FFN}(x) = \phi(x W_1 + b_1)\, W_2 + b_2,
        \qquad \phi = \mathrm{ReLU}\ \text{or}\ \mathrm{GELU}

    "Position-wise": the same two maps are applied to every token on its own;
    tokens exchange nothing here (that is attention's job).

    Args:
        X: token vectors, shape ``(..., n, d_model)``.
        W_1: shape ``(d_model, d_ff)``; b_1: shape ``(d_ff,)`` or None.
        W_2: shape ``(d_ff, d_model)``; b_2: shape ``(d_model,)`` or None.
        activation: ``"relu"`` (the original Transformer, T5) or ``"gelu"``
            (BERT, GPT-2, ViT).

    Returns:
        Array of shape ``(..., n, d_model)`` (the columns of ``W_2``).

    Raises:
        ValueError: if a shape does not fit (naming both), or ``activation``
            is not one of the two.
    """
    W_1, b_1, W_2, b_2, activation = _check_feed_forward(
        W_1, b_1, W_2, b_2, activation)
    X = check_tokens(X, W_1.shape[0], "W_1")
    hidden = linear(X, W_1, b_1)  # (..., n, d_ff)
    if activation == "relu":
        hidden = relu(hidden)  # (..., n, d_ff)
    else:
        hidden = gelu(hidden)  # (..., n, d_ff)
    return linear(hidden, W_2, b_2)  # (..., n, d_model)


def _check_feed_forward(W_1, b_1, W_2, b_2, activation):
    """W_1 (d_model, d_ff), W_2 (d_ff, d_out), their biases, and a known activation."""
    if activation not in ACTIVATIONS:
        known = ", ".join(map(repr, ACTIVATIONS))
        raise ValueError(f"activation must be one of {known}, got {activation!r}")
    W_1, W_2 = as_matrix("W_1", W_1), as_matrix("W_2", W_2)
    if W_2.shape[0] != W_1.shape[1]:
        raise ValueError(
            f"W_1 has d_ff={W_1.shape[1]} columns but W_2 has {W_2.shape[0]} rows "
            f"(W_1 {shape_str(W_1.shape)}, W_2 {shape_str(W_2.shape)}); "
            "the hidden layer must fit both"
        )
    b_1 = as_bias("b_1", b_1, W_1.shape[1], "W_1")
    b_2 = as_bias("b_2", b_2, W_2.shape[1], "W_2")
    return W_1, b_1, W_2, b_2, activation


def multi_head_cross_attention(X, memory, heads, W_O, b_O=None, mask=None):
    r"""Multi-head attention of the tokens ``X`` over the tokens ``memory``.

    .. math::
        Q^{(i)} = X W_Q^{(i)} + b_Q^{(i)}

        K^{(i)} = M W_K^{(i)} + b_K^{(i)},\ \text{likewise } V^{(i)}

        \mathrm{head}^{(i)} = \mathrm{Attention}(Q^{(i)}, K^{(i)}, V^{(i)})

        Y = \mathrm{Concat}\big(\mathrm{head}^{(1)}, \dots,
        \mathrm{head}^{(h)}\big)\, W_O + b_O

    In a decoder block ``X`` holds the ``n_q`` tokens being produced and
    ``memory`` (``M``) the encoder's ``n_k`` output tokens. With
    ``memory = X`` this is :func:`qkv.multi_head_attention`.

    Args:
        X: the queries' tokens, shape ``(..., n_q, d_model)``.
        memory: the keys' and values' tokens, shape ``(..., n_k, d_model)``.
        heads, W_O, b_O: as in :func:`qkv.multi_head_attention`.
        mask: optional boolean ``(..., n_q, n_k)``, True = may attend;
            shared by all heads.

    Returns:
        ``(Y, weights)`` with shapes ``(..., n_q, d_out)`` and
        ``(..., h, n_q, n_k)``.

    Raises:
        ValueError: if ``memory`` does not have the ``d_model`` the heads
            read, or as :func:`qkv.multi_head_attention` does.
    """
    heads, W_O, b_O = _check_multi_head(X, heads, W_O, b_O)
    memory = _check_memory(memory, heads)
    outputs, weights = [], []
    for head in heads:
        output, head_weights = cross_attention(X, memory, *head, mask=mask)
        outputs.append(output)  # (..., n_q, d_v)
        weights.append(head_weights)  # (..., n_q, n_k)
    concat = np.concatenate(outputs, axis=-1)  # (..., n_q, h * d_v)
    Y = linear(concat, W_O, b_O)  # (..., n_q, d_out)
    return Y, np.stack(weights, axis=-3)  # (..., h, n_q, n_k)


def _check_memory(memory, heads):
    """The encoder's output must be (..., n_k, d_model) with the d_model the heads' W_K reads."""
    memory = as_real_array("memory", memory, min_ndim=2)
    if memory.shape[-1] != heads[0].d_model:
        raise ValueError(
            f"memory has d_model={memory.shape[-1]} (shape {shape_str(memory.shape)}) but the "
            f"heads' W_K has {heads[0].d_model} rows; keys and values are projected from memory "
            "with W_K and W_V"
        )
    return memory


def _read_only(value):
    """A private, read-only copy of a parameter array (None stays None)."""
    if value is None:
        return None
    value = np.array(value, dtype=float)
    value.flags.writeable = False
    return value


@dataclass(frozen=True, eq=False)
class LayerNorm:
    """A layer norm's parameters: ``gamma`` and ``beta``, each of shape ``(d_model,)``, and ``eps``.

    Unpacks in the order of :func:`layer_norm`'s parameters: ``layer_norm(X, *norm)``.
    The arrays are stored read-only.
    """

    gamma: np.ndarray
    beta: np.ndarray
    eps: float = 1e-5

    def __post_init__(self):
        gamma = as_real_array("gamma", self.gamma)
        if gamma.ndim != 1:
            raise ValueError(f"gamma must be a vector (d_model,), got {shape_str(gamma.shape)}")
        gamma, beta = _check_norm(gamma, self.beta, gamma.shape[0], "gamma")
        object.__setattr__(self, "eps", as_positive_number("eps", self.eps))
        object.__setattr__(self, "gamma", _read_only(gamma))
        object.__setattr__(self, "beta", _read_only(beta))

    def __iter__(self):
        return iter((self.gamma, self.beta, self.eps))

    @property
    def d_model(self) -> int:
        return self.gamma.shape[0]

    @classmethod
    def identity(cls, d_model: int) -> "LayerNorm":
        """``gamma = 1``, ``beta = 0``: the values a layer norm starts training with."""
        return cls(np.ones(d_model), np.zeros(d_model))


@dataclass(frozen=True, eq=False)
class FeedForward:
    """A feed-forward layer's parameters: ``W_1`` ``(d_model, d_ff)``, ``b_1`` ``(d_ff,)``,
    ``W_2`` ``(d_ff, d_model)``, ``b_2`` ``(d_model,)`` and the ``activation``.

    Unpacks in the order of :func:`feed_forward`'s parameters: ``feed_forward(X, *ffn)``.
    """

    W_1: np.ndarray
    b_1: np.ndarray | None
    W_2: np.ndarray
    b_2: np.ndarray | None
    activation: str = "relu"

    def __post_init__(self):
        checked = _check_feed_forward(self.W_1, self.b_1, self.W_2, self.b_2, self.activation)
        for name, value in zip(("W_1", "b_1", "W_2", "b_2"), checked[:4]):
            object.__setattr__(self, name, _read_only(value))

    def __iter__(self):
        return iter((self.W_1, self.b_1, self.W_2, self.b_2, self.activation))

    @property
    def d_model(self) -> int:
        return self.W_1.shape[0]

    @property
    def d_ff(self) -> int:
        return self.W_1.shape[1]


@dataclass(frozen=True, eq=False)
class MultiHead:
    """A multi-head attention layer's parameters: ``h`` :class:`Head`, ``W_O`` ``(h * d_v, d_out)``
    and ``b_O`` ``(d_out,)``.

    Unpacks in the order of :func:`qkv.multi_head_attention`'s parameters:
    ``multi_head_attention(X, *attention)``.
    """

    heads: tuple[Head, ...]
    W_O: np.ndarray
    b_O: np.ndarray | None = None

    def __post_init__(self):
        heads, W_O, b_O = _check_heads_and_output(self.heads, self.W_O, self.b_O)
        object.__setattr__(self, "heads", heads)
        object.__setattr__(self, "W_O", _read_only(W_O))
        object.__setattr__(self, "b_O", _read_only(b_O))

    def __iter__(self):
        return iter((self.heads, self.W_O, self.b_O))

    @property
    def d_model(self) -> int:
        """The width of the tokens the heads read."""
        return self.heads[0].d_model

    @property
    def d_out(self) -> int:
        """The width of the layer's output (the columns of ``W_O``)."""
        return self.W_O.shape[1]

    @property
    def num_heads(self) -> int:
        """``h``, the number of heads."""
        return len(self.heads)

    @classmethod
    def from_fused(cls, W_Q, W_K, W_V, W_O, num_heads, b_Q=None, b_K=None, b_V=None,
                   b_O=None) -> "MultiHead":
        """The heads that :func:`qkv.fuse_heads` stacks side by side, cut apart again.

        Head ``i`` gets columns ``i*d_k`` to ``(i+1)*d_k - 1`` of ``W_Q`` and
        ``W_K`` (and ``i*d_v`` to ``(i+1)*d_v - 1`` of ``W_V``), and the same
        entries of their biases, as :func:`qkv.split_heads` cuts ``Q``, ``K``
        and ``V``. The arguments are those of
        :func:`qkv.fused_multi_head_attention`; trained models store their
        layers this way.

        Raises:
            ValueError: if the columns do not cut into ``num_heads`` equal
                slices, or a shape does not fit (naming it).
        """
        W_Q, W_K, W_V, b_Q, b_K, b_V = check_head_params(W_Q, W_K, W_V, b_Q, b_K, b_V)
        num_heads = check_equal_slices(W_Q, W_V, num_heads)

        def cut(value):
            """One fused parameter as ``num_heads`` slices of its columns (a missing bias: None each)."""
            return [None] * num_heads if value is None else np.split(value, num_heads, axis=-1)

        parts = zip(*(cut(value) for value in (W_Q, W_K, W_V, b_Q, b_K, b_V)))
        return cls(tuple(Head(*part) for part in parts), W_O, b_O)


def _check_widths(parts: dict, d_model: int) -> None:
    """Every part of a block reads and writes tokens of width ``d_model``: the residual sums fit."""
    for name, part in parts.items():
        if isinstance(part, MultiHead):
            widths = {"reads": part.d_model, "writes": part.d_out}
        elif isinstance(part, FeedForward):
            widths = {"reads": part.d_model, "writes": part.W_2.shape[1]}
        else:
            widths = {"normalises": part.d_model}
        for verb, width in widths.items():
            if width != d_model:
                raise ValueError(
                    f"{name} {verb} vectors of width {width} but the block's tokens have "
                    f"d_model={d_model}; every sublayer must keep d_model for the residual sum"
                )


def _set_parts(layer, kinds: dict) -> None:
    """Store each part of ``layer`` as its kind (a tuple of its fields is accepted), then check
    that every part keeps the width of the first."""
    parts = {}
    for name, kind in kinds.items():
        value = getattr(layer, name)
        parts[name] = value if isinstance(value, kind) else kind(*value)
        object.__setattr__(layer, name, parts[name])
    _check_widths(parts, parts["self_attention"].d_model)


@dataclass(frozen=True, eq=False)
class EncoderLayer:
    """The parameters of one encoder block: self-attention, a norm, a feed-forward layer, a norm."""

    self_attention: MultiHead
    norm_1: LayerNorm
    feed_forward: FeedForward
    norm_2: LayerNorm

    def __post_init__(self):
        _set_parts(self, {"self_attention": MultiHead, "norm_1": LayerNorm,
                          "feed_forward": FeedForward, "norm_2": LayerNorm})

    @property
    def d_model(self) -> int:
        return self.self_attention.d_model

    @property
    def num_heads(self) -> int:
        return self.self_attention.num_heads


@dataclass(frozen=True, eq=False)
class DecoderLayer:
    """The parameters of one decoder block: masked self-attention, cross-attention over the
    encoder's output, a feed-forward layer, and a norm for each of the three."""

    self_attention: MultiHead
    norm_1: LayerNorm
    cross_attention: MultiHead
    norm_2: LayerNorm
    feed_forward: FeedForward
    norm_3: LayerNorm

    def __post_init__(self):
        _set_parts(self, {"self_attention": MultiHead, "norm_1": LayerNorm,
                          "cross_attention": MultiHead, "norm_2": LayerNorm,
                          "feed_forward": FeedForward, "norm_3": LayerNorm})

    @property
    def d_model(self) -> int:
        return self.self_attention.d_model


def encoder_block(X, layer, mask=None, norm_first=False):
    r"""One encoder block: self-attention, then a feed-forward layer, each
    wrapped in a residual connection and a layer norm.

    .. math::
        \text{post-LN:}\quad H = \mathrm{LN}_1(X + \mathrm{MHA}(X)),

        Y = \mathrm{LN}_2(H + \mathrm{FFN}(H))

        \text{pre-LN:}\quad H = X + \mathrm{MHA}(\mathrm{LN}_1(X)),

        Y = H + \mathrm{FFN}(\mathrm{LN}_2(H))

    Args:
        X: token vectors, shape ``(..., n, d_model)``.
        layer: an :class:`EncoderLayer`.
        mask: optional boolean ``(..., n, n)``, True = may attend (say,
            a padding mask).
        norm_first: False for post-LN (the original Transformer, BERT),
            True for pre-LN (GPT-2, ViT), as in
            ``torch.nn.TransformerEncoderLayer``.

    Returns:
        ``(Y, weights)``: ``Y`` of shape ``(..., n, d_model)`` and the
        attention weights ``(..., h, n, n)``.

    Raises:
        ValueError: if ``X`` does not have the layer's ``d_model``.
        TypeError: if ``layer`` is not an :class:`EncoderLayer`.
    """
    _check_layer("encoder_block", layer, EncoderLayer)
    X = check_tokens(X, layer.d_model, "W_Q")
    attention, ffn = layer.self_attention, layer.feed_forward
    norm_1, norm_2 = layer.norm_1, layer.norm_2
    if norm_first:
        attended, weights = multi_head_attention(
            layer_norm(X, *norm_1), *attention, mask=mask)
        H = X + attended  # (..., n, d_model): the residual sum
        Y = H + feed_forward(layer_norm(H, *norm_2), *ffn)  # like X
    else:
        attended, weights = multi_head_attention(X, *attention, mask=mask)
        H = layer_norm(X + attended, *norm_1)  # (..., n, d_model)
        Y = layer_norm(H + feed_forward(H, *ffn), *norm_2)  # like X
    return Y, weights


class DecoderWeights(NamedTuple):
    """A decoder block's attention weights: ``self_attention`` ``(..., h, n, n)`` and
    ``cross_attention`` ``(..., h, n, n_k)``."""

    self_attention: np.ndarray
    cross_attention: np.ndarray


def decoder_block(X, memory, layer, self_mask=None, memory_mask=None,
                  norm_first=False):
    r"""One decoder block: masked self-attention, cross-attention over the
    encoder's output ``memory`` (``M``), and a feed-forward layer, each with
    a residual connection and a layer norm.

    .. math::
        \text{post-LN:}\quad H_1 = \mathrm{LN}_1(X + \mathrm{MHA}(X)),

        H_2 = \mathrm{LN}_2(H_1 + \mathrm{MHA}(H_1, M)), \quad
        Y = \mathrm{LN}_3(H_2 + \mathrm{FFN}(H_2))

        \text{pre-LN:}\quad H_1 = X + \mathrm{MHA}(\mathrm{LN}_1(X)),

        H_2 = H_1 + \mathrm{MHA}(\mathrm{LN}_2(H_1), M), \quad
        Y = H_2 + \mathrm{FFN}(\mathrm{LN}_3(H_2))

    The causal mask is not added for you, as in
    ``torch.nn.TransformerDecoderLayer``: a decoder that generates text
    passes ``self_mask=qkv.causal_mask(n)``.

    Args:
        X: the decoder's tokens, shape ``(..., n, d_model)``.
        memory: the encoder's output, shape ``(..., n_k, d_model)``.
        layer: a :class:`DecoderLayer`.
        self_mask: optional boolean ``(..., n, n)`` for the self-attention,
            True = may attend.
        memory_mask: optional boolean ``(..., n, n_k)`` for the
            cross-attention.
        norm_first: False for post-LN, True for pre-LN; ``memory`` itself is
            not normalised here.

    Returns:
        ``(Y, weights)``: ``Y`` of shape ``(..., n, d_model)`` and a
        :class:`DecoderWeights`.

    Raises:
        ValueError: if ``X`` or ``memory`` does not have the layer's
            ``d_model``.
        TypeError: if ``layer`` is not a :class:`DecoderLayer`.
    """
    _check_layer("decoder_block", layer, DecoderLayer)
    X = check_tokens(X, layer.d_model, "W_Q")
    attention, cross = layer.self_attention, layer.cross_attention
    norm_1, norm_2, norm_3 = layer.norm_1, layer.norm_2, layer.norm_3
    ffn = layer.feed_forward
    if norm_first:
        attended, self_weights = multi_head_attention(
            layer_norm(X, *norm_1), *attention, mask=self_mask)
        H_1 = X + attended  # (..., n, d_model)
        crossed, cross_weights = multi_head_cross_attention(
            layer_norm(H_1, *norm_2), memory, *cross, mask=memory_mask)
        H_2 = H_1 + crossed  # (..., n, d_model)
        Y = H_2 + feed_forward(layer_norm(H_2, *norm_3), *ffn)
    else:
        attended, self_weights = multi_head_attention(
            X, *attention, mask=self_mask)
        H_1 = layer_norm(X + attended, *norm_1)  # (..., n, d_model)
        crossed, cross_weights = multi_head_cross_attention(
            H_1, memory, *cross, mask=memory_mask)
        H_2 = layer_norm(H_1 + crossed, *norm_2)  # (..., n, d_model)
        Y = layer_norm(H_2 + feed_forward(H_2, *ffn), *norm_3)
    return Y, DecoderWeights(self_weights, cross_weights)  # Y: like X


def _check_layer(function: str, layer, expected: type) -> None:
    if not isinstance(layer, expected):
        raise TypeError(f"{function} needs a qkv.{expected.__name__}, got {type(layer).__name__}")
