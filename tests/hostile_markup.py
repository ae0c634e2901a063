"""Hand-ins whose markup tries to run on the pages an instructor opens: formgrader and nbgrader's feedback.

:func:`markup_attacks` adds them to the session's adversarial class (``tests/adversarial_class.py``),
in the same shape as its other attacks. One student, ``d'arcy_學生`` (an id with a quote and
Chinese characters, which every page must show as it is), hands in problem set 2 with blank
answers and every way markup of a student's reaches a page:

- markdown cells of their own: raw HTML (script, event handlers, SVG, MathML, frames, forms,
  meta refresh, base, styles), ``javascript:`` and ``data:`` links, pictures from another
  server, attachments (an SVG with a script, an HTML page), and MathJax macros that make links,
  classes, ids or styles or load code (``\\href``, ``\\class``, ``\\cssId``, ``\\style``,
  ``\\unicode``, ``\\mmlToken``, ``\\require``);
- saved outputs of every kind: HTML, SVG, JavaScript, a widget, markdown, LaTeX, images with
  hostile data and metadata, an error and a stream holding HTML;
- hostile cell metadata (a tag), and notebook metadata (a title, a widget state).

Every script in them, if it ever ran, would leave a mark a test can see: a dialog, a console
message, ``data-pwned`` on ``<body>``, the page's title changed to ``PWNED``, and requests to
the Jupyter API (a kernel started). :func:`hostile_notebook` is also what the browser tests put
in place of the autograded notebook, as plain ``nbgrader autograde`` would leave it (every cell
and output as handed in), to try the pages' own defences without the grading process's.
"""

from __future__ import annotations

import base64
import json

from .grading_support import PS2, released

STUDENT = "d'arcy_學生"
# What a script of the student's does if it ever runs: each is a mark the browser tests look for.
RUN = ("alert(1);console.log('STUDENT-SCRIPT');document.body.setAttribute('data-pwned','1');"
       "document.title='PWNED';fetch('/api/kernels',{method:'POST'})")
MARKS = {"title": "PWNED", "console": "STUDENT-SCRIPT", "attribute": "data-pwned"}
ELSEWHERE = "http://127.0.0.1:9"  # a server no page may ask anything of


def _b64(text: str) -> str:
    return base64.b64encode(text.encode("utf-8")).decode("ascii")


SVG = f'<svg xmlns="http://www.w3.org/2000/svg" onload="{RUN}"><script>{RUN}</script><circle r="5"/></svg>'
PAGE = f"<html><body><script>{RUN}</script></body></html>"

HTML_CELL = f"""## My notes

<script>{RUN}</script>
<img src="x" onerror="{RUN}">
<svg onload="{RUN}"><script>{RUN}</script></svg>
<math><mi xlink:href="javascript:{RUN}">m</mi></math>
<iframe src="javascript:{RUN}"></iframe><iframe srcdoc="<script>{RUN}</script>"></iframe>
<object data="data:text/html;base64,{_b64(PAGE)}"></object><embed src="data:image/svg+xml;base64,{_b64(SVG)}">
<form action="/api/contents" method="post"><button formaction="javascript:{RUN}">Save</button></form>
<details open ontoggle="{RUN}"><summary>more</summary></details>
<video><source onerror="{RUN}"></video><body onload="{RUN}">
<meta http-equiv="refresh" content="0; url=javascript:{RUN}">
<base href="{ELSEWHERE}/">
<link rel="stylesheet" href="{ELSEWHERE}/style.css">
<style>body {{ background: url("{ELSEWHERE}/bg.png"); }} .score {{ display: none; }}</style>
<div style="position: fixed; top: 0; left: 0; width: 100%; height: 100%; background: white">Score: 9 / 9</div>
<noscript><p title="</noscript><img src=x onerror={RUN}>"></noscript>
<a href="javascript:{RUN}">my score</a> <a href="JaVaScRiPt:{RUN}">again</a>
<a href="data:text/html;base64,{_b64(PAGE)}">a page</a>
<a href="/api/contents/gradebook.db?download=1">the gradebook</a>
<img src="{ELSEWHERE}/tracker.png"> <img src="data:image/svg+xml;base64,{_b64(SVG)}">
<input autofocus onfocus="{RUN}"> <textarea class="comment" id="scores_q1-comment">forged</textarea>
<span id="statusmessage" class="score">forged</span>
"""

MARKDOWN_CELL = f"""A [link](javascript:{RUN.replace(')', '%29')}) and [another](data:text/html;base64,{_b64(PAGE)}),
a picture ![x]({ELSEWHERE}/md.png), an attachment ![svg](attachment:evil.svg) and ![page](attachment:page.html),
and `code` with <b onmouseover="{RUN}">bold</b> in it.
"""

