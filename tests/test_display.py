"""qkv_book.display: matrices written as LaTeX with their names and shapes, entries as the seeds print them."""

from __future__ import annotations

import re

import numpy as np
import pytest
from IPython.display import Math

import qkv
import qkv_book.display as display

# Seed 000, head 1, as printed: the weights A^(1) and the output O^(1).
SEED_000_A1 = [[0.186324, 0.506480, 0.307196], [0.186324, 0.506480, 0.307196], [0.090031, 0.665241, 0.244728]]
SEED_000_O1 = [[0.493520, 0.813676], [0.493520, 0.813676], [0.334759, 0.909969]]


def read_bmatrices(latex: str) -> list[np.ndarray]:
    """Every bmatrix of a LaTeX string, parsed back to numbers (a reader's view of the page)."""
    matrices = []
    for body in re.findall(r"\\begin\{bmatrix\}(.*?)\\end\{bmatrix\}", latex, flags=re.S):
        rows = [row for row in body.split(r"\\") if row.strip()]
        matrices.append(np.array([[float(x) for x in row.split("&")] for row in rows]))
    return matrices


@pytest.mark.parametrize("value, decimals, text", [
    (0.5, 6, "0.5"), (2.0, 6, "2"), (0.0, 6, "0"), (-1e-9, 6, "0"), (-0.707107, 6, "-0.707107"),
    (2.00000062, 6, "2.000001"), (0.665241043, 6, "0.665241"), (0.4011, 2, "0.40"), (1234.5, 0, "1234"),
    (0.1 + 0.2, 6, "0.3"), (0.3, 2, "0.3"),
])
def test_format_entry_rounds_and_drops_only_the_zeros_of_an_exact_value(value, decimals, text):
    assert display.format_entry(value, decimals) == text


def test_seed_000_weights_print_with_the_seeds_six_decimals():
    """Seed 000 prints 0.506480 and 0.493520; qkv's A and O of head 1 print the same, not 0.50648."""
    trace = qkv.trace_head(qkv.examples.delivery_example().X, *qkv.examples.delivery_example().heads[0])
    shown = display.bmatrix(trace.A) + display.bmatrix(trace.O)
    assert "0.506480" in shown and "0.493520" in shown and "0.50648 " not in shown and "0.49352 " not in shown


def test_format_entry_rejects_a_bad_number_of_decimals():
    with pytest.raises(ValueError, match="decimals must be a whole number >= 0"):
        display.format_entry(1.0, -1)


def test_bmatrix_reads_back_as_the_matrix_rounded():
    rng = np.random.default_rng(0)
    M = rng.standard_normal((3, 4))
    (shown,) = read_bmatrices(display.bmatrix(M, decimals=4))
    np.testing.assert_allclose(shown, M, atol=5e-5)
    assert shown.shape == (3, 4)


def test_a_vector_is_shown_as_one_row_with_its_shape():
    latex = display.labelled("b_K", np.array([0.707107, 0.707107]))
    assert latex.startswith(r"b_K\ (1\times 2) = ")
    assert read_bmatrices(latex)[0].shape == (1, 2)


def test_labelled_writes_the_name_and_shape_then_the_entries():
    latex = display.labelled("Q^{(1)}", np.array([[1, 0], [0, 1], [1, 1]]), row_labels=["外送", "晚到", "補償"])
    assert latex.startswith(r"Q^{(1)}\ (3\times 2) = \begin{bmatrix} 1 & 0 \\ 0 & 1 \\ 1 & 1 \end{bmatrix}")
    assert [f"\\text{{{t}}}" in latex for t in ("外送", "晚到", "補償")] == [True] * 3


def test_row_labels_must_match_the_rows():
    with pytest.raises(ValueError, match="row_labels has 2 labels but the matrix has 3 rows"):
        display.bmatrix(np.eye(3), row_labels=["外送", "晚到"])


