"""Problem set 9: the block around attention.

Part 1 follows 補償 through the first half of a post-LN encoder block, by hand, in the
student's variant of :func:`qkv_exercises.variants.delivery_block_row_example`: the residual sum of
its vector and what attention adds, then the layer norm of that row (mean, variance, the
normalised row, gamma and beta). Part 2 asks where the models put the parts (which model is
post-LN, which is decoder-only), what the residual connection carries and where tokens
exchange information; the models offered and the order of the options are drawn per variant.
Part 3: the student writes ``layer_norm(X, gamma, beta, eps=1e-5)`` with numpy; visible checks
try every behaviour the hidden one grades (rows, gamma and beta, eps, 3-D input, rows of large
values).
"""

from __future__ import annotations

import numpy as np

from .. import variants
from ..checks import ChoiceCheck, ProblemSet, ValueCheck, function_checks
from ..expectations import choose_option, expect_block_row_step, ordered_options
from ..functions import (
    explain_layer_norm_error,
    judge_layer_norm,
    layer_norm_call,
    layer_norm_eps_call,
    layer_norm_gamma_beta_call,
    layer_norm_large_call,
    layer_norm_rows_call,
    random_layer_norm_calls,
)
from ..variants import VariantDraw
from ..language import N_, _

# What each model does, in the words a wrong choice is explained with.
POST_LN = {  # models that normalise after each residual sum
    "BERT": N_("BERT normalises after each residual sum (post-LN), as the original Transformer does."),
    N_("the original Transformer (2017)"): N_("the original Transformer normalises after each residual sum (post-LN)."),
    "BART": N_("BART keeps the original Transformer's order: a layer norm after each residual sum (post-LN)."),
}
PRE_LN = {  # models that normalise each sublayer's input
    "GPT-2": N_("GPT-2 normalises each sublayer's input (pre-LN), with one more layer norm after the last block."),
    "ViT": N_("ViT normalises each sublayer's input (pre-LN), with one more layer norm after the last block."),
    "T5": N_("T5 normalises each sublayer's input (pre-LN), with a norm that only rescales."),
    "LLaMA": N_("LLaMA normalises each sublayer's input (pre-LN), with RMSNorm."),
}
DECODER_ONLY = {
    "GPT-2": "",
    "LLaMA": "",
}
NOT_DECODER_ONLY = {
    "BERT": N_("BERT is encoder-only: its tokens attend in both directions, with no causal mask."),
    "ViT": N_("ViT is encoder-only: its patches attend to each other, with no causal mask."),
    "T5": N_("T5 keeps both halves, encoder and decoder (with cross-attention between them)."),
    "BART": N_("BART keeps both halves, encoder and decoder (with cross-attention between them)."),
    N_("the original Transformer (2017)"): N_("the original Transformer has an encoder and a decoder."),
}
SEED_POST_LN = ("BERT", "GPT-2", "ViT", "T5")  # variant 0: the chapter's four models, the right one first
SEED_DECODER_ONLY = ("GPT-2", "BERT", "ViT", "T5")

RESIDUAL_RIGHT = N_("The token's own vector: each sublayer adds its change F(x) to it, x + F(x).")
RESIDUAL_OPTIONS = {
    RESIDUAL_RIGHT: "",
    N_("Only the sublayer's output F(x); the input x is left behind."):
        N_("without the addition a sublayer would have to learn to pass its input on; the sum x + F(x) keeps x."),
    N_("The average of all the tokens' vectors."):
        N_("the residual connection adds each token's own vector to its own output; nothing is averaged."),
    N_("The attention weights of the block before."):
        N_("the weights stay inside attention; what is carried on is a vector per token."),
}
EXCHANGE_RIGHT = N_("Multi-head attention.")
EXCHANGE_OPTIONS = {
    EXCHANGE_RIGHT: "",
    N_("The feed-forward layer."): N_("the feed-forward layer acts on every token on its own (position-wise)."),
    N_("The layer norm."): N_("a layer norm takes the mean and variance of each token's own features."),
    N_("The residual sum."): N_("the residual sum adds each token's own vector to its own sublayer output."),
}


def givens(variant: int) -> dict:
    """The variant's row of 補償 (x, what attention adds, gamma, beta, eps) and each question's options."""
    row = variants.delivery_block_row_example(variant)
    return {
        "token": row.token, "x": row.x, "a": row.attended, "gamma": row.gamma, "beta": row.beta, "eps": row.eps,
        "post_ln_options": _models(POST_LN, PRE_LN, SEED_POST_LN, "post_ln", variant),
        "decoder_only_options": _models(DECODER_ONLY, NOT_DECODER_ONLY, SEED_DECODER_ONLY, "decoder_only", variant),
        "residual_options": _ordered(RESIDUAL_OPTIONS, RESIDUAL_RIGHT, "residual", variant),
        "exchange_options": _ordered(EXCHANGE_OPTIONS, EXCHANGE_RIGHT, "exchange", variant),
    }


def _models(right_pool: dict, wrong_pool: dict, seed: tuple[str, ...], question: str,
            variant: int) -> tuple[str, ...]:
    """One model of ``right_pool`` and three of ``wrong_pool``, in the variant's order (variant 0: ``seed``);
    the right one never first, where it is in variant 0."""
    if variant == 0:
        return seed
    draw = VariantDraw(f"ps9_models/{question}", variant)
    right = draw.choice(sorted(right_pool))
    wrong = sorted(wrong_pool)
    chosen = [wrong[i] for i in draw.permutation(len(wrong))[:3]]
    return ordered_options([right, *chosen], right, draw_name=f"ps9_order/{question}", variant=variant,
                           seed_place=0)


