"""The chapter on training attention: the backward pass it works by hand agrees with the chain rule
applied here to seed 000's printed weights and values, its finite-difference checks agree, and its
trained model's heads are named as the model's own tests find them.

The expected numbers come from the seed's tables (tests/seeds.py), not from qkv.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from .seeds import SEED_000
from .test_book import math_text, page_text

pytestmark = pytest.mark.slow

PAGE = ("book", "training_attention.html")


def bracketed(text: str, after: str) -> list[float]:
    """The numbers of the first [...] after ``after``."""
    match = re.search(re.escape(after) + r"[^\[]*\[([^\]]+)\]", text)
    assert match, f"{after!r} is not followed by a bracketed row on the page"
    return [float(x) for x in match.group(1).split(",")]


def test_the_softmax_row_and_the_query_gradient_of_buchang_are_the_chain_rule_on_seed_000(built_site):
    """L = o(補償)[0]: dA = first entries of V, dS = a (dA - a . dA), dq = dS K / sqrt(2)."""
    a, V, K = (np.array(SEED_000[1][name], dtype=float) for name in ("A", "V", "K"))
    a = a[2]
    dA = V[:, 0]
    dS = a * (dA - a @ dA)
    dq = dS @ K / math.sqrt(2)
    text = page_text(built_site.joinpath(*PAGE))
    before = re.search(r"\[([^\]]+)\],? which sums to", text)
    assert before, "the row dS of 補償 is not on the page"
    np.testing.assert_allclose([float(x) for x in before.group(1).split(",")], dS, atol=1e-4)
    np.testing.assert_allclose(bracketed(text, "in both entries:"), dq, atol=1e-4)


def test_the_value_gradient_is_buchangs_weights_on_the_first_entry(built_site):
    text = math_text(built_site.joinpath(*PAGE))
    start = text.find("dV\\ (3")
    assert start >= 0, "the matrix dV is not on the page"
    rows = re.search(r"\\begin\{bmatrix\}(.*?)\\end\{bmatrix\}", text[start:], flags=re.S).group(1)
    dV = np.array([[float(x) for x in row.split("&")] for row in rows.split(r"\\")])
    a = np.array(SEED_000[1]["A"][2])
    np.testing.assert_allclose(dV, np.outer(a, [1, 0]), atol=1e-4)


def test_the_finite_differences_on_the_page_agree_with_the_backward_pass(built_site):
    text = page_text(built_site.joinpath(*PAGE))
    found = re.findall(r"largest difference:? (\S+?\d)(?:\s|$)", text)
    assert len(found) == 4, f"expected the dQ, dK, dV and dW_Q checks on the page, found {found}"
    assert all(float(value) < 1e-9 for value in found), found


def test_the_page_names_the_previous_token_head_and_the_induction_heads(built_site):
    text = page_text(built_site.joinpath(*PAGE))
    assert re.search(r"Layer 1, head \d is a previous-token head", text)
    assert "two induction heads" in text or "induction head(s)" in text


def test_no_number_on_the_page_is_shown_as_a_numpy_repr(built_site):
    """An {eval} of a numpy scalar shows np.int64(512); the prose shows 512."""
    text = page_text(built_site.joinpath(*PAGE))
    shown = re.findall(r".{30}np\.(?:int|float)\d+\(.{10}", text)
    assert not shown, f"numpy reprs on the page: {shown}"
