"""How long it takes to draw a student's numbers: milliseconds per variant, for every problem set.

    .venv/bin/python bench/variants.py                 # 1000 students per problem set
    .venv/bin/python bench/variants.py --students 5000

For each problem set, times ``PROBLEM_SET.givens(variant)`` for the variants of
``--students`` student ids (CPU time, so that other work on the machine counts less),
after a first call that builds the tables the draws pick from (timed on its own).
Prints the figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import time

from qkv_exercises.identity import student_variant
from qkv_exercises.problem_sets import get_problem_set, names


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--students", type=int, default=1000)
    args = parser.parse_args()
    print(f"{'problem set':<26} {'first call':>11} {'per variant':>12}   ({args.students} students)")
    for name in names():
        problem_set = get_problem_set(name)
        start = time.process_time()
        problem_set.givens(student_variant(name, "warm-up"))
        first = time.process_time() - start
        variants = [student_variant(name, f"student-{i}") for i in range(args.students)]
        start = time.process_time()
        for variant in variants:
            problem_set.givens(variant)
        each = (time.process_time() - start) / len(variants)
        print(f"{name:<26} {first * 1000:>8.0f} ms {each * 1000:>9.2f} ms")


if __name__ == "__main__":
    main()
