"""The form of a worked example that more than one story takes.

A story's own forms (:class:`qkv.examples.MultiHeadExample` for seed 000's two heads,
:class:`qkv.examples.QueryExample` for seed 002's single query, ...) live in the story's
module; a form that several stories share lives here, so that neither story imports the
other. Imported by the story modules of :mod:`qkv.examples`; holds data only.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from ..multihead import Head


@dataclass(frozen=True)
class SelfAttentionExample:
    """Token vectors ``X`` ``(n, d_model)`` whose rows ``tokens`` names, and one head."""

    tokens: tuple[str, ...]
    X: np.ndarray
    head: Head
