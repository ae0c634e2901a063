"""Trained models run by the course's own numpy code: every layer is :func:`qkv.encoder_block`.

- :mod:`qkv.models.text`: all-MiniLM-L6-v2, a pretrained sentence encoder (6 layers, 12 heads).
- :mod:`qkv.models.vit`: a small Vision Transformer trained on 8x8 digits (3 layers, 4 heads).
- :mod:`qkv.models.encoder`: a stack of :class:`qkv.EncoderLayer` run by :func:`qkv.encoder_block`
  (post-LN for BERT, pre-LN for ViT), and reading trained weights.
- :mod:`qkv.models.pooling`: one vector for a sentence (mean pooling, unit length).
- :mod:`qkv.models.analysis`: reading heads from their weights (previous token, [CLS], ...) and
  measuring what they move.
- :mod:`qkv.models.induction`: a tiny attention-only transformer that the course trains itself, in
  numpy, until an induction head forms (``training/train_induction.py``).
- :mod:`qkv.models.excerpt`: the first heads of layers 1 and 2 of all-MiniLM-L6-v2 and what those layers
  read for a few sentences, shipped with the course (numpy only), for problem set 12.

Reading the weights needs the packages ``safetensors`` and ``tokenizers`` (and the package that
ships the text model); they are imported only when a model is loaded.
"""

from .pooling import mean_pooling, unit_length
from .encoder import gelu_encoder_layer, run_layers
from .analysis import head_contribution_norms, head_pattern_scores, pattern_targets, value_output_norms
from .text import Encoding, TextEncoder, embed, encode, load_bert, load_minilm, tokenize
from .vit import Classification, VisionTransformer, attention_rollout, classify, image_tokens, load_vit_digits
from .excerpt import TextModelExcerpt, load_minilm_excerpt
from .induction import InductionModel, load_induction_model

__all__ = [
    "mean_pooling", "unit_length", "gelu_encoder_layer", "run_layers",
    "TextEncoder", "Encoding", "tokenize", "embed", "encode", "load_bert", "load_minilm",
    "VisionTransformer", "Classification", "image_tokens", "classify", "attention_rollout", "load_vit_digits",
    "pattern_targets", "head_pattern_scores", "head_contribution_norms", "value_output_norms",
    "TextModelExcerpt", "load_minilm_excerpt",
    "InductionModel", "load_induction_model",
]
