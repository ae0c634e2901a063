"""Images as tokens, the ViT way (seed 002): cut into patches, and weights drawn back on the grid."""

from __future__ import annotations

import numpy as np

from .validate import as_real_array, shape_str


def patchify(image, patch_size):
    """Cut an image into non-overlapping square patches, one flattened token per patch.

    Patches are numbered row by row (left to right, then top to bottom), the
    order :func:`to_patch_grid` undoes.

    Args:
        image: ``(H, W)`` or ``(H, W, C)``; ``H`` and ``W`` multiples of ``patch_size``.
        patch_size: side ``P`` of a patch, in pixels.

    Returns:
        ``(N, P * P * C)`` with ``N = (H / P) * (W / P)``.
    """
    image = as_real_array("image", image, min_ndim=2)
    if image.ndim == 2:
        image = image[:, :, None]  # (H, W, 1)
    if image.ndim != 3:
        raise ValueError(f"image must be (H, W) or (H, W, C), got shape {shape_str(image.shape)}")
    if isinstance(patch_size, bool) or not isinstance(patch_size, (int, np.integer)) or patch_size < 1:
        raise ValueError(f"patch_size must be a positive integer, got {patch_size!r}")
    H, W, C = image.shape
    if H % patch_size or W % patch_size:
        raise ValueError(f"image of {H}x{W} pixels does not split into {patch_size}x{patch_size} patches")
    rows, cols = H // patch_size, W // patch_size
    patches = image.reshape(rows, patch_size, cols, patch_size, C).swapaxes(1, 2)  # (rows, cols, P, P, C)
    return patches.reshape(rows * cols, patch_size * patch_size * C)  # (N, P*P*C)


def to_patch_grid(weights, grid_shape):
    """Lay one query's weights over the patches ``(N,)`` back onto the ``(rows, cols)`` grid."""
    weights = as_real_array("weights", weights)
    rows, cols = grid_shape
    if weights.shape != (rows * cols,):
        raise ValueError(
            f"weights has shape {shape_str(weights.shape)} but a {rows}x{cols} grid needs "
            f"({rows * cols},): one weight per patch"
        )
    return weights.reshape(rows, cols)  # (rows, cols), patch k at (k // cols, k % cols)
