"""Feedback pages and autograded notebooks, made by the trusted grading process from a :class:`Graded`.

A feedback page (``feedback/<student>/<problem set>/<notebook>.html``) shows:

- the score, each check's points and message (a visible check's message states the
  expected value, now that grading is over; a hidden check's never does), and the
  notes on what went wrong while the notebook ran;
- the notebook as graded: the instructor's markdown rendered, every code cell and
  everything a student wrote or printed as escaped text (no HTML, no JavaScript, no
  rendered markdown from a student), each block bounded in size; test cells as the
  student's release shows them (without hidden tests).

Every text a student controls goes through :func:`qkv_grading.safe_text.stored` first,
here and in the autograded notebook: no lone surrogate, control character or
bidirectional override reaches a page or a file, only its visible escape.

The page loads nothing but MathJax, from the feedback folder (``_mathjax/``, beside the
student folders), and its Content-Security-Policy allows no other script, no inline
script and no connection anywhere.

The page speaks the submission's language (``Graded.language``, :mod:`qkv_grading.judging`):
its own words through :func:`qkv_exercises.language._` (so they share the checks' catalogue), the
notes on the submission as each :class:`~qkv_grading.notes.Note` says them in that language, and
the instructor's markdown translated from the problem set's catalogue in the course folder
(:mod:`qkv_grading.translation`); its ``lang`` says which.

The autograded notebook (``autograded/<student>/<problem set>/<notebook>.ipynb``) is the
notebook as it ran, for nbgrader's formgrader and the instructor: the source's cells with
their nbgrader metadata, the student's code cells with the text outputs the sandbox handed
back, and each markdown cell of the student's as the text typed, never rendered
(:func:`qkv_grading.markup.inert_markdown`). No attachment, metadata or output of a kind
other than text comes from the submission.
"""

from __future__ import annotations

import functools
import html
import shutil
from pathlib import Path

from qkv_book.language import speaking
from qkv_exercises.language import _

from . import translation
from .jobs import Plan, RunCell
from .judging import Graded
from .markup import inert_markdown
from .notes import shown
from .safe_text import stored

HTML_LANGUAGES = {"en": "en", "zh-TW": "zh-Hant-TW"}

MAX_SHOWN = 10_000  # characters of one cell's source or one output block
MAX_PAGE = 2_000_000  # characters of page after which the notebook is no longer shown
MATHJAX = "_mathjax"
POLICY = ("default-src 'none'; script-src 'self'; style-src 'self' 'unsafe-inline'; img-src 'self' data:; "
          "font-src 'self' data:; connect-src 'none'; form-action 'none'; base-uri 'none'")
STYLE = """
body { font-family: system-ui, sans-serif; max-width: 60rem; margin: 2rem auto; padding: 0 1rem; color: #222; }
pre { white-space: pre-wrap; word-break: break-word; background: #f6f6f6; padding: .5rem; margin: .25rem 0;
      font-size: .85rem; }
pre.output { background: #fff; border-left: 3px solid #ccc; }
pre.error { border-left-color: #c33; }
.cell { margin: 1rem 0; }
.label { font-size: .8rem; color: #666; }
.passed { color: #1a7f37; } .failed { color: #b42318; }
table { border-collapse: collapse; } td, th { padding: .2rem .6rem; border-bottom: 1px solid #ddd; text-align: left;
      vertical-align: top; }
.notes li { color: #8a4b00; }
.anchor-link { display: none; }
"""
MATHJAX_CONFIG = """window.MathJax = {
  tex: {inlineMath: [["$", "$"], ["\\\\(", "\\\\)"]], displayMath: [["$$", "$$"], ["\\\\[", "\\\\]"]], processEscapes: true},
  options: {ignoreHtmlClass: "page", processHtmlClass: "instructor", enableMenu: false},
  svg: {fontCache: "global"}
};
"""
# MathJax 3 (pip package django-static-mathjax): the SVG bundle and what it may load later.
MATHJAX_PARTS = ("tex-svg.js", "input", "ui", "a11y", "sre")


def escaped(text: str, limit: int = MAX_SHOWN) -> str:
    """``text`` as HTML text: made safe (:func:`safe_text.stored`), cut at ``limit`` characters, escaped."""
    text = stored(text)
    if len(text) > limit:
        text = text[:limit] + "\n... " + _("({count} more characters not shown)").format(count=len(text) - limit)
    return html.escape(text, quote=True)


@functools.lru_cache(maxsize=256)
def instructor_markdown(source: str) -> str:
    """An instructor's markdown cell (from the source notebook, never a student's) as HTML, math left for MathJax."""
    from nbconvert.filters.markdown_mistune import markdown2html_mistune

    return markdown2html_mistune(source)


