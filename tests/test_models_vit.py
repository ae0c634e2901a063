"""The course's digits ViT: qkv's numpy forward pass equals PyTorch's on the committed weights, and it
classifies the held-out digits as well as the chapter says.

PyTorch's side is the training script's own model (``torch.nn.TransformerEncoderLayer`` inside), fed
the committed file; the images come from ``sklearn.datasets.load_digits`` (the chapter reads the same
file another way, checked here too).
"""

from __future__ import annotations

import copy
import math

import numpy as np
import pytest
import torch
from safetensors.torch import load_file
from sklearn.datasets import load_digits

import qkv
import qkv.models
from qkv.models.vit import WEIGHTS_FILE
from qkv_book.datasets import digits
from training.train_vit_digits import CONFIG, DigitsViT

TOLERANCE = 1e-5
CHAPTER_FLOOR = 0.95  # the accuracy the chapter promises


@pytest.fixture(scope="module")
def vit():
    return qkv.models.load_vit_digits()


@pytest.fixture(scope="module")
def data():
    digits_set = load_digits()
    return digits_set.images, digits_set.target


@pytest.fixture(scope="module")
def torch_vit():
    state = load_file(str(WEIGHTS_FILE))
    state.pop("held_out_indices")
    model = DigitsViT(**CONFIG)
    model.load_state_dict(state)
    return model.eval()


def torch_layers(model, images, dtype=torch.float32):
    """PyTorch's hidden states (L + 1, b, n, d), weights (L, b, h, n, n) and logits, layer by layer."""
    model = model.to(dtype)
    x = torch.tensor(images / CONFIG["pixel_scale"], dtype=dtype)
    with torch.no_grad():
        tokens = model.patch_embedding(model.patches(x))
        h = torch.cat([model.class_token.expand(len(x), -1, -1), tokens], dim=1) + model.position_embedding
        hidden, weights = [h], []
        for layer in model.encoder.layers:
            normed = layer.norm1(h)
            _, w = layer.self_attn(normed, normed, normed, need_weights=True, average_attn_weights=False)
            h = layer(h)
            hidden.append(h)
            weights.append(w)
        logits = model(x)
    as_numpy = lambda ts: np.stack([t.double().numpy() for t in ts])  # noqa: E731
    return as_numpy(hidden), as_numpy(weights), logits.double().numpy()


def assert_close(name, ours, theirs):
    difference = np.abs(ours - theirs)
    worst = np.unravel_index(np.argmax(difference), difference.shape)
    assert difference[worst] <= TOLERANCE, (
        f"{name}{list(map(int, worst))} is {ours[worst]:.7f} in qkv but {theirs[worst]:.7f} in PyTorch")


def test_every_layer_matches_pytorch(vit, torch_vit, data):
    """Every held-out image, PyTorch in float64 on the same weights (qkv computes in float64):
    what differs is the code, not the rounding."""
    images = data[0][vit.held_out_indices]
    hidden, weights, logits = torch_layers(copy.deepcopy(torch_vit), images, torch.float64)
    result = qkv.models.classify(vit, images)
    assert result.hidden_states.shape == hidden.shape and result.weights.shape == weights.shape
    for layer in range(len(hidden)):
        assert_close(f"hidden state after layer {layer} [image, token, dim] ", result.hidden_states[layer],
                     hidden[layer])
    for layer in range(len(weights)):
        assert_close(f"layer {layer + 1} weights [image, head, query, key] ", result.weights[layer], weights[layer])
    assert_close("logits [image, class] ", result.logits, logits)


def test_logits_match_the_float32_model_as_trained(vit, torch_vit, data):
    images = data[0][vit.held_out_indices]
    _, weights, logits = torch_layers(torch_vit, images, torch.float32)
    result = qkv.models.classify(vit, images)
    assert_close("float32 logits [image, class] ", result.logits, logits)
    assert_close("float32 layer weights [layer, image, head, query, key] ", result.weights, weights)


def test_held_out_accuracy_is_what_the_chapter_promises(vit, torch_vit, data):
    """At least 95 % with qkv's forward pass, and the very same predictions as PyTorch's."""
    images, labels = data
    held_out = vit.held_out_indices
    predicted = qkv.models.classify(vit, images[held_out]).predicted
    accuracy = np.mean(predicted == labels[held_out])
    assert accuracy >= CHAPTER_FLOOR, f"held-out accuracy {accuracy:.4f} < {CHAPTER_FLOOR}"
    with torch.no_grad():
        torch_predicted = torch_vit(torch.tensor(images[held_out] / 16, dtype=torch.float32)).argmax(1).numpy()
    assert (predicted == torch_predicted).all(), "qkv and PyTorch disagree on some held-out images"


