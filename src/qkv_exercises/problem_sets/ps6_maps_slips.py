"""Reading an attention map and a ViT's patch grid: the slips of problem set 6 (attention maps).

Positions counted from 1, a grid filled column by column, (column, row) for (row, column), the
patch's number for its place, the most for the least: the answers
:mod:`qkv_exercises.problem_sets.ps6_maps` names when a student gives one of them.
"""

from __future__ import annotations

import numpy as np

from ..slips import Slip


ONE_BASED_POSITION = Slip(
    "one_based_position",
    "you counted from 1; positions count from 0 (the top row is row 0, the left column is column 0).",
)

GRID_FILLED_BY_COLUMNS = Slip(
    "grid_filled_by_columns",
    "did you fill the grid column by column? Patches are numbered row by row: left to right, "
    "then top to bottom.",
)

ROW_AND_COLUMN_SWAPPED = Slip(
    "row_and_column_swapped",
    "you gave (column, row); a grid position is written (row, column), row first, counting from 0.",
)

PATCH_NUMBER_GIVEN = Slip(
    "patch_number_given",
    "that is the patch's number; give its position on the grid as (row, column), counting from 0.",
)

MOST_NOT_LEAST = Slip(
    "most_not_least",
    "that is the token with the largest weight; the question asks for the smallest.",
)

LEAST_NOT_MOST = Slip(
    "least_not_most",
    "that is the token with the smallest weight; the question asks for the largest.",
)


def patch_grid_with_slip(weights, grid_shape: tuple[int, int], slip: Slip) -> np.ndarray | None:
    """One query's weights over the patches laid on the grid with ``slip``."""
    rows, cols = grid_shape
    if slip == GRID_FILLED_BY_COLUMNS:
        return np.asarray(weights, dtype=float).reshape(cols, rows).T  # patch k at (k % rows, k // rows)
    return None
