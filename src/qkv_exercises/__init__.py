"""qkv_exercises: what a problem-set notebook imports to check a student's answers.

- :mod:`qkv_exercises.checking`: compare an answer with :mod:`qkv` and explain a mismatch.
- :mod:`qkv_exercises.slips`: the values the typical slips produce, so a message can name one.
"""
