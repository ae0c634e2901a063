"""Images as tokens, the ViT way (seed 002): cut into patches, and weights drawn back on the grid."""

from __future__ import annotations

import numpy as np

from .validate import as_real_array, shape_str


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
