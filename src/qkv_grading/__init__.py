"""qkv_grading: the instructor's commands (release, collect, grade, export).

Run ``python -m qkv_grading --help``. :mod:`qkv_grading.pipeline` holds the commands;
a submission goes through :mod:`~qkv_grading.collect`, :mod:`~qkv_grading.jobs` (the job
for the sandbox), :mod:`~qkv_grading.sandbox` (the pure step, which runs
:mod:`~qkv_grading.sandbox_runner` with the stub :mod:`~qkv_grading.sandbox_stub`),
:mod:`~qkv_grading.judging` (points), :mod:`~qkv_grading.gradebook`,
:mod:`~qkv_grading.feedback` and :mod:`~qkv_grading.journal`.
"""
