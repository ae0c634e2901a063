"""A problem set that exists only for the grading tests: ``ps99_probe``.

It has every kind of check the grader handles: a visible and a hidden value check and
a visible and a hidden function check, so that the tests can prove that hidden tests,
their inputs' expected outputs and their expected values never reach a feedback page.
The grading tests put this folder on ``qkv_exercises.problem_sets.__path__`` before
running the real command (:func:`tests.grading_support.grading`); the notebook is made
by :func:`tests.grading_support.probe_notebook`.
"""

from __future__ import annotations

from qkv.attention import softmax
from qkv_exercises import variants
from qkv_exercises.checking import CODE_TOLERANCE, Expectation, judge_value
from qkv_exercises.expectations import expect_attention_step
from qkv_exercises.checks import Call, FunctionCheck, ProblemSet, ValueCheck

KEYS = ("k1", "k2", "k3")


def givens(variant: int) -> dict:
    single = variants.q1_example(variant)
    return {"q1": single.Q, "K": single.K, "V": single.V, "keys": KEYS}


def visible_calls(g, rng) -> list[Call]:
    return [Call((g["q1"] @ g["K"].T,), label="softmax(q1 K^T)")]


def hidden_calls(g, rng) -> list[Call]:
    return [Call((rng.normal(scale=3.0, size=(3, 4)),), label="softmax of a (3, 4) array")]


def judge_softmax(call: Call, result, reveal: bool):
    expected = softmax(call.args[0], axis=-1)
    return judge_value(result, call.label, Expectation(expected=expected, tol=CODE_TOLERANCE), reveal=reveal)


def _step(step: str, name: str):
    return lambda g: expect_attention_step(step, g["q1"], g["K"], g["V"], name=name, keys=g["keys"])


PROBLEM_SET = ProblemSet(
    name="ps99_probe",
    title="Grading probe",
    givens=givens,
    checks=(
        ValueCheck("scores", "scores", _step("S_raw", "scores"), "scores is q1 K^T."),
        ValueCheck("weights_hidden", "weights", _step("A", "weights"), "weights is softmax(q1 K^T / sqrt(2)).",
                   hidden=True),
        FunctionCheck("softmax_visible", "softmax", visible_calls, judge_softmax, "softmax of q1 K^T."),
        FunctionCheck("softmax_hidden", "softmax", hidden_calls, judge_softmax, "softmax of hidden inputs.",
                      hidden=True),
    ),
)
