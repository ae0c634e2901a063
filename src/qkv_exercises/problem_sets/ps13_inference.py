"""Problem set 13: attention at inference.

By hand, on the student's own numbers (variant 0 is the chapters'):

1. One decoding step with the cache: head 1 of a variant of seed 000 (the chapter's 外送 晚到 補償)
   has cached the keys and values of 外送 and 晚到; 補償 arrives. The key cache with its key
   appended, its scores over the three cached keys, its weights and its output.
2. What the cache costs: the GiB of a model's key-value cache (variant 0: Llama 2 70B at 4,096
   tokens) and the factor its grouped key/value heads save.
3. One grouped-query head: which key/value head query head ``i`` reads, and its weights for 補償
   (variant 0: the chapter's four query heads over seed 000's two heads).
4. A sliding window: which cache entries a token keeps, and how many pairs a causal window keeps.
5. An ALiBi-biased row: the slope of head ``k`` of ``h`` (the paper's rule when ``h`` is not a power
   of two), 永和路's biased scores and its weights (variant 0: the chapter's, slope 1/2).

In code, checked to 1e-6 against qkv (hidden checks on inputs drawn at grading):
``grouped_query_attention(Q, K, V)``, ``sliding_window_mask(n, window)`` and a decode loop
``decode(X, W_Q, W_K, W_V)``.

The slips this set names live with it, in :mod:`.ps13_inference_slips`: the cache appended after
use, the head mapping ``i % g`` instead of ``i // (h / g)``, the bias sign, the slope rule, the
window one too wide.
"""

from __future__ import annotations

import functools

import numpy as np

from qkv.attention import linear, softmax
from qkv.decoding import decode_with_cache
from qkv.examples import BiasedRowExample, GroupedHeadsExample, KVCacheExample, SlidingWindowExample
from qkv.grouped import grouped_query_attention
from qkv.patterns import sliding_window_mask
from qkv.validate import shape_str

from .. import variants
from ..checking import CODE_TOLERANCE, HAND_TOLERANCE, Expectation, Verdict, judge_value, rows_sum_to_one
from ..checks import Call, ProblemSet, Raised, ValueCheck, function_checks
from ..expectations import WHOLE_NUMBER
from ..functions import judge_boolean
from ..language import N_, _
from ..slips import each_part
from ..variants import VariantDraw, apart_from_seed
from ..variants.delivery import grouped_readings
from ..variants.inference import cache_gib, window_entries
from ..variants.zhonghe import alibi_readings
from . import ps13_inference_slips as slips
from .ps13_inference_slips import NO_SQRT_DK

TOKENS = ("外送", "晚到", "補償")
ZHONGHE = ("中和", "有", "一個", "永和路")
DISTINCT = 0.03  # a slip's answer differs from the right one by more than this (three hand tolerances)

# --------------------------------------------------------------------------- 1. a decoding step


def step_answers(x_3, W_Q, W_K, b_K, W_V, K_cache, V_cache, slip=None) -> dict[str, np.ndarray]:
    """Step 3 by hand: the key cache with 補償's key, its scores, weights and output (or a slip).

    ``x_3`` ``(d_model,)``; the cache of the two tokens before it, ``K_cache`` ``(2, d_k)`` and
    ``V_cache`` ``(2, d_v)``. Plain numpy: drawing a variant calls it many times, and the tests check
    it against :func:`qkv.decode_step`.
    """
    x_3 = np.asarray(x_3, dtype=float)
    q_3, k_3, v_3 = x_3 @ W_Q, x_3 @ W_K + b_K, x_3 @ W_V  # (d_k,), (d_k,), (d_v,)
    if slip is slips.APPENDED_AFTER_USE:  # the query reads the old cache, then its key joins
        K, V = K_cache, V_cache
    else:
        K, V = np.vstack([K_cache, k_3]), np.vstack([V_cache, v_3])  # (3, d_k), (3, d_v)
    scale = 1.0 if slip is NO_SQRT_DK else np.sqrt(len(q_3))
    scores = K @ q_3 / scale  # (t,)
    weights = softmax(scores)
    return {"K_cache_3": K, "scores_3": scores, "weights_3": weights, "output_3": weights @ V}


