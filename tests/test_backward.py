"""The backward pass of attention is the gradient: it agrees with PyTorch's autograd (float64, to
1e-10), with central finite differences and with a row-by-row Jacobian written out in loops, with
and without masks; and bad input is named in the error.

PyTorch differentiates its own forward pass, an implementation independent of qkv's. Each test
takes a random gradient ``dO`` at the output, asks torch for ``(dO * O).sum()``'s gradient (whose
gradient at ``O`` is ``dO``), and compares.
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import qkv

from .strategies import attention_inputs, matrices, multi_head_inputs

torch = pytest.importorskip("torch")
F = torch.nn.functional


def tensors(*arrays):
    return [torch.tensor(a, dtype=torch.float64, requires_grad=True) for a in arrays]


def torch_attention_gradients(Q, K, V, dO, mask=None):
    """dQ, dK, dV of torch's own scaled dot-product attention (True = may attend, as in qkv)."""
    q, k, v = tensors(Q, K, V)
    output = F.scaled_dot_product_attention(q, k, v, attn_mask=None if mask is None else torch.from_numpy(mask))
    (output * torch.from_numpy(dO)).sum().backward()
    return q.grad.numpy(), k.grad.numpy(), v.grad.numpy()


def assert_same_gradients(actual, expected, names=("dQ", "dK", "dV"), tolerance=1e-10):
    for name, a, e in zip(names, actual, expected):
        np.testing.assert_allclose(a, e, rtol=tolerance, atol=tolerance, err_msg=name)


# ---------------------------------------------------------------- one head


@settings(max_examples=25, deadline=None)
@given(attention_inputs(), st.data())
def test_attention_backward_matches_torch_autograd(inputs, data):
    Q, K, V, _ = inputs
    dO = data.draw(matrices((Q.shape[0], V.shape[1])))
    assert_same_gradients(qkv.attention_backward(Q, K, V, dO), torch_attention_gradients(Q, K, V, dO))


@settings(max_examples=25, deadline=None)
@given(attention_inputs(with_mask=True), st.data())
def test_attention_backward_matches_torch_autograd_with_a_mask(inputs, data):
    Q, K, V, mask = inputs
    dO = data.draw(matrices((Q.shape[0], V.shape[1])))
    assert_same_gradients(qkv.attention_backward(Q, K, V, dO, mask), torch_attention_gradients(Q, K, V, dO, mask))


def test_attention_backward_matches_torch_on_batches_of_heads_with_a_causal_mask():
    rng = np.random.default_rng(0)
    Q, K, V, dO = (rng.normal(size=(2, 3, 6, d)) for d in (4, 4, 5, 5))  # (batch, h, n, d)
    mask = qkv.causal_mask(6)
    assert_same_gradients(qkv.attention_backward(Q, K, V, dO, mask), torch_attention_gradients(Q, K, V, dO, mask))