def _output_html(item: dict) -> str:
    kind = item["kind"]
    if kind == "error":
        return f'<pre class="output error">{escaped(item["text"] or item["ename"] + ": " + item["evalue"])}</pre>'
    text = item["text"]
    if item.get("omitted"):
        text += "\n" + _("[{kinds} output not shown]").format(kinds=", ".join(item["omitted"]))
    css = "output error" if kind == "stderr" else "output"
    return f'<pre class="{css}">{escaped(text)}</pre>'


def _cell_html(cell: RunCell, graded: Graded, translate) -> str:
    outputs = "".join(_output_html(o) for o in graded.outputs.get(cell.job_id, ())) if cell.job_id is not None else ""
    if cell.kind == "markdown":
        return f'<div class="cell instructor">{instructor_markdown(translate(cell.source))}</div>'
    if cell.kind == "test":
        result = graded.checks.get(cell.grade_id)
        sc = cell.source_cell
        css = "passed" if result and result.passed else "failed"
        points = f"{result.points:g} / {result.max_points:g}" if result else f"0 / {sc.points:g}"
        title = {("passed", False): _("Test {grade_id}: passed, {points} points"),
                 ("failed", False): _("Test {grade_id}: failed, {points} points"),
                 ("passed", True): _("Hidden test {grade_id}: passed, {points} points"),
                 ("failed", True): _("Hidden test {grade_id}: failed, {points} points")}[css, sc.hidden].format(
            grade_id=sc.grade_id, points=points)
        return (f'<div class="cell test"><div class="label {css}">{escaped(title)}</div>'
                f"<pre>{escaped(sc.released_source)}</pre>{outputs}"
                f'<pre class="output {css}">{escaped(result.message if result else "")}</pre></div>')
    answer = _("your answer ({grade_id})").format(grade_id=cell.grade_id)
    labels = {"instructor": _("given"), "answer": answer, "manual": answer, "student-id": _("your student id"),
              "student": _("your own cell"), "student-markdown": _("your own text"), "answer-markdown": answer,
              "manual-markdown": answer}
    return (f'<div class="cell"><div class="label">{escaped(labels.get(cell.kind, cell.kind))}</div>'
            f"<pre>{escaped(cell.source)}</pre>{outputs}</div>")


def feedback_html(plan: Plan, graded: Graded, course_root: Path | None = None) -> str:
    """The feedback page of one graded submission (see the module docstring), in ``graded.language``; the
    markdown of the course at ``course_root`` translated (without it, the source's own words)."""
    with speaking(graded.language):
        catalogue = translation.problem_set_gettext(course_root, plan.name, graded.language) if course_root else None
        translate = (lambda text: translation.translate_markdown(text, catalogue)) if catalogue else (lambda t: t)
        return _feedback_html(plan, graded, translate, HTML_LANGUAGES.get(graded.language, "en"))


def _feedback_html(plan: Plan, graded: Graded, translate, html_language: str) -> str:
    title = _(plan.problem_set.title)
    score = _("{name} (Score: {score} / {max_score})").format(name=plan.name, score=f"{graded.score:.1f}",
                                                              max_score=f"{graded.max_score:.1f}")
    hidden = " " + _("(hidden)")
    rows = "".join(
        f'<tr><td>{escaped(c.grade_id)}{escaped(hidden) if c.hidden else ""}</td>'
        f'<td class="{"passed" if c.passed else "failed"}">{c.points:g} / {c.max_points:g}</td>'
        f"<td><pre>{escaped(c.message, 2000)}</pre></td></tr>"
        for c in graded.checks.values())
    notes = "".join(f"<li>{escaped(shown(n), 1000)}</li>" for n in graded.notes)
    student = f"<strong>{escaped(graded.student, 200)}</strong>"
    parts = [
        "<!DOCTYPE html>", f'<html lang="{html_language}"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{POLICY}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        f"<title>{escaped(_('{title}: feedback for {student}').format(title=title, student=graded.student), 400)}"
        "</title>",
        f"<style>{STYLE}</style>",
        f'<script src="../../{MATHJAX}/config.js"></script>',
        f'<script defer src="../../{MATHJAX}/tex-svg.js"></script>',
        '</head><body class="page">',
        f'<h1 class="instructor">{escaped(title)}</h1>',
        # The student's name goes in after escaping, so that a translation cannot unescape it.
        f"<p>{escaped(_('Feedback for {student}.')).replace('{student}', student)} <strong>{escaped(score)}</strong></p>",
    ]
    if notes:
        parts.append(f'<h2>{escaped(_("Notes"))}</h2><ul class="notes">{notes}</ul>')
    headings = "".join(f"<th>{escaped(word)}</th>" for word in (_("check"), _("points"), _("message")))
    parts.append(f"<h2>{escaped(_('Checks'))}</h2><table><tr>{headings}</tr>{rows}</table>")
    if graded.gradable:
        parts.append(f"<h2>{escaped(_('Your notebook, as graded'))}</h2>")
        length = sum(map(len, parts))
        for cell in graded.cells:
            block = _cell_html(cell, graded, translate)
            if length + len(block) > MAX_PAGE:
                parts.append(f"<p>{escaped(_('The rest of the notebook is not shown: the page would be too long.'))}</p>")
                break
            parts.append(block)
            length += len(block)
    parts.append("</body></html>")
    return "\n".join(parts)


