"""The course's problem sets, one module each, named as the nbgrader assignment (``ps2_scaled_dot_product``).

Each module ``<name>.py`` defines ``PROBLEM_SET``, a :class:`qkv_exercises.checks.ProblemSet`:
the givens of every variant and one check per graded cell of the notebook
``exercises/source/<name>/<name>.ipynb``. Beside it, ``<name>_slips.py`` (when the set has
slips of its own) holds the typical slips its checks recognise, so that a new problem set adds
files of its own instead of editing a long shared one.
"""

from __future__ import annotations

import functools
import importlib
import pkgutil
import re

from ..checks import ProblemSet

SLIPS_SUFFIX = "_slips"  # ps7_masks_slips.py: the slips of ps7_masks.py


def names() -> list[str]:
    """The problem sets that have a module here, in order (not the ``<name>_slips`` beside them)."""
    return list(_modules(tuple(__path__)))


@functools.cache
def _modules(path: tuple[str, ...]) -> tuple[str, ...]:
    """:func:`names`, read from the folders of ``path`` once per process (each check of a submission asks)."""
    return tuple(sorted((m.name for m in pkgutil.iter_modules(path)
                         if not m.name.startswith("_") and not m.name.endswith(SLIPS_SUFFIX)), key=order))


def order(name: str) -> tuple[int, str]:
    """Sort key of a problem set's name: by its number (``ps7`` before ``ps10``), then by name."""
    match = re.match(r"ps(\d+)", name)
    return (int(match[1]) if match else 10**9, name)


def get_problem_set(name: str) -> ProblemSet:
    """The problem set ``name``; a clear error for a name that is not one."""
    if not isinstance(name, str) or name not in names():
        raise ValueError(f"there is no problem set {name!r}; the problem sets are {', '.join(names())}")
    return importlib.import_module(f"{__name__}.{name}").PROBLEM_SET
