"""nbgrader configuration of the Attention by Hand course.

This folder is the course root: ``source/<problem set>/`` holds the instructor
versions, and nbgrader writes ``release/``, ``submitted/``, ``autograded/``,
``feedback/`` and the gradebook (``gradebook.db``) next to them. Run nbgrader from
here, or use ``make release`` / ``make grade`` at the top of the repository.
"""

import os

import nbgrader

from qkv_grading.nbgrader_feedback import HideHiddenTests

c = get_config()  # noqa: F821 (provided by nbgrader when it reads this file)

# The course root is this folder, wherever the repository is checked out.
c.CourseDirectory.root = os.path.dirname(os.path.abspath(__file__))
c.CourseDirectory.course_id = "attention-by-hand"

# What a student sees in place of a solution: an empty answer to fill in.
c.ClearSolutions.code_stub = {"python": "# YOUR ANSWER HERE"}
c.ClearSolutions.text_stub = "YOUR ANSWER HERE"

# Each cell of a submission may run this many seconds; a cell that takes longer (an
# infinite loop) is interrupted, scores 0, and the rest of the notebook still runs.
c.Execute.timeout = 20

# Feedback shows each test's message but never the text of a hidden test, nor its traceback.
c.GenerateFeedback.preprocessors = [
    "nbgrader.preprocessors.GetGrades",
    "nbconvert.preprocessors.CSSHTMLHeaderPreprocessor",
    HideHiddenTests,
]

# Submissions downloaded from a learning management system as one zip: each file is
# named <student>_<anything>_<notebook>.ipynb (for example Canvas's
# "alice_12345_67890_ps1_qkv.ipynb"); `nbgrader zip_collect` files it as
# submitted/<student>/<problem set>/<notebook>.ipynb.
c.FileNameCollectorPlugin.named_regexp = (
    r".*/(?P<student_id>[A-Za-z0-9.-]+)_(?:[^/]*_)?(?P<file_id>ps\d+_[a-z_]+?)(?:-\d+)?\.ipynb$"
)

# Feedback pages load MathJax from the feedback folder (feedback/_mathjax/, copied by
# `python -m qkv_grading`), not from nbgrader's default CDN: templates/feedback_offline/.
c.HTMLExporter.template_name = "feedback_offline"
c.HTMLExporter.extra_template_basedirs = [
    os.path.join(os.path.dirname(os.path.abspath(__file__)), "templates"),
    os.path.join(os.path.dirname(nbgrader.__file__), "server_extensions", "formgrader", "templates"),
]
