"""Other heads and sentences of the trained model for problem set 12: one variant per student.

``compensation_head_example(variant)`` returns :func:`qkv.examples.compensation_head_example`
for variant 0 (the chapter's head and sentence) and, for any other whole number, another
head of the model excerpt that follows a clear pattern, on a sentence where "compensation"
attends clearly to the pattern's key. Problem set 12 calls it with the student's variant;
the book never does. Changing anything here changes students' numbers: tests pin a few variants.
"""

from __future__ import annotations

import functools

import numpy as np

from qkv import examples
from qkv.examples import HEAD_PATTERNS, QUERY_WORD, TrainedHeadExample

from .draw import VariantDraw, margins

ROW_MARGIN = 0.3  # the query word's row puts this much more on the pattern's key than on any other


def compensation_head_example(variant: int) -> TrainedHeadExample:
    """Variant ``variant`` of a head of all-MiniLM-L6-v2 and what "compensation" attends to in it.

    Other variants draw a pattern (the previous token, or [CLS]; no head of the excerpt
    follows the next token from "compensation"), then a layer, head and sentence of the
    excerpt whose head is named after that pattern (:func:`qkv.examples.named_heads`) and
    whose row for "compensation" puts the most weight on the pattern's key, by
    :data:`ROW_MARGIN` or more, and on another word than "want" (variant 0's answer).
    """
    if variant == 0:
        return examples.compensation_head_example()
    candidates = _compensation_heads()
    draw = VariantDraw("compensation_head", variant)
    pattern = draw.choice(sorted(p for p, found in candidates.items() if found))
    layer, head, sentence = draw.choice(candidates[pattern])
    return examples.trained_head_example(layer, head, sentence)


@functools.cache
def _compensation_heads() -> dict[str, tuple[tuple[int, int, int], ...]]:
    """For each pattern, every ``(layer, head, sentence)`` a variant may ask about (heads counting from 1)."""
    from qkv.models.analysis import pattern_targets
    from qkv.models.excerpt import load_minilm_excerpt

    excerpt = load_minilm_excerpt()
    seed = _seed_compensation_answer()
    found = {pattern: [] for pattern in HEAD_PATTERNS}
    for (layer, head), pattern in sorted(examples.named_heads().items()):
        for sentence, tokens in enumerate(excerpt.tokens):
            query = tokens.index(QUERY_WORD)
            row = examples.excerpt_maps()[layer][sentence][head - 1, query]  # (n,)
            target = np.flatnonzero(pattern_targets(tokens)[pattern][query])
            top = int(np.argmax(row))
            if (len(target) == 1 and top == target[0] and margins(row) >= ROW_MARGIN
                    and tokens[top] != seed and (layer, head, sentence) != (1, 3, 0)):
                found[pattern].append((layer, head, sentence))
    return {pattern: tuple(candidates) for pattern, candidates in found.items()}


def _seed_compensation_answer() -> str:
    """The word compensation attends to most in variant 0 (layer 1, head 3, the chapter's sentence)."""
    from qkv.models.excerpt import load_minilm_excerpt

    tokens = load_minilm_excerpt().tokens[0]
    row = examples.excerpt_maps()[1][0][2, tokens.index(QUERY_WORD)]
    return tokens[int(np.argmax(row))]
