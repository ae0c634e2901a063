"""Bad input raises an error that says what is wrong, never a silently wrong answer."""

from __future__ import annotations

import re

import numpy as np
import pytest

import qkv

rng = np.random.default_rng(0)
Q3x2, K3x2, V3x2 = rng.normal(size=(3, 2)), rng.normal(size=(3, 2)), rng.normal(size=(3, 2))
X3x4 = rng.normal(size=(3, 4))
W4x2 = rng.normal(size=(4, 2))


def raises(exc, *fragments):
    """pytest.raises that also requires every fragment in the message, in order."""
    return pytest.raises(exc, match=".*".join(re.escape(f) for f in fragments))


# softmax


def test_softmax_names_the_fully_masked_row():
    with raises(ValueError, "row [1]", "-inf", "fully masked"):
        qkv.softmax([[0.0, 1.0], [-np.inf, -np.inf], [2.0, -np.inf]])


def test_softmax_names_the_fully_masked_row_in_a_batch():
    x = np.zeros((2, 3, 4))
    x[1, 2] = -np.inf
    with raises(ValueError, "row [1, 2]", "fully masked"):
        qkv.softmax(x)


def test_softmax_of_a_vector_that_is_all_minus_inf():
    with raises(ValueError, "every entry of the input", "-inf"):
        qkv.softmax([-np.inf, -np.inf])


@pytest.mark.parametrize("bad", [np.nan, np.inf])
def test_softmax_rejects_nan_and_plus_inf(bad):
    with raises(ValueError, "x[0, 1] is", "finite numbers or -inf"):
        qkv.softmax([[0.0, bad]])


def test_softmax_rejects_text():
    with raises(TypeError, "x must hold real numbers"):
        qkv.softmax(["1", "2"])


# linear


def test_linear_names_both_shapes_when_x_and_w_do_not_fit():
    with raises(ValueError, "X has d_in=4", "(3, 4)", "W has 3 rows", "(3, 2)", "X.shape[-1] == W.shape[0]"):
        qkv.linear(X3x4, rng.normal(size=(3, 2)))


def test_linear_rejects_a_bias_of_the_wrong_width():
    with raises(ValueError, "b has shape (3,)", "W has 2 columns", "(2,) or (1, 2)"):
        qkv.linear(X3x4, W4x2, [1.0, 2.0, 3.0])


def test_linear_accepts_the_bias_as_a_row_and_broadcasts_it():
    b = np.array([[10.0, 20.0]])
    np.testing.assert_allclose(qkv.linear(X3x4, W4x2, b) - X3x4 @ W4x2, np.repeat(b, 3, axis=0))


def test_linear_rejects_a_vector_as_x():
    with raises(ValueError, "X must have at least 2 axes", "(4,)"):
        qkv.linear(np.ones(4), W4x2)


# scaled dot-product attention


def test_attention_names_dk_of_q_and_k():
    with raises(ValueError, "Q has d_k=2 but K has d_k=3", "(3, 2)", "(3, 3)"):
        qkv.scaled_dot_product_attention(Q3x2, rng.normal(size=(3, 3)), V3x2)


def test_attention_names_keys_and_values_counts():
    with raises(ValueError, "K has n_k=3 keys but V has 4 values", "(3, 2)", "(4, 2)"):
        qkv.scaled_dot_product_attention(Q3x2, K3x2, rng.normal(size=(4, 2)))


def test_attention_rejects_batches_that_do_not_broadcast():
    with raises(ValueError, "leading (batch/head) axes", "(2,)", "(3,)", "do not broadcast"):
        qkv.scaled_dot_product_attention(np.ones((2, 3, 2)), np.ones((3, 3, 2)), np.ones((3, 3, 2)))


@pytest.mark.parametrize("name, position", [("Q", 0), ("K", 1), ("V", 2)])
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_attention_rejects_non_finite_input_naming_the_entry(name, position, bad):
    args = [Q3x2.copy(), K3x2.copy(), V3x2.copy()]
    args[position][1, 0] = bad
    with raises(ValueError, f"{name}[1, 0] is {bad}", "finite numbers"):
        qkv.scaled_dot_product_attention(*args)


def test_attention_rejects_a_mask_that_is_not_boolean():
    with raises(TypeError, "mask must be boolean", "int64", "astype(bool)"):
        qkv.scaled_dot_product_attention(Q3x2, K3x2, V3x2, mask=np.ones((3, 3), dtype=np.int64))


def test_attention_rejects_a_mask_of_the_wrong_shape():
    with raises(ValueError, "mask has shape (3, 2)", "scores have shape (3, 3)", "broadcast"):
        qkv.scaled_dot_product_attention(Q3x2, K3x2, V3x2, mask=np.ones((3, 2), dtype=bool))


