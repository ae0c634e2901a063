"""Problem set 2: scaled dot-product attention by hand.

Part 1 takes seed 002's single query over three keys (:func:`qkv.examples.q1_example`),
part 2 head 1 of seed 000's delivery example (:func:`qkv.examples.delivery_example`),
both in the student's own variant. Every answer is one step of
``softmax(Q K^T / sqrt(d_k)) V``, checked within 0.01.
"""

from __future__ import annotations

from qkv import examples, linear

from ..checking import expect_attention_step, expect_head_step
from ..checks import ProblemSet, ValueCheck

KEYS = ("k1", "k2", "k3")
VALUES = ("v1", "v2", "v3")


def givens(variant: int) -> dict:
    """The inputs of the student's variant: the single query, then head 1 of the delivery example."""
    single = examples.q1_example(variant)
    delivery = examples.delivery_example(variant)
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


_DESCRIPTIONS = {
    "S_raw": "{name} is Q K^T of {of}, each entry within 0.01.",
    "S": "{name} is Q K^T / sqrt(d_k) of {of}, each entry within 0.01.",
    "A": "{name} is the row-wise softmax of the scaled scores of {of}, each entry within 0.01.",
    "O": "{name} is the weights times V of {of}, each entry within 0.01.",
}

PROBLEM_SET = ProblemSet(
    name="ps2_scaled_dot_product",
    title="Problem set 2: scaled dot-product attention by hand",
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
    ),
)
