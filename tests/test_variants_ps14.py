"""Problem set 14's variants: variant 0 is the chapter's example, every variant's hand steps are what
qkv's backward pass and central differences give, and each slip the set names is named in the message.
"""

from __future__ import annotations

import numpy as np
import pytest

import qkv
from qkv_exercises.problem_sets import get_problem_set
from qkv_exercises.problem_sets.ps14_training import QUERY, ROW_SLIPS, row_steps

from .notebook_support import givens_of
from .seeds import SEED_000

PS = get_problem_set("ps14_training")


def test_variant_0_is_head_1_of_seed_000_with_the_chapters_gradient():
    g = PS.givens(0)
    for name in ("Q", "K", "V", "A"):
        np.testing.assert_allclose(g[name], SEED_000[1][name], atol=1e-6, err_msg=name)
    expected_dO = np.zeros((3, 2))
    expected_dO[2, 0] = 1
    np.testing.assert_array_equal(g["dO"], expected_dO)
    assert (g["key_token"], g["column"]) == ("晚到", 0)


@pytest.mark.parametrize("index", range(0, 200, 7))
def test_the_hand_steps_are_qkvs_backward_pass_and_central_differences(index):
    _, g = givens_of("ps14_training")[index]
    Q, K, V, dO, key, column = (g[name] for name in ("Q", "K", "V", "dO", "key", "column"))
    steps = row_steps(Q, K, V, dO, key, column)
    dQ, _, dV = qkv.attention_backward(Q, K, V, dO)
    np.testing.assert_allclose(steps["dV_entry"], dV[key, column], rtol=1e-12)
    np.testing.assert_allclose(steps["dQ_entry"], dQ[QUERY, column], rtol=1e-12)
    _, A = qkv.scaled_dot_product_attention(Q, K, V)
    dA = dO @ V.T
    np.testing.assert_allclose(steps["dA_row"], dA[QUERY], rtol=1e-12)
    np.testing.assert_allclose(steps["dS_row"], qkv.softmax_backward(A, dA)[QUERY], rtol=1e-12, atol=1e-15)
    scores = Q[QUERY] @ K.T / np.sqrt(2)  # (n_k,): 補償's scores
    by_differences = qkv.central_differences(lambda s: qkv.softmax(s)[key], scores)
    np.testing.assert_allclose(steps["jacobian_row"], by_differences, atol=1e-9)


@pytest.mark.parametrize("variant", [0, 1, 2, 3])
@pytest.mark.parametrize("slip", ROW_SLIPS, ids=lambda s: s.key)
def test_each_slip_of_part_1_is_named_where_it_changes_an_answer(variant, slip):
    g = PS.givens(variant)
    args = (g["Q"], g["K"], g["V"], g["dO"], g["key"], g["column"])
    right, slipped = row_steps(*args), row_steps(*args, slip)
    named = 0
    for check in PS.checks:
        if check.kind != "value" or np.allclose(slipped[check.answer], right[check.answer], atol=1e-12):
            continue
        verdict = check.judge(np.round(slipped[check.answer], 2), g, reveal=False)
        assert not verdict.passed and slip.advice in verdict.message, (check.grade_id, verdict.message)
        named += 1
    assert named, f"the slip {slip.key} changes no answer of variant {variant}"
