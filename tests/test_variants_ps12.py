"""Problem set 12's variants: one head of all-MiniLM-L6-v2 whose map has one clear answer.

For 1000 students (and the practice variants) the named head's map is recomputed here with plain
numpy from the givens (its own columns of W_Q and W_K, a softmax by rows), and the answers are read
from it as the problem set asks: the token "compensation" attends to most, one clear winner, never
the chapter's answer ("want"), and the head's pattern seen in the whole map. Variant 0 is the
chapter's: its sentence, layer 1, head 3, the previous-token head. That the maps are the model's
own is tests/test_models_excerpt.py's part.
"""

from __future__ import annotations

import numpy as np
import pytest

from qkv_exercises.problem_sets import get_problem_set

from .notebook_support import givens_of

CHAPTER_SENTENCE = "The delivery was late, so I want compensation."


def head_map(g) -> np.ndarray:
    """The named head's weights, ``(n, n)``, from its own 32 columns of W_Q and W_K."""
    d_k = g["W_Q"].shape[1] // g["num_heads"]
    columns = slice((g["head"] - 1) * d_k, g["head"] * d_k)
    q = (g["X"] @ g["W_Q"] + g["b_Q"])[:, columns]
    k = (g["X"] @ g["W_K"] + g["b_K"])[:, columns]
    scores = q @ k.T / np.sqrt(d_k)
    e = np.exp(scores - scores.max(axis=1, keepdims=True))
    return e / e.sum(axis=1, keepdims=True)


def attended(g) -> tuple[str, float]:
    """The token compensation attends to most, and by how much more than the next."""
    row = head_map(g)[g["tokens"].index("compensation")]
    top, second = np.sort(row)[::-1][:2]
    return g["tokens"][int(np.argmax(row))], top - second


def pattern(g) -> str:
    """What most of the map's weight follows: the token before, the token after, or [CLS]."""
    A, n = head_map(g), len(g["tokens"])
    share = {"previous token": A[np.arange(1, n), np.arange(n - 1)].mean(),
             "next token": A[np.arange(n - 1), np.arange(1, n)].mean(), "[CLS]": A[:, 0].mean()}
    return max(share, key=share.get)


@pytest.fixture(scope="module")
def variants():
    return givens_of("ps12_trained_model")


def test_variant_zero_is_the_chapters_previous_token_head():
    g = get_problem_set("ps12_trained_model").givens(0)
    assert (g["sentence"], g["layer"], g["head"]) == (CHAPTER_SENTENCE, 1, 3)
    assert g["tokens"][0] == "[CLS]" and g["tokens"][-1] == "[SEP]"
    assert attended(g)[0] == "want" and pattern(g) == "previous token"


def test_every_variant_asks_about_a_head_the_excerpt_holds(variants):
    for variant, g in variants:
        n, h = len(g["tokens"]), g["num_heads"]
        assert g["X"].shape == (n, 384) and 1 <= g["head"] <= h and "compensation" in g["tokens"]
        for name in ("W_Q", "W_K", "W_V"):
            assert g[name].shape == (384, 32 * h) and g["b" + name[1:]].shape == (32 * h,)
        assert g["W_O"].shape == (32 * h, 384) and g["b_O"].shape == (384,)
        assert all(np.isfinite(g[name]).all() for name in ("X", "W_Q", "W_K", "W_V", "W_O"))


def test_every_variant_has_one_clear_answer_not_the_chapters(variants):
    seen = set()
    for variant, g in variants:
        token, lead = attended(g)
        assert token != "want" and lead >= 0.3, (variant, token, lead)
        query = g["tokens"].index("compensation")
        expected = {"previous token": g["tokens"][query - 1], "[CLS]": "[CLS]"}[pattern(g)]
        assert token == expected, (variant, token, pattern(g))
        seen.add((g["layer"], g["head"], g["sentence"]))
    assert len(seen) >= 20, "many heads and sentences among the variants"
    assert {pattern(g) for _, g in variants} == {"previous token", "[CLS]"}
