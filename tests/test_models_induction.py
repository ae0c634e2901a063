"""The tiny transformer that the course trains in numpy: its gradients are PyTorch autograd's, its
training lowers the loss and repeats exactly, the shipped weights are what the training script
makes, and in them a previous-token head and an induction head are found, and removing the induction
head breaks the task.

The expected behaviour comes from outside the code under test: torch differentiates its own forward
pass of the same model; the pattern scores and the accuracy are measured on sequences drawn here with
their own generator; a freshly trained model is compared with the shipped file.
"""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from threadpoolctl import threadpool_limits

import qkv
from qkv.models import induction

torch = pytest.importorskip("torch")

SMALL = replace(induction.InductionConfig(), batch=16)  # the shipped architecture, smaller batches
# The shipped file is retrained bit for bit on the machine that made it (one BLAS thread). Another CPU
# or BLAS build may round some sums differently; training does not amplify that much (a change of
# 1e-15 in the initial embedding moved no trained weight by more than 6e-12 of its array's largest
# entry), so the weights are compared within this tolerance, relative to each array's largest entry,
# and the heads they form exactly.
RETRAINED_TOLERANCE = 1e-6


@pytest.fixture(scope="module")
def shipped() -> induction.TrainingRun:
    return induction.load_induction_model()


@pytest.fixture(scope="module")
def evaluation() -> induction.InductionBatch:
    """Sequences the model never trained on (another generator than training's)."""
    return induction.induction_batch(np.random.default_rng(12345), induction.InductionConfig(), batch=256)


def accuracy(model, batch) -> float:
    """The share of determined next tokens that the model predicts best."""
    predicted = induction.forward(model, batch.tokens).logits[:, :-1].argmax(axis=-1)
    counted = batch.determined[:, :-1]
    return float(np.mean(predicted[counted] == batch.tokens[:, 1:][counted]))


def pattern_scores(model, batch, pattern) -> np.ndarray:
    """(layers, heads): the pattern score of every head, averaged over the sequences."""
    weights = induction.forward(model, batch.tokens).weights  # (L, batch, h, n, n)
    per_sequence = [qkv.models.head_pattern_scores(weights[:, b], batch.tokens[b], patterns=[pattern])[pattern]
                    for b in range(len(batch.tokens))]
    return np.mean(per_sequence, axis=0)


# ---------------------------------------------------------------- gradients


def torch_loss(named: dict, batch: induction.InductionBatch):
    """The same model and loss, written in torch from the formulas (not from qkv's code)."""
    tokens = torch.from_numpy(batch.tokens)
    n = tokens.shape[-1]
    X = named["embedding"][tokens] + named["positions"][:n]
    causal = torch.tril(torch.ones(n, n, dtype=torch.bool))
    l = 1
    while f"layer{l}.W_O" in named:
        outputs, i = [], 1
        while f"layer{l}.head{i}.W_Q" in named:
            Q, K, V = (X @ named[f"layer{l}.head{i}.{role}"] for role in ("W_Q", "W_K", "W_V"))
            scores = (Q @ K.transpose(-1, -2) / Q.shape[-1] ** 0.5).masked_fill(~causal, float("-inf"))
            outputs.append(torch.softmax(scores, dim=-1) @ V)
            i += 1
        X = X + torch.cat(outputs, dim=-1) @ named[f"layer{l}.W_O"]
        l += 1
    logits = (X @ named["unembedding"])[:, :-1]
    counted = torch.from_numpy(batch.determined[:, :-1])
    return torch.nn.functional.cross_entropy(logits[counted], tokens[:, 1:][counted])


def test_the_models_gradient_at_every_parameter_is_torch_autograds():
    model = induction.initial_model(SMALL)
    batch = induction.induction_batch(np.random.default_rng(0), SMALL, batch=4)
    value, gradients = induction.backward(model, batch)
    named = {name: torch.tensor(array, requires_grad=True) for name, array in model.parameters().items()}
    expected = torch_loss(named, batch)
    expected.backward()
    assert value == pytest.approx(expected.item(), rel=1e-12)
    assert set(gradients) == set(named)
    for name, tensor in named.items():
        np.testing.assert_allclose(gradients[name], tensor.grad.numpy(), rtol=1e-9, atol=1e-12, err_msg=name)


def test_the_parameters_round_trip_through_their_names():
    model = induction.initial_model(SMALL)
    again = induction.InductionModel.from_parameters(model.parameters())
    for name, array in model.parameters().items():
        np.testing.assert_array_equal(again.parameters()[name], array, err_msg=name)


