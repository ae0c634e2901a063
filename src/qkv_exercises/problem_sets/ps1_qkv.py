"""Problem set 1: Q, K and V by hand.

Head 1 of seed 000's delivery example (:func:`qkv_exercises.variants.delivery_example`), in the
student's own variant: the queries, the broadcast key bias, the keys and the values;
then head 2's keys, and which of them is the longest. Checked within 0.01.
"""

from __future__ import annotations

import numpy as np

from .. import variants
from ..checks import Choice, ChoiceCheck, ProblemSet, ValueCheck
from ..expectations import choose_token, expect_head_step
from ..language import N_, _


def givens(variant: int) -> dict:
    """The inputs of the student's variant: the tokens, X and both heads."""
    delivery = variants.delivery_example(variant)
    head_1, head_2 = delivery.heads
    return {"tokens": delivery.tokens, "X": delivery.X, "head_1": head_1, "head_2": head_2}


def _step(step: str, grade_id: str, answer: str, head: str, description: str) -> ValueCheck:
    return ValueCheck(
        grade_id=grade_id, answer=answer,
        expect=lambda g: expect_head_step(step, g["X"], g[head], name=answer, tokens=g["tokens"]),
        description=description,
    )


def _longest_key(g) -> Choice:
    head_2 = g["head_2"]
    K2 = g["X"] @ head_2.W_K + head_2.b_K  # (n, d_k)
    lengths = np.linalg.norm(K2, axis=1)
    right = int(np.argmax(lengths))
    largest_entries = int(np.argmax(K2.sum(axis=1)))
    head_1 = g["head_1"]
    longest_in_head_1 = int(np.argmax(np.linalg.norm(g["X"] @ head_1.W_K + head_1.b_K, axis=1)))
    wrong = {largest_entries: _("that key has the largest entries, but length counts their size whatever the "
                                "sign: |k| = sqrt(k_1^2 + k_2^2)."),
             longest_in_head_1: _("that is the longest key of head 1; the question is about K2.")}
    return choose_token(
        g["tokens"], right, wrong=wrong,
        explain_right=_("its key has the largest length sqrt(k_1^2 + k_2^2) in head 2"),
        reveal=_("The longest key of head 2 is {token}'s (length {length}).").format(
            token=g["tokens"][right], length=f"{lengths[right]:.2f}"))


PROBLEM_SET = ProblemSet(
    name="ps1_qkv",
    title=N_("Problem set 1: Q, K and V by hand"),
    givens=givens,
    checks=(
        _step("Q", "q_head1", "Q1", "head_1", "Q1 is X W_Q + B_Q of head 1, each entry within 0.01."),
        _step("B_K", "bias_broadcast_head1", "B_K1", "head_1",
              "B_K1 is head 1's key bias repeated on every row, each entry within 0.01."),
        _step("K", "k_head1", "K1", "head_1", "K1 is X W_K + B_K of head 1, each entry within 0.01."),
        _step("V", "v_head1", "V1", "head_1", "V1 is X W_V + B_V of head 1, each entry within 0.01."),
        _step("K", "k_head2", "K2", "head_2", "K2 is X W_K + B_K of head 2, each entry within 0.01."),
        ChoiceCheck(grade_id="longest_key_head2", answer="longest_key", expect=_longest_key,
                    description="longest_key is the token whose key is the longest in head 2."),
    ),
)
