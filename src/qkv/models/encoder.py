"""A trained model's stack of encoder layers: each layer is a :class:`qkv.EncoderLayer`, run by
:func:`qkv.encoder_block` with the layer norm after each sublayer (BERT) or before it (ViT).

A trained model stores each layer's heads side by side (one wide ``W_Q`` and so on) and in
PyTorch's orientation (``W^T``); the loaders of :mod:`qkv.models` transpose the matrices to the
course's ``Y = X W + b`` and cut the heads apart with :meth:`qkv.MultiHead.from_fused`.
"""

from __future__ import annotations

from dataclasses import fields

import numpy as np

from ..block import EncoderLayer, FeedForward, LayerNorm, MultiHead, encoder_block


def gelu_encoder_layer(*, W_Q, b_Q, W_K, b_K, W_V, b_V, W_O, b_O, norm_1, W_1, b_1, W_2, b_2, norm_2,
                       num_heads, eps):
    """A :class:`qkv.EncoderLayer` from a trained layer's fused matrices, in the course's orientation.

    ``W_Q, W_K, W_V`` ``(d_model, h * d_k)`` hold the ``num_heads`` heads side by side, ``W_O``
    ``(h * d_v, d_model)``; ``W_1`` ``(d_model, d_ff)`` and ``W_2`` ``(d_ff, d_model)`` make a GELU
    feed-forward layer; ``norm_1`` and ``norm_2`` are ``(gamma, beta)`` pairs with epsilon ``eps``.

    Raises:
        ValueError: as :class:`qkv.EncoderLayer` and :meth:`qkv.MultiHead.from_fused` do.
    """
    return EncoderLayer(
        MultiHead.from_fused(W_Q, W_K, W_V, W_O, num_heads, b_Q, b_K, b_V, b_O),
        LayerNorm(*norm_1, eps),
        FeedForward(W_1, b_1, W_2, b_2, "gelu"),
        LayerNorm(*norm_2, eps),
    )


def run_layers(X, layers, norm_first=False):
    """Run ``X`` through every layer with :func:`qkv.encoder_block`, keeping each layer's input and
    output and every head's weights.

    Args:
        X: ``(..., n, d_model)``, the first layer's input.
        layers: :class:`qkv.EncoderLayer`, bottom first.
        norm_first: False for post-LN (BERT), True for pre-LN (ViT).

    Returns:
        ``(hidden_states, weights)``: ``(L + 1, ..., n, d_model)`` (the input first, then each layer's
        output) and ``(L, ..., h, n, n)``.
    """
    hidden_states, weights = [np.asarray(X, dtype=np.float64)], []
    for layer in layers:
        Y, layer_weights = encoder_block(hidden_states[-1], layer, norm_first=norm_first)
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
