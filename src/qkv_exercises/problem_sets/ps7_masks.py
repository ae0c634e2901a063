"""Problem set 7: masks and cross-attention.

Part 1 reads head 1 of seed 000's 外送 晚到 補償 left to right under a causal mask
(:func:`qkv_exercises.variants.causal_delivery_example`, in the student's variant): the
exponentials and the weights of 晚到's masked row, the whole masked weight matrix, and
which keys and outputs the mask lets through. Part 2 asks what a padding mask hides and
where cross-attention takes its queries, keys and values from, then works the 2 x 3
cross-attention of "late delivery" over 外送 晚到 補償
(:func:`qkv_exercises.variants.delivery_translation_example`). Part 3 checks three functions the
student writes, ``causal_mask(n)``, ``padding_mask(lengths, n)`` and ``masked_softmax(scores,
mask)``, on the student's own scores and on small inputs that try every behaviour the hidden
checks grade.
"""

from __future__ import annotations

from qkv import Head, causal_mask, trace_head

from .. import variants
from ..checks import ProblemSet, ValueCheck, function_checks
from ..expectations import expect_cross_step, expect_masked_step, option_check, ordered_options
from ..functions import (
    causal_mask_call,
    explain_masked_softmax_error,
    judge_causal_mask,
    judge_masked_softmax,
    judge_padding_mask,
    masked_softmax_call,
    padding_mask_call,
    padding_mask_of,
    random_causal_mask_calls,
    random_halves,
    random_masked_softmax_calls,
    random_padding_mask_calls,
)
from ..language import N_, _

LATE = 1  # 晚到's index among the tokens

KEYS_RIGHT = N_("外送 and 晚到")
KEYS_OPTIONS = {  # option -> what choosing it means (the right one: "")
    N_("晚到 and 補償"): N_("that is the wrong triangle: token i attends to tokens 0 .. i, the ones before it and itself."),
    KEYS_RIGHT: "",
    N_("外送 only"): N_("a token may attend to itself too: the causal mask keeps the diagonal."),
    N_("晚到 only"): N_("a token may attend to every earlier token as well as to itself."),
    N_("外送, 晚到 and 補償"): N_("that is the unmasked row: the causal mask blocks the later token 補償."),
}
LATER_RIGHT = N_("補償's only.")
LATER_OPTIONS = {
    N_("外送's and 晚到's, not 補償's."): N_("a token reads the tokens before it and itself, so a change to the last token "
                                    "reaches no earlier output, but it does reach its own."),
    N_("All three: every token attends to 補償."): N_("under the causal mask 外送 and 晚到 give 補償 a weight of exactly 0: "
                                            "nothing of 補償 reaches their outputs."),
    LATER_RIGHT: "",
    N_("None: the mask keeps every output fixed."): N_("補償 attends to itself and to the tokens before it, so its own "
                                                 "output changes with its vector."),
}
PADDING_RIGHT = N_("It blocks [PAD] as a key: no query, not even [PAD]'s own, gives it any weight.")
PADDING_OPTIONS = {
    N_("It blocks [PAD] as a query: [PAD]'s row gets no weights and no output."):
        N_("a (batch, 1, n) mask is one row, the same for every query: it blocks a column (a key). [PAD]'s own row "
        "is computed like any other, and ignored later."),
    N_("It blocks, for every token, the tokens that come after it."): N_("that is the causal mask."),
    N_("It sets [PAD]'s value to zero, so the weight [PAD] gets carries nothing."):
        N_("the mask works on the scores, not on the values: a blocked key gets a weight of exactly 0, so neither its "
        "key nor its value reaches the output."),
    PADDING_RIGHT: "",
}
CROSS_RIGHT = N_("Q from the decoder's tokens; K and V from the encoder's output.")
CROSS_OPTIONS = {
    N_("Q from the encoder's output; K and V from the decoder's tokens."):
        N_("the decoder asks (its words make the queries) and reads the encoder (its tokens make the keys and "
           "values)."),
    CROSS_RIGHT: "",
    N_("Q and K from the decoder's tokens; V from the encoder's output."):
        N_("keys and values come in pairs, one per source token: both from the encoder."),
    N_("Q, K and V from the decoder's tokens, under a causal mask."):
        N_("that is the decoder's masked self-attention, not cross-attention."),
}


