"""A head of a trained model: the first heads of one layer of all-MiniLM-L6-v2, and what the word
"compensation" attends to in one of them.

The trained-model chapter (book/trained_model.md) runs a layer's heads from their matrices and
reads one head's map. The numbers come from the excerpt of the model that ships with the
course (:func:`qkv.models.load_minilm_excerpt`), so that a student's install needs no model
package. A head is named after a pattern (:data:`HEAD_PATTERNS`) when it follows it clearly over
the excerpt's sentences (:func:`named_heads`).

Chapters and tests reach these through :mod:`qkv.examples`; the problem sets' other heads and
sentences are drawn by :mod:`qkv_exercises.variants.trained_model`, never here.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass

import numpy as np

QUERY_WORD = "compensation"
HEAD_PATTERNS = ("previous token", "next token", "[CLS]")  # what a head may be named after
PATTERN_SCORE = 0.5  # a head is named after a pattern when its score, over the excerpt's sentences, is this or more


@dataclass(frozen=True, eq=False)
class TrainedHeadExample:
    """One head of a trained model's layer, on one sentence.

    ``X`` ``(n, d_model)`` is what layer ``layer`` (counting from 1) reads for ``sentence``, whose
    ``tokens`` it has one row each; ``attention`` holds the fused matrices of the layer's first
    ``num_heads`` heads (``W_Q, b_Q, W_K, b_K, W_V, b_V, W_O, b_O``, see
    :class:`qkv.models.TextModelExcerpt`); ``head`` (counting from 1) follows ``pattern`` (one of
    :data:`HEAD_PATTERNS`), and the row of ``query`` in its map puts the most weight on
    ``tokens[attended]``. ``sentence_index`` is the sentence's place in the excerpt.
    """

    model: str
    sentence: str
    sentence_index: int
    tokens: tuple[str, ...]
    layer: int
    head: int
    num_heads: int
    X: np.ndarray
    attention: dict
    query: str
    attended: int
    pattern: str


def compensation_head_example() -> TrainedHeadExample:
    """A head of all-MiniLM-L6-v2 that follows a clear pattern, and what "compensation" attends to in it.

    The trained-model chapter's sentence, "The delivery was late, so I want compensation.", in
    layer 1, head 3: the previous-token head, so compensation attends to "want".
    """
    return trained_head_example(1, 3, 0)


def trained_head_example(layer: int, head: int, sentence: int) -> TrainedHeadExample:
    """Head ``head`` of layer ``layer`` (both counting from 1) of the model excerpt on its sentence
    ``sentence`` (counting from 0), and what :data:`QUERY_WORD` attends to most in that head's map.

    Raises:
        ValueError: if the head follows none of :data:`HEAD_PATTERNS` (:func:`compensation_head_pattern`).
    """
    from ..models.excerpt import load_minilm_excerpt

    pattern = compensation_head_pattern(layer, head)
    excerpt = load_minilm_excerpt()
    tokens = excerpt.tokens[sentence]
    weights = excerpt_maps()[layer][sentence]  # (h, n, n)
    query = tokens.index(QUERY_WORD)
    return TrainedHeadExample(
        model=excerpt.name, sentence=excerpt.sentences[sentence], sentence_index=sentence, tokens=tokens,
        layer=layer, head=head, num_heads=excerpt.num_heads[layer], X=excerpt.inputs[layer][sentence],
        attention=dict(excerpt.attention[layer]), query=QUERY_WORD,
        attended=int(np.argmax(weights[head - 1, query])), pattern=pattern)


@functools.cache
def excerpt_maps() -> dict[int, tuple[np.ndarray, ...]]:
    """The map ``(h, n, n)`` of every head the excerpt holds, by layer (counting from 1), on every
    sentence. Computed once; callers must not change the arrays."""
    from ..models.excerpt import load_minilm_excerpt
    from ..multihead import fused_multi_head_attention

    excerpt = load_minilm_excerpt()
    maps = {}
    for layer in excerpt.layers:
        a = excerpt.attention[layer]
        maps[layer] = tuple(
            fused_multi_head_attention(X, a["W_Q"], a["W_K"], a["W_V"], a["W_O"], excerpt.num_heads[layer],
                                       a["b_Q"], a["b_K"], a["b_V"], a["b_O"])[1]
            for X in excerpt.inputs[layer])
    return maps


@functools.cache
def named_heads() -> dict[tuple[int, int], str]:
    """``{(layer, head): pattern}`` for every head of the excerpt named after one of :data:`HEAD_PATTERNS`
    (heads counting from 1): its score over the excerpt's sentences is :data:`PATTERN_SCORE` or more.
    Computed once; callers must not change it."""
    from ..models.analysis import head_pattern_scores
    from ..models.excerpt import load_minilm_excerpt

    excerpt = load_minilm_excerpt()
    named = {}
    for layer in excerpt.layers:
        scores = [head_pattern_scores(w, tokens) for w, tokens in zip(excerpt_maps()[layer], excerpt.tokens)]
        for pattern in HEAD_PATTERNS:
            average = np.nanmean([s[pattern] for s in scores], axis=0)  # (h,)
            for head in np.flatnonzero(average >= PATTERN_SCORE):
                named[(layer, int(head) + 1)] = pattern
    return named


def compensation_head_pattern(layer: int, head: int) -> str:
    """The pattern that head ``head`` (counting from 1) of layer ``layer`` of the model excerpt follows.

    Raises:
        ValueError: if the head follows none of :data:`HEAD_PATTERNS` clearly enough to be named.
    """
    try:
        return named_heads()[(layer, head)]
    except KeyError:
        raise ValueError(f"head {head} of layer {layer} follows none of {', '.join(HEAD_PATTERNS)} "
                         f"(score {PATTERN_SCORE} or more)") from None
