"""Problem set 10: what attention costs, and online softmax.

Part 1 reads seed 002's scores [2, 1, 0] (:func:`qkv_exercises.variants.online_softmax_example`, in the
student's variant) with the online softmax in two blocks: the running maximum and sum after each
block and the weights; part 2 reads the same scores backwards, so that the largest score arrives
last and the running sum is rescaled. Part 3 counts what the n x n weights cost
(:func:`qkv_exercises.variants.attention_memory_example`): the scores of one head, the bytes of every head's
weights, the GiB of a long context, the growth with n; and asks what FlashAttention saves. Part 4
checks ``fold_block`` (one step of the online softmax) and ``online_softmax`` written by the
student, to 1e-6 against :func:`qkv.online_softmax_update` and :func:`qkv.online_softmax`.
"""

from __future__ import annotations

from .. import variants
from ..checks import ProblemSet, ValueCheck, function_checks
from ..expectations import (
    expect_memory_growth,
    expect_online_state,
    expect_online_weights,
    expect_rescale,
    expect_scores_per_head,
    expect_weights_bytes,
    expect_weights_gib,
    option_check,
    ordered_options,
)
from ..functions import (
    HIGHER_MAX,
    LARGE_SCORES,
    LOWER_MAX,
    ONE_SCORE,
    cut,
    explain_fold_error,
    fold_call,
    fold_calls_after,
    folded,
    judge_fold_block,
    judge_online_softmax,
    online_call,
    random_fold_calls,
    random_halves,
    random_online_calls,
)
from ..language import N_, _

FLASH_RIGHT = N_("Memory and memory traffic: it never stores the n x n weights, and its output is exact.")
FLASH_OPTIONS = {  # option -> what choosing it means (the right one: "")
    N_("Arithmetic: it does fewer than n^2 d multiply-adds."):
        N_("it does the same O(n^2 d) multiply-adds (a few more, "
                                                             "to recompute scores); it moves less data."),
    FLASH_RIGHT: "",
    N_("Accuracy for speed: its output approximates attention."):
        N_("the rescaled running sums make its output exactly "
                                                                "the softmax-weighted sum, not an approximation."),
    N_("Parameters: its heads share one W_Q, W_K and W_V."): N_("it changes how attention is computed, not the model: "
                                                         "the parameters are the same."),
}


def givens(variant: int) -> dict:
    """The variant's scores in blocks (both ways), the sizes to count, and the order of the options."""
    online = variants.online_softmax_example(variant)
    memory = variants.attention_memory_example(variant)
    return {"scores": online.scores, "blocks": online.blocks, "reversed_blocks": online.reversed_blocks,
            "n": memory.n, "heads": memory.heads, "dtype": memory.dtype, "n_long": memory.n_long,
            "heads_long": memory.heads_long, "dtype_long": memory.dtype_long, "growth": memory.growth,
            "flash_options": ordered_options(FLASH_OPTIONS, FLASH_RIGHT, "ps10_options/flash", variant)}


def _state(grade_id: str, given: str, t: int, description: str) -> ValueCheck:
    return ValueCheck(grade_id, grade_id, lambda g: expect_online_state(g[given], t), description)


def _your_folds(g, rng) -> list:
    forwards, backwards = g["blocks"], g["reversed_blocks"]
    return (fold_calls_after(forwards[0], forwards[1], behaviour=LOWER_MAX, what=_("your block 2"))
            + fold_calls_after(backwards[0], backwards[1], behaviour=HIGHER_MAX,
                               what=_("block 2 of your scores read backwards"))[1:])


def _other_folds(g, rng) -> list:
    calls = fold_calls_after([1.5, -1.0, 0.5], [3.0, 2.5], behaviour=HIGHER_MAX)
    m, l = folded(-float("inf"), 0.0, [1.5, -1.0, 0.5])
    calls += [fold_call(m, l, [-2.0, 1.0], behaviour=LOWER_MAX), fold_call(m, l, [-0.5], behaviour=ONE_SCORE)]
    calls += fold_calls_after([501.0, 498.5], [503.0, 500.0, 499.5], behaviour=LARGE_SCORES)[1:]
    return calls


