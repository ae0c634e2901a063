"""Data sets the book draws on, read from the files their packages ship (nothing is downloaded)."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np


def digits():
    """scikit-learn's 8x8 handwritten digits: ``(images, labels)``, ``(1797, 8, 8)`` pixels 0..16 and ``(1797,)``.

    The same numbers as ``sklearn.datasets.load_digits()``, read straight from the file scikit-learn
    ships, because importing scikit-learn takes seconds and every chapter runs at every build.

    Raises:
        ImportError: if scikit-learn is not installed, or its file is not where it ships it.
    """
    spec = importlib.util.find_spec("sklearn")
    if spec is None or spec.origin is None:
        raise ImportError("the digits come with scikit-learn: pip install -r requirements.txt")
    path = Path(spec.origin).parent / "datasets" / "data" / "digits.csv.gz"
    if not path.is_file():
        raise ImportError(f"scikit-learn is installed but has no {path.name}; use sklearn.datasets.load_digits()")
    table = np.loadtxt(path, delimiter=",")  # (1797, 65): 64 pixels, then the label
    return table[:, :-1].reshape(-1, 8, 8), table[:, -1].astype(int)
