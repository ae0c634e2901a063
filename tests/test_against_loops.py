"""qkv agrees with a plain-loop implementation written here, entry by entry.

The loops follow the definitions with scalars only (math.exp, sums over indices), so they
share no code, no broadcasting and no numpy reduction with qkv.
"""

from __future__ import annotations

import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

import qkv

from .strategies import attention_inputs, multi_head_inputs


def loop_softmax(row: list[float]) -> list[float]:
    finite = [s for s in row if s != -math.inf]
    top = max(finite)
    exps = [0.0 if s == -math.inf else math.exp(s - top) for s in row]
    total = sum(exps)
    return [e / total for e in exps]


def loop_attention(Q, K, V, mask=None):
    """Attention for one (n_q, d_k), (n_k, d_k), (n_k, d_v) triple, index by index."""
    n_q, d_k = len(Q), len(Q[0])
    n_k, d_v = len(K), len(V[0])
    weights, output = [], []
    for i in range(n_q):
        scores = []
        for j in range(n_k):
            dot = sum(Q[i][c] * K[j][c] for c in range(d_k))
            allowed = True if mask is None else bool(mask[i][j])
            scores.append(dot / math.sqrt(d_k) if allowed else -math.inf)
        w = loop_softmax(scores)
        weights.append(w)
        output.append([sum(w[j] * V[j][c] for j in range(n_k)) for c in range(d_v)])
    return output, weights


def loop_linear(X, W, b=None):
    return [
        [sum(x[r] * W[r][c] for r in range(len(W))) + (0.0 if b is None else b[c]) for c in range(len(W[0]))]
        for x in X
    ]


def loop_multi_head(X, heads, W_O, b_O=None):
    outputs, weights = [], []
    for head in heads:
        Q = loop_linear(X, head.W_Q.tolist(), None if head.b_Q is None else head.b_Q.tolist())
        K = loop_linear(X, head.W_K.tolist(), None if head.b_K is None else head.b_K.tolist())
        V = loop_linear(X, head.W_V.tolist(), None if head.b_V is None else head.b_V.tolist())
        out, w = loop_attention(Q, K, V)
        outputs.append(out)
        weights.append(w)
    concat = [sum((out[t] for out in outputs), []) for t in range(len(X))]
    return loop_linear(concat, W_O.tolist(), None if b_O is None else b_O.tolist()), weights


@settings(max_examples=60, deadline=None)
@given(attention_inputs(with_mask=True))
def test_scaled_dot_product_attention_matches_loops(inputs):
    Q, K, V, mask = inputs
    output, weights = qkv.scaled_dot_product_attention(Q, K, V, mask)
    expected_output, expected_weights = loop_attention(Q.tolist(), K.tolist(), V.tolist(), mask.tolist())
    np.testing.assert_allclose(weights, expected_weights, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(output, expected_output, rtol=1e-9, atol=1e-9)


@settings(max_examples=40, deadline=None)
@given(multi_head_inputs())
def test_multi_head_attention_matches_loops(inputs):
    X, heads, W_O, b_O = inputs
    Y, weights = qkv.multi_head_attention(X, heads, W_O, b_O)
    expected_Y, expected_weights = loop_multi_head(X.tolist(), heads, W_O, b_O)
    np.testing.assert_allclose(weights, expected_weights, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(Y, expected_Y, rtol=1e-9, atol=1e-9)


@settings(max_examples=40, deadline=None)
@given(multi_head_inputs())
def test_trace_matches_loops_step_by_step(inputs):
    X, heads, W_O, b_O = inputs
    trace = qkv.trace_multi_head(X, heads, W_O, b_O)
    expected_Y, expected_weights = loop_multi_head(X.tolist(), heads, W_O, b_O)
    np.testing.assert_allclose(trace.Y.Z, expected_Y, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(trace.weights, expected_weights, rtol=1e-9, atol=1e-12)
    for head, head_trace in zip(heads, trace.heads):
        Q = loop_linear(X.tolist(), head.W_Q.tolist(), None if head.b_Q is None else head.b_Q.tolist())
        np.testing.assert_allclose(head_trace.Q.Z, Q, rtol=1e-9, atol=1e-9)
        np.testing.assert_allclose(head_trace.Q.raw + head_trace.Q.B, head_trace.Q.Z)
        np.testing.assert_allclose(head_trace.S, head_trace.S_raw / math.sqrt(head.d_k))
        np.testing.assert_array_equal(head_trace.K_T, head_trace.K.Z.T)


def test_loops_reproduce_a_seed_table():
    """The loop reference itself is right: it gives seed 000's A^(1) row for 補償."""
    ex = qkv.examples.delivery_example()
    _, weights = loop_multi_head(ex.X.tolist(), ex.heads, ex.W_O)
    np.testing.assert_allclose(weights[0][2], [0.090031, 0.665241, 0.244728], atol=1e-6)