def test_show_returns_math_and_rejects_a_matrix_passed_by_mistake():
    shown = display.show(display.shaped("X", np.ones((3, 4))), r"\cdot", display.shaped("W", np.ones((4, 2))))
    assert isinstance(shown, Math)
    assert shown.data == r"X\ (3\times 4) \cdot W\ (4\times 2)"
    with pytest.raises(TypeError, match="show\\(\\) takes LaTeX strings"):
        display.show(np.eye(2))


def test_chain_aligns_the_steps_on_equals_signs():
    latex = display.chain("Y", "A + B", "C")
    assert latex == r"\begin{aligned} Y &= A + B \\ &= C \end{aligned}"
    with pytest.raises(ValueError, match="at least one step"):
        display.chain("Y")


def test_head_trace_equations_show_seed_000_head_1():
    """The weights and the output written for head 1 are the ones seed 000 prints, in the seed's order."""
    ex = qkv.examples.delivery_example()
    trace = qkv.trace_head(ex.X, *ex.heads[0])
    equations = display.head_trace_equations(trace, head=1, row_labels=ex.tokens)
    leading = [re.match(r"(?:\\begin\{aligned\} )?(\S+)", eq).group(1) for eq in equations]
    assert leading == ["Q^{(1)}\\", "K^{(1)}\\", "V^{(1)}\\", "K^{(1)\\top}\\", "S_{\\mathrm{raw}}^{(1)}\\",
                       "S^{(1)}\\", "A^{(1)}\\", "O^{(1)}\\"]
    np.testing.assert_allclose(read_bmatrices(equations[6])[-1], SEED_000_A1, atol=1e-6)
    np.testing.assert_allclose(read_bmatrices(equations[7])[-1], SEED_000_O1, atol=1e-6)
    # the exact root, not a rounded 1.414214 that would make 2.828428 / 1.414214 look like 2.000001
    assert r"\frac{S_{\mathrm{raw}}^{(1)}}{\sqrt{2}}" in equations[5]


def test_projection_chain_shows_product_bias_and_sum():
    """K^(1) = K_raw + B_K: seed 000's bias 0.707107 copied on every row, and 外送's key becomes 0."""
    ex = qkv.examples.delivery_example()
    head = ex.heads[0]
    latex = display.projection_chain("K^{(1)}", qkv.project(ex.X, head.W_K, head.b_K),
                                     raw_name="K_{raw}", bias_name="B_K")
    raw, bias, key = read_bmatrices(latex)
    np.testing.assert_allclose(bias, [[0.707107, 0.707107]] * 3)
    np.testing.assert_allclose(key, raw + bias)
    np.testing.assert_allclose(key[0], [0, 0], atol=1e-12)


def test_head_parameter_equations_show_every_matrix_and_bias():
    ex = qkv.examples.delivery_example()
    equations = display.head_parameter_equations(ex.heads[1], number=2)
    assert len(equations) == 3
    W_K, b_K = read_bmatrices(equations[1])
    np.testing.assert_allclose(W_K, ex.heads[1].W_K)
    np.testing.assert_allclose(b_K, [[2.121321, 2.121321]])


def test_masked_bmatrix_shows_minus_infinity_where_the_mask_blocks():
    S = np.array([[0.0, 1.0, 0.5], [0.0, 1.0, 0.5], [0.0, 2.0, 1.0]])
    latex = display.masked_bmatrix(S, qkv.causal_mask(3))
    rows = latex.removeprefix(r"\begin{bmatrix} ").removesuffix(r" \end{bmatrix}").split(r" \\ ")
    assert [row.split(" & ") for row in rows] == [
        ["0", r"-\infty", r"-\infty"], ["0", "1", r"-\infty"], ["0", "2", "1"]]


def test_masked_bmatrix_needs_a_boolean_mask_of_the_same_shape():
    with pytest.raises(ValueError, match="needs a matrix and a boolean mask of its shape"):
        display.masked_bmatrix(np.ones((2, 2)), np.ones((2, 2)))
    with pytest.raises(ValueError, match=r"got shapes \(2, 2\) and \(3, 3\)"):
        display.masked_bmatrix(np.ones((2, 2)), qkv.causal_mask(3))
