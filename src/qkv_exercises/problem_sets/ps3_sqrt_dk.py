"""Problem set 3: why divide by sqrt(d_k).

Part 1 is seed 002's softmax saturation example (:func:`qkv_exercises.variants.softmax_saturation_example`)
in the student's variant; part 2 asks how large q . k gets, for a width ``d_k`` (a
perfect square) and components of variance ``variance`` drawn per variant (variant 0:
d_k = 64, the width of one head in ViT-Base, and variance 1); part 3 checks a
simulation the student writes, graded by the range of its samples' variance.
"""

from __future__ import annotations

from .. import variants
from ..checks import FunctionCheck, ProblemSet, ValueCheck
from ..expectations import expect_dot_product_variance, expect_softmax, expect_typical_size
from ..functions import (
    SIMULATION_SAMPLES,
    judge_samples_shape,
    judge_uses_its_rng,
    rng_calls,
    sample_call,
    simulated_variance_judge,
)
from ..variants import VariantDraw
from ..language import N_

WIDTHS = (16, 25, 36, 49, 81, 100, 144)  # d_k with an easy square root (64 is the seed's)
VARIANCES = (0.5, 2.0, 3.0, 4.0)  # never 1: Var(q.k / sqrt(d_k)) = variance^2 is then not the seed's 1


def givens(variant: int) -> dict:
    """The saturation example of the variant, and the width and component variance of part 2."""
    saturation = variants.softmax_saturation_example(variant)
    d_k, variance = (64, 1.0) if variant == 0 else _width_and_variance(variant)
    return {"moderate": saturation.moderate, "scaled_up": saturation.scaled_up,
            "d_k_saturation": saturation.d_k, "d_k": d_k, "variance": variance}


def _width_and_variance(variant: int) -> tuple[int, float]:
    draw = VariantDraw("ps3_dot_products", variant)
    return draw.until(lambda d: (d.choice(WIDTHS), d.choice(VARIANCES)),
                      lambda c: c[0] * c[1] ** 2 != 64,  # Var(q.k) and its square root differ from the seed's
                      "width and variance")


def _simulated(grade_id: str, *, scaled: bool, description: str) -> FunctionCheck:
    return FunctionCheck(
        grade_id=grade_id, answer="sample_dot_products",
        calls=lambda g, rng: [sample_call(g["d_k"], SIMULATION_SAMPLES, int(rng.integers(2**31)),
                                          behaviour=N_("variance of the samples"))],
        judge_result=simulated_variance_judge(scaled=scaled), description=description,
    )


def _other_widths(g, rng) -> list:
    widths = rng.choice([4, 9, 12, 25, 32, 49], size=2, replace=False)
    return [sample_call(int(d_k), SIMULATION_SAMPLES // 2, int(rng.integers(2**31)),
                        behaviour=N_("variance of the samples")) for d_k in widths]


PROBLEM_SET = ProblemSet(
    name="ps3_sqrt_dk",
    title=N_("Problem set 3: why divide by sqrt(d_k)"),
    givens=givens,
    checks=(
        ValueCheck("softmax_moderate_scores", "softmax_moderate",
                   lambda g: expect_softmax(g["moderate"], name="softmax_moderate"),
                   "softmax_moderate is the softmax of the moderate scores, each entry within 0.01."),
        ValueCheck("softmax_large_scores", "softmax_scaled_up",
                   lambda g: expect_softmax(g["scaled_up"], name="softmax_scaled_up"),
                   "softmax_scaled_up is the softmax of the scaled-up scores, each entry within 0.01."),
        ValueCheck("softmax_rescaled_scores", "softmax_rescaled",
                   lambda g: expect_softmax(g["scaled_up"] / g["d_k_saturation"] ** 0.5, name="softmax_rescaled"),
                   "softmax_rescaled is the softmax of the scaled-up scores divided by sqrt(d_k), within 0.01."),
        ValueCheck("variance_of_dot_product", "variance_of_dot_product",
                   lambda g: expect_dot_product_variance(g["d_k"], g["variance"]),
                   "variance_of_dot_product is Var(q.k), within 0.01."),
        ValueCheck("typical_size_of_dot_product", "typical_size",
                   lambda g: expect_typical_size(g["d_k"], g["variance"]),
                   "typical_size is the standard deviation of q.k, within 0.01."),
        ValueCheck("variance_after_scaling", "variance_after_scaling",
                   lambda g: expect_dot_product_variance(g["d_k"], g["variance"], scaled=True),
                   "variance_after_scaling is Var(q.k / sqrt(d_k)), within 0.01."),
        _simulated("simulated_variance_raw", scaled=False,
                   description="The variance of 20000 simulated dot products is within 10% of d_k."),
        _simulated("simulated_variance_scaled", scaled=True,
                   description="Divided by sqrt(d_k), the simulated dot products have a variance within 10% of 1."),
        FunctionCheck("simulation_uses_its_rng", "sample_dot_products",
                      calls=lambda g, rng: rng_calls(rng, behaviour=N_("draws from the rng it is given")),
                      judge_result=judge_samples_shape, judge_together=judge_uses_its_rng,
                      description="sample_dot_products draws from the generator it is given: the same seed gives "
                                  "the same samples, another seed others."),
        FunctionCheck("simulated_variance_other_widths", "sample_dot_products", calls=_other_widths,
                      judge_result=simulated_variance_judge(scaled=False), hidden=True,
                      description="The simulation agrees with Var(q.k) for other widths d_k (graded by range)."),
        FunctionCheck("simulation_draws_samples", "sample_dot_products",
                      calls=lambda g, rng: rng_calls(rng, behaviour=N_("draws from the rng it is given")),
                      judge_result=judge_samples_shape, judge_together=judge_uses_its_rng, hidden=True,
                      description="sample_dot_products draws from the generators it is given, on other seeds."),
    ),
)
