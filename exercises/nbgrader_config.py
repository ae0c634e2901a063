"""nbgrader configuration of the Attention by Hand course.

This folder is the course root: ``source/<problem set>/`` holds the instructor
versions, and nbgrader writes ``release/``, ``submitted/``, ``autograded/``,
``feedback/`` and the gradebook (``gradebook.db``) next to them. Run nbgrader from
here, or use ``make release`` / ``make grade`` at the top of the repository.
"""

import os

import nbgrader

from qkv_grading.collect import PLATFORM_NAME
from qkv_grading.nbgrader_feedback import HideHiddenTests

c = get_config()  # noqa: F821 (provided by nbgrader when it reads this file)

# The course root is this folder, wherever the repository is checked out.
c.CourseDirectory.root = os.path.dirname(os.path.abspath(__file__))
c.CourseDirectory.course_id = "attention-by-hand"

# What a student sees in place of a solution: an empty answer to fill in.
c.ClearSolutions.code_stub = {"python": "# YOUR ANSWER HERE"}
c.ClearSolutions.text_stub = "YOUR ANSWER HERE"

# Each cell of a submission may run this many seconds; a cell that takes longer (an
# infinite loop) is interrupted, and the rest of the notebook still runs.
c.Execute.timeout = 20

# The grading sandbox (`python -m qkv_grading grade`, see qkv_grading.sandbox.Limits): what
# one submission may use in all. A notebook still running after notebook_seconds is
# stopped, with every process it started; its answers computed before then still count.
c.Sandbox.notebook_seconds = 60
c.Sandbox.sandbox_memory = 2 << 30  # bytes of memory of the sandbox as a whole (a cgroup, where there is one)
c.Sandbox.memory = 1 << 30        # bytes of address space of each process
c.Sandbox.processes = 8           # without a cgroup, one notebook holds at most 8 GiB
c.Sandbox.file_size = 16 << 20    # bytes of any one file it writes
c.Sandbox.workspace = 64 << 20    # bytes of its working folder in all
c.Sandbox.shared_memory = 16 << 20  # bytes of its /dev/shm in all

# Feedback shows each test's message but never the text of a hidden test, nor its traceback.
c.GenerateFeedback.preprocessors = [
    "nbgrader.preprocessors.GetGrades",
    "nbconvert.preprocessors.CSSHTMLHeaderPreprocessor",
    HideHiddenTests,
]

# Submissions downloaded from a learning platform as one zip: each file is named as Canvas
# names them, <name>_[late_]<user id>_<submission id>_<notebook>[-<n>].ipynb (for example
# "alice_12345_67890_ps1_qkv.ipynb"), or as Moodle does (qkv_grading.platforms); the student
# is the user id. `python -m qkv_grading grade` reads them without unpacking anything. The
# Canvas pattern, for `nbgrader zip_collect` run by hand:
c.FileNameCollectorPlugin.named_regexp = "(?s)(?:.*/)?" + PLATFORM_NAME.format(files=r"ps\d+_[a-z0-9_]+?").replace(
    "(?P<user>", "(?P<student_id>").replace("(?P<file>", "(?P<file_id>") + "$"

# `nbgrader export` writes grades.csv through the csv module, so that any student id gives a valid file.
c.ExportApp.plugin_class = "qkv_grading.gradebook.CsvExport"

# Formgrader shows students' markdown and outputs with their HTML sanitized (no script runs).
c.HTMLExporter.sanitize_html = True

# Feedback pages load MathJax from the feedback folder (feedback/_mathjax/, copied by
# `python -m qkv_grading`), not from nbgrader's default CDN: templates/feedback_offline/.
c.HTMLExporter.template_name = "feedback_offline"
c.HTMLExporter.extra_template_basedirs = [
    os.path.join(os.path.dirname(os.path.abspath(__file__)), "templates"),
    os.path.join(os.path.dirname(nbgrader.__file__), "server_extensions", "formgrader", "templates"),
]
