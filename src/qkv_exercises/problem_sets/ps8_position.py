"""Problem set 8: order and position.

Part 1 gives the outputs and weights of one head on 中和 有 一個 永和路 and a reordering
of the tokens (:func:`qkv_exercises.variants.zhonghe_reordered_example`, in the student's variant);
the student writes the permutation matrix ``P`` and the outputs of the reordered sentence
without computing attention again (``P O``), says what its weights are (``P A P^T``) and
what changes once positions are added. Part 2 works the sinusoidal encoding of one position by hand
(:func:`qkv_exercises.variants.position_encoding_example`: a width whose frequencies are powers
of 10), the dot product of two positions' encodings from their offset, which other pair
has the same dot product, and what rotary embeddings turn. Part 3 checks the student's
``sinusoidal_position_encoding(n, d_model)``.
"""

from __future__ import annotations

import re

import numpy as np

from qkv import self_attention

from .. import variants
from ..checks import Choice, ChoiceCheck, ProblemSet, ValueCheck, function_checks
from ..expectations import (
    choose_option,
    expect_offset_dot_product,
    expect_position_angles,
    expect_position_encoding,
    expect_reordered,
    option_check,
    ordered_options,
)
from ..functions import encoding_call, judge_encoding, random_encoding_calls
from ..variants import VariantDraw
from ..language import N_, _

FORMULA_RIGHT = N_("P A P^T: the rows and the columns reordered.")
FORMULA_OPTIONS = {  # option -> what choosing it means (the right one: "")
    N_("P A: the rows reordered."):
        N_("the rows are the queries and they move with their tokens, but so do the columns, "
                                "the keys: column j is the token that now stands at place j."),
    N_("A P^T: the columns reordered."):
        N_("the columns are the keys and they move with their tokens, but so do the rows, "
                                     "the queries: row i is the token that now stands at place i."),
    N_("A: attention does not see order, so nothing changes."):
        N_("each token attends to the others with the same weights "
                                                           "as before, but its row and its column move with it."),
    FORMULA_RIGHT: "",
}
ADDED_RIGHT = N_("They are no longer a mere reordering: a token's output depends on where it stands.")
ADDED_OPTIONS = {  # option -> what choosing it means (the right one: "")
    N_("They are P O, the first outputs reordered, as without positions."):
        N_("that holds without positions. With PE added, 中和 at position 0 and 中和 at position 3 are two different "
        "vectors, so their outputs differ."),
    ADDED_RIGHT: "",
    N_("They are O, the first outputs in the same rows: the positions did not move."):
        N_("the positions stayed, but the tokens moved: each place now holds another token plus the same PE."),
    N_("Every token gets the same output."): N_("adding a different vector at each position makes the tokens more "
                                         "different from each other, not alike."),
}
ROTARY_RIGHT = N_("The queries and the keys, in every layer and head.")
ROTARY_OPTIONS = {
    ROTARY_RIGHT: "",
    N_("The token vectors, once, before the first layer."):
        N_("that is where sinusoidal and learned encodings go, added rather than turned; RoPE turns the queries and "
        "keys inside attention."),
    N_("The values."):
        N_("the values are not rotated: position decides which tokens are read, not what is read from them."),
    N_("The queries, the keys and the values."):
        N_("the values are not rotated: position decides which tokens are read, "
                                             "not what is read from them."),
}
SHIFTS = range(20, 61)  # how far the pairs of the same-dot-product question move: far more than any offset


def givens(variant: int) -> dict:
    """The variant's 中和 有 一個 永和路 outputs and weights and its reordering; the width, position and
    pair of part 2; the orders of the options."""
    reordered = variants.zhonghe_reordered_example(variant)
    ex, order = reordered.example, reordered.order
    O, A = self_attention(ex.X, *ex.head)  # (4, 4) each
    position = variants.position_encoding_example(variant)
    pair = position.pair
    shift = 100 if variant == 0 else VariantDraw("ps8_shift", variant).choice(SHIFTS)  # the chapter: 0, 3 and 100, 103
    return {
        "tokens": ex.tokens, "O": O, "A": A, "order": order.copy(),
        "tokens_reordered": tuple(ex.tokens[i] for i in order),
        "formula_options": ordered_options(tuple(FORMULA_OPTIONS), FORMULA_RIGHT, "ps8_options/formula", variant),
        "added_options": ordered_options(tuple(ADDED_OPTIONS), ADDED_RIGHT, "ps8_options/added", variant),
        "d_model": position.d_model, "position": position.position, "pair": np.array(pair),
        "pair_options": _pair_options(pair, shift, variant),
        "rotary_options": ordered_options(tuple(ROTARY_OPTIONS), ROTARY_RIGHT, "ps8_options/rotary", variant),
    }