def givens(variant: int) -> dict:
    """The variant's head 1 scores of 外送 晚到 補償, its translation example, and the options' orders."""
    causal = variants.causal_delivery_example(variant)
    translation = variants.delivery_translation_example(variant)
    head = translation.head
    return {
        "tokens": causal.tokens, "S1": trace_head(causal.X, *causal.head).S,  # (3, 3): head 1's scaled scores
        "words": translation.query_tokens[:2], "X_q": translation.X_q[:2],  # late, delivery: (2, 4)
        "X_kv": translation.X_kv, "W_Q": head.W_Q, "W_K": head.W_K, "W_V": head.W_V,
        "keys_options": ordered_options(tuple(KEYS_OPTIONS), KEYS_RIGHT, "ps7_options/keys", variant),
        "later_options": ordered_options(tuple(LATER_OPTIONS), LATER_RIGHT, "ps7_options/later", variant),
        "padding_options": ordered_options(tuple(PADDING_OPTIONS), PADDING_RIGHT, "ps7_options/padding", variant),
        "cross_options": ordered_options(tuple(CROSS_OPTIONS), CROSS_RIGHT, "ps7_options/cross", variant),
    }


def _masked(step: str, grade_id: str, answer: str, description: str, *, row: int | None) -> ValueCheck:
    return ValueCheck(grade_id, answer,
                      lambda g: expect_masked_step(step, g["S1"], causal_mask(3), name=answer, queries=g["tokens"],
                                                   keys=g["tokens"], row=row),
                      description)


def _cross(step: str, grade_id: str, answer: str, description: str) -> ValueCheck:
    return ValueCheck(grade_id, answer,
                      lambda g: expect_cross_step(step, g["X_q"], g["X_kv"], Head(g["W_Q"], g["W_K"], g["W_V"]),
                                                  name=answer, queries=g["words"], keys=g["tokens"]),
                      description)


_causal_mask_check = function_checks("causal_mask", judge_causal_mask)
_padding_mask_check = function_checks("padding_mask", judge_padding_mask)
_masked_softmax_check = function_checks("masked_softmax", judge_masked_softmax, explain_masked_softmax_error)


def _causal_calls(g, rng) -> list:
    return [masked_softmax_call(g["S1"], causal_mask(3), what="S1, causal_mask(3)", behaviour=N_("causal mask")),
            masked_softmax_call(random_halves(rng, (4, 4)), causal_mask(4), what=_("scores (4, 4), causal_mask(4)"),
                                behaviour=N_("causal mask"))]


def _padding_calls(g, rng) -> list:
    return [masked_softmax_call(random_halves(rng, (3, 3, 3)), padding_mask_of([3, 2, 1], 3),
                                what=_("scores (3, 3, 3), the padding mask of lengths [3, 2, 1]"),
                                behaviour=N_("padding mask, broadcast over the queries")),
            masked_softmax_call(random_halves(rng, (2, 4, 4)), padding_mask_of([4, 2], 4),
                                what=_("scores (2, 4, 4), the padding mask of lengths [4, 2]"),
                                behaviour=N_("padding mask, broadcast over the queries"))]


def _cross_and_large_calls(g, rng) -> list:
    mask = [[True, False, True], [False, True, True]]
    return [masked_softmax_call(random_halves(rng, (2, 3)), mask, what=_("scores (2, 3), a mask (2, 3)"),
                                behaviour="n_q != n_k"),
            masked_softmax_call(1000 + g["S1"], causal_mask(3), what="S1 + 1000, causal_mask(3)",
                                behaviour=N_("large scores"))]


