"""Problem set 4: single-head attention, in code.

The student writes ``softmax(x, axis=-1)`` and ``scaled_dot_product_attention(Q, K, V)``
with numpy; the visible checks call them on the student's own variant of seed 002's
query (:func:`qkv_exercises.variants.q1_example`), of head 1 of seed 000's delivery example, and
on small inputs that try every behaviour the hidden checks grade (a softmax along axis
0 and on 3-D scores, attention with n_q != n_k ...). Then the attention matrix of seed
001's 中和 有 一個 永和路 (:func:`qkv.examples.zhonghe_example`) mixes a matrix of values
drawn per variant, by hand.
"""

from __future__ import annotations

import numpy as np

from qkv import examples, linear, trace_head

from .. import variants
from ..checks import ProblemSet, ValueCheck, function_checks
from ..expectations import expect_weighted_sum
from ..functions import (
    attention_call,
    explain_attention_error,
    explain_softmax_error,
    judge_attention,
    judge_softmax,
    random_attention_calls,
    random_halves,
    random_softmax_calls,
    softmax_call,
)
from ..variants import VariantDraw, apart_from_seed
from ..language import N_, _

SEED_VALUES = np.array([
    [2.0, 0.0],  # 中和
    [0.0, 1.0],  # 有
    [1.0, 1.0],  # 一個
    [0.0, 4.0],  # 永和路
])  # (n, d_v) = (4, 2): the values of variant 0


def givens(variant: int) -> dict:
    """The variant's q1 example, head 1 of its delivery example, and the values that 中和 有 一個 永和路 mix."""
    single = variants.q1_example(variant)
    delivery = variants.delivery_example(variant)
    head_1 = trace_head(delivery.X, *delivery.heads[0])
    zhonghe = examples.zhonghe_example()
    return {
        "q1": single.Q, "K": single.K, "V": single.V,
        "Q1": head_1.Q.Z, "K1": head_1.K.Z, "V1": head_1.V.Z, "S1": head_1.S,
        "tokens": zhonghe.tokens, "A_zhonghe": zhonghe.weights,
        "V_zhonghe": SEED_VALUES.copy() if variant == 0 else _zhonghe_values(variant, zhonghe.weights),
    }


def _zhonghe_values(variant: int, weights: np.ndarray) -> np.ndarray:
    """Whole numbers from 0 to 4, four different rows, and an output that is not the seed's anywhere near."""
    seed_output = linear(weights, SEED_VALUES)
    return VariantDraw("ps4_zhonghe_values", variant).until(
        lambda d: np.array(d.integers(0, 4, (4, 2)), dtype=float),
        lambda V: len({tuple(v) for v in V}) == 4 and apart_from_seed(linear(weights, V), seed_output),
        "values")


_softmax_check = function_checks("softmax", judge_softmax, explain_softmax_error)
_attention_check = function_checks("scaled_dot_product_attention", judge_attention, explain_attention_error)


def _rows_calls(g, rng) -> list:
    return [softmax_call(g["S1"], -1, what=_("S1, head 1's scaled scores"), behaviour=N_("rows of a matrix")),
            softmax_call(random_halves(rng, (3, 4)), -1, what=_("an array of shape {shape}").format(shape="(3, 4)"),
                         behaviour=N_("rows of a matrix"))]


def _axis_calls(g, rng) -> list:
    shape = _("an array of shape {shape}")
    return [softmax_call(random_halves(rng, (5, 3)), 0, what=shape.format(shape="(5, 3)"), behaviour=N_("axis 0")),
            softmax_call(random_halves(rng, (2, 3, 4)), 1, what=shape.format(shape="(2, 3, 4)"),
                         behaviour=N_("3-D, middle axis")),
            softmax_call(random_halves(rng, (2, 2, 3)), -1, what=shape.format(shape="(2, 2, 3)"),
                         behaviour=N_("3-D, last axis"))]


def _cross_calls(g, rng) -> list:
    Q, K, V = random_halves(rng, (2, 3)), random_halves(rng, (4, 3)), random_halves(rng, (4, 5))
    return [attention_call(Q, K, V, behaviour="n_q != n_k, d_v != d_k")]


PROBLEM_SET = ProblemSet(
    name="ps4_single_head",
    title=N_("Problem set 4: single-head attention"),
    givens=givens,
    checks=(
        _softmax_check("softmax_one_row",
                       lambda g, rng: [softmax_call((g["q1"] @ g["K"].T / np.sqrt(2))[0], None,
                                                    what=_("q1's scaled scores"),
                                                    behaviour=N_("1-D, default axis"))],
                       "softmax of q1's scaled scores (1-D, no axis given) matches qkv.softmax to 1e-6."),
        _softmax_check("softmax_rows_of_matrix", _rows_calls,
                       "softmax(S, axis=-1) normalises each row of a matrix of scores, to 1e-6."),
        _softmax_check("softmax_large_scores",
                       lambda g, rng: [softmax_call(1000 + g["S1"][0], None, what=_("head 1's first row of scores "
                                                           "+ 1000"), behaviour=N_("large scores"))],
                       "softmax of scores near 1000 stays finite (the maximum is subtracted first)."),
        _softmax_check("softmax_along_axis", _axis_calls,
                       "softmax along axis 0 of a matrix, and along the middle and last axes of 3-D scores."),
        _softmax_check("softmax_random_inputs", lambda g, rng: random_softmax_calls(rng),
                       "softmax matches qkv.softmax on random scores of several shapes, along several axes.",
                       hidden=True),
        _attention_check("attention_q1",
                         lambda g, rng: [attention_call(g["q1"], g["K"], g["V"], what="q1, K, V",
                                                        behaviour=N_("one query"))],
                         "scaled_dot_product_attention(q1, K, V) returns qkv's output and weights, to 1e-6."),
        _attention_check("attention_head1",
                         lambda g, rng: [attention_call(g["Q1"], g["K1"], g["V1"], what="Q1, K1, V1",
                                                        behaviour="n_q = n_k")],
                         "scaled_dot_product_attention on head 1's Q, K, V returns qkv's output and weights."),
        _attention_check("attention_cross", _cross_calls,
                         "scaled_dot_product_attention with 2 queries over 4 keys (d_k = 3, d_v = 5)."),
        _attention_check("attention_random_inputs", lambda g, rng: random_attention_calls(rng),
                         "scaled_dot_product_attention matches qkv on random Q, K, V.", hidden=True),
        ValueCheck("output_zhonghe", "O_zhonghe",
                   lambda g: expect_weighted_sum(g["A_zhonghe"], g["V_zhonghe"], name="O_zhonghe",
                                                 tokens=g["tokens"]),
                   "O_zhonghe is the attention matrix times V, each entry within 0.01."),
    ),
)
