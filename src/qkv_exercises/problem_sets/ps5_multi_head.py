"""Problem set 5: multi-head attention.

Head 2 of seed 000's delivery example (:func:`qkv_exercises.variants.delivery_example`) end to
end, both heads joined and projected with ``W_O = I`` and with a mixing ``W_O`` drawn
per variant, all by hand within 0.01; then ``split_heads`` and ``merge_heads`` in code,
checked to 1e-6 on small inputs and (hidden) on random ones.
"""

from __future__ import annotations

import numpy as np

from qkv import examples, self_attention, split_heads

from .. import variants
from ..checks import FunctionCheck, ProblemSet, ValueCheck
from ..expectations import expect_head_step, expect_multi_head_step
from ..functions import (
    judge_merge_heads,
    judge_split_heads,
    merge_call,
    random_halves,
    random_merge_calls,
    random_split_calls,
    split_call,
)
from ..variants import VariantDraw, apart_from_seed
from ..language import N_

SEED_MIXING = np.array([
    [0.5, 0.0, 1.0, 0.0],
    [0.0, 0.5, 0.0, 1.0],
    [0.5, 0.0, 0.0, 0.0],
    [0.0, 0.5, 0.0, 0.0],
])  # (h * d_v, d_model): the first two output columns average the heads, the last two keep head 1


def givens(variant: int) -> dict:
    """The variant's delivery example, head 1's output (given), and the mixing W_O."""
    delivery = variants.delivery_example(variant)
    head_1, head_2 = delivery.heads
    given = {"tokens": delivery.tokens, "X": delivery.X, "heads": delivery.heads, "head_1": head_1,
             "head_2": head_2, "W_O": delivery.W_O, "b_O": delivery.b_O,
             "O1": self_attention(delivery.X, *head_1)[0]}  # (3, 2)
    given["W_O_mixing"] = SEED_MIXING.copy() if variant == 0 else _mixing(variant, given)
    return given


def _mixing_columns(draw: VariantDraw) -> np.ndarray:
    """Each output column either averages a column of head 1 with one of head 2, or copies one column."""
    W = np.zeros((4, 4))
    for column in range(4):
        if draw.integer(0, 1):
            W[draw.integer(0, 1), column] = W[2 + draw.integer(0, 1), column] = 0.5
        else:
            W[draw.integer(0, 3), column] = 1.0
    return W


def _mixing(variant: int, given: dict) -> np.ndarray:
    seed = examples.delivery_example()
    seed_Y = _mixed(seed.X, seed.heads, SEED_MIXING)

    def workable(W: np.ndarray) -> bool:  # both heads are used, and Y is not the seed's
        return W[:2].any() and W[2:].any() and apart_from_seed(_mixed(given["X"], given["heads"], W), seed_Y)

    return VariantDraw("ps5_mixing", variant).until(_mixing_columns, workable, "mixing W_O")


def _mixed(X, heads, W_O) -> np.ndarray:
    O_concat = np.concatenate([self_attention(X, *head)[0] for head in heads], axis=1)  # (n, h * d_v)
    return O_concat @ W_O


def _head_2(step: str, grade_id: str, answer: str, description: str) -> ValueCheck:
    return ValueCheck(grade_id, answer,
                      lambda g: expect_head_step(step, g["X"], g["head_2"], name=answer, tokens=g["tokens"]),
                      description)


def _joined(step: str, grade_id: str, answer: str, W_O: str, description: str) -> ValueCheck:
    return ValueCheck(grade_id, answer,
                      lambda g: expect_multi_head_step(step, g["X"], g["heads"], g[W_O], g["b_O"], name=answer,
                                                       tokens=g["tokens"]),
                      description)


def _split_calls(g, rng) -> list:
    return [split_call(np.arange(12.0).reshape(3, 4), 2, what="np.arange(12.0).reshape(3, 4)",
                       behaviour=N_("2 heads")),
            split_call(random_halves(rng, (2, 6)), 3, behaviour=N_("more than 2 heads")),
            split_call(random_halves(rng, (1, 8)), 4, behaviour=N_("one token"))]


def _merge_calls(g, rng) -> list:
    Z = random_halves(rng, (3, 6))
    return [merge_call(np.arange(12.0).reshape(2, 3, 2), what="np.arange(12.0).reshape(2, 3, 2)",
                       behaviour=N_("2 heads")),
            merge_call(random_halves(rng, (3, 2, 2)), behaviour=N_("more than 2 heads")),
            merge_call(random_halves(rng, (4, 1, 2)), behaviour=N_("one token")),
            merge_call(split_heads(Z, 3), what="split_heads(Z (3, 6), 3)",
                       behaviour=N_("undoes split_heads"))]


PROBLEM_SET = ProblemSet(
    name="ps5_multi_head",
    title=N_("Problem set 5: multi-head attention"),
    givens=givens,
    checks=(
        _head_2("V", "v_head2", "V2", "V2 is X W_V + B_V of head 2, each entry within 0.01."),
        _head_2("S", "scores_scaled_head2", "S2", "S2 is Q K^T / sqrt(d_k) of head 2, each entry within 0.01."),
        _head_2("A", "weights_head2", "A2", "A2 is the row-wise softmax of S2, each entry within 0.01."),
        _head_2("O", "output_head2", "O2", "O2 is A V of head 2, each entry within 0.01."),
        _joined("O_concat", "concatenation", "O_concat", "W_O",
                "O_concat is head 1's output next to head 2's, each entry within 0.01."),
        _joined("Y", "output_identity_projection", "Y_identity", "W_O",
                "Y_identity is O_concat W_O + b_O with W_O = I, each entry within 0.01."),
        _joined("Y", "output_mixing_projection", "Y_mixing", "W_O_mixing",
                "Y_mixing is O_concat W_O + b_O with the mixing W_O, each entry within 0.01."),
        FunctionCheck("split_heads_small_example", "split_heads", calls=_split_calls, judge_result=judge_split_heads,
                      description="split_heads matches qkv.split_heads on small inputs with 2 to 4 heads, to 1e-6."),
        FunctionCheck("merge_heads_small_example", "merge_heads", calls=_merge_calls, judge_result=judge_merge_heads,
                      description="merge_heads matches qkv.merge_heads on small inputs and undoes split_heads."),
        FunctionCheck("split_heads_random_inputs", "split_heads", calls=lambda g, rng: random_split_calls(rng),
                      judge_result=judge_split_heads, hidden=True,
                      description="split_heads matches qkv.split_heads on random inputs with 2 to 8 heads."),
        FunctionCheck("merge_heads_random_inputs", "merge_heads", calls=lambda g, rng: random_merge_calls(rng),
                      judge_result=judge_merge_heads, hidden=True,
                      description="merge_heads matches qkv.merge_heads on random inputs and undoes split_heads."),
    ),
)