PROBLEM_SET = ProblemSet(
    name="ps7_masks",
    title=N_("Problem set 7: masks and cross-attention"),
    givens=givens,
    checks=(
        _masked("E", "exponentials_late", "E_late",
                "E_late holds e^s of 晚到's masked row of scores (0 for a blocked key), each entry within 0.01.",
                row=LATE),
        _masked("A", "weights_late", "A_late", "A_late is 晚到's row of weights under the causal mask, within 0.01.",
                row=LATE),
        _masked("A", "weights_causal", "A1_causal",
                "A1_causal is head 1's weight matrix under the causal mask, each entry within 0.01.", row=None),
        option_check("keys_of_late", "keys_of_late", KEYS_OPTIONS, KEYS_RIGHT, "keys_options",
                     "keys_of_late is the letter of the keys 晚到 may attend to under the causal mask."),
        option_check("later_token_changes", "later_token", LATER_OPTIONS, LATER_RIGHT, "later_options",
                     "later_token is the letter of the outputs a change of 補償 can reach under the causal mask."),
        option_check("what_padding_hides", "padding_hides", PADDING_OPTIONS, PADDING_RIGHT, "padding_options",
                     "padding_hides is the letter of what a padding mask does."),
        option_check("cross_attention_sources", "cross_sources", CROSS_OPTIONS, CROSS_RIGHT, "cross_options",
                     "cross_sources is the letter of where cross-attention's Q, K and V come from."),
        _cross("S", "cross_scores", "S_cross", "S_cross is Q K^T / sqrt(d_k) of late and delivery over 外送 晚到 補償 "
                                              "(2 x 3), each entry within 0.01."),
        _cross("A", "cross_weights", "A_cross", "A_cross is the row-wise softmax of S_cross (2 x 3), each entry "
                                                "within 0.01."),
        _cross("O", "cross_output", "O_cross", "O_cross is A_cross times V (2 x 4), each entry within 0.01."),
        _causal_mask_check("causal_mask_small",
                           lambda g, rng: [causal_mask_call(3, behaviour="n tokens"),
                                           causal_mask_call(1, behaviour=N_("one token")),
                                           causal_mask_call(6, behaviour="n tokens")],
                           "causal_mask(n) for n = 3, 1 and 6 is qkv.causal_mask(n): True on and below the diagonal."),
        _causal_mask_check("causal_mask_random",
                           lambda g, rng: random_causal_mask_calls(rng)
                           + [causal_mask_call(1, behaviour=N_("one token"))],
                           "causal_mask(n) is qkv.causal_mask(n) for other n.", hidden=True),
        _padding_mask_check("padding_mask_small",
                            lambda g, rng: [padding_mask_call([3, 2], 3, behaviour=N_("padded sentences")),
                                            padding_mask_call([4, 1, 2], 4, behaviour=N_("padded sentences"))],
                            "padding_mask([3, 2], 3) (外送 晚到 補償 and 晚到 補償 [PAD]) and padding_mask([4, 1, 2], 4) "
                            "are qkv.padding_mask: (batch, 1, n), True for the real tokens."),
        _padding_mask_check("padding_mask_random", lambda g, rng: random_padding_mask_calls(rng),
                            "padding_mask is qkv.padding_mask for other lengths and n.", hidden=True),
        _masked_softmax_check("masked_softmax_causal", _causal_calls,
                              "masked_softmax under a causal mask (your S1, and a 4 x 4) matches qkv, to 1e-6."),
        _masked_softmax_check("masked_softmax_padding", _padding_calls,
                              "masked_softmax under padding masks (batch, 1, n), broadcast over the queries, to 1e-6."),
        _masked_softmax_check("masked_softmax_cross_and_large", _cross_and_large_calls,
                              "masked_softmax with n_q != n_k, and with scores near 1000, to 1e-6."),
        _masked_softmax_check("masked_softmax_random", lambda g, rng: random_masked_softmax_calls(rng),
                              "masked_softmax matches qkv on random scores under causal, padding and other masks.",
                              hidden=True),
    ),
)
