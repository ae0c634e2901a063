"""qkv_exercises: what a problem-set notebook imports to check a student's answers.

- :func:`start` (from :mod:`qkv_exercises.notebook`): start a problem set with the
  student's own numbers; ``ps.check(grade_id, answer)`` under each answer.
- :mod:`qkv_exercises.problem_sets`: each problem set's givens (per variant) and checks, and
  beside each the slips only it recognises (``<name>_slips``).
- :mod:`qkv_exercises.variants`: every student's own numbers for the book's worked examples,
  one module per story.
- :mod:`qkv_exercises.checks` and :mod:`qkv_exercises.checking`: the checks and the
  comparison they share with the grader, which never states an expected value to a
  student before grading.
- :mod:`qkv_exercises.expectations` and :mod:`qkv_exercises.functions`: what hand answers
  are compared with, and how the functions students write are called and judged.
- :mod:`qkv_exercises.slips`: the values the typical slips that several problem sets share
  produce, so a message can name one.
- :mod:`qkv_exercises.identity`: student id -> variant.
- :mod:`qkv_exercises.answers`: answers as plain JSON, across the grading sandbox's wall.

Importing the package imports nothing else: ``start`` is loaded on first use.
"""


def __getattr__(name):
    if name == "start":
        from .notebook import start

        return start
    raise AttributeError(f"module 'qkv_exercises' has no attribute {name!r}")