def test_held_out_split_is_a_stratified_fifth(vit, data):
    """scikit-learn's train_test_split rounds the held-out fifth up: ceil(0.2 * 1797) = 360."""
    labels = data[1]
    held_out = vit.held_out_indices
    assert len(np.unique(held_out)) == len(held_out) == math.ceil(0.2 * len(labels))
    assert held_out.min() >= 0 and held_out.max() < len(labels)
    counts = np.bincount(labels[held_out], minlength=10)
    assert counts.min() >= 34 and counts.max() <= 38, f"held-out images per digit: {counts}"


def test_the_committed_weights_are_small(vit):
    assert WEIGHTS_FILE.stat().st_size < 1_000_000, "the ViT weights should stay well under 5 MB"
    assert vit.grid_shape == (4, 4) and len(vit.layers) == 3 and vit.num_heads == 4


def test_the_chapter_reads_the_same_digits_as_scikit_learn(data):
    images, labels = digits()
    np.testing.assert_array_equal(images, data[0])
    np.testing.assert_array_equal(labels, data[1])


def test_one_image_gives_one_set_of_maps(vit, data):
    one = qkv.models.classify(vit, data[0][0])
    batch = qkv.models.classify(vit, data[0][:3])
    assert one.weights.shape == (3, 4, 17, 17) and one.logits.shape == (10,)
    np.testing.assert_allclose(one.weights, batch.weights[:, 0], atol=1e-12)


def test_image_tokens_put_the_class_token_first_and_patches_row_by_row(vit):
    image = np.zeros((8, 8))
    image[0:2, 2:4] = 16.0  # only patch 1 (row 0, column 1) has ink
    tokens = qkv.models.vit.image_tokens(vit, image)
    blank = qkv.models.vit.image_tokens(vit, np.zeros((8, 8)))
    changed = np.flatnonzero(np.abs(tokens - blank).max(axis=1) > 0)
    assert changed.tolist() == [2], "the inked patch 1 should change token 2 (token 0 is the class token)"
    np.testing.assert_allclose(tokens[0], vit.class_token + vit.position_embeddings[0])


def loop_rollout(weights):
    """Rollout with explicit loops: per layer, average the heads, add I, halve; chain the layers."""
    num_layers, h, n, _ = weights.shape
    result = [[1.0 if i == j else 0.0 for j in range(n)] for i in range(n)]
    for layer in range(num_layers):
        mixed = [[0.5 * (sum(weights[layer, k, i, j] for k in range(h)) / h + (i == j)) for j in range(n)]
                 for i in range(n)]
        result = [[sum(mixed[i][m] * result[m][j] for m in range(n)) for j in range(n)] for i in range(n)]
    return np.array(result)


def test_attention_rollout_matches_a_loop_implementation(vit, data):
    weights = qkv.models.classify(vit, data[0][5]).weights  # (L, h, n, n)
    rollout = qkv.models.attention_rollout(weights)
    np.testing.assert_allclose(rollout, loop_rollout(weights), atol=1e-12)
    np.testing.assert_allclose(rollout.sum(axis=-1), 1.0, atol=1e-12)


def test_rollout_of_a_batch_is_the_rollout_of_each_image(vit, data):
    weights = qkv.models.classify(vit, data[0][:4]).weights  # (L, 4, h, n, n)
    batch = qkv.models.attention_rollout(weights)
    for i in range(4):
        np.testing.assert_allclose(batch[i], qkv.models.attention_rollout(weights[:, i]), atol=1e-12)


@pytest.mark.parametrize("images, message", [
    (np.zeros((7, 8)), r"images have shape \(7, 8\); the model reads \(\.\.\., 8, 8\)"),
    (np.zeros(8), "images must have at least 2 axes"),
])
def test_bad_images_are_refused(vit, images, message):
    with pytest.raises(ValueError, match=message):
        qkv.models.classify(vit, images)


def test_a_missing_weights_file_is_explained(tmp_path):
    with pytest.raises(FileNotFoundError, match="training/train_vit_digits.py writes them"):
        qkv.models.load_vit_digits(tmp_path / "none.safetensors")
