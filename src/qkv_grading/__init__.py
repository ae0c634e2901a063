"""qkv_grading: the instructor's commands (release, collect, grade, feedback, export).

Run ``python -m qkv_grading --help``; :mod:`qkv_grading.pipeline` holds the steps.
"""
