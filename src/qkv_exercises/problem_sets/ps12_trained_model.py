"""Problem set 12: attention in a trained model.

The student writes one layer's attention for all-MiniLM-L6-v2 from the weight matrices of the
layer's first heads (given as arrays, the heads side by side as the model stores them; the course
ships the first heads of layers 1 and 2, :func:`qkv.models.load_minilm_excerpt`):
``layer_attention(X, W_Q, b_Q, W_K, b_K, W_V, b_V, W_O, b_O, num_heads)`` returning
``(output, weights)``; it is checked to 1e-6 against the course's forward pass on the
student's sentence, and on small layers of other sizes (hidden: on another sentence). Then
the student takes one named head's map from it and reads the map: which token
"compensation" attends to, and why (the head's pattern).

The layer, head and sentence are the variant's (:func:`qkv_exercises.variants.compensation_head_example`);
their numbers come from the excerpt of the model that ships with the course
(:func:`qkv.models.load_minilm_excerpt`), which a test checks against the model package.
"""

from __future__ import annotations

import numpy as np

from qkv import examples
from qkv.models import load_minilm_excerpt

from .. import slips, variants
from ..checks import Choice, ChoiceCheck, ProblemSet, ValueCheck, function_checks
from ..expectations import LAYER_ARRAYS, choose_option, expect_head_map, layer_weights, ordered_options
from ..functions import (
    explain_layer_attention_error,
    judge_layer_attention,
    layer_attention_call,
    random_small_layer_calls,
    small_layer_call,
)
from .ps12_trained_model_slips import HEAD_COUNTED_FROM_0
from ..language import N_, _

PATTERN_OPTIONS = {  # the pattern a head follows -> the option that says so
    N_("previous token"): N_("It is a previous-token head: in its map nearly every token puts most of its weight on "
                      "the token just before it."),
    N_("next token"): N_("It is a next-token head: in its map nearly every token puts most of its weight on the "
                  "token just after it."),
    "[CLS]": N_("It is a [CLS] head: in its map nearly every token puts most of its weight on [CLS], the first "
             "token."),
}
MEANING = N_("The two words belong together in meaning: the head links compensation to the word that explains it.")
WHY_ADVICE = {  # what choosing an option wrongly means
    PATTERN_OPTIONS[N_("previous token")]: N_("a previous-token head's map is dark just below its diagonal "
                                       "(row i, column i - 1); look at the whole map, not only one row."),
    PATTERN_OPTIONS[N_("next token")]:
        N_("a next-token head's map is dark just above its diagonal (row i, column i + 1); "
                                   "look at the whole map, not only one row."),
    PATTERN_OPTIONS["[CLS]"]: N_("a [CLS] head's map is dark in its first column; look at the whole map, not only "
                              "one row."),
    MEANING: N_("look at the other rows of the map: if nearly every token sends its weight the same way, the head "
             "follows a position, not a meaning."),
}
WHY_SEED = (PATTERN_OPTIONS["previous token"], PATTERN_OPTIONS["next token"], PATTERN_OPTIONS["[CLS]"], MEANING)


def givens(variant: int) -> dict:
    """The variant's sentence, layer and head, what the layer reads (X), its fused matrices, and the
    options of the question why."""
    ex = variants.compensation_head_example(variant)
    right = PATTERN_OPTIONS[ex.pattern]  # where the option the variant's head follows must not be: variant 0's place
    return {
        "model": ex.model, "sentence": ex.sentence, "tokens": ex.tokens, "query": ex.query,
        "layer": ex.layer, "head": ex.head, "num_heads": ex.num_heads, "X": ex.X,
        **{name: ex.attention[name] for name in LAYER_ARRAYS},
        "why_options": ordered_options(WHY_SEED, right, draw_name="ps12_options/why", variant=variant,
                                       seed_place=WHY_SEED.index(PATTERN_OPTIONS["previous token"])),
    }


def _arrays(g) -> dict:
    return {name: g[name] for name in LAYER_ARRAYS}


