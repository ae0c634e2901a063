"""Images as tokens, the ViT way (seed 002): cut into patches, and weights drawn back on the grid."""

from __future__ import annotations

import numpy as np

from .multihead import Head
from .validate import as_positive_number, as_real_array, shape_str


def patchify(image, patch_size):
    """Cut an image into square patches that do not overlap, one token per patch.

    Patches are numbered row by row (left to right, then top to bottom), the
    order :func:`to_patch_grid` undoes.

    Args:
        image: ``(H, W)`` or ``(H, W, C)``; ``H`` and ``W`` multiples of
            ``patch_size``.
        patch_size: side ``P`` of a patch, in pixels.

    Returns:
        ``(N, P * P * C)`` with ``N = (H / P) * (W / P)``.
    """
    image = as_real_array("image", image, min_ndim=2)
    if image.ndim == 2:
        image = image[:, :, None]  # (H, W, 1)
    if image.ndim != 3:
        raise ValueError(f"image must be (H, W) or (H, W, C), "
                         f"got shape {shape_str(image.shape)}")
    P = patch_size
    if isinstance(P, bool) or not isinstance(P, (int, np.integer)) or P < 1:
        raise ValueError(f"patch_size must be a positive integer, got {P!r}")
    H, W, C = image.shape
    if H % P or W % P:
        raise ValueError(
            f"image of {H}x{W} pixels does not split into {P}x{P} patches")
    rows, cols = H // P, W // P
    # (rows, cols, P, P, C): patch (r, c) holds its P x P pixels
    patches = image.reshape(rows, P, cols, P, C).swapaxes(1, 2)
    return patches.reshape(rows * cols, P * P * C)  # (N, P*P*C)


def to_patch_grid(weights, grid_shape):
    """Lay one query's weights over the patches, ``(N,)``, back onto the grid
    ``(rows, cols)``."""
    weights = as_real_array("weights", weights)
    rows, cols = grid_shape
    if weights.shape != (rows * cols,):
        raise ValueError(
            f"weights has shape {shape_str(weights.shape)} but a {rows}x{cols} "
            f"grid needs ({rows * cols},): one weight per patch"
        )
    # (rows, cols): patch k goes to row k // cols, column k % cols
    return weights.reshape(rows, cols)


def colour_tokens(patches, channels=3):
    r"""One token per patch: its average colour ``c`` (centred on the image's average) and
    :math:`-\tfrac12\lVert c\rVert^2`, the extra number that :func:`colour_head` needs.

    Args:
        patches: ``(N, P * P * C)`` from :func:`patchify`, channels interleaved per pixel.
        channels: ``C``.

    Returns:
        ``(N, C + 1)``: row ``j`` is :math:`[\,c_j,\ -\tfrac12\lVert c_j\rVert^2\,]`.
    """
    patches = as_real_array("patches", patches, min_ndim=2)
    if patches.ndim != 2 or patches.shape[1] % channels:
        raise ValueError(
            f"patches must be (N, P * P * {channels}), got shape {shape_str(patches.shape)}"
        )
    colour = patches.reshape(patches.shape[0], -1, channels).mean(axis=1)  # (N, C)
    colour = colour - colour.mean(axis=0)  # (N, C): centred on the image's average colour
    half_square = -0.5 * np.sum(colour**2, axis=1, keepdims=True)  # (N, 1)
    return np.concatenate([colour, half_square], axis=1)  # (N, C + 1)


def colour_head(g, channels=3):
    r"""A head, built by hand, that makes a patch attend to patches of a
    similar colour.

    On :func:`colour_tokens` it gives :math:`q_i = g\,[\,c_i,\ 1\,]` and
    :math:`k_j = v_j = g\,[\,c_j,\ -\tfrac12\lVert c_j\rVert^2\,]`, so

    .. math::
        q_i\cdot k_j = g^2\Big(c_i\cdot c_j - \tfrac12\lVert c_j\rVert^2\Big)
        = -\frac{g^2}{2}\lVert c_i - c_j\rVert^2
          + \frac{g^2}{2}\lVert c_i\rVert^2 ,

    a score that falls with the colour distance; ``g`` sets how sharply.
    """
    g = as_positive_number("g", g)
    d = channels + 1
    W_Q = np.diag([g] * channels + [0.0])  # (d, d): q = g [c, 0] ...
    b_Q = np.array([0.0] * channels + [g])  # (d,): ... + [0, g] = g [c, 1]
    W_K = g * np.eye(d)  # (d, d): k = g [c, -|c|^2 / 2]
    return Head(W_Q=W_Q, W_K=W_K, W_V=W_K, b_Q=b_Q)
