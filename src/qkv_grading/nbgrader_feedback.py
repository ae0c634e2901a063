"""nbgrader feedback that keeps hidden tests hidden.

nbgrader's autograded notebooks hold the full text of every test, hidden tests
included, and its feedback HTML would show them. :class:`HideHiddenTests` runs
when the feedback is made (``c.GenerateFeedback.preprocessors`` in the course's
``nbgrader_config.py``): it removes each ``### BEGIN HIDDEN TESTS`` ...
``### END HIDDEN TESTS`` region, as nbgrader does for the released notebooks,
and cuts the traceback of a failed hidden test down to its message, because a
traceback quotes the lines of the test that raised.
"""

from __future__ import annotations

from nbgrader.preprocessors import ClearHiddenTests


class HideHiddenTests(ClearHiddenTests):
    """Remove hidden-test regions from test cells, and their tracebacks from the outputs."""

    def preprocess_cell(self, cell, resources, cell_index):
        if cell.cell_type == "code" and self._remove_hidden_test_region(cell):
            for output in cell.get("outputs", []):
                if output.get("output_type") == "error":
                    message = f"{output.get('ename', 'Error')}: {output.get('evalue', '')}".rstrip(": ")
                    output["traceback"] = [message]
        return cell, resources
