"""A student of the 繁體中文 edition reads no English sentence in what a problem set prints.

Every check of every problem set is run in zh-TW on the seed's variant: on the right answer, on
every kind of wrong answer and typical slip that the messages' test drives
(:mod:`tests.test_exercises_messages`), while solving (``reveal=False``) and as the feedback page
shows it after grading (``reveal=True``); with the options of its multiple-choice questions as
``show_options`` prints them, its banner and its summary. A message fails when it holds a run
of English words that is not code, a name, math or a quoted answer: three words or more in a row
(a word of :data:`ALLOWED` does not count), once quotes, code and formulas are taken out.
"""

from __future__ import annotations

import contextlib
import io
import re

import numpy as np
import pytest

from qkv_book.language import speaking
from qkv_exercises.checking import qkv_switched_off
from qkv_exercises.checks import FunctionCheck, seed_for
from qkv_exercises.identity import solver
from qkv_exercises.notebook import Session
from qkv_exercises.problem_sets import get_problem_set, names

from .notebook_support import outcomes_of
from .test_exercises_messages import reference, wrong_answers, wrong_functions

# Words a Chinese message keeps in English: the course's terms written as in the book, names of
# things in code, units. They never make a run by themselves.
ALLOWED = {"token", "tokens", "softmax", "query", "key", "value", "Query", "Key", "Value", "float32", "float16",
           "bfloat16", "GiB", "MiB", "KiB", "GB", "bytes", "ViT", "GPT", "KV", "cache", "RoPE", "ALiBi",
           "CLS", "logits", "logit", "ReLU", "GELU", "batch", "dtype", "numpy", "NumPy", "PyTorch", "True",
           "False", "None", "nan", "inf", "NaN", "sin", "cos", "exp", "log", "max", "min", "sum", "mean",
           "argmax", "argmin", "tril", "triu", "reshape", "transpose", "keepdims", "axis", "def", "return",
           "STUDENT_ID", "PRACTICE", "LANGUAGE", "Transformer", "Adam", "SGD", "LayerNorm", "gamma", "beta", "sigma",
           "eps", "delta", "normalised", "dQ", "dK", "dV", "dO"}
QUOTED = re.compile(r"'[^'\n]*'|\"[^\"\n]*\"|`[^`\n]*`|「[^」\n]*」|“[^”\n]*”")
_CJK = "\u3000-\u303f\u3400-\u9fff\uff00-\uffef"
# a name, a call, a formula: a stretch of text with one of code's signs (a dot or colon only inside it)
CODE = re.compile(rf"[^\s{_CJK}]*(?:[_=^/\\()\[\]{{}}*+<>|@$]|\w[.:]\w|\d)[^\s{_CJK}]*")
# what the student's own code raised, as Python says it: "ValueError: matmul: Input operand 1 ..."
RAISED = re.compile(r"\b[A-Z]\w*(?:Error|Exception|Warning|Interrupt)\b:.*$", re.MULTILINE)
TOKEN = re.compile(rf"[A-Za-z][A-Za-z'-]+|[{_CJK}]+")  # a letter alone is math: x, a, n
RUN = 3  # words in a row that make an English sentence


def english_runs(message: str) -> list[str]:
    """The runs of English words of ``message`` outside quotes, code and math: Chinese ends a run, and a
    word of :data:`ALLOWED`, a quote or code neither counts nor ends one."""
    text = CODE.sub(" ", QUOTED.sub(" ", RAISED.sub(" ", re.sub(r"\x1b\[\d+m", "", message))))
    runs, current = [], []
    for token in TOKEN.findall(text) + ["。"]:
        if token[0].isascii():
            if token not in ALLOWED:
                current.append(token)
            continue
        if len(current) >= RUN:
            runs.append(" ".join(current))
        current = []
    return runs


