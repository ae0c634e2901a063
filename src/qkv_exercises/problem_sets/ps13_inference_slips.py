"""The slips problem set 13 names: decoding with a cache, grouped heads, windows and ALiBi.

Each is a :class:`~qkv_exercises.slips.Slip` whose advice a student reads when an answer (or a
function's result) matches what the slip computes; the computations with a slip are beside the
right ones in :mod:`.ps13_inference` (``step_answers(..., slip)`` and the like). The slips shared
with other problem sets are imported here from :mod:`qkv_exercises.slips`.
"""

from __future__ import annotations

from ..slips import BITS_NOT_BYTES, GB_NOT_GIB, MIB_NOT_GIB, NO_SQRT_DK, Slip

__all__ = ["BITS_NOT_BYTES", "GB_NOT_GIB", "MIB_NOT_GIB", "NO_SQRT_DK"]  # and the slips below

# decoding with the cache

APPENDED_AFTER_USE = Slip(
    "cache_appended_after_use",
    "did the query read the cache before the new token's key and value joined it? At step t the new "
    "key and value are appended first, then q_t attends to all t cached tokens: a token may attend to "
    "itself, as the causal mask allows.",
)
NOT_CAUSAL = Slip(
    "decode_not_causal",
    "did every token read every token, later ones too? When token t is written, tokens t+1, ... do not "
    "exist yet: the cache holds tokens 1 .. t only.",
)

# what the cache costs

KEYS_ONLY = Slip(
    "cache_keys_only",
    "did you count the keys only? The cache keeps a key AND a value for every token, head and layer: "
    "that is the 2 in 2 L h_kv d_k n b.",
)
QUERY_HEADS_CACHED = Slip(
    "cache_query_heads",
    "did you count every query head? Only the key/value heads are cached: with grouped-query "
    "attention there are h_kv of them, fewer than the query heads.",
)
LAYERS_FORGOTTEN = Slip(
    "cache_layers_forgotten",
    "did you forget the layers? Every attention layer keeps its own keys and values.",
)
SAVING_INVERTED = Slip(
    "saving_inverted",
    "you wrote h_kv / h; the saving is how many times SMALLER the cache gets: h / h_kv.",
)

# grouped-query attention

HEAD_MODULO = Slip(
    "kv_head_modulo",
    "did you map query head i to key/value head i % g? The query heads come in consecutive groups "
    "of h / g: heads 0 .. h/g - 1 share key/value head 0, the next h/g share head 1, so head i reads "
    "key/value head i // (h / g).",
)
HEAD_OVER_G = Slip(
    "kv_head_over_g",
    "did you divide i by g? Each key/value head serves h / g query heads: query head i reads key/value "
    "head i // (h / g).",
)

# sliding windows

WINDOW_ONE_TOO_WIDE = Slip(
    "window_one_too_wide",
    "is your window one too wide? A window of w keeps the keys LESS than w away, |i - j| < w: with "
    "the causal mask, the token itself and the w - 1 before it, w entries in all.",
)
WINDOW_OLDEST = Slip(
    "window_oldest",
    "a sliding window keeps the most recent entries, not the first ones: token t keeps t - w + 1, ..., t.",
)
WINDOW_BOTH_SIDES = Slip(
    "window_both_sides",
    "did you count the window on both sides? Under the causal mask a query keeps only the keys before "
    "it (and itself): min(i + 1, w) keys for query i.",
)
WINDOW_ONE_SIDED = Slip(
    "window_one_sided",
    "did you keep only the keys before each query? The sliding-window mask alone reaches both ways, "
    "|i - j| < w; the causal mask, combined with &, is what removes the later keys.",
)
WINDOW_INVERTED = Slip(
    "window_inverted",
    "your mask is inverted: True means the query MAY attend to the key, for |i - j| < w.",
)

# ALiBi

BIAS_SIGN = Slip(
    "alibi_bias_sign",
    "did you add m (i - j) instead of subtracting it? ALiBi's bias is a penalty, -m (i - j): the "
    "farther the key, the lower its score.",
)
BIAS_FROM_FIRST = Slip(
    "alibi_distance_from_first",
    "did you measure the distance from the first token (-m j)? It is the distance to the query, i - j: "
    "0 for the query itself, 3 for a key three tokens back.",
)
NO_BIAS = Slip(
    "alibi_no_bias",
    "these are the scores without the bias: subtract m (i - j) from each, m the head's slope.",
)
SLOPE_POWER_RULE = Slip(
    "alibi_slope_rule",
    "2^(-8k/h) holds only when h is a power of two. Otherwise ALiBi takes the slopes of the largest "
    "power of two p below h for heads 1 .. p, then every other slope of 2p heads (2^(-8/(2p)), "
    "2^(-24/(2p)), ...) for the heads after p.",
)
SLOPE_FROM_ZERO = Slip(
    "alibi_slope_from_zero",
    "did you count the heads from 0? The paper numbers them from 1: head k has slope 2^(-8k/h), so "
    "head 1's is 2^(-8/h), never 1.",
)