def _pair_options(pair, shift: int, variant: int) -> tuple[str, ...]:
    """The options of the same-dot-product question: both positions shifted (the right one, third in
    variant 0), or only one, or one more than the other."""
    p, q = (int(v) for v in pair)
    positions = _("positions {p} and {q}")  # in the language the problem set speaks: the student reads them
    right = positions.format(p=p + shift, q=q + shift)
    texts = (positions.format(p=p, q=q + shift), positions.format(p=p + shift, q=q), right,
             positions.format(p=p + shift, q=q + shift + 1))
    return ordered_options(texts, right, "ps8_options/pairs", variant)


def _same_dot_product(g) -> Choice:
    p, q = (int(v) for v in g["pair"])
    options = g["pair_options"]
    right = next(text for text in options if _offset(text) == q - p)  # the only one with the pair's offset
    wrong = {text: _("those positions are {apart} apart, not {offset}: the dot product of two encodings depends on "
                     "their offset only.").format(apart=_offset(text), offset=q - p)
             for text in options if text != right}
    return choose_option(options, right, explain_right=_("the same offset, so the same sum of cos(offset w_i)"),
                         explain_wrong=wrong)


def _offset(text: str) -> int:
    first, second = (int(number) for number in re.findall(r"\d+", text))
    return second - first


def _your_table(g):
    """The table of encodings up to the student's position, in the student's width."""
    return encoding_call(g["position"] + 1, g["d_model"], behaviour="d_model = 4" if g["d_model"] == 4 else
                         "wider d_model")


_encoding_check = function_checks("sinusoidal_position_encoding", judge_encoding)


PROBLEM_SET = ProblemSet(
    name="ps8_position",
    title=N_("Problem set 8: order and position"),
    givens=givens,
    checks=(
        ValueCheck("permutation_matrix", "P",
                   lambda g: expect_reordered(np.eye(4), g["order"], name="P", tokens=g["tokens_reordered"]),
                   "P is the permutation matrix of the reordering: P X holds the reordered tokens."),
        ValueCheck("outputs_reordered", "O_reordered",
                   lambda g: expect_reordered(g["O"], g["order"], name="O_reordered", tokens=g["tokens_reordered"]),
                   "O_reordered is the output of the reordered sentence, P O, each entry within 0.01."),
        option_check("weights_reordered", "A_formula", FORMULA_OPTIONS, FORMULA_RIGHT, "formula_options",
                     "A_formula is the letter of the weights of the reordered sentence."),
        option_check("positions_added", "with_positions", ADDED_OPTIONS, ADDED_RIGHT, "added_options",
                     "with_positions is the letter of what happens to the outputs once positions are added."),
        ValueCheck("position_angles", "angles",
                   lambda g: expect_position_angles(g["position"], g["d_model"]),
                   "angles holds p w_i of your position for every pair i, each within 0.01."),
        ValueCheck("position_encoding", "PE_p",
                   lambda g: expect_position_encoding(g["position"], g["d_model"]),
                   "PE_p is the sinusoidal encoding of your position, each entry within 0.01."),
        ValueCheck("offset_dot_product", "dot_pq",
                   lambda g: expect_offset_dot_product(tuple(int(v) for v in g["pair"]), g["d_model"]),
                   "dot_pq is PE_p . PE_q of your pair of positions, within 0.01."),
        ChoiceCheck("same_dot_product", "same_dot_product", _same_dot_product,
                    "same_dot_product is the letter of the pair whose encodings have the same dot product."),
        option_check("what_rotary_turns", "rotary_turns", ROTARY_OPTIONS, ROTARY_RIGHT, "rotary_options",
                     "rotary_turns is the letter of what rotary embeddings rotate."),
        _encoding_check("encoding_small",
                        lambda g, rng: [encoding_call(4, 4, behaviour=N_("d_model = 4")), _your_table(g)],
                        "sinusoidal_position_encoding(4, 4) (the table of 中和 有 一個 永和路), and the table up to "
                        "your position, match qkv to 1e-6."),
        _encoding_check("encoding_wider",
                        lambda g, rng: [encoding_call(10, 16, behaviour=N_("wider d_model")),
                                        encoding_call(50, 64, behaviour=N_("wider d_model"))],
                        "sinusoidal_position_encoding(10, 16) and (50, 64) match qkv to 1e-6."),
        _encoding_check("encoding_one_position",
                        lambda g, rng: [encoding_call(1, 6, behaviour=N_("one position"))],
                        "sinusoidal_position_encoding(1, 6), a single position 0, matches qkv to 1e-6."),
        _encoding_check("encoding_random", lambda g, rng: random_encoding_calls(rng),
                        "sinusoidal_position_encoding matches qkv for other n and d_model.", hidden=True),
    ),
)