def write_feedback(feedback_root: Path, plan: Plan, graded: Graded, course_root: Path | None = None) -> Path:
    """Write the feedback page of ``graded`` into ``feedback_root/<student>/<problem set>/`` (see
    :func:`feedback_html`); its path."""
    folder = Path(feedback_root) / graded.student / plan.name
    shutil.rmtree(folder, ignore_errors=True)
    folder.mkdir(parents=True)
    target = folder / f"{plan.notebook}.html"
    target.write_text(feedback_html(plan, graded, course_root), encoding="utf-8")
    return target


def copy_mathjax(feedback_root: Path) -> None:
    """Put MathJax and its configuration in ``feedback/_mathjax/``, where the feedback pages load them from."""
    import mathjax

    source = Path(mathjax.__file__).parent / "static" / "mathjax" / "es5"
    target = Path(feedback_root) / MATHJAX
    target.mkdir(parents=True, exist_ok=True)
    (target / "config.js").write_text(MATHJAX_CONFIG, encoding="utf-8")
    if (target / MATHJAX_PARTS[0]).is_file():
        return
    for part in MATHJAX_PARTS:
        if (source / part).is_dir():
            shutil.copytree(source / part, target / part, dirs_exist_ok=True)
        else:
            shutil.copy2(source / part, target / part)


# --------------------------------------------------------------------------- the autograded notebook


def _nb_output(item: dict) -> dict:
    kind, text = item["kind"], stored(item["text"])
    if kind in ("stdout", "stderr"):
        return {"output_type": "stream", "name": kind, "text": text}
    if kind == "error":
        return {"output_type": "error", "ename": stored(item["ename"]), "evalue": stored(item["evalue"]),
                "traceback": [text]}
    if kind == "cut":
        return {"output_type": "stream", "name": "stderr", "text": text + "\n"}
    data = {"text/plain": text}
    if kind == "result":
        return {"output_type": "execute_result", "data": data, "metadata": {}, "execution_count": None}
    return {"output_type": "display_data", "data": data, "metadata": {}}


STUDENT_TEXT_LABEL = "*A cell the student added, as typed:*\n\n"


def autograded_notebook(plan: Plan, graded: Graded) -> dict:
    """The notebook as graded, as nbformat 4 JSON: source cells with their nbgrader metadata, text outputs only."""
    cells = []
    for number, cell in enumerate(graded.cells):
        metadata = dict(cell.source_cell.metadata) if cell.source_cell is not None else {}
        source = stored(cell.source)
        if cell.kind in ("markdown", "student-markdown", "answer-markdown", "manual-markdown"):
            if cell.kind != "markdown":  # the student's text: shown as typed, never rendered
                source = STUDENT_TEXT_LABEL * (cell.kind == "student-markdown") + inert_markdown(source)
            cells.append({"cell_type": "markdown", "id": f"cell-{number}", "metadata": metadata, "source": source})
            continue
        outputs = [_nb_output(o) for o in graded.outputs.get(cell.job_id, ())] if cell.job_id is not None else []
        if cell.kind == "test":
            result = graded.checks.get(cell.grade_id)
            message = stored(result.message) if result is not None else ""
            if result is not None and not result.passed:
                outputs.append({"output_type": "error", "ename": "AnswerMismatch", "evalue": message,
                                "traceback": [f"AnswerMismatch: {message}"]})
            elif result is not None:
                outputs.append({"output_type": "stream", "name": "stdout", "text": f"\u2713 {message}\n"})
        cells.append({"cell_type": "code", "id": f"cell-{number}", "metadata": metadata, "source": source, "outputs": outputs,
                      "execution_count": None})
    return {"nbformat": 4, "nbformat_minor": 5, "cells": cells,
            "metadata": {"kernelspec": {"display_name": "Python 3 (ipykernel)", "language": "python",
                                        "name": "python3"}, "language_info": {"name": "python"}}}