def _ordered(options: dict, right: str, question: str, variant: int) -> tuple[str, ...]:
    texts = tuple(options)
    return ordered_options(texts, right, draw_name=f"ps9_options/{question}", variant=variant,
                           seed_place=texts.index(right))


def _model_choice(given: str, right_pool: dict, wrong_pool: dict, explain_right: str):
    def expect(g):
        options = g[given]
        right = next(model for model in options if model in right_pool)
        return choose_option(options, right, explain_right=explain_right,
                             explain_wrong={model: wrong_pool[model] for model in options if model in wrong_pool})

    return expect


def _option_choice(given: str, options: dict, right: str):
    return lambda g: choose_option(g[given], right, explain_right=right,
                                   explain_wrong={text: advice for text, advice in options.items() if advice})


def _row_step(step: str, name: str):
    return lambda g: expect_block_row_step(step, g["x"], g["a"], g["gamma"], g["beta"], g["eps"], name=name)


# --------------------------------------------------------------------------- layer_norm's calls


def _your_row(g) -> np.ndarray:
    return (g["x"] + g["a"])[None, :]  # (1, 4): the residual sum as one token's row


def _rows_calls(g, rng) -> list:
    return [layer_norm_call(_your_row(g), np.ones(4), np.zeros(4), what=_("your residual sum r (1, 4), gamma = 1, "
                            "beta = 0"), behaviour="rows"),
            layer_norm_rows_call(rng, (3, 5))]


def _gamma_beta_calls(g, rng) -> list:
    return [layer_norm_call(_your_row(g), g["gamma"], g["beta"], what=_("your r (1, 4), your gamma and beta"),
                            behaviour=N_("gamma and beta")),
            layer_norm_gamma_beta_call(rng, (4, 6))]


_layer_norm_check = function_checks("layer_norm", judge_layer_norm, explain_layer_norm_error)


PROBLEM_SET = ProblemSet(
    name="ps9_block",
    title=N_("Problem set 9: the block around attention"),
    givens=givens,
    checks=(
        ValueCheck("residual_sum", "r", _row_step("r", "r"),
                   "r is 補償's residual sum x + a, each entry within 0.01."),
        ValueCheck("row_mean", "mean", _row_step("mean", "mean"), "mean is the mean of r's 4 entries, within 0.01."),
        ValueCheck("row_variance", "variance", _row_step("variance", "variance"),
                   "variance is the variance of r's entries (divided by d = 4), within 0.01."),
        ValueCheck("normalised_row", "normalised", _row_step("normalised", "normalised"),
                   "normalised is r scaled to mean 0 and variance 1, each entry within 0.01."),
        ValueCheck("scaled_row", "y", _row_step("scaled", "y"),
                   "y is gamma * normalised + beta, each entry within 0.01."),
        ChoiceCheck("post_ln_model", "post_ln", _model_choice(
            "post_ln_options", POST_LN, PRE_LN, N_("it normalises after each residual sum: x <- LayerNorm(x + F(x))")),
            "post_ln is the letter of the model that normalises after each residual sum."),
        ChoiceCheck("decoder_only_model", "decoder_only", _model_choice(
            "decoder_only_options", DECODER_ONLY, NOT_DECODER_ONLY,
            N_("it stacks decoder blocks without cross-attention, each with a causal mask")),
            "decoder_only is the letter of the decoder-only model."),
        ChoiceCheck("residual_carries", "residual", _option_choice("residual_options", RESIDUAL_OPTIONS,
                                                                   RESIDUAL_RIGHT),
                    "residual is the letter of what the residual connection carries."),
        ChoiceCheck("tokens_exchange", "exchange", _option_choice("exchange_options", EXCHANGE_OPTIONS,
                                                                  EXCHANGE_RIGHT),
                    "exchange is the letter of the sublayer in which tokens exchange information."),
        _layer_norm_check("layer_norm_rows", _rows_calls,
                          "layer_norm normalises every row of a matrix (gamma = 1, beta = 0), to 1e-6."),
        _layer_norm_check("layer_norm_gamma_beta", _gamma_beta_calls,
                          "layer_norm scales by gamma and shifts by beta, feature by feature, to 1e-6."),
        _layer_norm_check("layer_norm_eps",
                          lambda g, rng: [layer_norm_eps_call(rng, 0.5, 4), layer_norm_eps_call(rng, None, 5)],
                          "layer_norm adds its eps under the square root: a row of equal entries stays finite."),
        _layer_norm_check("layer_norm_3d",
                          lambda g, rng: [layer_norm_gamma_beta_call(rng, (2, 3, 4), "3-D input")],
                          "layer_norm normalises the rows of a 3-D input (2 sentences of 3 tokens), to 1e-6."),
        _layer_norm_check("layer_norm_large_values", lambda g, rng: [layer_norm_large_call(rng, (3, 4))],
                          "layer_norm keeps its digits on rows near a million (deviations first, then squares)."),
        _layer_norm_check("layer_norm_random_inputs", lambda g, rng: random_layer_norm_calls(rng),
                          "layer_norm matches qkv.layer_norm on random inputs of every kind, to 1e-6.", hidden=True),
    ),
)
