"""Problem set 2: scaled dot-product attention by hand.

Part 1 takes seed 002's single query over three keys (:func:`qkv_exercises.variants.q1_example`),
part 2 head 1 of seed 000's delivery example (:func:`qkv_exercises.variants.delivery_example`),
both in the student's own variant. Every number is one step of
``softmax(Q K^T / sqrt(d_k)) V``, checked within 0.01; the last question asks which
token's output mixes in the most of 晚到's value.
"""

from __future__ import annotations

import numpy as np

from qkv import linear, self_attention

from .. import slips, variants
from ..checks import Choice, ChoiceCheck, ProblemSet, ValueCheck
from ..expectations import choose_token, expect_attention_step, expect_head_step
from ..language import N_, _

KEYS = ("k1", "k2", "k3")
VALUES = ("v1", "v2", "v3")
LATE = 1  # 晚到's index among the tokens


def givens(variant: int) -> dict:
    """The inputs of the student's variant: the single query, then head 1 of the delivery example."""
    single = variants.q1_example(variant)
    delivery = variants.delivery_example(variant)
    X, head_1 = delivery.X, delivery.heads[0]
    return {
        "q1": single.Q, "K": single.K, "V": single.V, "keys": KEYS, "values": VALUES,
        "tokens": delivery.tokens, "X": X, "head_1": head_1,
        "Q1": linear(X, head_1.W_Q, head_1.b_Q),  # (3, 2)
        "K1": linear(X, head_1.W_K, head_1.b_K),  # (3, 2)
        "V1": linear(X, head_1.W_V, head_1.b_V),  # (3, 2)
    }


def _single(step: str, answer: str) -> ValueCheck:
    return ValueCheck(
        grade_id=answer, answer=answer,
        expect=lambda g: expect_attention_step(step, g["q1"], g["K"], g["V"], name=answer, keys=g["keys"]),
        description=_DESCRIPTIONS[step].format(name=answer, of="q1"),
    )


def _head_1(step: str, grade_id: str, answer: str) -> ValueCheck:
    return ValueCheck(
        grade_id=grade_id, answer=answer,
        expect=lambda g: expect_head_step(step, g["X"], g["head_1"], name=answer, tokens=g["tokens"]),
        description=_DESCRIPTIONS[step].format(name=answer, of="head 1"),
    )


def _mixes_most_of_late(g) -> Choice:
    weights = self_attention(g["X"], *g["head_1"])[1]  # (n, n)
    right = int(np.argmax(weights[:, LATE]))
    return choose_token(
        g["tokens"], right,
        wrong={int(np.argmax(weights[LATE])): slips.READ_ROW_NOT_COLUMN.advice},
        explain_right=_("its row of A1 puts the largest weight on 晚到, so its output takes the most of 晚到's "
                        "value"),
        reveal=_("{token}'s row puts the largest weight on 晚到 ({weight}).").format(
            token=g["tokens"][right], weight=f"{weights[right, LATE]:.2f}"))


_DESCRIPTIONS = {
    "S_raw": "{name} is Q K^T of {of}, each entry within 0.01.",
    "S": "{name} is Q K^T / sqrt(d_k) of {of}, each entry within 0.01.",
    "A": "{name} is the row-wise softmax of the scaled scores of {of}, each entry within 0.01.",
    "O": "{name} is the weights times V of {of}, each entry within 0.01.",
}

PROBLEM_SET = ProblemSet(
    name="ps2_scaled_dot_product",
    title=N_("Problem set 2: scaled dot-product attention by hand"),
    givens=givens,
    checks=(
        _single("S_raw", "scores_q1"),
        _single("S", "scaled_scores_q1"),
        _single("A", "weights_q1"),
        _single("O", "output_q1"),
        _head_1("S_raw", "scores_raw_head1", "S_raw1"),
        _head_1("S", "scores_scaled_head1", "S1"),
        _head_1("A", "weights_head1", "A1"),
        _head_1("O", "output_head1", "O1"),
        ChoiceCheck(grade_id="mixes_most_of_late", answer="mixes_most_of_late", expect=_mixes_most_of_late,
                    description="mixes_most_of_late is the token whose output takes the most of 晚到's value."),
    ),
)
