"""Who is solving a problem set, and so which numbers (which variant) they get.

Every student computes their own variant of the book's worked examples. The variant
is a whole number: 0 is the seed articles' own numbers (the book's example, a
warm-up), 1, 2, 3, ... are practice variants, and a student's variant is derived
from their student id and the problem set by :func:`student_variant`, the same on
every machine and in every later release of the course (a change here would change
every student's numbers in the middle of a course, so a test pins it).

The id comes from, in order: what the student types in the notebook's first code
cell (``STUDENT_ID = "..."``), then the ``JUPYTERHUB_USER`` variable a JupyterHub
sets. With neither, the notebook uses a practice variant (``PRACTICE``) and says so.
At grading the variant comes from the id the submission is filed under, never from
the notebook.
"""

from __future__ import annotations

import hashlib
import os
import unicodedata
from dataclasses import dataclass

FIRST_STUDENT_VARIANT = 1_000_000  # practice variants lie below, students' variants from here on
STUDENT_VARIANTS = 2**31
HUB_USER_VARIABLE = "JUPYTERHUB_USER"


def normalise_id(student_id: str) -> str:
    """The id as the course compares it: surrounding spaces removed, Unicode in NFC form."""
    return unicodedata.normalize("NFC", student_id.strip())


def student_variant(problem_set: str, student_id: str) -> int:
    """The variant of ``problem_set`` that the student ``student_id`` computes.

    The first 8 bytes of SHA-256 of ``"attention-by-hand/<problem set>/<id>"`` (UTF-8),
    reduced into the students' range. Different problem sets give the same student
    unrelated numbers, so one problem set's given values never answer another's.
    """
    if not isinstance(student_id, str) or not normalise_id(student_id):
        raise ValueError(f"a student id must be non-empty text, got {student_id!r}")
    digest = hashlib.sha256(f"attention-by-hand/{problem_set}/{normalise_id(student_id)}".encode()).digest()
    return FIRST_STUDENT_VARIANT + int.from_bytes(digest[:8], "big") % STUDENT_VARIANTS


@dataclass(frozen=True)
class Solver:
    """Who solves the notebook: a student (``student_id``) or a practice run (``practice``)."""

    student_id: str | None
    practice: int
    source: str  # "notebook", "hub" or "none": where the id came from

    def variant(self, problem_set: str) -> int:
        if self.student_id is not None:
            return student_variant(problem_set, self.student_id)
        return self.practice

    def describe(self) -> str:
        """Who this is, in the current language: ``student ab1234``, ``practice variant 2``."""
        from .language import _

        if self.student_id is None:
            if self.practice == 0:
                return _("practice variant 0: the book's own numbers")
            return _("practice variant {number}").format(number=self.practice)
        if self.source == "hub":
            return _("student {id} (from JupyterHub)").format(id=self.student_id)
        return _("student {id}").format(id=self.student_id)


def solver(student_id="", practice=1, environ=None) -> Solver:
    """Who is solving: the typed ``student_id``, else the hub's user, else practice variant ``practice``."""
    environ = os.environ if environ is None else environ
    if student_id is None:
        student_id = ""
    if not isinstance(student_id, str):
        raise TypeError(f"STUDENT_ID must be text in quotes, like \"ab1234\"; got {student_id!r}")
    if isinstance(practice, bool) or not isinstance(practice, int) or practice < 0 or practice >= FIRST_STUDENT_VARIANT:
        raise ValueError(f"PRACTICE must be a whole number from 0 to {FIRST_STUDENT_VARIANT - 1}, got {practice!r}")
    if normalise_id(student_id):
        return Solver(normalise_id(student_id), practice, "notebook")
    hub_user = environ.get(HUB_USER_VARIABLE, "")
    if normalise_id(hub_user):
        return Solver(normalise_id(hub_user), practice, "hub")
    return Solver(None, practice, "none")
