"""A small Vision Transformer trained on 8x8 images of handwritten digits, run with numpy.

Each image is cut into 2x2-pixel patches (a 4x4 grid of 16 patch tokens), a class token is put in
front, position embeddings are added, and three pre-norm encoder layers of 4 heads follow; the class
token's final vector is classified into the digits 0-9. The weights were trained with PyTorch by
``training/train_vit_digits.py`` and ship with this package as ``vit_digits.safetensors``.

::

    vit = load_vit_digits()
    result = classify(vit, images)      # images (..., 8, 8), pixels 0..16 as in scikit-learn
    result.logits.argmax(axis=-1)       # the predicted digits
    result.weights.shape                # (3, ..., 4, 17, 17): (layers, ..., h, n, n)
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from ..attention import linear
from ..block import EncoderLayer, layer_norm
from ..validate import as_real_array, shape_str
from ..vision import patchify
from .encoder import freeze_arrays, gelu_encoder_layer, read_safetensors, run_layers

WEIGHTS_FILE = Path(__file__).with_name("vit_digits.safetensors")


@dataclass(frozen=True, eq=False)
class VisionTransformer:
    """A ViT's parameters in the course's convention (``X W + b``).

    ``W_patch`` ``(P * P, d_model)`` and ``b_patch`` embed a flattened patch; ``class_token``
    ``(d_model,)``; ``position_embeddings`` ``(N + 1, d_model)`` (the class token's first);
    ``layers``: one :class:`qkv.EncoderLayer` each (pre-LN); ``norm_gamma``, ``norm_beta`` and ``eps``:
    the final LayerNorm; ``W_classifier`` ``(d_model, classes)`` and ``b_classifier``.
    ``pixel_scale`` divides the raw pixels; ``held_out_indices`` are the images never used in training.
    """

    image_size: int
    patch_size: int
    pixel_scale: float
    W_patch: np.ndarray
    b_patch: np.ndarray
    class_token: np.ndarray
    position_embeddings: np.ndarray
    layers: tuple[EncoderLayer, ...]
    norm_gamma: np.ndarray
    norm_beta: np.ndarray
    eps: float
    W_classifier: np.ndarray
    b_classifier: np.ndarray
    held_out_indices: np.ndarray
    metadata: dict

    def __post_init__(self):
        freeze_arrays(self)

    @property
    def grid_shape(self) -> tuple[int, int]:
        """(rows, columns) of the patch grid."""
        side = self.image_size // self.patch_size
        return side, side

    @property
    def num_heads(self) -> int:
        return self.layers[0].num_heads


@dataclass(frozen=True, eq=False)
class Classification:
    """What :func:`classify` computes for a batch of images ``(...)``.

    ``logits`` ``(..., classes)``; ``hidden_states`` ``(L + 1, ..., N + 1, d_model)`` (token 0 is the
    class token, tokens 1..N the patches, row by row); ``weights`` ``(L, ..., h, N + 1, N + 1)``.
    """

    logits: np.ndarray
    hidden_states: np.ndarray
    weights: np.ndarray

    @property
    def predicted(self) -> np.ndarray:
        """The digit with the largest logit, ``(...)``."""
        return self.logits.argmax(axis=-1)


def image_tokens(model, images):
    r"""The first layer's input: a class token, then one token per patch.

    .. math::
        X = \big[\,x_{\mathrm{class}};\ p_1 W + b;\ \dots;\
        p_N W + b\,\big] + E_{\mathrm{pos}}

    with :math:`W, b` the patch embedding (``W_patch``, ``b_patch``).

    Args:
        model: a :class:`VisionTransformer`.
        images: ``(..., H, W)`` raw pixels (0..16 for scikit-learn's digits).

    Returns:
        ``(..., N + 1, d_model)``.

    Raises:
        ValueError: if the images are not ``image_size x image_size``.
    """
    images = as_real_array("images", images, min_ndim=2)
    size = model.image_size
    if images.shape[-2:] != (size, size):
        raise ValueError(f"images have shape {shape_str(images.shape)}; "
                         f"the model reads (..., {size}, {size})")
    flat = images.reshape(-1, size, size) / model.pixel_scale  # (b, H, W)
    patches = np.stack([patchify(image, model.patch_size)
                        for image in flat])  # (b, N, P*P)
    embedded = linear(patches, model.W_patch, model.b_patch)  # (b, N, d)
    class_tokens = np.broadcast_to(model.class_token,
                                   (len(flat), 1, embedded.shape[-1]))
    tokens = np.concatenate([class_tokens, embedded], axis=1)  # (b, N+1, d)
    tokens = tokens + model.position_embeddings
    return tokens.reshape(*images.shape[:-2], *tokens.shape[1:])


def classify(model, images):
    r"""Run the ViT on images: embed the patches, run every layer, classify the class token.

    .. math::
        H^{(l)} = \mathrm{Layer}_l\big(H^{(l-1)}\big)

        \mathrm{logits} = \mathrm{LayerNorm}\big(H^{(L)}_{\mathrm{class}}\big)\, W_{\mathrm{classifier}} + b

    Every layer is :func:`qkv.encoder_block` in pre-LN order (ViT's),
    whose attention is :func:`qkv.multi_head_attention`.

    Args:
        model: a :class:`VisionTransformer`.
        images: ``(..., H, W)``; one image ``(H, W)`` gives weights ``(L, h, n, n)``.

    Returns:
        a :class:`Classification`.
    """
    hidden_states, weights = run_layers(image_tokens(model, images), model.layers, norm_first=True)
    class_vector = layer_norm(hidden_states[-1][..., 0, :], model.norm_gamma, model.norm_beta, model.eps)
    logits = linear(class_vector[..., None, :], model.W_classifier, model.b_classifier)[..., 0, :]  # (..., classes)
    return Classification(logits, hidden_states, weights)


def attention_rollout(weights):
    r"""How much each token draws on each input token through all layers.

    Each layer's weights are averaged over the heads, the residual
    connection is counted as attention to oneself, and the layers are
    chained (Abnar and Zuidema, 2020):

    .. math::
        \tilde A^{(l)} = \tfrac{1}{2}\Big(\tfrac{1}{h}\textstyle\sum_i
        A^{(l,i)} + I\Big),\qquad
        R = \tilde A^{(L)} \cdots \tilde A^{(2)}\, \tilde A^{(1)}

    Args:
        weights: ``(L, ..., h, n, n)``, every layer's weights (as
            :func:`classify` returns them).

    Returns:
        ``(..., n, n)``; each row sums to 1.
    """
    weights = as_real_array("weights", weights, min_ndim=4)
    n = weights.shape[-1]
    rollout = np.broadcast_to(np.eye(n), weights.shape[1:-3] + (n, n))
    for layer_weights in weights:  # (..., h, n, n)
        mixed = 0.5 * (layer_weights.mean(axis=-3) + np.eye(n))  # (.., n, n)
        rollout = mixed @ rollout  # rows still sum to 1
    return rollout


@lru_cache(maxsize=1)
def load_vit_digits(path=WEIGHTS_FILE):
    """The course's digits ViT, from the safetensors file that ships with :mod:`qkv.models`.

    Raises:
        FileNotFoundError: if the file is missing (``training/train_vit_digits.py`` writes it).
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no ViT weights at {path}; training/train_vit_digits.py writes them")
    tensors, metadata = read_safetensors(path)
    eps = float(metadata["layer_norm_eps"])
    layers = tuple(_torch_encoder_layer(tensors, f"encoder.layers.{i}.", int(metadata["num_heads"]), eps)
                   for i in range(int(metadata["num_layers"])))
    return VisionTransformer(
        image_size=int(metadata["image_size"]), patch_size=int(metadata["patch_size"]),
        pixel_scale=float(metadata["pixel_scale"]),
        W_patch=tensors["patch_embedding.weight"].T, b_patch=tensors["patch_embedding.bias"],
        class_token=tensors["class_token"].reshape(-1), position_embeddings=tensors["position_embedding"][0],
        layers=layers, norm_gamma=tensors["norm.weight"], norm_beta=tensors["norm.bias"], eps=eps,
        W_classifier=tensors["classifier.weight"].T, b_classifier=tensors["classifier.bias"],
        held_out_indices=tensors["held_out_indices"], metadata=metadata,
    )


def _torch_encoder_layer(tensors, prefix, num_heads, eps):
    """One ``torch.nn.TransformerEncoderLayer``'s parameters: ``in_proj`` stacks W_Q, W_K, W_V."""
    W_Q, W_K, W_V = np.split(tensors[prefix + "self_attn.in_proj_weight"], 3)  # 3 x (d_model, d_model)
    b_Q, b_K, b_V = np.split(tensors[prefix + "self_attn.in_proj_bias"], 3)
    return gelu_encoder_layer(
        W_Q=W_Q.T, b_Q=b_Q, W_K=W_K.T, b_K=b_K, W_V=W_V.T, b_V=b_V,
        W_O=tensors[prefix + "self_attn.out_proj.weight"].T, b_O=tensors[prefix + "self_attn.out_proj.bias"],
        norm_1=(tensors[prefix + "norm1.weight"], tensors[prefix + "norm1.bias"]),
        W_1=tensors[prefix + "linear1.weight"].T, b_1=tensors[prefix + "linear1.bias"],
        W_2=tensors[prefix + "linear2.weight"].T, b_2=tensors[prefix + "linear2.bias"],
        norm_2=(tensors[prefix + "norm2.weight"], tensors[prefix + "norm2.bias"]),
        num_heads=num_heads, eps=eps,
    )

