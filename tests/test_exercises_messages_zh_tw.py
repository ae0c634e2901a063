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