STEP_SLIPS = (slips.APPENDED_AFTER_USE, NO_SQRT_DK)
STEP_GIVENS = ("x_3", "W_Q", "W_K", "b_K", "W_V", "K_cache", "V_cache")
_STEP_HELP = {"K_cache_3": (N_("the cached keys of 外送 and 晚到, then k_3 = x_3 W_K + b_K"),
                           N_("one row per cached token (外送, 晚到, 補償), d_k numbers each")),
              "scores_3": (N_("q_3 K^T / sqrt(d_k) over the 3 cached keys"),
                           N_("one score per cached key: 外送, 晚到, 補償")),
              "weights_3": ("softmax(scores_3)", N_("one weight per cached key: 外送, 晚到, 補償")),
              "output_3": (N_("weights_3 V, over the 3 cached values"), N_("one row: d_v numbers"))}
_STEP_LABELS = {"K_cache_3": [list(TOKENS), None], "scores_3": [list(TOKENS)], "weights_3": [list(TOKENS)]}


def _step(answer: str):
    def expect(g) -> Expectation:
        args = tuple(g[name] for name in STEP_GIVENS)
        formula, shape_help = _STEP_HELP[answer]
        return Expectation(
            step_answers(*args)[answer], HAND_TOLERANCE, formula=formula, shape_help=shape_help,
            labels=_STEP_LABELS.get(answer),
            slip_values=lambda: [(slip, step_answers(*args, slip).get(answer)) for slip in STEP_SLIPS],
            hints=[rows_sum_to_one(answer)] if answer == "weights_3" else (),
            what=_("your answer, a list of numbers"))

    return expect


@functools.cache
def _delivery_step(example_variant: int) -> dict | None:
    """x_3, W_Q, W_K, b_K, W_V and the cache of 外送 and 晚到, of head 1 of a delivery example."""
    ex = variants.delivery_example(example_variant)
    head = ex.heads[0]
    if any(b is not None and np.any(b) for b in (head.b_Q, head.b_V)):
        return None  # the step by hand asks for the key bias only
    b_K = np.zeros(head.d_k) if head.b_K is None else head.b_K
    K, V = linear(ex.X, head.W_K, b_K), linear(ex.X, head.W_V)  # (3, d_k), (3, d_v)
    return {"x_3": ex.X[2], "W_Q": head.W_Q, "W_K": head.W_K, "b_K": b_K, "W_V": head.W_V,
            "K_cache": K[:2], "V_cache": V[:2], "X_delivery": ex.X}


def _step_workable(g: dict | None) -> bool:
    """Every answer differs from the seed's, and from each slip's by more than three tolerances."""
    if g is None:
        return False
    args = tuple(g[name] for name in STEP_GIVENS)
    right = step_answers(*args)
    if right["weights_3"].min() < 0.02 or right["weights_3"].max() > 0.9:
        return False
    for slip in STEP_SLIPS:
        for name, value in step_answers(*args, slip).items():
            if value.shape == right[name].shape and 1e-12 < np.abs(value - right[name]).max() <= DISTINCT:
                return False
    seed = step_answers(*(_delivery_step(0)[name] for name in STEP_GIVENS))
    return all(apart_from_seed(value, seed[name]) for name, value in right.items())


EXAMPLE_VARIANTS = 400  # the delivery examples a variant draws its head from (each made once)


def _step_givens(variant: int) -> dict:
    if variant == 0:
        return _delivery_step(0)
    return VariantDraw("ps13_step", variant).until(
        lambda d: _delivery_step(d.integer(1, EXAMPLE_VARIANTS)), _step_workable, "delivery head")


# --------------------------------------------------------------------------- 2. what the cache costs