def test_a_broadcast_key_gets_the_sum_of_its_copies_gradients():
    """One K and V for two batches of queries: their gradient adds both batches' gradients."""
    rng = np.random.default_rng(1)
    Q, dO = rng.normal(size=(2, 3, 4)), rng.normal(size=(2, 3, 2))
    K, V = rng.normal(size=(1, 5, 4)), rng.normal(size=(1, 5, 2))
    dQ, dK, dV = qkv.attention_backward(Q, K, V, dO)
    assert dK.shape == K.shape and dV.shape == V.shape
    each = [qkv.attention_backward(Q[b], K[0], V[0], dO[b]) for b in range(2)]
    np.testing.assert_allclose(dK[0], each[0][1] + each[1][1], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(dV[0], each[0][2] + each[1][2], rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(dQ, np.stack([e[0] for e in each]), rtol=1e-12, atol=1e-12)


def loop_attention_backward(Q, K, V, dO):
    """The chain rule written out entry by entry, with each row's full softmax Jacobian."""
    n_q, d_k = Q.shape
    n_k = K.shape[0]
    S = np.array([[sum(Q[i, c] * K[j, c] for c in range(d_k)) / np.sqrt(d_k) for j in range(n_k)]
                  for i in range(n_q)])
    A = np.exp(S - S.max(axis=1, keepdims=True))
    A /= A.sum(axis=1, keepdims=True)
    dV = np.zeros_like(V)
    dS = np.zeros_like(S)
    for i in range(n_q):
        for j in range(n_k):
            dV[j] += A[i, j] * dO[i]
        dA_i = [sum(dO[i, c] * V[j, c] for c in range(V.shape[1])) for j in range(n_k)]
        jacobian = [[A[i, j] * ((j == m) - A[i, m]) for m in range(n_k)] for j in range(n_k)]  # dA_ij / dS_im
        for m in range(n_k):
            dS[i, m] = sum(dA_i[j] * jacobian[j][m] for j in range(n_k))
    dQ = np.array([[sum(dS[i, j] * K[j, c] for j in range(n_k)) for c in range(d_k)] for i in range(n_q)])
    dK = np.array([[sum(dS[i, j] * Q[i, c] for i in range(n_q)) for c in range(d_k)] for j in range(n_k)])
    return dQ / np.sqrt(d_k), dK / np.sqrt(d_k), dV


@settings(max_examples=40, deadline=None)
@given(attention_inputs(), st.data())
def test_attention_backward_matches_the_full_jacobian_written_in_loops(inputs, data):
    Q, K, V, _ = inputs
    dO = data.draw(matrices((Q.shape[0], V.shape[1])))
    assert_same_gradients(qkv.attention_backward(Q, K, V, dO), loop_attention_backward(Q, K, V, dO), tolerance=1e-9)


@pytest.mark.parametrize("masked", [False, True], ids=["no mask", "causal mask"])
def test_attention_backward_matches_central_differences(masked):
    rng = np.random.default_rng(2)
    Q, K, V, dO = (rng.normal(size=(4, d)) for d in (3, 3, 2, 2))
    mask = qkv.causal_mask(4) if masked else None

    def loss(Q, K, V):
        return float(np.sum(dO * qkv.scaled_dot_product_attention(Q, K, V, mask)[0]))

    expected = (qkv.central_differences(lambda x: loss(x, K, V), Q),
                qkv.central_differences(lambda x: loss(Q, x, V), K),
                qkv.central_differences(lambda x: loss(Q, K, x), V))
    assert_same_gradients(qkv.attention_backward(Q, K, V, dO, mask), expected, tolerance=1e-8)


@settings(max_examples=40, deadline=None)
@given(st.integers(1, 4), st.integers(1, 6), st.data())
def test_every_row_of_the_softmax_gradient_sums_to_zero(n_q, n_k, data):
    """Adding one number to a whole row of scores changes no weight, so no row's dS moves it."""
    S, dA = data.draw(matrices((n_q, n_k))), data.draw(matrices((n_q, n_k)))
    dS = qkv.softmax_backward(qkv.softmax(S), dA)
    np.testing.assert_allclose(dS.sum(axis=-1), 0, atol=1e-12)


# ---------------------------------------------------------------- the layer's parameters


def torch_multi_head_gradients(X, heads, W_O, b_O, dY, mask=None):
    """Gradients at X and every parameter, from torch's autograd through the same layer."""
    x, w_o = tensors(X, W_O)
    b_o = tensors(b_O)[0] if b_O is not None else None
    params, outputs = [], []
    for head in heads:
        arrays = [None if a is None else tensors(a)[0] for a in head]
        params.append(arrays)
        W_Q, W_K, W_V, b_Q, b_K, b_V = arrays
        Q = x @ W_Q + (0 if b_Q is None else b_Q)
        K = x @ W_K + (0 if b_K is None else b_K)
        V = x @ W_V + (0 if b_V is None else b_V)
        outputs.append(F.scaled_dot_product_attention(
            Q, K, V, attn_mask=None if mask is None else torch.from_numpy(mask)))
    Y = torch.cat(outputs, dim=-1) @ w_o + (0 if b_o is None else b_o)
    (Y * torch.from_numpy(dY)).sum().backward()
    grad = lambda t: None if t is None else t.grad.numpy()  # noqa: E731
    return grad(x), [[grad(a) for a in arrays] for arrays in params], grad(w_o), grad(b_o)


def assert_layer_gradients(actual, expected):
    dX, gradients = actual
    dX_t, heads_t, dW_O_t, db_O_t = expected
    np.testing.assert_allclose(dX, dX_t, rtol=1e-10, atol=1e-10, err_msg="dX")
    np.testing.assert_allclose(gradients.W_O, dW_O_t, rtol=1e-10, atol=1e-10, err_msg="dW_O")
    assert (gradients.b_O is None) == (db_O_t is None)
    if db_O_t is not None:
        np.testing.assert_allclose(gradients.b_O, db_O_t, rtol=1e-10, atol=1e-10, err_msg="db_O")
    for i, (head, expected_head) in enumerate(zip(gradients.heads, heads_t), start=1):
        for name, a, e in zip(("W_Q", "W_K", "W_V", "b_Q", "b_K", "b_V"), head, expected_head):
            assert (a is None) == (e is None), f"head {i} {name}"
            if e is not None:
                np.testing.assert_allclose(a, e, rtol=1e-10, atol=1e-10, err_msg=f"head {i} d{name}")


@settings(max_examples=40, deadline=None)
@given(multi_head_inputs(), st.data())
def test_the_layers_parameter_gradients_match_torch_autograd(inputs, data):
    X, heads, W_O, b_O = inputs
    dY = data.draw(matrices((X.shape[0], W_O.shape[1])))
    actual = qkv.multi_head_attention_backward(X, dY, heads, W_O, b_O)
    assert_layer_gradients(actual, torch_multi_head_gradients(X, heads, W_O, b_O, dY))


def test_the_layers_parameter_gradients_match_torch_on_a_causal_batch():
    rng = np.random.default_rng(3)
    X, dY = rng.normal(size=(3, 5, 6)), rng.normal(size=(3, 5, 6))
    heads = [qkv.Head(*(rng.normal(size=(6, 3)) for _ in range(3)), *(rng.normal(size=3) for _ in range(3)))
             for _ in range(2)]
    W_O, b_O = rng.normal(size=(6, 6)), rng.normal(size=6)
    mask = qkv.causal_mask(5)
    actual = qkv.multi_head_attention_backward(X, dY, heads, W_O, b_O, mask=mask)
    assert_layer_gradients(actual, torch_multi_head_gradients(X, heads, W_O, b_O, dY, mask))


def test_linear_backward_matches_torch():
    rng = np.random.default_rng(4)
    X, W, b, dZ = rng.normal(size=(2, 3, 4)), rng.normal(size=(4, 5)), rng.normal(size=5), rng.normal(size=(2, 3, 5))
    x, w, bias = tensors(X, W, b)
    ((x @ w + bias) * torch.from_numpy(dZ)).sum().backward()
    assert_same_gradients(qkv.linear_backward(X, W, dZ), (x.grad.numpy(), w.grad.numpy(), bias.grad.numpy()),
                          names=("dX", "dW", "db"))


# ---------------------------------------------------------------- central differences


def test_central_differences_recover_the_gradient_of_a_polynomial():
    """f(x) = sum(x^3): the gradient is 3x^2; the central difference's error is h^2 * x-free, exactly h^2."""
    x = np.array([[1.0, -2.0], [0.5, 3.0]])
    approx = qkv.central_differences(lambda y: np.sum(y ** 3), x, h=1e-3)
    np.testing.assert_allclose(approx, 3 * x ** 2 + 1e-6, rtol=0, atol=1e-9)
    assert np.array_equal(x, [[1.0, -2.0], [0.5, 3.0]]), "central_differences changed its input"


def test_central_differences_refuse_a_function_that_returns_an_array():
    with pytest.raises(ValueError, match="one finite number"):
        qkv.central_differences(lambda y: y * 2, np.ones(3))


def test_central_differences_refuse_a_step_that_is_not_positive():
    with pytest.raises(ValueError, match="h must be a positive number"):
        qkv.central_differences(np.sum, np.ones(3), h=0)


# ---------------------------------------------------------------- bad input


def test_a_gradient_of_the_wrong_shape_is_named():
    Q, K, V = np.ones((3, 2)), np.ones((4, 2)), np.ones((4, 5))
    with pytest.raises(ValueError, match=r"dO has shape \(3, 2\) but the output has \(3, 5\)"):
        qkv.attention_backward(Q, K, V, np.ones((3, 2)))


def test_softmax_backward_names_mismatched_shapes():
    with pytest.raises(ValueError, match=r"A has shape \(2, 3\) but dA has \(3, 2\)"):
        qkv.softmax_backward(np.full((2, 3), 1 / 3), np.ones((3, 2)))


def test_a_layer_gradient_of_the_wrong_shape_is_named():
    head = qkv.Head(np.eye(2), np.eye(2), np.eye(2))
    with pytest.raises(ValueError, match=r"dY has shape \(3, 3\) but Y has \(3, 2\)"):
        qkv.multi_head_attention_backward(np.ones((3, 2)), np.ones((3, 3)), [head], np.eye(2))


def test_a_fully_masked_row_is_named_in_the_backward_pass_too():
    mask = np.array([[True, False], [False, False]])
    with pytest.raises(ValueError, match=r"mask row \[1\] is all False"):
        qkv.attention_backward(np.ones((2, 2)), np.ones((2, 2)), np.ones((2, 2)), np.ones((2, 2)), mask)
