"""Problem set 6: reading attention maps.

Part 1 shows the two heads' maps of seed 000's delivery example
(:func:`qkv_exercises.variants.delivery_example`) in the student's variant and asks what they
show: who attends most to 晚到 (a column), whom 補償 attends to least in head 2 (a
row), why, and what a map does not show (options in an order drawn per variant).
Part 2 cuts a small image drawn per variant into patches; the student computes one
patch's scores and weights, lays the weights on the grid and finds the brightest cell.
"""

from __future__ import annotations

import numpy as np

from qkv import multi_head_attention, patchify, softmax

from .. import slips, variants
from ..checks import Choice, ChoiceCheck, ProblemSet, ValueCheck
from ..expectations import (
    choose_token,
    expect_brightest_patch,
    expect_patch_grid,
    expect_patch_scores,
    option_check,
    ordered_options,
    patch_weights,
)
from ..variants import VariantDraw, apart_from_seed
from .ps6_maps_slips import MOST_NOT_LEAST
from ..language import N_, _

LATE, COMPENSATION = 1, 2  # 晚到 and 補償 among the tokens
PATCH_SIZE = 2
SEED_IMAGE = np.array([
    [0, 0, 1, 1, 0, 0],
    [0, 0, 1, 1, 0, 0],
    [0, 1, 1, 0, 2, 2],
    [0, 1, 1, 0, 2, 2],
], dtype=float)  # (H, W) = (4, 6): 6 patches of 2 x 2 pixels
SEED_QUERY_PATCH = 4

WHY_RIGHT = N_("Its query is the longest: its scores are spread the widest, so its softmax is the sharpest.")
WHY_OPTIONS = {  # option -> what choosing it means (the right one: "")
    N_("Its key is the longest."): N_("a token's own key sets how much the others attend to it (its column), "
                               "not how it attends (its row)."),
    WHY_RIGHT: "",
    N_("It comes last in the sentence."):
        N_("nothing here depends on the order of the tokens: moving a token moves its "
                                      "row and column, and changes no weight."),
    N_("Its value is the largest."): N_("the values are mixed after the weights are fixed; they change no weight."),
}
NOT_SHOWN_RIGHT = N_("The values that the weights mix, and so what each token's output is.")
NOT_SHOWN_OPTIONS = {
    N_("How much each token attends to every other token."): N_("that is exactly what a map shows: row i, column j."),
    N_("Which token each token attends to most."): N_("a map shows it: the darkest cell of the token's row."),
    NOT_SHOWN_RIGHT: "",
    N_("That each token's weights add up to 1."): N_("each row of a map adds up to 1: you can read it off."),
}


def givens(variant: int) -> dict:
    """The variant's maps, the order of each question's options, and the image and query patch of part 2."""
    delivery = variants.delivery_example(variant)
    maps = multi_head_attention(delivery.X, delivery.heads, delivery.W_O, delivery.b_O)[1]  # (2, 3, 3)
    image, query_patch = (SEED_IMAGE.copy(), SEED_QUERY_PATCH) if variant == 0 else _image(variant)
    return {"tokens": delivery.tokens, "X": delivery.X, "heads": delivery.heads, "maps": maps,
            "why_options": ordered_options(WHY_OPTIONS, WHY_RIGHT, "ps6_options/why", variant),
            "not_shown_options": ordered_options(NOT_SHOWN_OPTIONS, NOT_SHOWN_RIGHT, "ps6_options/not_shown",
                                                 variant),
            "image": image, "patch_size": PATCH_SIZE, "query_patch": query_patch}


