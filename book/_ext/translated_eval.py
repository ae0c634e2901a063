"""Sphinx extension: an ``{eval}`` inside a translated paragraph shows the value its page computed.

myst-nb's ``{eval}`` role asks the page's kernel for a value while the page is read. A page of
a translated edition is read in its source language first: its cells run and its ``{eval}``s
are evaluated. Then Sphinx's i18n transform replaces each paragraph (heading, caption, table
cell) by its translation and parses that text anew, after myst-nb has shut the kernel down,
so the same role found no kernel and rendered nothing.

This role remembers, while a page is read, what each evaluation gave (the nodes, keyed by the
expression) and gives a copy of them to the same expression in a translated paragraph. The
memory lives in ``env.temp_data``, which Sphinx empties after each page: nothing leaks from one
page to the next, and parallel reading processes each keep their own pages.

An expression in a translation that the page never evaluated (a translator's typo) is a
warning that names it, an error under ``-W``. This relies on myst-nb's ``EvalRoleAny`` and
on its parser reading a ``<translated>`` source as plain MyST: myst-nb is pinned in
``requirements.txt``, and ``tests/test_book_editions.py`` builds a small translated
notebook to check that the numbers arrive.
"""

from __future__ import annotations

from myst_nb.ext.eval import EvalRoleAny, eval_warning

MEMORY = "qkv_eval_values"  # key in env.temp_data: {expression: [nodes]}


class RememberedEvalRole(EvalRoleAny):
    """``{eval}``: evaluated in the page's kernel, or, in a translation, remembered from it."""

    def run(self):
        memory = self.document.settings.env.temp_data.setdefault(MEMORY, {})
        if "nb_renderer" in self.document:  # the page itself: its kernel is running
            rendered, messages = super().run()
            if rendered:
                memory[self.text] = [node.deepcopy() for node in rendered]
            return rendered, messages
        if self.text in memory:  # a translated paragraph of the same page
            return [node.deepcopy() for node in memory[self.text]], []
        return [], [eval_warning(f"the translation evaluates {self.text!r}, which its page never evaluates: "
                                 "keep the source's {eval} expressions as they are", self.document, self.line)]


def setup(app):
    # Replaces myst-nb's role (registered when myst_nb was set up, before this extension).
    app.add_role("eval", RememberedEvalRole(), override=True)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
