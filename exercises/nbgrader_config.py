"""nbgrader configuration of the Attention by Hand course.

This folder is the course root: ``source/<problem set>/`` holds the instructor
versions, and nbgrader writes ``release/``, ``submitted/``, ``autograded/``,
``feedback/`` and the gradebook (``gradebook.db``) next to them. Run nbgrader from
here, or use ``make release`` / ``make grade`` at the top of the repository.
"""

import os

from qkv_grading.collect import PLATFORM_NAME
from qkv_grading.markup import FILTERS
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

# The pages an instructor opens show students' notebooks, and nothing of a student's may run on
# them (qkv_grading.markup): formgrader's grading page uses the course's templates/qkv_formgrade,
# and `nbgrader generate_feedback` templates/qkv_feedback. Both sanitise every markdown cell and
# output, escape every value, allow no script but their own, and read MathJax from the course's
# copy in feedback/_mathjax/ (made by `python -m qkv_grading grade`), never from a CDN.
# Formgrader's exporter is nbgrader's top-level HTMLExporter; generate_feedback's is its own.
c.HTMLExporter.template_name = "qkv_formgrade"
c.HTMLExporter.extra_template_basedirs = [os.path.join(os.path.dirname(os.path.abspath(__file__)), "templates")]
c.HTMLExporter.filters = FILTERS
c.HTMLExporter.sanitize_html = True  # nbconvert's own sanitiser too, wherever its templates use it
c.GenerateFeedback.HTMLExporter.template_name = "qkv_feedback"
