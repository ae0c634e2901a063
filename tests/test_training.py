"""The loss, its gradient and Adam are those of PyTorch: cross-entropy and its gradient at the logits
against torch's, and Adam's steps against ``torch.optim.Adam`` (float64); bad input is named."""

from __future__ import annotations

import numpy as np
import pytest

import qkv

torch = pytest.importorskip("torch")


def test_cross_entropy_and_its_gradient_match_torch():
    rng = np.random.default_rng(0)
    logits, targets = rng.normal(size=(3, 4, 6)), rng.integers(0, 6, size=(3, 4))
    counted = rng.random((3, 4)) < 0.6
    counted[0, 0] = True
    z = torch.tensor(logits, requires_grad=True)
    expected = torch.nn.functional.cross_entropy(z[torch.from_numpy(counted)], torch.from_numpy(targets[counted]))
    expected.backward()
    np.testing.assert_allclose(qkv.cross_entropy(logits, targets, counted), expected.item(), rtol=1e-13)
    np.testing.assert_allclose(qkv.cross_entropy_backward(logits, targets, counted), z.grad.numpy(),
                               rtol=1e-12, atol=1e-15)


def test_a_uniform_guess_scores_log_v():
    assert qkv.cross_entropy(np.zeros((5, 8)), np.arange(5)) == pytest.approx(np.log(8), rel=1e-14)


def test_adam_takes_the_steps_of_torch_optim_adam():
    rng = np.random.default_rng(1)
    start = {"W": rng.normal(size=(3, 2)), "b": rng.normal(size=2)}
    target = {name: rng.normal(size=value.shape) for name, value in start.items()}
    tensors = {name: torch.tensor(value, requires_grad=True) for name, value in start.items()}
    optimiser = torch.optim.Adam(tensors.values(), lr=0.05, betas=(0.9, 0.999), eps=1e-8)
    adam, parameters = qkv.Adam(learning_rate=0.05), dict(start)
    for _ in range(5):
        # loss = sum (theta - target)^4: a gradient 4 (theta - target)^3 that changes scale as it goes
        gradients = {name: 4 * (value - target[name]) ** 3 for name, value in parameters.items()}
        parameters = adam.update(parameters, gradients)
        optimiser.zero_grad()
        sum(((t - torch.from_numpy(target[name])) ** 4).sum() for name, t in tensors.items()).backward()
        optimiser.step()
    for name, value in parameters.items():
        np.testing.assert_allclose(value, tensors[name].detach().numpy(), rtol=1e-12, atol=1e-14, err_msg=name)


def test_adam_names_a_gradient_without_its_parameter():
    with pytest.raises(ValueError, match=r"gradients for \['b'\] without their parameter"):
        qkv.Adam().update({"W": np.ones(2)}, {"W": np.ones(2), "b": np.ones(1)})


def test_adam_names_a_gradient_of_the_wrong_shape():
    with pytest.raises(ValueError, match=r"the gradient of W has shape \(3,\) but W has \(2,\)"):
        qkv.Adam().update({"W": np.ones(2)}, {"W": np.ones(3)})


def test_a_target_outside_the_vocabulary_is_named():
    with pytest.raises(ValueError, match=r"targets must lie in 0\.\.3"):
        qkv.cross_entropy(np.zeros((2, 4)), np.array([1, 4]))