def test_attention_names_the_query_that_may_attend_to_nothing():
    mask = np.ones((3, 3), dtype=bool)
    mask[2] = False
    with raises(ValueError, "mask row [2] is all False", "query 2 may attend to no key"):
        qkv.scaled_dot_product_attention(Q3x2, K3x2, V3x2, mask=mask)


def test_attention_rejects_ragged_lists():
    with raises(ValueError, "Q is not a rectangular array"):
        qkv.scaled_dot_product_attention([[1.0, 0.0], [1.0]], K3x2, V3x2)


def test_attention_rejects_empty_inputs():
    with raises(ValueError, "K has an empty axis", "(0, 2)"):
        qkv.scaled_dot_product_attention(Q3x2, np.ones((0, 2)), np.ones((0, 2)))


# self-attention and heads


def test_self_attention_names_the_projection_that_does_not_fit_x():
    with raises(ValueError, "X has d_model=4", "W_Q has 5 rows"):
        qkv.self_attention(X3x4, *(rng.normal(size=(5, 2)) for _ in range(3)))


def test_head_names_wq_and_wk_width_mismatch():
    with raises(ValueError, "W_Q has d_k=2 columns but W_K has 3", "(4, 2)", "(4, 3)"):
        qkv.Head(W4x2, rng.normal(size=(4, 3)), W4x2)


def test_head_names_a_projection_reading_another_width():
    with raises(ValueError, "W_Q has d_model=4 rows but W_V has 5"):
        qkv.Head(W4x2, W4x2, rng.normal(size=(5, 2)))


def test_head_names_the_bias_that_does_not_fit():
    with raises(ValueError, "b_K has shape (3,)", "W_K has 2 columns"):
        qkv.Head(W4x2, W4x2, W4x2, b_K=np.zeros(3))


# multi-head


def test_multi_head_names_w_o_rows_against_the_concatenation():
    heads = qkv.examples.delivery_example().heads
    with raises(ValueError, "W_O has 3 rows", "2 heads' outputs concatenate to 4 columns", "2, 2"):
        qkv.multi_head_attention(X3x4, heads, np.eye(3))


def test_multi_head_needs_a_head():
    with raises(ValueError, "at least one head"):
        qkv.multi_head_attention(X3x4, [], np.eye(4))


def test_multi_head_names_heads_that_read_different_widths():
    heads = [qkv.Head(W4x2, W4x2, W4x2), qkv.Head(*(rng.normal(size=(5, 2)) for _ in range(3)))]
    with raises(ValueError, "head 1 reads d_model=4 but head 2 reads d_model=5"):
        qkv.multi_head_attention(X3x4, heads, np.eye(4))


def test_split_heads_names_the_widths_that_do_not_divide():
    with raises(ValueError, "d_model=5", "not divisible by num_heads=2"):
        qkv.split_heads(np.ones((3, 5)), 2)


@pytest.mark.parametrize("num_heads", [0, -1, 1.5, True])
def test_split_heads_rejects_a_head_count_that_is_not_a_positive_integer(num_heads):
    with raises(ValueError, "num_heads must be a positive integer"):
        qkv.split_heads(np.ones((3, 4)), num_heads)


def test_fuse_heads_names_heads_of_different_sizes():
    heads = [qkv.Head(W4x2, W4x2, W4x2), qkv.Head(W4x2, W4x2, rng.normal(size=(4, 3)))]
    with raises(ValueError, "head 1 has (d_model, d_k, d_v)=(4, 2, 2) but head 2 has (4, 2, 3)"):
        qkv.fuse_heads(heads)


def test_patchify_names_an_image_that_does_not_split():
    with raises(ValueError, "image of 5x6 pixels does not split into 2x2 patches"):
        qkv.patchify(np.zeros((5, 6)), 2)


def test_to_patch_grid_names_the_count_it_needs():
    with raises(ValueError, "weights has shape (5,)", "2x3 grid needs (6,)"):
        qkv.to_patch_grid(np.ones(5) / 5, (2, 3))


def test_fused_multi_head_names_w_o_rows_against_the_concatenation():
    W = rng.normal(size=(4, 4))
    with raises(ValueError, "W_O has 3 rows but the 2 heads' outputs concatenate to 4 columns"):
        qkv.fused_multi_head_attention(X3x4, W, W, W, np.eye(3), 2)


def test_fused_multi_head_names_a_width_the_heads_do_not_divide():
    W = rng.normal(size=(4, 4))
    with raises(ValueError, "W_Q has 4 columns", "not divisible by num_heads=3"):
        qkv.fused_multi_head_attention(X3x4, W, W, W, np.eye(4), 3)
