"""Trained models run by the course's own numpy code: every attention is :func:`qkv.fused_multi_head_attention`.

- :mod:`qkv.models.text`: all-MiniLM-L6-v2, a pretrained sentence encoder (6 layers, 12 heads).
- :mod:`qkv.models.vit`: a small Vision Transformer trained on 8x8 digits (3 layers, 4 heads).
- :mod:`qkv.models.encoder`: the encoder layer both share (post-norm for BERT, pre-norm for ViT).
- :mod:`qkv.models.blocks`: LayerNorm, GELU, the feed-forward network, pooling.
- :mod:`qkv.models.analysis`: reading heads from their weights (previous token, [CLS], ...) and
  measuring what they move.

Reading the weights needs the packages ``safetensors`` and ``tokenizers`` (and the package that
ships the text model); they are imported only when a model is loaded.
"""

from .blocks import feed_forward, gelu, layer_norm, mean_pooling, unit_length
from .encoder import EncoderLayer, attention_sublayer, post_norm_layer, pre_norm_layer, run_layers
from .analysis import head_contribution_norms, head_pattern_scores, pattern_targets
from .text import Encoding, TextEncoder, embed, encode, load_bert, load_minilm, tokenize
from .vit import Classification, VisionTransformer, attention_rollout, classify, image_tokens, load_vit_digits

__all__ = [
    "layer_norm", "gelu", "feed_forward", "mean_pooling", "unit_length",
    "EncoderLayer", "attention_sublayer", "post_norm_layer", "pre_norm_layer", "run_layers",
    "TextEncoder", "Encoding", "tokenize", "embed", "encode", "load_bert", "load_minilm",
    "VisionTransformer", "Classification", "image_tokens", "classify", "attention_rollout", "load_vit_digits",
    "pattern_targets", "head_pattern_scores", "head_contribution_norms",
]