# ---------------------------------------------------------------- training


@pytest.fixture(scope="module")
def short_runs():
    """Two runs of 30 steps with the same seed, and one with another seed (one BLAS thread, as the script)."""
    with threadpool_limits(limits=1, user_api="blas"):
        return (induction.train(SMALL, steps=30), induction.train(SMALL, steps=30),
                induction.train(replace(SMALL, seed=1), steps=30))


def test_a_few_steps_of_training_lower_the_loss(short_runs, evaluation):
    run = short_runs[0]
    before = induction.loss(induction.initial_model(SMALL), evaluation)
    after = induction.loss(run.model, evaluation)
    assert after < before - 0.3, f"30 steps of Adam took the loss from {before:.3f} only to {after:.3f}"


def test_training_is_deterministic(short_runs):
    first, second, other_seed = short_runs
    np.testing.assert_array_equal(first.losses, second.losses)
    for name, array in first.model.parameters().items():
        np.testing.assert_array_equal(second.model.parameters()[name], array, err_msg=name)
    assert not np.array_equal(other_seed.model.parameters()["embedding"], first.model.parameters()["embedding"])


@pytest.mark.slow
def test_the_shipped_weights_are_what_the_training_script_makes(shipped, evaluation, tmp_path):
    from training.train_induction import main

    out = tmp_path / "induction.safetensors"
    assert main(["--out", str(out)]) == 0
    retrained = induction.load_induction_model(out)
    assert retrained.config == shipped.config
    for name, array in shipped.model.parameters().items():
        np.testing.assert_allclose(retrained.model.parameters()[name], array, rtol=0,
                                   atol=RETRAINED_TOLERANCE * np.abs(array).max(), err_msg=name)
    np.testing.assert_allclose(retrained.losses, shipped.losses, rtol=0, atol=RETRAINED_TOLERANCE)
    for pattern in ("previous token", "induction"):
        best = [np.unravel_index(np.argmax(pattern_scores(run.model, evaluation, pattern)), (2, 2))
                for run in (shipped, retrained)]
        assert best[0] == best[1], f"the {pattern} head is {best[0]} in the shipped file, {best[1]} retrained"


# ---------------------------------------------------------------- what the trained model does


def test_the_shipped_model_solves_the_task(shipped, evaluation):
    assert accuracy(shipped.model, evaluation) > 0.98
    assert induction.loss(shipped.model, evaluation) < 0.05


def test_a_previous_token_head_forms_in_layer_1_and_induction_heads_in_layer_2(shipped, evaluation):
    previous = pattern_scores(shipped.model, evaluation, "previous token")  # (2, 2)
    induction_scores = pattern_scores(shipped.model, evaluation, "induction")
    assert previous[0].max() > 0.7, f"no previous-token head in layer 1: scores {previous[0]}"
    assert induction_scores[1].min() > 0.8, f"layer 2 is not two induction heads: scores {induction_scores[1]}"
    assert induction_scores[0].max() < 0.2, f"an induction head in layer 1: scores {induction_scores[0]}"
    before = induction.initial_model(shipped.config)
    assert pattern_scores(before, evaluation, "induction").max() < 0.3, "an induction head before training"


def test_ablating_the_circuits_heads_breaks_the_task_and_ablating_another_head_does_not(shipped, evaluation):
    """The previous-token head, or both induction heads, removed: the task fails. The strongest
    induction head alone removed: it suffers. Layer 1's other head removed: nothing changes."""
    previous_head = int(np.argmax(pattern_scores(shipped.model, evaluation, "previous token")[0])) + 1
    strongest = int(np.argmax(pattern_scores(shipped.model, evaluation, "induction")[1])) + 1
    both = induction.ablate(induction.ablate(shipped.model, 2, 1), 2, 2)
    assert accuracy(induction.ablate(shipped.model, 1, previous_head), evaluation) < 0.3
    assert accuracy(both, evaluation) < 0.1
    assert accuracy(induction.ablate(shipped.model, 2, strongest), evaluation) < 0.8
    assert accuracy(induction.ablate(shipped.model, 1, 3 - previous_head), evaluation) > 0.95


def test_the_induction_pattern_names_the_token_after_an_earlier_occurrence():
    targets = qkv.models.pattern_targets(["a", "b", "c", "a", "b"], patterns=["induction"])["induction"]
    expected = np.zeros((5, 5), dtype=bool)
    expected[3, 1] = True  # the second a reads b, which followed the first a
    expected[4, 2] = True  # the second b reads c
    np.testing.assert_array_equal(targets, expected)
