"""Sliding-window, strided and global-token masks against loops, and path lengths against counting.

Each mask is checked entry by entry against its rule written as a loop here; path lengths
against the number of layers that a hop of at most w - 1 tokens a layer needs (ceil((n - 1) /
(w - 1))), and against a breadth-first search over the allowed pairs.
"""

from __future__ import annotations

import math
from collections import deque

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import qkv

from .test_errors import raises


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 12), st.integers(1, 14))
def test_the_sliding_window_keeps_the_keys_less_than_w_away(n, window):
    mask = qkv.sliding_window_mask(n, window)
    expected = [[abs(i - j) < window for j in range(n)] for i in range(n)]
    np.testing.assert_array_equal(mask, expected)


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 12), st.integers(1, 14))
def test_with_the_causal_mask_each_query_keeps_itself_and_the_w_minus_1_before(n, window):
    mask = qkv.sliding_window_mask(n, window) & qkv.causal_mask(n)
    for i in range(n):
        kept = [j for j in range(n) if mask[i, j]]
        assert kept == list(range(max(0, i - window + 1), i + 1))


@settings(max_examples=60, deadline=None)
@given(st.integers(1, 12), st.integers(1, 6))
def test_the_strided_mask_keeps_every_stride_th_key(n, stride):
    mask = qkv.strided_mask(n, stride)
    expected = [[(i - j) % stride == 0 for j in range(n)] for i in range(n)]
    np.testing.assert_array_equal(mask, expected)


def test_global_tokens_see_and_are_seen_by_every_token():
    mask = qkv.global_tokens_mask(6, [0, 4])
    for i in range(6):
        for j in range(6):
            assert mask[i, j] == (i in (0, 4) or j in (0, 4))


def bfs_layers(mask) -> int:
    """Layers from the first token to the last along allowed pairs (key j -> query i), by BFS."""
    n = len(mask)
    distance = {0: 0}
    queue = deque([0])
    while queue:
        j = queue.popleft()
        for i in range(n):
            if mask[i][j] and i not in distance:
                distance[i] = distance[j] + 1
                queue.append(i)
    return distance[n - 1]


@pytest.mark.parametrize("n, window", [(16, 2), (16, 3), (16, 4), (33, 5), (64, 8), (10, 10)])
def test_a_causal_window_of_w_reaches_w_minus_1_tokens_further_per_layer(n, window):
    mask = qkv.sliding_window_mask(n, window) & qkv.causal_mask(n)
    layers = qkv.path_length(mask)
    assert layers == math.ceil((n - 1) / (window - 1)) == bfs_layers(mask)


def test_full_attention_reaches_in_one_layer_and_a_recurrent_chain_in_n_minus_1():
    assert qkv.path_length(qkv.causal_mask(50)) == 1
    assert qkv.path_length(qkv.sliding_window_mask(50, 2) & qkv.causal_mask(50)) == 49


def test_a_window_and_a_stride_together_reach_any_earlier_token_in_two_layers():
    """The Sparse Transformer's pattern with s = sqrt(n): at most s + n / s keys per query."""
    n, s = 256, 16
    mask = (qkv.sliding_window_mask(n, s) | qkv.strided_mask(n, s)) & qkv.causal_mask(n)
    assert qkv.path_length(mask) == 2 == bfs_layers(mask)
    assert mask.sum(axis=1).max() <= s + n // s


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 10), st.data())
def test_path_length_agrees_with_a_search_on_random_masks(n, data):
    mask = np.asarray(data.draw(st.lists(st.lists(st.booleans(), min_size=n, max_size=n),
                                         min_size=n, max_size=n)))
    mask |= np.eye(n, dtype=bool)
    mask[np.arange(1, n), np.arange(n - 1)] = True  # a chain, so the last token is reached
    assert qkv.path_length(mask) == bfs_layers(mask)


def test_a_mask_that_never_reaches_is_named():
    with raises(ValueError, "the last token never reaches the first"):
        qkv.path_length(np.eye(4, dtype=bool))


def test_path_length_needs_the_diagonal():
    with raises(ValueError, "mask[2, 2] is False"):
        qkv.path_length(np.array([[True, False, False], [True, True, False], [True, True, False]]))


@pytest.mark.parametrize("bad", [0, -2, 1.5])
def test_a_window_is_a_positive_integer(bad):
    with raises(ValueError, "window must be a positive integer"):
        qkv.sliding_window_mask(5, bad)


def test_global_tokens_outside_the_sequence_are_named():
    with raises(ValueError, "tokens holds position 7, outside 0 .. 4"):
        qkv.global_tokens_mask(5, [0, 7])