def _cache_example(g) -> KVCacheExample:
    from qkv.decoding import ModelShape

    shape = ModelShape("", g["layers"], g["heads"], g["kv_heads"], g["d_k"], g["n_tokens"], "")
    return KVCacheExample(shape=shape, n=g["n_tokens"], dtype=g["dtype"])


def _expect_cache(g) -> Expectation:
    right = cache_gib(_cache_example(g))
    size, layers, heads, kv_heads = right * 2**30, g["layers"], g["heads"], g["kv_heads"]
    return Expectation(
        np.array(right), HAND_TOLERANCE, formula=_("2 L h_kv d_k n b / 2^30"),
        slip_values=[(slips.KEYS_ONLY, np.array(right / 2)),
                     (slips.QUERY_HEADS_CACHED, np.array(right * heads / kv_heads)),
                     (slips.LAYERS_FORGOTTEN, np.array(right / layers)), (slips.GB_NOT_GIB, np.array(size / 1e9)),
                     (slips.MIB_NOT_GIB, np.array(size / 2**20)), (slips.BITS_NOT_BYTES, np.array(8 * right))],
        what=_("your answer, a number of GiB"))


def _expect_saving(g) -> Expectation:
    heads, kv_heads = g["heads"], g["kv_heads"]
    return Expectation(np.array(float(heads / kv_heads)), WHOLE_NUMBER, formula="h / h_kv",
                       slip_values=[(slips.SAVING_INVERTED, np.array(kv_heads / heads))],
                       what=_("your answer, one number"))


def _cache_givens(ex: KVCacheExample) -> dict:
    shape = ex.shape
    return {"layers": shape.layers, "heads": shape.heads, "kv_heads": shape.kv_heads, "d_k": shape.d_k,
            "n_tokens": ex.n, "dtype": ex.dtype}


# --------------------------------------------------------------------------- 3. one grouped-query head

_GQA_READINGS = {None: "right", slips.HEAD_MODULO: "modulo", slips.HEAD_OVER_G: "over_g", NO_SQRT_DK: "unscaled"}
GQA_SLIPS = (slips.HEAD_MODULO, slips.HEAD_OVER_G, NO_SQRT_DK)


