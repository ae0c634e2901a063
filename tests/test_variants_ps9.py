"""Problem set 9's variants: 補償's row through a residual sum and a layer norm, workable by hand.

Variant 0 is checked against seed 000's printed output for 補償; every other variant of 1000
students (and the practice ones) is recomputed here with plain numpy: the residual sum, its mean
and variance, the normalised row and gamma * it + beta. They must be small numbers a student can
follow (0s and 1s, whole numbers, a whole standard deviation, halves), differ from the chapter's in
every step, and the questions with options must have one right option, never at the chapter's letter.
"""

from __future__ import annotations

import numpy as np
import pytest

from qkv_exercises.problem_sets import get_problem_set

from .notebook_support import givens_of
from .seeds import SEED_000_Y
from .test_variants import differs, is_multiple

POST_LN_MODELS = {"BERT", "BART", "the original Transformer (2017)"}  # normalise after each residual sum
DECODER_ONLY_MODELS = {"GPT-2", "LLaMA"}


def steps_by_hand(g) -> dict[str, np.ndarray]:
    r = g["x"] + g["a"]
    mean = r.sum() / len(r)
    variance = sum((value - mean) ** 2 for value in r) / len(r)
    normalised = (r - mean) / np.sqrt(variance + g["eps"])
    return {"r": r, "mean": mean, "variance": variance, "normalised": normalised,
            "y": g["gamma"] * normalised + g["beta"]}


@pytest.fixture(scope="module")
def variants():
    return givens_of("ps9_block")


@pytest.fixture(scope="module")
def seed():
    return get_problem_set("ps9_block").givens(0)


def test_variant_zero_is_the_chapters_row_of_compensation(seed):
    assert seed["token"] == "補償"
    np.testing.assert_array_equal(seed["x"], [1, 1, 0, 0])
    np.testing.assert_allclose(seed["a"], SEED_000_Y[2], atol=1e-6)  # the two heads' output for 補償, W_O = I
    np.testing.assert_array_equal(seed["gamma"], np.ones(4))
    np.testing.assert_array_equal(seed["beta"], np.zeros(4))
    assert seed["eps"] == 1e-5


def test_every_variant_is_workable_by_hand(variants):
    for variant, g in variants:
        steps = steps_by_hand(g)
        assert g["token"] == "補償" and all(g[k].shape == (4,) for k in ("x", "a", "gamma", "beta"))
        assert set(np.unique(g["x"])) <= {0.0, 1.0} and g["x"].any()
        assert is_multiple(g["a"], 1) and is_multiple(steps["mean"], 1), variant
        std = np.sqrt(steps["variance"])
        assert is_multiple(std, 1) and 1 <= std <= 5, variant
        assert is_multiple(g["gamma"], 0.5) and g["gamma"].min() >= 0.5 and g["gamma"].max() <= 2
        assert is_multiple(g["beta"], 0.5) and np.abs(g["beta"]).max() <= 1
        assert not np.all(g["gamma"] == 1) and not np.all(g["beta"] == 0), "gamma and beta do something"
        assert all(np.isfinite(v).all() for v in steps.values())


def test_every_step_differs_from_the_chapters(variants, seed):
    seed = steps_by_hand(seed)
    for variant, g in variants:
        steps = steps_by_hand(g)
        for name in steps:
            assert differs(steps[name], seed[name], by=0.01), (variant, name)


def test_each_question_has_one_right_option_never_at_the_chapters_letter(variants, seed):
    seed_place = {given: [option in right for option in seed[given]].index(True)
                  for given, right in (("post_ln_options", POST_LN_MODELS),
                                       ("decoder_only_options", DECODER_ONLY_MODELS))}
    for variant, g in variants:
        for given, right in (("post_ln_options", POST_LN_MODELS), ("decoder_only_options", DECODER_ONLY_MODELS)):
            places = [i for i, option in enumerate(g[given]) if option in right]
            assert len(places) == 1 and len(set(g[given])) == len(g[given]) == 4, (variant, g[given])
            assert places[0] != seed_place[given], (variant, given)
