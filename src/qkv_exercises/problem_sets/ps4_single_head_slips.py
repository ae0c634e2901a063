"""The slips of problem set 4 (single-head attention) that no other set shares.

:data:`WEIGHTS_READ_BY_COLUMNS` for the weighted sum of 中和 有 一個 永和路's values, and :data:`WRONG_AXIS`
for the student's ``softmax(x, axis)``, judged in :mod:`qkv_exercises.functions`.
"""

from __future__ import annotations

from ..slips import Slip


WEIGHTS_READ_BY_COLUMNS = Slip(
    "weights_read_by_columns",
    "did you use the columns of A? Row i of the output mixes the value rows with the weights in ROW i of A: "
    "A[i, 0] V[0] + A[i, 1] V[1] + ...",
)

WRONG_AXIS = Slip(
    "wrong_axis",
    "did you normalise along the wrong axis? Use the axis argument you are given.",
)