def gqa_answers(Q, K, head: int, slip=None) -> dict[str, np.ndarray]:
    """Which key/value head query head ``head`` reads, and its weights for 補償 (or with one slip).

    ``Q`` ``(h, d_k)``: 補償's query in every query head; ``K`` ``(g, 3, d_k)``.
    """
    h, g = len(Q), len(K)
    group = {None: head // (h // g), slips.HEAD_MODULO: head % g, slips.HEAD_OVER_G: head // g,
             NO_SQRT_DK: head // (h // g)}[slip]
    example = GroupedHeadsExample(tokens=TOKENS, Q=np.asarray(Q, dtype=float), K=np.asarray(K, dtype=float),
                                  V=np.zeros_like(K), query_head=head)
    weights = grouped_readings(example).get(_GQA_READINGS[slip])
    if weights is None:
        return {}
    return {"kv_head": np.array(float(group)), "weights_gqa": weights}


def _gqa(answer: str):
    def expect(g) -> Expectation:
        value = gqa_answers(g["Q_gqa"], g["K_gqa"], g["query_head"])[answer]
        slip_values = [(slip, gqa_answers(g["Q_gqa"], g["K_gqa"], g["query_head"], slip).get(answer))
                       for slip in GQA_SLIPS]
        if answer == "kv_head":
            return Expectation(value, WHOLE_NUMBER, formula="i // (h / g)", slip_values=slip_values,
                               what=_("your answer, a whole number (key/value heads count from 0)"))
        return Expectation(value, HAND_TOLERANCE, formula="softmax(q_i K_kv(i)^T / sqrt(d_k))",
                           shape_help=_("one weight per key: 外送, 晚到, 補償"), labels=[list(TOKENS)],
                           slip_values=slip_values, hints=[rows_sum_to_one(answer)],
                           what=_("your answer, a list of 3 numbers"))

    return expect


def _gqa_givens(ex: GroupedHeadsExample) -> dict:
    return {"Q_gqa": ex.Q, "K_gqa": ex.K, "V_gqa": ex.V, "query_head": ex.query_head}


# --------------------------------------------------------------------------- 4. a sliding window

WINDOW_SLIPS = (slips.WINDOW_ONE_TOO_WIDE, slips.WINDOW_OLDEST, slips.WINDOW_BOTH_SIDES)


def window_answers(n: int, window: int, token: int, slip=None) -> dict[str, np.ndarray]:
    """The cache entries token ``token`` keeps under a causal window, and the pairs the window keeps
    (or with one slip)."""
    wider = window + 1 if slip is slips.WINDOW_ONE_TOO_WIDE else window
    kept, pairs = window_entries(SlidingWindowExample(n=n, window=wider, token=token))
    if slip is slips.WINDOW_OLDEST:
        kept = np.arange(min(window, token + 1))
    if slip is slips.WINDOW_BOTH_SIDES:  # the window on both sides of each query, as the mask alone
        pairs = int(sliding_window_mask(n, window).sum())
    return {"kept": kept.astype(float), "pairs_kept": np.array(float(pairs))}


def _window(answer: str):
    def expect(g) -> Expectation:
        args = (g["n_window"], g["window"], g["token"])
        value = window_answers(*args)[answer]
        slip_values = [(slip, window_answers(*args, slip).get(answer)) for slip in WINDOW_SLIPS]
        if answer == "kept":
            return Expectation(value, WHOLE_NUMBER, formula=_("token - w + 1, ..., token"),
                               shape_help=_("the positions of the kept entries, counting from 0, oldest first"),
                               slip_values=slip_values, what=_("your answer, a list of whole numbers"))
        return Expectation(value, WHOLE_NUMBER, formula=_("sum over i of min(i + 1, w)"), slip_values=slip_values,
                           what=_("your answer, a whole number"))

    return expect


def _window_givens(ex: SlidingWindowExample) -> dict:
    return {"n_window": ex.n, "window": ex.window, "token": ex.token}


# --------------------------------------------------------------------------- 5. an ALiBi-biased row

_ALIBI_READINGS = {None: "right", slips.BIAS_SIGN: "added", slips.BIAS_FROM_FIRST: "from_first",
                   slips.NO_BIAS: "unbiased", slips.SLOPE_POWER_RULE: "power_rule", slips.SLOPE_FROM_ZERO: "from_zero"}
ALIBI_SLIPS = (slips.BIAS_SIGN, slips.BIAS_FROM_FIRST, slips.NO_BIAS, slips.SLOPE_POWER_RULE, slips.SLOPE_FROM_ZERO)


def alibi_answers(scores_row, h: int, k: int, slip=None) -> dict[str, np.ndarray]:
    """Head ``k``'s slope (counting from 1), the last token's biased scores and weights (or a slip)."""
    example = BiasedRowExample(tokens=ZHONGHE, scores=np.asarray(scores_row, dtype=float), h=h, head=k)
    reading = alibi_readings(example).get(_ALIBI_READINGS[slip])
    if reading is None:
        return {}
    return {"slope": reading["slope"], "biased_row": reading["biased_row"], "weights_alibi": reading["weights"]}


_ALIBI_HELP = {"slope": (N_("2^(-8k/h) for h a power of two, the paper's rule otherwise"), ""),
               "biased_row": (N_("s_j - m (i - j) for the last token i"), N_("one biased score per key")),
               "weights_alibi": ("softmax(biased_row)", N_("one weight per key"))}


def _alibi(answer: str):
    def expect(g) -> Expectation:
        args = (g["scores_row"], g["h_alibi"], g["alibi_head"])
        formula, shape_help = _ALIBI_HELP[answer]
        return Expectation(
            alibi_answers(*args)[answer], HAND_TOLERANCE, formula=formula, shape_help=shape_help,
            labels=None if answer == "slope" else [list(ZHONGHE)],
            slip_values=lambda: [(slip, alibi_answers(*args, slip).get(answer)) for slip in ALIBI_SLIPS],
            hints=[rows_sum_to_one(answer)] if answer == "weights_alibi" else (),
            what=_("your answer, one number") if answer == "slope" else _("your answer, a list of 4 numbers"))

    return expect


def _alibi_givens(ex: BiasedRowExample) -> dict:
    return {"zhonghe": ex.tokens, "scores_row": ex.scores, "h_alibi": ex.h, "alibi_head": ex.head}


# --------------------------------------------------------------------------- the givens


def givens(variant: int) -> dict:
    """The student's numbers for the five parts (variant 0: the chapters')."""
    return {"tokens": TOKENS, **_step_givens(variant), **_cache_givens(variants.kv_cache_example(variant)),
            **_gqa_givens(variants.grouped_delivery_example(variant)),
            **_window_givens(variants.sliding_window_example(variant)),
            **_alibi_givens(variants.zhonghe_alibi_example(variant))}


# --------------------------------------------------------------------------- grouped_query_attention(Q, K, V)

GQA = "grouped_query_attention"


def gqa_call(Q, K, V, *, what: str, behaviour: str) -> Call:
    Q, K, V = (np.asarray(M, dtype=float) for M in (Q, K, V))
    return Call(args=(Q, K, V), label=f"{GQA}({what})", behaviour=behaviour)


def _shapes(Q, K, V) -> str:
    return f"Q {shape_str(Q.shape)}, K {shape_str(K.shape)}, V {shape_str(V.shape)}"


def random_gqa_call(rng: np.random.Generator, h: int, g: int, n: int, m: int, d_k: int, d_v: int,
                    behaviour: str) -> Call:
    Q, K, V = rng.normal(size=(h, n, d_k)), rng.normal(size=(g, m, d_k)), rng.normal(size=(g, m, d_v))
    return gqa_call(Q, K, V, what=_shapes(Q, K, V), behaviour=behaviour)


GQA_CASES = ((N_("grouped heads"), (8, 2, 3, 5, 4, 3)), (N_("grouped heads"), (6, 3, 2, 4, 2, 2)),
             (N_("one key/value head (multi-query)"), (4, 1, 3, 3, 2, 2)),
             (N_("as many key/value heads as query heads"), (3, 3, 2, 4, 3, 2)))


def random_gqa_calls(rng: np.random.Generator) -> list[Call]:
    return [random_gqa_call(rng, *shapes, behaviour) for behaviour, shapes in GQA_CASES]


def gqa_with_slip(Q, K, V, slip):
    """:func:`qkv.grouped_query_attention` with one slip (None where the slip changes nothing or cannot be made)."""
    h, g = Q.shape[0], K.shape[0]
    if slip is slips.HEAD_MODULO:
        groups = np.arange(h) % g
    elif slip is slips.HEAD_OVER_G:
        groups = np.arange(h) // g
        if groups.max() >= g:
            return None
    else:
        groups = np.arange(h) // (h // g)
    scale = 1.0 if slip is NO_SQRT_DK else np.sqrt(Q.shape[-1])
    if slip is not NO_SQRT_DK and np.array_equal(groups, np.arange(h) // (h // g)):
        return None
    weights = softmax(Q @ K[groups].swapaxes(-1, -2) / scale)  # (h, n, m)
    return weights @ V[groups], weights


def judge_gqa(call: Call, result, reveal: bool) -> Verdict:
    """Compare ``(output, weights)`` with :func:`qkv.grouped_query_attention`; name the head mapping."""
    if not isinstance(result, (tuple, list)) or len(result) != 2:
        return Verdict(False, _("{call} returned {kind}; it must return two arrays: return output, weights").format(
            call=_(call.label), kind=_kind(result)))
    expected = grouped_query_attention(*call.args)
    slipped = functools.cache(lambda: [(slip, gqa_with_slip(*call.args, slip)) for slip in GQA_SLIPS])
    for index, name in enumerate((_("output of {call}"), _("weights of {call}"))):
        expectation = Expectation(
            expected[index], CODE_TOLERANCE,
            shape_help=_("(h, n, d_v): one output row per query head and query") if index == 0 else
            _("(h, n, m): one row of weights per query head and query"),
            slip_values=each_part(slipped, index),
            what=_("an array"))
        verdict = judge_value(result[index], name.format(call=_(call.label)), expectation, reveal=reveal)
        if not verdict.passed:
            return verdict
    return Verdict(True, _("{call} is correct.").format(call=_(call.label)))


def explain_gqa_error(call: Call, raised: Raised) -> str | None:
    """The likely slip behind an error: K (g heads) used as if it had h."""
    if raised.type_name in ("ValueError", "IndexError") and ("broadcast" in raised.message or "index" in raised.message):
        Q, K = call.args[:2]
        return _("Q has {h} query heads and K {g} key/value heads: repeat each key/value head for its h/g query "
                 "heads (query head i reads key/value head i // (h / g)) before the product.").format(
            h=Q.shape[0], g=K.shape[0])
    return None


def _kind(result) -> str:
    if isinstance(result, (tuple, list)):
        return _("a {type} of {length}").format(type=type(result).__name__, length=len(result))
    return _("one {type}").format(type=type(result).__name__)


# --------------------------------------------------------------------------- sliding_window_mask(n, window)

WINDOW_MASK = "sliding_window_mask"


def window_call(n: int, window: int, *, behaviour: str) -> Call:
    return Call(args=(int(n), int(window)), label=f"{WINDOW_MASK}({int(n)}, {int(window)})", behaviour=behaviour)


def judge_window_mask(call: Call, result, reveal: bool) -> Verdict:
    """Compare with :func:`qkv.sliding_window_mask`; name a window one too wide, one side only, inverted."""
    n, window = call.args
    expected = sliding_window_mask(n, window)  # (n, n)
    distance = np.abs(np.arange(n)[:, None] - np.arange(n)[None, :])
    slip_values = [(slips.WINDOW_ONE_TOO_WIDE, distance <= window),
                   (slips.WINDOW_ONE_SIDED, expected & np.tril(np.ones((n, n), dtype=bool))),
                   (slips.WINDOW_INVERTED, ~expected)]
    slip_values = [(slip, value) for slip, value in slip_values if not np.array_equal(value, expected)]
    return judge_boolean(result, _(call.label), expected, slip_values, reveal=reveal,
                         shape_help=_("one row per query ({rows}), one column per key ({cols})").format(rows=n, cols=n),
                         what=_("a boolean array of shape ({n}, {n}), True where |i - j| < window").format(n=n))


def random_window_calls(rng: np.random.Generator) -> list[Call]:
    calls = []
    for n in rng.choice(np.arange(3, 14), 3, replace=False):
        calls.append(window_call(int(n), int(rng.integers(1, n)), behaviour=N_("a window shorter than n")))
    calls.append(window_call(int(rng.integers(2, 6)), int(rng.integers(6, 9)), behaviour=N_("a window of n or more")))
    return calls


# --------------------------------------------------------------------------- decode(X, W_Q, W_K, W_V)

DECODE = "decode"


def decode_call(X, W_Q, W_K, W_V, *, what: str, behaviour: str) -> Call:
    X, W_Q, W_K, W_V = (np.asarray(M, dtype=float) for M in (X, W_Q, W_K, W_V))
    return Call(args=(X, W_Q, W_K, W_V), label=f"{DECODE}({what})", behaviour=behaviour)


def decode_with_slip(X, W_Q, W_K, W_V, slip) -> np.ndarray | None:
    """The outputs of the decode loop with one slip (None where it cannot be made)."""
    Q, K, V = X @ W_Q, X @ W_K, X @ W_V
    n = len(X)
    scale = 1.0 if slip is NO_SQRT_DK else np.sqrt(Q.shape[-1])
    if slip is slips.APPENDED_AFTER_USE:  # token t reads tokens 0 .. t-1; the first token reads itself
        allowed = np.tril(np.ones((n, n), dtype=bool), k=-1) | np.eye(n, k=0, dtype=bool) * (np.arange(n) == 0)
    elif slip is slips.NOT_CAUSAL:
        allowed = np.ones((n, n), dtype=bool)
    else:
        allowed = np.tril(np.ones((n, n), dtype=bool))
    scores = np.where(allowed, Q @ K.T / scale, -np.inf)
    return softmax(scores) @ V


DECODE_SLIPS = (slips.APPENDED_AFTER_USE, slips.NOT_CAUSAL, NO_SQRT_DK)


def judge_decode(call: Call, result, reveal: bool) -> Verdict:
    """Compare the outputs with :func:`qkv.decode_with_cache`; name the cache appended after use."""
    expected = decode_with_cache(*call.args)[0]
    n, d_v = expected.shape
    expectation = Expectation(
        expected, CODE_TOLERANCE,
        shape_help=_("({n}, {d_v}): one output row per token, in the order written").format(n=n, d_v=d_v),
        slip_values=lambda: [(slip, decode_with_slip(*call.args, slip)) for slip in DECODE_SLIPS],
        what=_("an array"))
    return judge_value(result, _(call.label), expectation, reveal=reveal)


def explain_decode_error(call: Call, raised: Raised) -> str | None:
    """The likely slip behind an error at the first token: the cache read while still empty."""
    if any(word in raised.message for word in ("zero-size", "empty", "identity")):
        return slips.APPENDED_AFTER_USE.advice
    return None


def random_decode_call(rng: np.random.Generator, n: int, d_model: int, d_k: int, d_v: int, behaviour: str) -> Call:
    X = rng.normal(size=(n, d_model))
    W_Q, W_K = rng.normal(size=(d_model, d_k)), rng.normal(size=(d_model, d_k))
    W_V = rng.normal(size=(d_model, d_v))
    return decode_call(X, W_Q, W_K, W_V, what=f"X {shape_str(X.shape)}, d_k = {d_k}, d_v = {d_v}",
                       behaviour=behaviour)


def random_decode_calls(rng: np.random.Generator) -> list[Call]:
    return [random_decode_call(rng, 6, 4, 2, 3, N_("n tokens")), random_decode_call(rng, 9, 8, 4, 2, N_("n tokens")),
            random_decode_call(rng, 1, 3, 2, 2, N_("one token"))]


# --------------------------------------------------------------------------- the checks

_gqa_check = function_checks(GQA, judge_gqa, explain_gqa_error)
_window_check = function_checks(WINDOW_MASK, judge_window_mask)
_decode_check = function_checks(DECODE, judge_decode, explain_decode_error)


def _your_gqa(g, rng) -> list[Call]:
    Q = g["Q_gqa"][:, None, :]  # (h, 1, d_k): 補償's query in every head
    return [gqa_call(Q, g["K_gqa"], g["V_gqa"], what=_("your Q_gqa[:, None, :], K_gqa, V_gqa"),
                     behaviour=N_("grouped heads"))]


PROBLEM_SET = ProblemSet(
    name="ps13_inference",
    title=N_("Problem set 13: attention at inference"),
    givens=givens,
    checks=(
        ValueCheck("new_key", "K_cache_3", _step("K_cache_3"),
                   "K_cache_3 is the key cache with 補償's key x_3 W_K + b_K appended, within 0.01."),
        ValueCheck("step_scores", "scores_3", _step("scores_3"),
                   "scores_3 is 補償's query against the 3 cached keys, scaled by sqrt(d_k), within 0.01."),
        ValueCheck("step_weights", "weights_3", _step("weights_3"),
                   "weights_3 is the softmax of scores_3, each entry within 0.01."),
        ValueCheck("step_output", "output_3", _step("output_3"),
                   "output_3 is weights_3 times the 3 cached values, each entry within 0.01."),
        ValueCheck("cache_size", "cache_gib", _expect_cache,
                   "cache_gib is the GiB of the model's key-value cache, within 0.01."),
        ValueCheck("cache_saving", "gqa_saving", _expect_saving,
                   "gqa_saving is how many times smaller the grouped cache is than one head per query head, "
                   "exactly."),
        ValueCheck("kv_head_of_query_head", "kv_head", _gqa("kv_head"),
                   "kv_head is the key/value head that query head i reads, exactly."),
        ValueCheck("grouped_head_weights", "weights_gqa", _gqa("weights_gqa"),
                   "weights_gqa is query head i's weights for 補償 over its group's keys, within 0.01."),
        ValueCheck("window_entries", "kept", _window("kept"),
                   "kept lists the cache entries the token keeps under the causal window, exactly."),
        ValueCheck("window_pairs", "pairs_kept", _window("pairs_kept"),
                   "pairs_kept is the number of (query, key) pairs the causal window keeps, exactly."),
        ValueCheck("alibi_slope", "slope", _alibi("slope"), "slope is ALiBi's slope of head k of h, within 0.01."),
        ValueCheck("alibi_biased_row", "biased_row", _alibi("biased_row"),
                   "biased_row is 永和路's scores with ALiBi's bias added, each entry within 0.01."),
        ValueCheck("alibi_weights", "weights_alibi", _alibi("weights_alibi"),
                   "weights_alibi is the softmax of biased_row, each entry within 0.01."),
        _gqa_check("gqa_yours", _your_gqa,
                   "grouped_query_attention on your query heads over your key/value heads, to 1e-6."),
        _gqa_check("gqa_other_groupings",
                   lambda g, rng: [random_gqa_call(rng, *shapes, behaviour) for behaviour, shapes in GQA_CASES],
                   "grouped_query_attention with 2, 3, 1 (multi-query) and h (multi-head) key/value heads, to 1e-6."),
        _gqa_check("gqa_random", lambda g, rng: random_gqa_calls(rng),
                   "grouped_query_attention matches qkv.grouped_query_attention on random inputs of every kind.",
                   hidden=True),
        _window_check("window_mask_small",
                      lambda g, rng: [window_call(6, 3, behaviour=N_("a window shorter than n")),
                                      window_call(5, 1, behaviour=N_("a window shorter than n")),
                                      window_call(4, 9, behaviour=N_("a window of n or more"))],
                      "sliding_window_mask(6, 3), (5, 1) and (4, 9) are qkv.sliding_window_mask."),
        _window_check("window_mask_random", lambda g, rng: random_window_calls(rng),
                      "sliding_window_mask is qkv.sliding_window_mask for other n and windows.", hidden=True),
        _decode_check("decode_yours",
                      lambda g, rng: [decode_call(g["X_delivery"], g["W_Q"], g["W_K"], g["W_V"],
                                                  what=_("your X, W_Q, W_K, W_V"), behaviour="n tokens")],
                      "decode on your 外送 晚到 補償 gives the causal full pass, to 1e-6."),
        _decode_check("decode_other_sequences",
                      lambda g, rng: [random_decode_call(rng, 7, 4, 2, 3, "n tokens"),
                                      random_decode_call(rng, 1, 3, 2, 2, N_("one token"))],
                      "decode on 7 tokens with d_v != d_k, and on one token, to 1e-6."),
        _decode_check("decode_random", lambda g, rng: random_decode_calls(rng),
                      "decode matches qkv.decode_with_cache on random sequences, to 1e-6.", hidden=True),
    ),
)