def _image(variant: int) -> tuple[np.ndarray, int]:
    seed_weights = patch_weights(SEED_IMAGE, PATCH_SIZE, SEED_QUERY_PATCH)
    seed_patches = patchify(SEED_IMAGE, PATCH_SIZE)  # (6, 4)
    seed_scaled = seed_patches @ seed_patches[SEED_QUERY_PATCH] / np.sqrt(seed_patches.shape[1])

    def draw_once(d: VariantDraw) -> tuple[np.ndarray, int]:
        return np.array(d.integers(0, 2, (4, 6)), dtype=float), d.integer(0, 5)

    def workable(candidate) -> bool:
        image, query = candidate
        patches = patchify(image, PATCH_SIZE)  # (6, 4)
        if not patches[query].any() or len({tuple(p) for p in patches}) < 4:
            return False
        scaled = patches @ patches[query] / np.sqrt(patches.shape[1])  # (6,): q . k_j / sqrt(d)
        weights = softmax(scaled)
        top, second = np.sort(weights)[::-1][:2]
        return (top - second >= 0.05 and top <= 0.9 and weights.min() >= 0.01
                and int(np.argmax(weights)) != int(np.argmax(seed_weights))
                and apart_from_seed(weights, seed_weights) and apart_from_seed(scaled, seed_scaled))

    return VariantDraw("ps6_image", variant).until(draw_once, workable, "image")


def _attends_most_to_late(g) -> Choice:
    column = g["maps"][0][:, LATE]  # head 1, how much each token attends to 晚到
    right = int(np.argmax(column))
    return choose_token(g["tokens"], right,
                        wrong={int(np.argmax(g["maps"][0][LATE])): slips.READ_ROW_NOT_COLUMN.advice},
                        explain_right=_("its row puts the largest weight on 晚到 (the largest entry of its column)"),
                        reveal=_("In head 1, {token} attends most to 晚到 ({weight}).").format(
                            token=g["tokens"][right], weight=f"{column[right]:.2f}"))


def _least_attended_head2(g) -> Choice:
    row = g["maps"][1][COMPENSATION]  # head 2, what 補償 attends to
    right = int(np.argmin(row))
    return choose_token(g["tokens"], right,
                        wrong={int(np.argmax(row)): MOST_NOT_LEAST.advice,
                               int(np.argmin(g["maps"][1][:, COMPENSATION])): slips.READ_COLUMN_NOT_ROW.advice},
                        explain_right=_("the smallest weight in 補償's row of head 2"),
                        reveal=_("In head 2, 補償 attends least to {token} ({weight}).").format(
                            token=g["tokens"][right], weight=f"{row[right]:.2f}"))


PROBLEM_SET = ProblemSet(
    name="ps6_maps",
    title=N_("Problem set 6: reading attention maps"),
    givens=givens,
    checks=(
        ChoiceCheck("attends_most_to_late", "attends_most_to_late", _attends_most_to_late,
                    "attends_most_to_late is the token that attends most to 晚到 in head 1."),
        ChoiceCheck("least_attended_head2", "least_attended_head2", _least_attended_head2,
                    "least_attended_head2 is the token 補償 attends to least in head 2."),
        option_check("why_it_attends_most", "why", WHY_OPTIONS, WHY_RIGHT, "why_options",
                      "why is the letter of the reason that token attends most to 晚到."),
        option_check("what_a_map_does_not_show", "not_shown", NOT_SHOWN_OPTIONS, NOT_SHOWN_RIGHT,
                      "not_shown_options", "not_shown is the letter of what an attention map does not show."),
        ValueCheck("patch_scores", "patch_scores",
                   lambda g: expect_patch_scores(g["image"], g["patch_size"], g["query_patch"], name="patch_scores"),
                   "patch_scores holds the query patch's scaled scores against every patch, each within 0.01."),
        ValueCheck("patch_weights_on_grid", "patch_grid",
                   lambda g: expect_patch_grid(g["image"], g["patch_size"], g["query_patch"], name="patch_grid"),
                   "patch_grid holds the query patch's weights on the 2 x 3 grid of patches, each within 0.01."),
        ValueCheck("most_attended_patch", "brightest_cell",
                   lambda g: expect_brightest_patch(g["image"], g["patch_size"], g["query_patch"]),
                   "brightest_cell is the (row, column) of the patch the query patch attends to most."),
    ),
)