def test_the_english_finder_sees_a_sentence_and_not_code_names_or_quotes():
    assert english_runs("did you divide the scores by sqrt(d_k)? Left to right, then top to bottom.") == [
        "did you divide the scores by Left to right then top to bottom"]
    assert english_runs("A[1] 的總和是 1.37：你是不是對行（axis=0）取了 softmax？") == []
    assert english_runs('not_shown 是 "b"：選項 "The values that the weights mix"') == []
    assert english_runs("q_t K^T / sqrt(d_k) 用了 np.exp(x - x.max(axis=-1, keepdims=True))") == []
    assert english_runs("在 head 1 中，2 號 token 最注意 晚到") == []
    assert english_runs("softmax(x) 引發了 ValueError: something of the student's went wrong") == []
    assert english_runs("weights_head1 正確：it is the softmax of the scores") == ["it is the of the scores"]


def messages_of(problem_set: str) -> list[tuple[str, str]]:
    """``(what, message)``: everything the checks of ``problem_set`` say on the seed's variant."""
    ps = get_problem_set(problem_set)
    givens = ps.givens(0)
    said = []
    for check in ps.checks:
        for reveal in (False, True):
            said += [(f"{check.grade_id} {what} reveal={reveal}", message)
                     for what, message in _verdicts(problem_set, check, givens, reveal)]
    session = Session(ps, solver("", 0))
    printed = io.StringIO()
    with contextlib.redirect_stdout(printed):
        print(session.banner())
        for name, value in givens.items():
            if isinstance(value, tuple) and value and all(isinstance(v, str) and " " in v for v in value):
                session.show_options(value)
        session.summary()
    said.append(("banner, options and summary", printed.getvalue()))
    return said


def _verdicts(problem_set, check, givens, reveal):
    if check.kind == "value":
        expectation = check.expect(givens)
        answers = [("the right answer", expectation.expected)] + wrong_answers(expectation)
        for kind, answer in answers:
            yield kind, check.judge(answer, givens, reveal=reveal).message
    elif check.kind == "choice":
        for answer in list(check.expect(givens).choices) + [None, 2, "zzz"]:
            yield repr(answer), check.judge(answer, givens, reveal=reveal).message
    elif isinstance(check, FunctionCheck):
        calls = (check.calls(givens, np.random.default_rng(seed_for(problem_set, check.grade_id, "someone")))
                 if check.hidden else get_problem_set(problem_set).visible_calls(check, givens))
        right = [("the right function", lambda *a, **k: reference(check.answer, *a, **k))]
        for kind, func in right + wrong_functions(check.answer):
            with qkv_switched_off(), np.errstate(all="ignore"):
                outcomes = outcomes_of(func, calls)
                yield kind, check.judge(outcomes, calls, reveal=reveal).message


@pytest.mark.parametrize("problem_set", names())
def test_no_message_of_a_problem_set_speaks_english_in_zh_tw(problem_set):
    with speaking("zh-TW"):
        said = messages_of(problem_set)
    english = [f"{what}: {runs}\n    {message}" for what, message in said if (runs := english_runs(message))]
    assert not english, f"{problem_set}: {len(english)} messages in English:\n" + "\n".join(english[:40])


# ---------------------------------------------------------------- the grader's own words on a feedback page
#
# A zh-TW submission that stops early, leaves its answers undefined or runs past its time limit is
# judged from its run record (as the sandbox would hand it back) and its feedback page written: the
# verdicts and notes the student reads there speak Chinese, while each note stays English for the
# instructor's console.


def _plan_and_cells():
    from qkv_grading import jobs

    from .exercise_support import SOURCE
    from .grading_support import PS2

    plan = jobs.plan(SOURCE / PS2, get_problem_set(PS2))
    cells, _ = jobs.arrange(plan, None)
    jobs.build_job(plan, cells, "hana", "k" * 64)  # numbers every cell the sandbox runs
    return plan, cells