def _your_rows(g, rng) -> list:
    return [online_call(g["blocks"], behaviour=N_("the largest score in the first block")),
            online_call(g["reversed_blocks"], behaviour=N_("the largest score in a later block"))]


def _other_rows(g, rng) -> list:
    more = random_halves(rng, (9,), -3, 3)
    return [online_call(cut(more, (2, 1, 3, 1, 2)), behaviour=N_("more blocks")),
            online_call(cut(random_halves(rng, (5,), -3, 3), (1,) * 5), behaviour=N_("blocks of one score")),
            online_call(cut(1000 + random_halves(rng, (6,), -3, 3), (2, 2, 2)), behaviour=LARGE_SCORES,
                        what=_("3 blocks of scores near 1000"))]


_fold_check = function_checks("fold_block", judge_fold_block, explain_fold_error)
_online_check = function_checks("online_softmax", judge_online_softmax, explain_fold_error)


PROBLEM_SET = ProblemSet(
    name="ps10_online_softmax",
    title=N_("Problem set 10: what attention costs, and online softmax"),
    givens=givens,
    checks=(
        _state("state_1", "blocks", 1, "state_1 is [m, l] after block 1, each within 0.01."),
        _state("state_2", "blocks", 2, "state_2 is [m, l] after block 2, each within 0.01."),
        ValueCheck("weights", "weights", lambda g: expect_online_weights(g["blocks"], name="weights"),
                   "weights is the softmax of the scores from the final m and l, each within 0.01."),
        _state("reversed_state_1", "reversed_blocks", 1,
               "reversed_state_1 is [m, l] after block 1 of the scores read backwards, each within 0.01."),
        ValueCheck("rescale", "rescale", lambda g: expect_rescale(g["reversed_blocks"], 2),
                   "rescale is the factor the running sum is multiplied by in block 2, within 0.01."),
        _state("reversed_state_2", "reversed_blocks", 2,
               "reversed_state_2 is [m, l] after block 2 of the scores read backwards, each within 0.01."),
        ValueCheck("scores_per_head", "scores_per_head", lambda g: expect_scores_per_head(g["n"], g["heads"]),
                   "scores_per_head is the number of scores one head computes for n tokens, exactly."),
        ValueCheck("weights_bytes", "weights_bytes", lambda g: expect_weights_bytes(g["n"], g["heads"], g["dtype"]),
                   "weights_bytes is the bytes of every head's n x n weights, exactly."),
        ValueCheck("long_context_gib", "long_context_gib",
                   lambda g: expect_weights_gib(g["n_long"], g["heads_long"], g["dtype_long"]),
                   "long_context_gib is the GiB of the long context's weights, within 0.01."),
        ValueCheck("memory_growth", "memory_growth", lambda g: expect_memory_growth(g["growth"]),
                   "memory_growth is the factor by which the weights' memory grows, within 0.01."),
        option_check("what_flash_attention_saves", "flash_saves", FLASH_OPTIONS, FLASH_RIGHT, "flash_options",
                     "flash_saves is the letter of what FlashAttention saves."),
        _fold_check("fold_your_blocks", _your_folds,
                    "fold_block on your own blocks: the first block, a lower maximum, a higher maximum."),
        _fold_check("fold_other_blocks", _other_folds,
                    "fold_block on other blocks: a higher and a lower maximum, one score, scores near 500."),
        _fold_check("fold_random_blocks", lambda g, rng: random_fold_calls(rng),
                    "fold_block matches qkv.online_softmax_update on random blocks of every kind.", hidden=True),
        _online_check("online_your_rows", _your_rows,
                      "online_softmax on your scores, both ways: the weights and [m, l] after each block."),
        _online_check("online_other_rows", _other_rows,
                      "online_softmax on more blocks, blocks of one score, and scores near 1000."),
        _online_check("online_random_rows", lambda g, rng: random_online_calls(rng),
                      "online_softmax matches qkv.online_softmax on random rows of every kind.", hidden=True),
    ),
)
