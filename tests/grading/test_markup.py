"""A student's text reaches the instructor's pages as text: never as markup, link, picture or script.

The renderers are the truth here: nbconvert's (formgrader's and nbgrader's feedback) and a
CommonMark one (markdown-it, as JupyterLab's renderers follow CommonMark) must show exactly what
the student typed, whatever it is; bleach's output is read back by an HTML parser.
"""

from __future__ import annotations

import html
import html.parser
import re

import nbformat
from hypothesis import given, settings
from hypothesis import strategies as st
from markdown_it import MarkdownIt
from nbconvert.filters.markdown_mistune import markdown2html_mistune

from qkv_grading import feedback, jobs, judging, markup
from qkv_grading.collect import id_problem

from ..exercise_support import SOURCE
from ..grading_support import PS2

# Text that stresses markdown: fences of both kinds, HTML, math, escapes, indentation, Chinese.
MARKDOWN_TEXT = st.lists(st.sampled_from(list("`~$\\<>&\"'*_[]()!#|- \t\nax學") + ["```", "$$", "\n\n", "<b>"]),
                         max_size=40).map("".join)
PAYLOADS = [
    "<script>alert(1)</script>", '<img src="x" onerror="alert(1)">', '<svg onload="alert(1)"><circle/></svg>',
    '<a href="javascript:alert(1)">a</a>', '<a href=" JaVaScRiPt:alert(1)">b</a>', '<a href="/api/contents">c</a>',
    '<a href="data:text/html;base64,PHNjcmlwdD4=">d</a>', '<img src="http://127.0.0.1:9/t.png">',
    '<img src="data:image/svg+xml;base64,PHN2Zz4=" onload="alert(1)">', '<iframe src="javascript:alert(1)"></iframe>',
    '<math><mi xlink:href="javascript:alert(1)">m</mi></math>', '<form action="/x"><button>b</button></form>',
    '<div style="position:fixed">x</div>', '<span class="score navbar-fixed-top" id="statusmessage">s</span>',
    '<noscript><p title="</noscript><img src=x onerror=alert(1)>"></noscript>', "<style>body{display:none}</style>",
    '<meta http-equiv="refresh" content="0;url=javascript:alert(1)">', '<base href="http://127.0.0.1:9/">',
    '<details open ontoggle="alert(1)">d</details>', "<!-- <script>alert(1)</script> -->",
]


class Elements(html.parser.HTMLParser):
    """Every element and attribute of an HTML fragment, as a browser's parser reads them."""

    def __init__(self, fragment: str):
        super().__init__()
        self.elements: list[tuple[str, dict]] = []
        self.feed(fragment)

    def handle_starttag(self, tag, attrs):
        self.elements.append((tag, dict(attrs)))


def code_text(rendered: str) -> str:
    """The text of the one ``<pre>`` block ``rendered`` holds (and assert there is nothing else)."""
    blocks = re.findall(r"<pre[^>]*>(.*?)</pre>", rendered, flags=re.S)
    assert len(blocks) == 1, f"not one code block: {rendered!r}"
    rest = re.sub(r"<pre[^>]*>.*?</pre>", "", rendered, flags=re.S)
    assert re.sub(r"<[^>]+>", "", rest).strip() == "", f"something besides the code block: {rendered!r}"
    return html.unescape(re.sub(r"<[^>]+>", "", blocks[0]))


@settings(max_examples=300, deadline=None)
@given(MARKDOWN_TEXT)
def test_a_students_markdown_is_shown_exactly_as_typed_by_each_renderer(text):
    source = markup.inert_markdown(text)
    for name, rendered in (("nbconvert", markdown2html_mistune(source)),
                           ("CommonMark", MarkdownIt("commonmark").render(source))):
        assert code_text(rendered).rstrip("\n") == text.rstrip("\n"), f"{name} shows {rendered!r} for {text!r}"


def test_a_fence_is_longer_than_every_run_of_backticks_in_the_text():
    assert markup.fence_for("no ticks") == "```"
    assert markup.fence_for("a ```` b ` c") == "`````"


def test_sanitised_html_drops_every_way_to_run_script_or_make_a_request():
    for payload in PAYLOADS:
        clean = markup.sanitised_html(payload)
        for tag, attributes in Elements(clean).elements:
            assert tag in markup.TAGS, f"{payload}: <{tag}> kept"
            for name, value in attributes.items():
                assert not name.startswith("on") and name not in ("style", "id"), f"{payload}: {name} kept"
                if name == "href":
                    assert value.split(":")[0].strip().lower() in markup.LINK_SCHEMES, f"{payload}: link {value}"
                if name == "src":
                    assert value.startswith("data:image/"), f"{payload}: picture {value}"
                if name == "class":
                    assert "score" not in value and "navbar" not in value, f"{payload}: class {value}"


def test_sanitised_html_shows_a_tag_it_does_not_allow_as_text():
    assert markup.sanitised_html("<script>alert(1)</script>") == "&lt;script&gt;alert(1)&lt;/script&gt;"


def test_sanitised_html_keeps_what_rendered_markdown_needs():
    kept = ('<h2>Notes</h2><p><strong>a</strong> <em>b</em> <code>c</code> <a href="https://example.org">d</a></p>'
            '<ul><li>e</li></ul><table><tbody><tr><td>f</td></tr></tbody></table>'
            '<img alt="g" src="data:image/png;base64,iVBORw0KGgo="><div class="highlight hl-python"><pre>'
            '<span class="k">import</span></pre></div>')
    assert markup.sanitised_html(kept) == kept


def test_image_data_is_base64_or_nothing():
    assert markup.image_data("iVBORw0KGgo=\n") == "iVBORw0KGgo=\n"
    assert markup.image_data(["iVBOR", "w0KGgo="]) == "iVBORw0KGgo="
    assert markup.image_data('iVBORw0KGgo=" onerror="alert(1)') == ""


def test_an_id_that_formgrader_would_read_as_markup_is_refused():
    for name in ("<img src=x onerror=alert(1)>", 'a"b', "x>y"):
        assert "markup" in (id_problem(name) or ""), name
    assert id_problem("d'arcy_學生") is None


def test_the_autograded_notebook_holds_a_students_markdown_as_the_text_typed():
    from qkv_exercises.problem_sets import get_problem_set

    plan = jobs.plan(SOURCE / PS2, get_problem_set(PS2))
    cells, _ = jobs.arrange(plan, None)
    typed = '<img src="x" onerror="alert(1)"> ![p](attachment:p.svg) $\\href{javascript:alert(1)}{x}$'
    cells.insert(1, jobs.RunCell("student-markdown", typed))
    nb = feedback.autograded_notebook(plan, judging.Graded("d'arcy", PS2, cells, max_score=plan.max_score))
    nbformat.validate(nbformat.from_dict(nb))
    own = nb["cells"][1]
    assert own["metadata"] == {} and "attachments" not in own
    label, block = own["source"].split("\n\n", 1)
    assert label == feedback.STUDENT_TEXT_LABEL.strip()
    assert code_text(markdown2html_mistune(block)).rstrip("\n") == typed
    instructors = [c["source"] for c in nb["cells"] if c["cell_type"] == "markdown"][0]
    assert instructors.startswith("# Problem set 2"), "the instructor's markdown is kept as markdown"
