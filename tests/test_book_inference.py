"""The chapters on decoding with a cache and on attention past the trained length: what the built
pages show agrees with the seeds and with counts and computations done here.

The expected numbers come from seed 000's printed weights, from the published model shapes (the
cache is counted here as 2 * layers * h_kv * d_k * n * bytes), and from math written in the test;
nothing is copied from qkv's output. The pages come from the one book build of the session.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from .seeds import SEED_000
from .test_book import page_text

pytestmark = pytest.mark.slow


def numbers_after(text: str, pattern: str) -> list[float]:
    match = re.search(pattern, text)
    assert match, f"the page has no text matching {pattern!r}"
    return [float(x.replace(",", "")) for x in match.groups()]


def softmax(scores):
    exps = [math.exp(s) for s in scores]
    return [e / sum(exps) for e in exps]


@pytest.fixture(scope="module")
def decoding(built_site) -> str:
    return page_text(built_site / "book" / "decoding.html")


@pytest.fixture(scope="module")
def long_context(built_site) -> str:
    return page_text(built_site / "book" / "long_context.html")


def test_step_3_of_decoding_gives_the_seeds_row_of_compensation(decoding):
    """補償's query [1, 1] over the three cached keys: seed 000's weights and output of 補償."""
    weights = numbers_after(decoding, r"and the weights are ([\d.]+), ([\d.]+), ([\d.]+): seed 000.s row")
    np.testing.assert_allclose(weights, SEED_000[1]["A"][2], atol=1e-6)
    output = numbers_after(decoding, r"gives the output \[ ?([\d.]+), ([\d.]+) ?\]")
    np.testing.assert_allclose(output, SEED_000[1]["O"][2], atol=1e-6)


def test_every_decoding_step_is_checked_against_the_causal_full_pass(decoding):
    gaps = re.findall(r"step by step vs causal full pass, largest difference (\d\.\de[-+]\d+)", decoding)
    assert len(gaps) == 2 and all(float(gap) < 1e-12 for gap in gaps), gaps


def test_the_cache_of_llama_2_7b_is_counted_from_its_published_shape(decoding):
    """32 layers, 32 key/value heads of width 128, 16-bit numbers: half a MiB per token."""
    (per_token,) = numbers_after(decoding, r"Llama 2 7B keeps .{0,60}? ([\d,]+) bytes, half a MiB")
    assert per_token == 2 * 32 * 32 * 128 * 2
    batch_gib = 2 * 32 * 32 * 128 * 4096 * 2 * 32 / 2**30
    assert f"Serving 32 sequences at once takes {batch_gib:.0f} GiB" in decoding


def test_grouped_heads_shrink_the_cache_of_llama_2_70b_eightfold(decoding):
    every_head, grouped = numbers_after(
        decoding, r"would take ([\d.]+) GiB with a key/value head per query head; its 8 groups make it ([\d.]+) GiB")
    assert every_head == pytest.approx(2 * 80 * 64 * 128 * 4096 * 2 / 2**30, abs=0.5)
    assert grouped == pytest.approx(2 * 80 * 8 * 128 * 4096 * 2 / 2**30, abs=0.005)


def test_multi_query_attention_collapses_the_two_heads_of_seed_000(decoding):
    assert "compute the same weights (equal to the last bit: True)" in decoding


def test_alibi_reweights_the_row_of_yonghe_road_as_computed_here(long_context):
    """Scaled scores [1.5, 0, 0, 2.5] plus -1/2 [3, 2, 1, 0]: the softmax of [0, -1, -0.5, 2.5]."""
    import qkv

    zh = qkv.examples.zhonghe_vectors_example()  # the inputs; the scores are recomputed here
    b_Q, b_K = (0.0 if b is None else b for b in (zh.head.b_Q, zh.head.b_K))
    Q, K = zh.X @ zh.head.W_Q + b_Q, zh.X @ zh.head.W_K + b_K
    scores = (Q @ K.T)[3] / math.sqrt(Q.shape[1])
    biased = [s - 0.5 * (3 - j) for j, s in enumerate(scores)]
    shown = numbers_after(long_context, r"the weights are \[ ?([\d.]+), ([\d.]+), ([\d.]+), ([\d.]+) ?\], against")
    np.testing.assert_allclose(shown, softmax(biased), atol=1e-4)


def test_the_page_works_t5s_bucket_of_distance_20(long_context):
    expected = 16 + math.floor(16 * math.log(20 / 16) / math.log(128 / 16))
    assert f"whose floor is 1, so bucket {expected}" in long_context
    assert "distance 20 -> bucket 17" in long_context


def test_the_slopes_of_12_heads_are_the_papers(long_context):
    shown = numbers_after(long_context, r"h = 12: \[" + r"\s*([\d.]+)" * 12)
    expected = [2.0**-k for k in range(1, 9)] + [2.0**-0.5, 2.0**-1.5, 2.0**-2.5, 2.0**-3.5]
    np.testing.assert_allclose(shown, expected, atol=1e-4)


def test_path_lengths_are_the_layers_a_window_needs(long_context):
    """A causal window of w passes information w - 1 tokens a layer: ceil(1023 / (w - 1)) layers."""
    for name, window in (("sliding window, w = 64", 64), ("convolution, kernel 3", 3), ("recurrent layer", 2)):
        (layers,) = numbers_after(long_context, re.escape(name) + r" [\d,]+ pairs, path length +(\d+) layers")
        assert layers == math.ceil(1023 / (window - 1)), name


def test_the_sliding_window_keeps_the_last_w_cache_entries(long_context):
    assert "token 6 (index 5) keeps the cache entries [3, 4, 5]" in long_context
    window_gib = 2 * 32 * 8 * 128 * 4096 * 2 / 2**30
    assert f"stops growing at 4,096 tokens, {window_gib:.1f} GiB per sequence" in long_context


def test_linear_attention_equals_its_quadratic_form_on_the_page(long_context):
    gaps = re.findall(r"O\(n\) vs O\(n\^2\) differ by (\d\.\de[-+]\d+);", long_context)
    assert len(gaps) == 2 and all(float(gap) < 1e-12 for gap in gaps), gaps