def _map(g) -> np.ndarray:
    return layer_weights(g["X"], _arrays(g), g["num_heads"])[g["head"] - 1]  # (n, n)


def _attended(g) -> Choice:
    tokens, query = g["tokens"], g["tokens"].index(g["query"])
    weights = layer_weights(g["X"], _arrays(g), g["num_heads"])  # (h, n, n)
    right = tokens[int(np.argmax(weights[g["head"] - 1, query]))]
    wrong = {tokens[int(np.argmax(weights[g["head"] - 1, :, query]))]: slips.READ_COLUMN_NOT_ROW.advice}
    if g["head"] < g["num_heads"]:
        wrong.setdefault(tokens[int(np.argmax(weights[g["head"], query]))], HEAD_COUNTED_FROM_0.advice)
    wrong.pop(right, None)
    return Choice(right=right, choices=tuple(dict.fromkeys(tokens)),
                  explain_right=_("the largest weight in {query}'s row of head {head}").format(query=g["query"],
                                                                                                head=g["head"]),
                  explain_wrong=wrong,
                  reveal_text=_("In layer {layer}, head {head}, {query} attends most to {token}.").format(
                      layer=g["layer"], head=g["head"], query=g["query"], token=right))


def _why(g) -> Choice:
    right = PATTERN_OPTIONS[examples.compensation_head_pattern(g["layer"], g["head"])]
    return choose_option(g["why_options"], right, explain_right=right,
                         explain_wrong={text: WHY_ADVICE[text] for text in g["why_options"] if text != right})


# --------------------------------------------------------------------------- layer_attention's calls


def _your_sentence(g, rng) -> list:
    return [layer_attention_call(g["X"], _arrays(g), g["num_heads"],
                                 what=_("X of your sentence, layer {layer}'s matrices, {heads} heads").format(
                                     layer=g["layer"], heads=g["num_heads"]),
                                 behaviour=N_("a trained layer"))]


def _small_layers(g, rng) -> list:
    return [small_layer_call(rng, 4, 6, 3), small_layer_call(rng, 1, 4, 2)]


def _other_sentences(g, rng) -> list:
    """The student's layer on another sentence of the excerpt, and a small layer of halves."""
    excerpt = load_minilm_excerpt()
    others = [i for i, sentence in enumerate(excerpt.sentences) if sentence != g["sentence"]]
    other = others[int(rng.integers(len(others)))]
    return [layer_attention_call(excerpt.inputs[g["layer"]][other], _arrays(g), g["num_heads"],
                                 what=_("X of another sentence ({count} tokens), layer {layer}'s matrices").format(
                                     count=len(excerpt.tokens[other]), layer=g["layer"]),
                                 behaviour=N_("a trained layer")),
            *random_small_layer_calls(rng)]


_layer_check = function_checks("layer_attention", judge_layer_attention, explain_layer_attention_error)


PROBLEM_SET = ProblemSet(
    name="ps12_trained_model",
    title=N_("Problem set 12: attention in a trained model"),
    givens=givens,
    checks=(
        _layer_check("layer_attention_your_sentence", _your_sentence,
                     "layer_attention on your sentence gives the weights and output of the course's forward pass, "
                     "to 1e-6."),
        _layer_check("layer_attention_small_layers", _small_layers,
                     "layer_attention works for layers of other sizes and numbers of heads, to 1e-6."),
        _layer_check("layer_attention_other_sentences", _other_sentences,
                     "layer_attention on another sentence and on a random small layer, to 1e-6.", hidden=True),
        ValueCheck("head_map", "A_head",
                   lambda g: expect_head_map(g["X"], _arrays(g), g["num_heads"], g["head"], name="A_head",
                                             tokens=g["tokens"]),
                   "A_head is your head's map on your sentence, each weight within 1e-6 of the forward pass."),
        ChoiceCheck("attended_from_compensation", "attended", _attended,
                    "attended is the token compensation attends to most in your head."),
        ChoiceCheck("why_it_attends_there", "why", _why,
                    "why is the letter of the reason compensation attends there."),
    ),
)