def _graded_in_chinese(case: str):
    """``(graded, page)`` of a zh-TW submission whose run went as ``case`` says."""
    from qkv_grading import feedback, judging
    from qkv_grading.run_record import CellRecord, RunRecord
    from qkv_grading.sandbox import Limits

    plan, cells = _plan_and_cells()
    ran = [c for c in cells if c.job_id is not None]
    answer = next(c for c in ran if c.kind == "answer")  # the first answer cell: every check comes after it
    before = [CellRecord(c.job_id, answer="missing" if c.kind == "test" else "none")
              for c in ran if c.job_id < answer.job_id]
    if case == "stops early":  # the process ends in the first answer cell
        record = RunRecord("ended", tuple(before), in_cell=answer.job_id, exit_code=1)
    elif case == "leaves its answers undefined":  # every check finds its name undefined
        record = RunRecord("finished", tuple(CellRecord(c.job_id, answer="missing" if c.kind == "test" else "none")
                                             for c in ran))
    elif case == "hands back what no answer encodes":  # data the sandbox's encoder never writes
        record = RunRecord("finished", tuple(CellRecord(c.job_id, answer="value", value={"t": "bogus"})
                                             if c.kind == "test" else CellRecord(c.job_id) for c in ran))
    else:  # "times out": the first answer cell loops until the limit
        record = RunRecord("timed_out", (*before, CellRecord(answer.job_id, timed_out=True)), in_cell=answer.job_id)
    graded = judging.judge(plan, "hana", "k" * 64, cells, record, Limits(notebook_seconds=30, cell_seconds=5),
                           notebook_language="zh-TW")
    return graded, feedback.feedback_html(plan, graded), answer


def _page_text(page: str) -> list[str]:
    """The texts of a feedback page's notes and its table of checks, unescaped."""
    import html

    notes = re.findall(r"<li>(.*?)</li>", page, re.S)
    checks = re.findall(r"<td><pre>(.*?)</pre></td>", page, re.S)
    return [html.unescape(text) for text in notes + checks]


@pytest.mark.parametrize("case, console", [
    ("stops early", "the notebook's process ended (exit code 1) in cell {cell}; the checks after it were not "
                    "reached"),
    ("leaves its answers undefined", None),
    ("hands back what no answer encodes", None),
    ("times out", "cell {cell} ran past the time limit of 5 s per cell and was stopped"),
])
def test_the_graders_verdicts_and_notes_on_a_chinese_feedback_page_speak_chinese(case, console):
    graded, page, answer = _graded_in_chinese(case)
    texts = _page_text(page)
    assert len(texts) >= len(graded.checks) > 0 and not any(c.passed for c in graded.checks.values())
    english = [f"{runs}: {text}" for text in texts if (runs := english_runs(text))]
    assert not english, f"{case}: English on the zh-TW feedback page:\n" + "\n".join(english)
    assert all(re.search(f"[{_CJK}]", text) for text in texts), texts
    if console is not None:  # the instructor's console reads the same note in English
        assert console.format(cell=answer.grade_id) in graded.notes, graded.notes
        assert f"儲存格 {answer.grade_id}" in page, "the note names the cell the notebook stopped in"


@pytest.mark.parametrize("case, words", [
    ("stops early", "未檢查"),  # not checked
    ("leaves its answers undefined", "沒有定義"),  # not defined
    ("hands back what no answer encodes", "無法讀成答案"),  # cannot be read as an answer
    ("times out", "時間限制"),  # time limit
])
def test_each_way_of_not_being_judged_says_why_in_chinese(case, words):
    graded, _, _ = _graded_in_chinese(case)
    messages = [c.message for c in graded.checks.values()]
    assert all(words in message for message in messages), messages
    checked = {check.grade_id: check.answer for check in get_problem_set(graded.problem_set).checks}
    for grade_id, result in graded.checks.items():
        assert checked[grade_id] in result.message or case in ("stops early", "times out"), result.message


def test_an_english_submission_keeps_the_graders_english():
    from qkv_grading import feedback, judging
    from qkv_grading.run_record import RunRecord
    from qkv_grading.sandbox import Limits

    plan, cells = _plan_and_cells()
    graded = judging.judge(plan, "bob", "k" * 64, cells, RunRecord("ended", (), in_cell=0, exit_code=1), Limits())
    page = feedback.feedback_html(plan, graded)
    assert "Not checked: the notebook stopped before this check (the notebook&#x27;s process ended (exit code 1)" \
        in page, page[:3000]
    assert not re.search(f"[{_CJK}]", "".join(_page_text(page)))