MATH_CELL = r"""Math: $\href{javascript:alert(1)}{x}$, $\class{pwned-class}{y}$, $\cssId{pwned}{z}$,
$\style{position: fixed; top: 0; left: 0; width: 100%; height: 100%; background: red}{w}$, $\unicode{x1F600}$,
$\mmlToken{mi}[href="javascript:alert(1)"]{v}$, $\require{http://127.0.0.1:9/x.js}$, $\require{html}\href{javascript:alert(1)}{u}$,
$$\def\bomb{\bomb\bomb}\bomb$$ and \begin{equation}\href{javascript:alert(1)}{e}\end{equation}
"""

TEXT_OUTPUT = f"<script>{RUN}</script><img src=x onerror=\"{RUN}\">"


def _outputs() -> list[dict]:
    """A saved output of every kind (the grader runs the notebook afresh, but a page may show these)."""
    png_data = "iVBORw0KGgo=\" onerror=\"" + RUN
    return [
        {"output_type": "display_data", "metadata": {}, "data": {
            "text/html": f"<b>bold</b><script>{RUN}</script><img src=x onerror=\"{RUN}\">", "text/plain": "html"}},
        {"output_type": "display_data", "metadata": {}, "data": {"image/svg+xml": SVG, "text/plain": "svg"}},
        {"output_type": "display_data", "metadata": {}, "data": {"application/javascript": RUN, "text/plain": "js"}},
        {"output_type": "display_data", "metadata": {}, "data": {
            "application/vnd.jupyter.widget-view+json": {"model_id": "x</script><script>" + RUN + "</script>",
                                                         "version_major": 2, "version_minor": 0}}},
        {"output_type": "display_data", "metadata": {}, "data": {"text/markdown": f"[md](javascript:{RUN})"}},
        {"output_type": "display_data", "metadata": {}, "data": {"text/latex": r"$\href{javascript:alert(1)}{l}$"}},
        {"output_type": "display_data", "data": {"image/png": png_data},
         "metadata": {"image/png": {"width": f"1 onerror={RUN}", "height": "1\" onerror=\"" + RUN,
                                    "alt": f"\"><script>{RUN}</script>"},
                      "filenames": {"image/png": "/api/contents/gradebook.db"}}},
        {"output_type": "display_data", "metadata": {}, "data": {"application/x-unknown": TEXT_OUTPUT}},
        {"output_type": "execute_result", "execution_count": 3, "metadata": {},
         "data": {"text/plain": TEXT_OUTPUT}},
        {"output_type": "stream", "name": "stdout", "text": TEXT_OUTPUT},
        {"output_type": "error", "ename": f"<b onmouseover=\"{RUN}\">Error</b>", "evalue": TEXT_OUTPUT,
         "traceback": [TEXT_OUTPUT, "\x1b[31m" + TEXT_OUTPUT + "\x1b[0m"]},
    ]


def _markdown(cell_id: str, source: str, **extra) -> dict:
    return {"cell_type": "markdown", "id": cell_id, "metadata": {}, "source": source, **extra}


def hostile_notebook(course) -> dict:
    """Problem set 2 as released (blank answers), with the student's hostile cells, outputs and metadata."""
    nb = json.loads(json.dumps(released(course, PS2)))
    # nbformat refuses a tag with a comma, and nbgrader a graded cell the gradebook does not know:
    # either would keep the notebook from any page.
    tags = {"tags": ["x\" onmouseover=\"alert(1)"]}
    own = [
        _markdown("own-html", HTML_CELL),
        _markdown("own-markdown", MARKDOWN_CELL, attachments={
            "evil.svg": {"image/svg+xml": _b64(SVG)}, "page.html": {"text/html": _b64(PAGE)}}),
        _markdown("own-math", MATH_CELL),
        {"cell_type": "raw", "id": "own-raw", "metadata": {"raw_mimetype": "text/html"}, "source": f"<script>{RUN}</script>"},
        {"cell_type": "code", "id": "own-outputs", "metadata": tags, "execution_count": 7,
         "source": "print('my outputs')", "outputs": _outputs()},
    ]
    at = next(i for i, c in enumerate(nb["cells"]) if c["metadata"].get("nbgrader", {}).get("grade_id") == "answer_scores_q1")
    nb["cells"][at:at] = own
    nb["metadata"]["title"] = f"</title><script>{RUN}</script>"
    nb["metadata"]["widgets"] = {"application/vnd.jupyter.widget-state+json": {
        "state": {"x": {"model_name": "HTMLModel", "state": {"value": f"<script>{RUN}</script>"}}},
        "version_major": 2, "version_minor": 0}}
    return nb


def markup_attacks(course, listener_port) -> dict:
    """``{student: (problem set, notebook, extra files, expected score, words its notes must hold)}``."""
    return {STUDENT: (PS2, hostile_notebook(course), {}, 0, [])}

