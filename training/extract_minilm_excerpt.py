"""Extract the excerpt of all-MiniLM-L6-v2 that ships with the course (for problem set 12).

    .venv/bin/python training/extract_minilm_excerpt.py      # writes src/qkv/models/minilm_excerpt.npz

A student's install of the course does not include the model's own package (it brings PyTorch), so
problem set 12 reads its givens from this excerpt, kept near 1 MB: the first heads of layers 1 and 2
(:data:`HEADS`; one head's matrices are about 0.2 MB), exactly as the model stores them (float32), in
the course's orientation (``Y = X W + b``): the columns of ``W_Q``, ``W_K``, ``W_V`` and the biases
that belong to those heads, their rows of ``W_O``, and ``b_O``. For each sentence below it holds its
tokens and what those two layers read, rounded to float32 (the maps computed from them stay within
1e-7 of the forward pass's). Every sentence ends its story with "compensation", the word whose row of
a head's map the problem set asks about.

The file is a plain numpy ``.npz`` (read with numpy alone, no pickle); ``tests/test_models_excerpt.py``
checks that it equals what ``qkv.models`` computes from the model package.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np

import qkv
import qkv.models

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = ROOT / "src" / "qkv" / "models" / "minilm_excerpt.npz"

# layer -> how many of its first heads the excerpt holds (counting from 1): head 3 of layer 1 is the
# previous-token head, heads 1 and 2 of layer 2 rest on [CLS]
HEADS = {1: 3, 2: 2}
LAYERS = tuple(HEADS)
SENTENCES = (
    "The delivery was late, so I want compensation.",  # the chapter's sentence: variant 0
    "My order arrived late and I expect compensation.",
    "The food came cold, so I ask for compensation.",
    "The courier lost my parcel, so I demand compensation.",
    "Late delivery means the shop owes me compensation.",
    "I waited an hour for my lunch and got no compensation.",
    "We want compensation for the late delivery.",
    "The restaurant offered compensation after the late delivery.",
    "After two late orders the driver promised compensation.",
    "Cold soup, a rude driver and still no compensation!",
)


def excerpt_arrays(model) -> dict[str, np.ndarray]:
    """Every array of the excerpt, by the names :func:`qkv.models.load_minilm_excerpt` reads."""
    arrays = {"name": np.array(model.name), "sentences": np.array(SENTENCES), "layers": np.array(LAYERS),
              "model_num_heads": np.array(model.num_heads)}
    encodings = [qkv.models.encode(model, sentence) for sentence in SENTENCES]
    for i, encoding in enumerate(encodings):
        if "compensation" not in encoding.tokens:
            raise ValueError(f"{SENTENCES[i]!r} has no token 'compensation': {encoding.tokens}")
        arrays[f"tokens_{i}"] = np.array(encoding.tokens)
    for layer, kept in HEADS.items():
        attention = model.layers[layer - 1].self_attention
        heads = attention.heads[:kept]
        W_Q, W_K, W_V, b_Q, b_K, b_V = qkv.fuse_heads(heads)  # (d_model, kept * d_k): the heads side by side
        W_O = attention.W_O[:kept * heads[0].d_v]  # (kept * d_v, d_model): the rows these heads' outputs meet
        fused = {"W_Q": W_Q, "b_Q": b_Q, "W_K": W_K, "b_K": b_K, "W_V": W_V, "b_V": b_V,
                 "W_O": W_O, "b_O": attention.b_O}
        arrays[f"layer{layer}_num_heads"] = np.array(kept)
        for name, value in fused.items():
            stored = value.astype(np.float32)  # the model's own float32 numbers, exactly
            if not np.array_equal(stored, value):
                raise ValueError(f"layer {layer} {name} is not float32: the excerpt would round it")
            arrays[f"layer{layer}_{name}"] = stored
        for i, encoding in enumerate(encodings):
            arrays[f"layer{layer}_input_{i}"] = encoding.hidden_states[layer - 1].astype(np.float32)  # (n, d_model)
    return arrays


def main(argv=None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    out = parser.parse_args(argv).out
    np.savez_compressed(out, **excerpt_arrays(qkv.models.load_minilm()))
    print(f"wrote {out} ({out.stat().st_size / 1e6:.2f} MB)")


if __name__ == "__main__":
    main()
