"""Problem set 11: attention as soft lookup.

Part 1 weighs three keys with a Gaussian kernel, as the chapter does for seed 002's query
q1 = [1, 0] with sigma = 1 (:func:`qkv_exercises.variants.kernel_lookup_example`, in the student's
variant): the squared distances, the exponents, the weights, the Nadaraya-Watson prediction, and
the extended scores whose softmax is the same; then which value a very narrow kernel returns (the
hard lookup as a limit). Part 2 asks what makes a Gaussian kernel a softmax of scaled dot products,
and what sets additive scoring apart from dot-product scoring. Part 3 checks
``gaussian_kernel_weights`` written by the student, to 1e-6 against
:func:`qkv.gaussian_kernel_weights`.
"""

from __future__ import annotations

import numpy as np

from .. import variants
from ..checks import Choice, ChoiceCheck, ProblemSet, ValueCheck, function_checks
from ..expectations import expect_kernel_step, option_check, ordered_options
from ..functions import (
    FAR_AWAY,
    ONE_FEATURE,
    ONE_QUERY,
    SEVERAL_QUERIES,
    explain_kernel_error,
    judge_kernel_weights,
    kernel_call,
    random_halves,
    random_kernel_calls,
)
from ..language import N_, _

KEYS = ("k1", "k2", "k3")
VALUES = ("v1", "v2", "v3")
MEAN = "mean"  # the narrow-kernel question's distractor: what a very wide kernel returns

WHY_RIGHT = (N_("When all keys have the same length: -|q - k|^2 / (2 sigma^2) is then q . k / sigma^2 plus a term "
             "that is the same for every key, which the softmax cancels."))
WHY_OPTIONS = {  # option -> what choosing it means (the right one: "")
    N_("For any keys: e^(-|q - k|^2 / (2 sigma^2)) is always e^(q . k / sigma^2) times one same factor."):
        N_("the key's own term -|k|^2 / (2 sigma^2) differs from key to key; the softmax cancels it only when "
        "every key has the same length (or when an extra coordinate carries it)."),
    WHY_RIGHT: "",
    N_("When sigma = 1: the width is what makes the two differ."):
        N_("the width only scales the scores (1 / sigma^2 in the place of 1 / sqrt(d_k)); the key-length term is "
        "what can make them differ."),
    N_("When the query's term -|q|^2 / (2 sigma^2) is kept: it changes which key weighs most."):
        N_("the query's term is the same for every key of a row, so the softmax cancels it: it changes no weight."),
}
ADDITIVE_RIGHT = (N_("Dot-product scores are one matrix product Q K^T; additive scoring runs a small network "
                  "(a tanh layer) for every query-key pair."))
ADDITIVE_OPTIONS = {
    N_("Additive scoring has nothing to learn; dot-product scoring learns W_Q and W_K."):
        N_("additive scoring learns W_q, W_k and w_v: it is a small network."),
    N_("Dot-product scoring allows queries and keys of different widths; additive does not."):
        N_("the other way round: q . k needs equal widths, while additive scoring projects each to d_h units."),
    ADDITIVE_RIGHT: "",
    N_("Additive scoring gives weights that do not add up to 1."):
        N_("both kinds of scores go through the same softmax, so both kinds of weights add up to 1."),
}


def givens(variant: int) -> dict:
    """The variant's query, keys, values and kernel width, and the order of each question's options."""
    lookup = variants.kernel_lookup_example(variant)
    return {"q": lookup.Q, "K": lookup.K, "V": lookup.V, "sigma": lookup.sigma, "keys": KEYS, "values": VALUES,
            "why_options": ordered_options(WHY_OPTIONS, WHY_RIGHT, "ps11_options/why", variant),
            "additive_options": ordered_options(ADDITIVE_OPTIONS, ADDITIVE_RIGHT, "ps11_options/additive", variant)}


def _step(step: str, answer: str, description: str) -> ValueCheck:
    return ValueCheck(answer, answer,
                      lambda g: expect_kernel_step(step, g["q"], g["K"], g["V"], g["sigma"], name=answer,
                                                   keys=g["keys"]),
                      description)


def _narrow_kernel(g) -> Choice:
    distances = ((g["K"] - g["q"][0]) ** 2).sum(axis=1)  # (n_k,)
    nearest, farthest = int(np.argmin(distances)), int(np.argmax(distances))
    dot_best = int(np.argmax(g["K"] @ g["q"][0]))
    wrong = {VALUES[farthest]: _("that is the value of the key FARTHEST from q: did the exponent lose its minus "
                                 "sign?"),
             MEAN: _("that is what a very WIDE kernel returns (every weight tends to 1/3); a narrow one keeps only "
                     "the key nearest to q.")}
    if dot_best not in (nearest, farthest):
        wrong[VALUES[dot_best]] = _("that key has the largest dot product with q; a Gaussian kernel weighs keys by "
                                    "their distance from q.")
    for other in set(range(len(VALUES))) - {nearest, farthest, dot_best}:
        wrong[VALUES[other]] = _("compare the squared distances |q - k_j|^2: which key is nearest to q?")
    return Choice(right=VALUES[nearest], choices=(*VALUES, MEAN),
                  explain_right=_("as sigma shrinks, the nearest key's weight tends to 1 and every other to 0: "
                                "the hard lookup"),
                  explain_wrong=wrong,
                  reveal_text=_("The key nearest to q is {key} (|q - k|^2 = {distance}), so a very narrow kernel "
                                "returns {value}.").format(key=KEYS[nearest], distance=f"{distances[nearest]:g}",
                                                          value=VALUES[nearest]))


_kernel_check = function_checks("gaussian_kernel_weights", judge_kernel_weights, explain_kernel_error)


def _several(g, rng) -> list:
    return [kernel_call(random_halves(rng, (3, 2)), random_halves(rng, (4, 2)), 0.5, behaviour=SEVERAL_QUERIES),
            kernel_call(np.linspace(0, 5, 6)[:, None], np.arange(5.0)[:, None] + 0.25, 0.75, behaviour=ONE_FEATURE)]


def _far_away(g, rng) -> list:
    K = random_halves(rng, (4, 3))
    return [kernel_call(K[:2] + 50, K, 0.25, behaviour=FAR_AWAY)]


PROBLEM_SET = ProblemSet(
    name="ps11_soft_lookup",
    title=N_("Problem set 11: attention as soft lookup"),
    givens=givens,
    checks=(
        _step("distances", "distances", "distances holds |q - k_j|^2 for the three keys, each within 0.01."),
        _step("exponents", "exponents", "exponents holds -|q - k_j|^2 / (2 sigma^2), each within 0.01."),
        _step("weights", "kernel_weights", "kernel_weights holds the Gaussian kernel's weights, each within 0.01."),
        _step("prediction", "prediction", "prediction is the Nadaraya-Watson prediction, each entry within 0.01."),
        _step("extended_scores", "extended_scores",
              "extended_scores holds (q . k_j - |k_j|^2 / 2) / sigma^2, each within 0.01."),
        ChoiceCheck("narrow_kernel", "narrow_kernel", _narrow_kernel,
                    "narrow_kernel is the value a very narrow kernel returns."),
        option_check("why_a_softmax_of_dot_products", "why", WHY_OPTIONS, WHY_RIGHT, "why_options",
                      "why is the letter of when a Gaussian kernel is a softmax of scaled dot products."),
        option_check("additive_or_dot_product", "additive", ADDITIVE_OPTIONS, ADDITIVE_RIGHT, "additive_options",
                      "additive is the letter of what sets additive scoring apart from dot-product scoring."),
        _kernel_check("kernel_your_query",
                      lambda g, rng: [kernel_call(g["q"], g["K"], g["sigma"], what="q, K", behaviour=ONE_QUERY)],
                      "gaussian_kernel_weights(q, K, sigma) on your numbers matches qkv to 1e-6."),
        _kernel_check("kernel_other_inputs", _several,
                      "gaussian_kernel_weights on several queries (each row sums to 1) and on one feature (d = 1)."),
        _kernel_check("kernel_far_from_every_key", _far_away,
                      "gaussian_kernel_weights for queries far from every key with a narrow kernel stays finite."),
        _kernel_check("kernel_random_inputs", lambda g, rng: random_kernel_calls(rng),
                      "gaussian_kernel_weights matches qkv.gaussian_kernel_weights on random inputs of every kind.",
                      hidden=True),
    ),
)
