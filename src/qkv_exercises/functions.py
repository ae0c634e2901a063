"""The functions students write: the inputs each check calls them on, and how each result is judged.

For every function there are call builders (the inputs of a visible check come from
the student's givens and a generator seeded from the check; a hidden check's from a
generator seeded at grading) and a judge, ``judge_<function>(call, result, reveal)``,
which computes the expected result with qkv from the call's own inputs and compares
with :func:`~qkv_exercises.checking.judge_value`, naming the likely slip. Every call
carries a ``behaviour``; each behaviour a hidden check tries is tried by a visible
check too, on other inputs.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence

import numpy as np

from qkv.attention import causal_mask, softmax
from qkv.block import layer_norm
from qkv.blockwise import online_softmax_update
from qkv.masks import padding_mask
from qkv.multihead import fused_multi_head_attention, merge_heads, split_heads
from qkv.position import sinusoidal_position_encoding
from qkv.validate import shape_str

from . import slips
from .answers import Rng
from .checking import (
    CODE_TOLERANCE,
    Expectation,
    Verdict,
    _Unusable,
    as_numbers,
    describe_input,
    format_number,
    judge_value,
    likely_slip,
)
from .checks import Call, Raised
from .expectations import LAYER_ARRAYS, step_meaning
from .language import N_, _, ngettext
from .problem_sets.ps4_single_head_slips import WRONG_AXIS
from .problem_sets.ps7_masks_slips import (
    DIAGONAL_BLOCKED,
    MASK_AFTER_SOFTMAX,
    MASK_INVERTED,
    MASK_NOT_APPLIED,
    MASK_WRONG_TRIANGLE,
    MASK_ZERO_NOT_NEG_INF,
    PADDING_OFF_BY_ONE,
    PADDING_QUERY_AXIS_MISSING,
    masked_softmax_steps,
)
from .problem_sets.ps8_position_slips import (
    DEGREES_NOT_RADIANS,
    EXPONENT_I_NOT_2I,
    EXPONENT_SIGN,
    POSITIONS_FROM_ONE,
    SINES_THEN_COSINES,
    SIN_COS_SWAPPED,
    encoding_with_slip,
)
from .problem_sets.ps9_block_slips import (
    LAYER_NORM_SLIPS,
    STATISTICS_WITHOUT_KEEPDIMS,
    layer_norm_with_slip,
)
from .problem_sets.ps10_online_softmax_slips import ONLINE_SLIPS, fold_with_slip, online_steps
from .problem_sets.ps11_soft_lookup_slips import KERNEL_SLIPS, kernel_steps
from .problem_sets.ps12_trained_model_slips import LAYER_ATTENTION_SLIPS, layer_attention_with_slip

SIMULATION_TOLERANCE = 0.10  # a simulated variance passes within 10% of the exact one
SIMULATION_SAMPLES = 20_000

OVERFLOW_HINT = N_("Large scores overflow e^s: subtract the maximum along the axis from the scores before taking "
                    "the exponential (the softmax does not change).")


def random_halves(rng: np.random.Generator, shape: tuple[int, ...], low: float = -2, high: float = 2) -> np.ndarray:
    """Multiples of 0.5 from ``low`` to ``high``: inputs a student can follow by hand."""
    return rng.integers(int(2 * low), int(2 * high) + 1, size=shape) / 2


# --------------------------------------------------------------------------- softmax(x, axis=-1)

SOFTMAX = "softmax"


def softmax_call(scores, axis: int | None, *, what: str, behaviour: str) -> Call:
    """``softmax(scores)`` (``axis`` None: the default axis) or ``softmax(scores, axis=axis)``."""
    scores = np.asarray(scores, dtype=float)
    kwargs = {} if axis is None else {"axis": axis}
    label = f"{SOFTMAX}({what}{'' if axis is None else f', axis={axis}'})"
    return Call(args=(scores,), kwargs=kwargs, label=label, behaviour=behaviour)


def random_softmax_calls(rng: np.random.Generator) -> list[Call]:
    """Random scores trying every behaviour of softmax: 1-D, rows, axis 0, 3-D along two axes, large scores."""
    cases = [((int(rng.integers(4, 9)),), None, N_("1-D, default axis")), ((4, 5), -1, N_("rows of a matrix")),
             ((5, 3), 0, N_("axis 0")), ((3, 4, 6), 1, N_("3-D, middle axis")), ((2, 3, 5), -1, N_("3-D, last axis"))]
    calls = []
    for shape, axis, behaviour in cases:
        scores = rng.normal(scale=4.0, size=shape)
        calls.append(softmax_call(scores, axis, what=_("an array of shape {shape}").format(shape=shape_str(shape)),
                                  behaviour=behaviour))
    large = 500 + rng.normal(scale=4.0, size=6)
    calls.append(softmax_call(large, None, what=_("scores near 500"), behaviour=N_("large scores")))
    return calls


def judge_softmax(call: Call, result, reveal: bool) -> Verdict:
    """Compare ``softmax(scores, axis)`` with :func:`qkv.softmax`; name a slip (wrong axis, no exponential, ...)."""
    (scores,) = call.args
    axis = call.kwargs.get("axis", -1)
    slip_values = list(slips.softmax_slip_values(scores, axis))
    for other in range(scores.ndim):
        if other != axis % scores.ndim:
            slip = slips.SOFTMAX_OVER_COLUMNS if scores.ndim == 2 and axis % 2 == 1 else WRONG_AXIS
            slip_values.append((slip, softmax(scores, axis=other)))
    expectation = Expectation(softmax(scores, axis=axis), CODE_TOLERANCE, shape_help=N_("the shape of the scores"),
                              slip_values=slip_values, nonfinite_hint=_(OVERFLOW_HINT), what=N_("an array"))
    return judge_value(result, call.label, expectation, reveal=reveal)


def explain_softmax_error(call: Call, raised: Raised) -> str | None:
    """The likely slip behind an error: sums that do not broadcast back (no keepdims)."""
    if "broadcast" in raised.message:
        return slips.MISSING_KEEPDIMS.advice
    return None


# --------------------------------------------------------------------------- scaled_dot_product_attention(Q, K, V)

ATTENTION = "scaled_dot_product_attention"


def attention_call(Q, K, V, *, behaviour: str, what: str = "") -> Call:
    Q, K, V = (np.asarray(M, dtype=float) for M in (Q, K, V))
    shapes = f"Q {shape_str(Q.shape)}, K {shape_str(K.shape)}, V {shape_str(V.shape)}"
    return Call(args=(Q, K, V), label=f"{ATTENTION}({what or shapes})", behaviour=behaviour)


def random_attention_calls(rng: np.random.Generator) -> list[Call]:
    """Random Q, K, V: self-attention (n_q = n_k), cross-attention (n_q != n_k, d_v != d_k), one query."""
    calls = []
    for n_q, n_k, d_k, d_v, behaviour in [(3, 3, 4, 4, "n_q = n_k"), (2, 5, 3, 6, "n_q != n_k, d_v != d_k"),
                                          (6, 4, 8, 2, "n_q != n_k, d_v != d_k"), (1, 7, 16, 3, N_("one query"))]:
        Q, K, V = rng.normal(size=(n_q, d_k)), rng.normal(size=(n_k, d_k)), rng.normal(size=(n_k, d_v))
        calls.append(attention_call(Q, K, V, behaviour=behaviour))
    return calls


def judge_attention(call: Call, result, reveal: bool) -> Verdict:
    """Compare ``(output, weights)`` with :func:`qkv.scaled_dot_product_attention`; name a slip."""
    Q, K, V = call.args
    not_a_pair = not_a_tuple(call, result, "output, weights")
    if not_a_pair:
        return not_a_pair
    output, weights = result
    steps = slips.attention_steps(Q, K, V)
    if _looks_swapped(output, weights, steps):
        return Verdict(False, _("{call} returned the weights first.").format(call=_(call.label)) + "\n"
                       + likely_slip(slips.OUTPUT_AND_WEIGHTS_SWAPPED.advice))
    slip_steps = functools.cache(lambda: [(slip, slips.attention_steps(Q, K, V, slip))
                                          for slip in slips.ATTENTION_SLIPS])
    for part, step in ((weights, "A"), (output, "O")):
        expectation = Expectation(steps[step], CODE_TOLERANCE, shape_help=step_meaning(step, steps[step]),
                                  slip_values=slips.each_part(slip_steps, step),
                                  nonfinite_hint=_(OVERFLOW_HINT), what=N_("an array"))
        name = (_("the weights of {call}") if step == "A" else _("the output of {call}")).format(call=_(call.label))
        verdict = judge_value(part, name, expectation, reveal=reveal)
        if not verdict.passed:
            return verdict
    return Verdict(True, _("{call} is correct.").format(call=_(call.label)))


def _looks_swapped(output, weights, steps) -> bool:
    """Whether ``output`` is the weights and ``weights`` the output."""
    try:
        first, second = as_numbers(output, "output"), as_numbers(weights, "weights")
    except _Unusable:
        return False
    A, O = steps["A"], steps["O"]
    if first.shape != A.shape or second.shape != O.shape:
        return False
    with np.errstate(all="ignore"):
        swapped = np.allclose(first, A, atol=1e-3) and np.allclose(second, O, atol=1e-3)
        return bool(swapped and not (A.shape == O.shape and np.allclose(A, O, atol=1e-3)))


def explain_attention_error(call: Call, raised: Raised) -> str | None:
    """The likely slip behind an error: K where K^T belongs (the shapes of a product do not fit), or no keepdims."""
    if raised.type_name == "ValueError" and any(word in raised.message for word in ("matmul", "not aligned",
                                                                                    "core dimension")):
        Q, K = call.args[:2]
        shapes = _("Q is {Q} and K is {K}: Q K does not fit, Q K^T is {QKT}.").format(
            Q=shape_str(Q.shape), K=shape_str(K.shape), QKT=shape_str((Q.shape[0], K.shape[0])))
        return slips.K_NOT_TRANSPOSED.advice + " " + shapes
    if "broadcast" in raised.message:
        return slips.MISSING_KEEPDIMS.advice
    return None


# --------------------------------------------------------------------------- split_heads(Z, num_heads), merge_heads(Z)

SPLIT, MERGE = "split_heads", "merge_heads"


def split_call(Z, num_heads: int, *, behaviour: str, what: str = "") -> Call:
    Z = np.asarray(Z, dtype=float)
    return Call(args=(Z, num_heads), label=f"{SPLIT}({what or f'Z {shape_str(Z.shape)}'}, {num_heads})",
                behaviour=behaviour)


def merge_call(Z, *, behaviour: str, what: str = "") -> Call:
    Z = np.asarray(Z, dtype=float)
    return Call(args=(Z,), label=f"{MERGE}({what or f'Z {shape_str(Z.shape)}'})", behaviour=behaviour)


_RANDOM_HEAD_SHAPES = [(5, 2, 3, N_("2 heads")), (4, 4, 2, N_("more than 2 heads")), (7, 3, 5, N_("more than 2 heads")),
                       (1, 8, 4, N_("one token"))]  # (n, h, d_k, behaviour)


def random_split_calls(rng: np.random.Generator) -> list[Call]:
    return [split_call(rng.normal(size=(n, h * d_k)), h, behaviour=b) for n, h, d_k, b in _RANDOM_HEAD_SHAPES]


def random_merge_calls(rng: np.random.Generator) -> list[Call]:
    calls = [merge_call(rng.normal(size=(h, n, d_k)), behaviour=b) for n, h, d_k, b in _RANDOM_HEAD_SHAPES]
    n, h, d_k = 3, 4, 2
    Z = rng.normal(size=(n, h * d_k))
    calls.append(merge_call(split_heads(Z, h), what=f"split_heads(Z {shape_str(Z.shape)}, {h})",
                            behaviour=N_("undoes split_heads")))
    return calls


def judge_split_heads(call: Call, result, reveal: bool) -> Verdict:
    """Compare with :func:`qkv.split_heads`; name the reshape without the transpose."""
    Z, num_heads = call.args
    expectation = Expectation(
        split_heads(Z, num_heads), CODE_TOLERANCE,
        shape_help=N_("(h, n, d_k): one block per head, one row per token in each"),
        slip_values=[(slips.RESHAPED_WITHOUT_TRANSPOSE,
                      slips.split_heads_with_slip(Z, num_heads, slips.RESHAPED_WITHOUT_TRANSPOSE))],
        what=N_("an array"))
    return judge_value(result, _(call.label), expectation, reveal=reveal)


def judge_merge_heads(call: Call, result, reveal: bool) -> Verdict:
    """Compare with :func:`qkv.merge_heads`; name the reshape without the transpose."""
    (Z,) = call.args
    expectation = Expectation(
        merge_heads(Z), CODE_TOLERANCE,
        shape_help=N_("(n, h * d_k): one row per token, the heads' columns side by side"),
        slip_values=[(slips.MERGED_WITHOUT_TRANSPOSE,
                      slips.merge_heads_with_slip(Z, slips.MERGED_WITHOUT_TRANSPOSE))],
        what=N_("an array"))
    return judge_value(result, _(call.label), expectation, reveal=reveal)


# --------------------------------------------------------------------------- sample_dot_products(d_k, n_samples, rng)

SAMPLE = "sample_dot_products"


def sample_call(d_k: int, n_samples: int, seed: int, *, behaviour: str) -> Call:
    """``sample_dot_products(d_k, n_samples, rng)`` with ``rng = np.random.default_rng(seed)``."""
    return Call(args=(int(d_k), int(n_samples), Rng(int(seed))),
                label=f"{SAMPLE}({d_k}, {n_samples}, rng)", behaviour=behaviour)


def _samples(call: Call, result) -> np.ndarray:
    """The result as an array of ``n_samples`` numbers, or raise :class:`_Unusable` saying why not."""
    samples = as_numbers(result, call.label, what=_("an array of sample dot products"))
    n_samples = call.args[1]
    if samples.shape != (n_samples,):
        raise _Unusable(_("{call} has shape {shape} but should have shape ({count},): one dot product q.k per "
                          "sample.").format(call=call.label, shape=shape_str(samples.shape), count=n_samples))
    return samples


def simulated_variance_judge(*, scaled: bool):
    """A judge of a simulation by the variance of its samples (divided by sqrt(d_k) with ``scaled``), graded by range.

    The variance of standard normal q . k is d_k (of q . k / sqrt(d_k): 1); the samples'
    variance must lie within :data:`SIMULATION_TOLERANCE` of it.
    """

    def judge(call: Call, result, reveal: bool) -> Verdict:
        d_k = call.args[0]
        try:
            samples = _samples(call, result)
        except _Unusable as unusable:
            return Verdict(False, str(unusable))
        exact = float(d_k)
        what = _("Var(q.k) of {call}").format(call=call.label)
        if scaled:
            samples, exact = samples / np.sqrt(d_k), 1.0
            what = _("Var(q.k / sqrt({d_k})) of {call}").format(d_k=d_k, call=call.label)
        variance = float(np.var(samples))
        fields = {"what": what, "variance": f"{variance:.4g}", "tolerance": f"{SIMULATION_TOLERANCE:.0%}"}
        if abs(variance - exact) <= SIMULATION_TOLERANCE * exact:
            return Verdict(True, _("the simulated {what} is within {tolerance} of the exact value.").format(**fields))
        if variance > exact:
            lines = [_("the simulated {what} is {variance}: too large (it counts within {tolerance} of the exact "
                       "value).").format(**fields)]
        else:
            lines = [_("the simulated {what} is {variance}: too small (it counts within {tolerance} of the exact "
                       "value).").format(**fields)]
        if abs(variance) < 1e-12:
            lines.append(_("All your samples are equal: draw new random q and k for every sample."))
        elif abs(variance - np.sqrt(exact)) <= SIMULATION_TOLERANCE * np.sqrt(exact) and exact != 1:
            lines.append(_("That is near the square root of the variance: is each component's variance 1 "
                           "(rng.standard_normal)?"))
        elif not scaled and abs(variance - 1) <= SIMULATION_TOLERANCE:
            lines.append(_("That is the variance after dividing by sqrt(d_k): return the raw dot products q.k."))
        return Verdict(False, "\n".join(lines))

    return judge


def judge_samples_shape(call: Call, result, reveal: bool) -> Verdict:
    """One call of a simulation returned ``n_samples`` finite numbers."""
    try:
        _samples(call, result)
    except _Unusable as unusable:
        return Verdict(False, str(unusable))
    return Verdict(True, _("{call} returned {count} samples.").format(call=call.label, count=call.args[1]))


def rng_calls(rng: np.random.Generator, *, behaviour: str) -> list[Call]:
    """Four calls: two generators with the same seed, one with another seed, and many samples for the mean."""
    first, second, third = (int(s) for s in rng.integers(0, 2**31, size=3))
    return [sample_call(16, 200, first, behaviour=behaviour), sample_call(16, 200, first, behaviour=behaviour),
            sample_call(16, 200, second, behaviour=behaviour), sample_call(16, 2000, third, behaviour=behaviour)]


def judge_uses_its_rng(calls: Sequence[Call], results: Sequence, reveal: bool) -> Verdict:
    """The calls of :func:`rng_calls`: the same seed gives the same samples, another seed others, mean near 0."""
    same, again, other, many = (np.asarray(r, dtype=float) for r in results)
    if not np.array_equal(same, again):
        return Verdict(False, _("{name} returned different samples for two generators made with the same seed: "
                                "draw q and k with the rng it is given (rng.standard_normal), not with np.random "
                                "or a generator of your own.").format(name=SAMPLE))
    if np.allclose(same, other):
        return Verdict(False, _("{name} returned the same samples for generators with different seeds: draw q "
                                "and k with the rng it is given.").format(name=SAMPLE))
    if abs(many.mean()) > 0.5:  # the mean of 2000 samples of variance 16 has standard deviation ~0.09
        return Verdict(False, _("the mean of {call} is {mean}, far from 0: q and k have mean 0.").format(
            call=calls[3].label, mean=f"{many.mean():.3f}"))
    return Verdict(True, _("{name} draws its samples from the rng it is given.").format(name=SAMPLE))


# --------------------------------------------------------------------------- fold_block, online_softmax(blocks)

FOLD, ONLINE = "fold_block", "online_softmax"
ONLINE_OVERFLOW_HINT = N_("Large scores overflow e^s: measure every exponential from the running maximum, "
                           "e^(s - m), which is at most 1.")
FIRST_BLOCK = N_("first block (m = -inf, l = 0)")
LOWER_MAX, HIGHER_MAX = N_("block max lower than the running max"), N_("block max higher than the running max")
ONE_SCORE, LARGE_SCORES = N_("a block of one score"), N_("large scores")


def fold_call(m: float, l: float, block, *, behaviour: str, what: str = "") -> Call:
    """``fold_block(m, l, block)``: one block of scores folded into the running maximum and sum."""
    block = np.asarray(block, dtype=float)
    label = f"{FOLD}({what or f'{format_number(m)}, {format_number(l)}, {describe_input(block)}'})"
    return Call(args=(float(m), float(l), block), label=label, behaviour=behaviour)


def folded(m: float, l: float, block) -> tuple[float, float]:
    """``(m', l')`` from :func:`qkv.online_softmax_update`."""
    new_max, new_sum, *_others = online_softmax_update(np.array([m]), np.array([l]), np.asarray(block, dtype=float))
    return float(new_max[0]), float(new_sum[0])


def fold_calls_after(first, second, *, behaviour: str, what: str = "") -> list[Call]:
    """Two calls: ``first`` folded into nothing, then ``second`` folded into the state it leaves
    (named ``m_1, l_1, <what>`` with ``what``)."""
    m, l = folded(-np.inf, 0.0, first)
    return [fold_call(-np.inf, 0.0, first, behaviour=FIRST_BLOCK),
            fold_call(m, l, second, behaviour=behaviour, what=what and f"m_1, l_1, {what}")]


def random_fold_calls(rng: np.random.Generator) -> list[Call]:
    """A first block, then blocks whose maximum is lower, higher, one score, and scores near 500."""
    first = random_halves(rng, (int(rng.integers(2, 5)),), -3, 3)
    top = first.max()
    calls = fold_calls_after(first, top - 0.5 - random_halves(rng, (3,), 0, 2), behaviour=LOWER_MAX)
    m, l = folded(-np.inf, 0.0, first)
    calls.append(fold_call(m, l, top + random_halves(rng, (2,), -1, 2) + np.array([0.0, 2.5]), behaviour=HIGHER_MAX))
    calls.append(fold_call(m, l, random_halves(rng, (1,), -3, 3), behaviour=ONE_SCORE))
    large = 500 + random_halves(rng, (3,), -3, 3)
    calls += fold_calls_after(large, 500 + random_halves(rng, (2,), 1, 4), behaviour=LARGE_SCORES)[1:]
    return calls


def _pair(call: Call, result, what: str) -> Verdict | None:
    """A verdict when ``result`` is not a pair (a tuple or list of two), else None."""
    return not_a_tuple(call, result, what)


def not_a_tuple(call: Call, result, what: str, count: int = 2) -> Verdict | None:
    """A verdict when ``result`` is not a tuple (or list) of ``count`` (2: a pair, 3), else None; ``what`` is the
    return statement's names (``"output, weights"``)."""
    if isinstance(result, (tuple, list)) and len(result) == count:
        return None
    fields = {"call": _(call.label), "type": type(result).__name__, "what": what}
    if isinstance(result, (tuple, list)):
        found = _("{call} returned a {type} of {length}").format(length=len(result), **fields)
    else:
        found = _("{call} returned one {type}").format(**fields)
    wanted = (_("; it must return a pair: return {what}") if count == 2 else
              _("; it must return three arrays: return {what}")).format(**fields)
    return Verdict(False, found + wanted)


def judge_fold_block(call: Call, result, reveal: bool) -> Verdict:
    """Compare ``(m', l')`` with :func:`qkv.online_softmax_update`; name a slip (no rescaling, ...)."""
    m, l, block = call.args
    not_a_pair = _pair(call, result, "m_new, l_new")
    if not_a_pair:
        return not_a_pair
    slip_values = slips.merged(lambda: [(slip, np.array(fold_with_slip(m, l, block, slip)[:2]))
                                        for slip in ONLINE_SLIPS[:6]])
    expectation = Expectation(np.array(folded(m, l, block)), CODE_TOLERANCE, labels=(("m", "l"),),
                              shape_help=N_("the pair (m_new, l_new)"), slip_values=slip_values,
                              nonfinite_hint=_(ONLINE_OVERFLOW_HINT), what=N_("the pair (m_new, l_new)"))
    return judge_value(tuple(result), _(call.label), expectation, reveal=reveal)


def explain_fold_error(call: Call, raised: Raised) -> str | None:
    """The likely slip behind an error: ``max(m, block)`` compares a number with a whole array."""
    if "truth value of an array" in raised.message:
        return _("max(m, block) compares m with the whole block: take the block's largest score first, "
                 "max(m, block.max()).")
    return None


def online_call(blocks, *, behaviour: str, what: str = "") -> Call:
    """``online_softmax(blocks)``, the blocks a list of 1-D arrays."""
    blocks = [np.asarray(b, dtype=float) for b in blocks]
    shown = what or "[" + ", ".join(describe_input(b) for b in blocks) + "]"
    if not what and len(shown) > 60:
        shown = _("{count} blocks of a row of {scores} scores").format(count=len(blocks),
                                                                         scores=sum(len(b) for b in blocks))
    return Call(args=(blocks,), label=f"{ONLINE}({shown})", behaviour=behaviour)


def cut(scores, sizes) -> list[np.ndarray]:
    """``scores`` cut into consecutive blocks of the given sizes."""
    return np.split(np.asarray(scores, dtype=float), np.cumsum(sizes)[:-1])


def random_online_calls(rng: np.random.Generator) -> list[Call]:
    """Random rows: two blocks with the largest score first or last, more blocks, one score per block,
    scores near 1000."""
    calls = []
    for place, behaviour in ((0, N_("the largest score in the first block")),
                             (-1, N_("the largest score in a later block"))):
        scores = random_halves(rng, (5,), -3, 3)
        top = int(np.argmax(scores))
        scores[[place, top]] = scores[[top, place]]
        calls.append(online_call(cut(scores, (2, 3)), behaviour=behaviour))
    sizes = rng.integers(1, 4, size=int(rng.integers(4, 7)))
    calls.append(online_call(cut(random_halves(rng, (int(sizes.sum()),), -3, 3), sizes), behaviour=N_("more blocks")))
    calls.append(online_call(cut(random_halves(rng, (6,), -3, 3), (1,) * 6), behaviour=N_("blocks of one score")))
    calls.append(online_call(cut(1000 + rng.normal(scale=3.0, size=7), (3, 2, 2)), behaviour=LARGE_SCORES,
                             what=_("3 blocks of scores near 1000")))
    return calls


def judge_online_softmax(call: Call, result, reveal: bool) -> Verdict:
    """Compare ``(weights, running)`` with :func:`qkv.online_softmax`: the ``[m, l]`` after every block, then
    the weights; name a slip."""
    (blocks,) = call.args
    not_a_pair = _pair(call, result, "weights, running")
    if not_a_pair:
        return not_a_pair
    weights, running = result
    steps = online_steps(blocks)
    slipped = functools.cache(lambda: [(slip, online_steps(blocks, slip)) for slip in ONLINE_SLIPS])
    for part, step, shape_help in (
            (running, "running", _("one row [m, l] per block: ({count}, 2), returned second").format(
                count=len(blocks))),
            (weights, "weights", _("one weight per score ({count}), returned first").format(
                count=len(steps["weights"])))):
        expectation = Expectation(steps[step], CODE_TOLERANCE, shape_help=shape_help,
                                  slip_values=slips.merged(slips.each_part(slipped, step)),
                                  nonfinite_hint=_(ONLINE_OVERFLOW_HINT), what=N_("an array"))
        name = (_("the running of {call}") if step == "running" else _("the weights of {call}")).format(
            call=_(call.label))
        verdict = judge_value(part, name, expectation, reveal=reveal)
        if not verdict.passed:
            return verdict
    return Verdict(True, _("{call} is correct.").format(call=_(call.label)))


# --------------------------------------------------------------------------- gaussian_kernel_weights(Q, K, sigma)

KERNEL = "gaussian_kernel_weights"
UNDERFLOW_HINT = N_("Far from every key, every e^(exponent) underflows to 0 and 0 / 0 is nan: subtract the row's "
                     "largest exponent (the nearest key's) before taking e^x; the weights do not change.")
ONE_QUERY, SEVERAL_QUERIES = N_("one query"), N_("several queries (each row sums to 1)")
ONE_FEATURE, FAR_AWAY = N_("one feature (d = 1)"), N_("far from every key (a narrow kernel)")


def kernel_call(Q, K, sigma: float, *, behaviour: str, what: str = "") -> Call:
    Q, K = np.asarray(Q, dtype=float), np.asarray(K, dtype=float)
    shown = what or f"Q {shape_str(Q.shape)}, K {shape_str(K.shape)}"
    return Call(args=(Q, K, float(sigma)), label=f"{KERNEL}({shown}, sigma={format_number(sigma)})",
                behaviour=behaviour)


def random_kernel_calls(rng: np.random.Generator) -> list[Call]:
    """Random queries and keys: one query, several, one feature, and queries far from every key."""
    sigma = float(rng.choice([0.5, 1.0, 2.0]))
    calls = [kernel_call(sigma * random_halves(rng, (1, 2)), sigma * random_halves(rng, (4, 2)), sigma,
                         behaviour=ONE_QUERY),
             kernel_call(random_halves(rng, (3, 2)), random_halves(rng, (5, 2)), float(rng.choice([0.5, 1.0, 1.5])),
                         behaviour=SEVERAL_QUERIES),
             kernel_call(rng.uniform(0, 5, size=(6, 1)), rng.uniform(0, 5, size=(8, 1)), float(rng.uniform(0.2, 1.5)),
                         behaviour=ONE_FEATURE)]
    keys = random_halves(rng, (4, 3))
    calls.append(kernel_call(keys[:2] + 40 + random_halves(rng, (2, 3)), keys, 0.2, behaviour=FAR_AWAY))
    return calls


def judge_kernel_weights(call: Call, result, reveal: bool) -> Verdict:
    """Compare with :func:`qkv.gaussian_kernel_weights`; name a slip (no minus sign, sigma not squared, ...)."""
    Q, K, sigma = call.args
    values = np.zeros((len(K), 1))  # the weights do not depend on the values
    expectation = Expectation(
        kernel_steps(Q, K, values, sigma)["weights"], CODE_TOLERANCE,
        shape_help=N_("(n_q, n_k): one row per query, one column per key"),
        slip_values=slips.merged(lambda: [(s, kernel_steps(Q, K, values, sigma, s).get("weights"))
                                          for s in KERNEL_SLIPS]),
        nonfinite_hint=_(UNDERFLOW_HINT), what=N_("an array"))
    return judge_value(result, _(call.label), expectation, reveal=reveal)


def explain_kernel_error(call: Call, raised: Raised) -> str | None:
    """The likely slip behind an error: ``Q - K`` for arrays of different lengths."""
    if "broadcast" in raised.message:
        Q, K = call.args[:2]
        return _("Q - K subtracts row by row and needs equal shapes (here {Q} and {K}); for every query-key pair "
                 "write Q[:, None, :] - K[None, :, :], of shape {pairs}.").format(
            Q=shape_str(Q.shape), K=shape_str(K.shape), pairs=shape_str((len(Q), len(K), Q.shape[1])))
    return None
# --------------------------------------------------------------------------- masks (problem set 7)
# causal_mask(n) and masked_softmax(scores, mask)

CAUSAL_MASK, MASKED_SOFTMAX = "causal_mask", "masked_softmax"
MASK_NONFINITE_HINT = N_("0 * (-inf) is NaN: choose the blocked entries with np.where rather than by multiplying "
                        "with the mask.")
MASK_ALSO_NONFINITE_HINT = N_("(If you multiplied by the mask, 0 * (-inf) is NaN too: choose the blocked entries with "
                             "np.where.)")
LARGEST_EXPONENT = float(np.log(np.finfo(float).max))  # e^s overflows to inf above this (about 709.78)


def masked_nonfinite_hint(scores) -> str:
    """Why a masked softmax of ``scores`` came out NaN or infinite, the likelier cause first: an
    overflowing e^s when some score is too large for it, else 0 * (-inf) from a mask multiplied in."""
    if np.max(scores) > LARGEST_EXPONENT:
        return _(OVERFLOW_HINT) + " " + _(MASK_ALSO_NONFINITE_HINT)
    return _(MASK_NONFINITE_HINT) + " " + _(OVERFLOW_HINT)


def judge_boolean(result, label: str, expected: np.ndarray, slip_values, *, reveal: bool, shape_help: str,
                  what: str) -> Verdict:
    """Compare a boolean array with ``expected``: the first entry that is wrong, how many are, and the
    slip (an exact match of one of ``slip_values``, pairs of a slip and a boolean array)."""
    try:
        value = np.asarray(result)
    except Exception:  # an object of the student's own whose conversion fails
        return Verdict(False, _("{call} returned a {type}, which is not an array: return {what}.").format(
            call=label, type=type(result).__name__, what=what))
    if value.dtype.kind not in "biuf":
        return Verdict(False, _("{call} returned {type} of {dtype}: return {what}.").format(
            call=label, type=type(result).__name__, dtype=value.dtype, what=what))
    if value.shape != expected.shape:
        return Verdict(False, _("{name} has shape {shape} but should have shape {expected}").format(
            name=label, shape=shape_str(value.shape), expected=shape_str(expected.shape))
            + _(": {meaning}.").format(meaning=shape_help))
    if value.dtype.kind != "b":
        return Verdict(False, _("{call} holds numbers ({dtype}), not True/False: return {what}. (A mask of 1s and 0s "
                                "is easily read as weights, or as a mask added to the scores.)").format(
            call=label, dtype=value.dtype, what=what))
    wrong = value != expected
    if not wrong.any():
        return Verdict(True, _("{call} is correct ({count} entries).").format(call=label, count=expected.size))
    index = tuple(int(i) for i in np.argwhere(wrong)[0])
    where = f"{label}[{', '.join(map(str, index))}]"
    if value.ndim == 2:
        where += " " + _("(query {query}, key {key})").format(query=index[0], key=index[1])
    count = int(wrong.sum())
    fields = {"where": where, "value": bool(value[index]), "expected": bool(expected[index])}
    line = (_("{where} is {value}, which is wrong (expected {expected})") if reveal
            else _("{where} is {value}, which is wrong")).format(**fields)
    line += ngettext("; {count} of {size} entries is wrong.", "; {count} of {size} entries are wrong.",
                     count).format(count=count, size=expected.size)
    for slip, slipped in slip_values:
        if slipped is not None and slipped.shape == value.shape and np.array_equal(slipped, value):
            return Verdict(False, line + "\n" + likely_slip(slip.advice))
    return Verdict(False, line)


def causal_mask_call(n: int, *, behaviour: str) -> Call:
    return Call(args=(int(n),), label=f"{CAUSAL_MASK}({int(n)})", behaviour=behaviour)


def judge_causal_mask(call: Call, result, reveal: bool) -> Verdict:
    """Compare with :func:`qkv.causal_mask`; name the wrong triangle, a blocked diagonal, an inverted mask."""
    (n,) = call.args
    expected = causal_mask(n)  # (n, n)
    slip_values = [(MASK_WRONG_TRIANGLE, expected.T), (DIAGONAL_BLOCKED, np.tril(expected, k=-1)),
                   (MASK_INVERTED, ~expected)]
    slip_values = [(slip, value) for slip, value in slip_values if not np.array_equal(value, expected)]
    return judge_boolean(result, _(call.label), expected, slip_values, reveal=reveal,
                         shape_help=_("one row per query ({rows}), one column per key ({cols})").format(rows=n, cols=n),
                         what=_("a boolean array of shape ({n}, {n}), True where query i may attend to key j").format(
                             n=n))


def random_causal_mask_calls(rng: np.random.Generator) -> list[Call]:
    return [causal_mask_call(int(n), behaviour=N_("n tokens")) for n in rng.choice(np.arange(2, 13), 3, replace=False)]


PADDING_MASK = "padding_mask"


def padding_mask_call(lengths, n: int, *, behaviour: str) -> Call:
    """``padding_mask(lengths, n)``: ``lengths`` whole numbers from 1 to ``n``, one per sentence."""
    lengths = np.asarray(lengths, dtype=int)
    return Call(args=(lengths, int(n)), label=f"{PADDING_MASK}({lengths.tolist()}, {int(n)})", behaviour=behaviour)


def judge_padding_mask(call: Call, result, reveal: bool) -> Verdict:
    """Compare with :func:`qkv.padding_mask`; name a missing query axis, an inverted mask, a length off by one."""
    lengths, n = call.args
    expected = padding_mask(lengths, n)  # (batch, 1, n)
    try:
        shape = np.shape(result)
    except Exception:  # a ragged list: judge_boolean says what is wrong with it
        shape = None
    if shape == (len(lengths), n):
        return Verdict(False, _("{name} has shape {shape} but should have shape {expected}").format(
            name=_(call.label), shape=shape_str((len(lengths), n)), expected=shape_str(expected.shape)) + _(".")
            + "\n" + likely_slip(PADDING_QUERY_AXIS_MISSING.advice))
    keys = np.arange(n)  # (n,)
    off_by_one = (keys[None, :] <= np.asarray(lengths)[:, None])[:, None, :]  # (batch, 1, n): j <= l
    slip_values = [(MASK_INVERTED, ~expected), (PADDING_OFF_BY_ONE, off_by_one)]
    return judge_boolean(result, _(call.label), expected,
                         [(slip, value) for slip, value in slip_values if not np.array_equal(value, expected)],
                         reveal=reveal,
                         shape_help=_("one sentence per row ({rows}), one query axis of size 1, one column per key "
                                      "({n})").format(rows=len(lengths), n=n),
                         what=_("a boolean array of shape ({rows}, 1, {n}), True where key j is a real token").format(
                             rows=len(lengths), n=n))


def random_padding_mask_calls(rng: np.random.Generator) -> list[Call]:
    """Random batches of padded sentences, each with at least one sentence shorter than ``n``."""
    calls = []
    for _sentence in range(3):
        batch, n = int(rng.integers(2, 6)), int(rng.integers(2, 11))
        lengths = rng.integers(1, n + 1, size=batch)
        lengths[rng.integers(0, batch)] = int(rng.integers(1, n))  # some padding
        calls.append(padding_mask_call(lengths, n, behaviour=N_("padded sentences")))
    return calls


def masked_softmax_call(scores, mask, *, what: str, behaviour: str) -> Call:
    """``masked_softmax(scores, mask)``: ``mask`` boolean, broadcastable to the scores' shape."""
    scores, mask = np.asarray(scores, dtype=float), np.asarray(mask, dtype=bool)
    return Call(args=(scores, mask), label=f"{MASKED_SOFTMAX}({what})", behaviour=behaviour)


def padding_mask_of(lengths, n: int) -> np.ndarray:
    """The padding mask ``(batch, 1, n)`` of sentences of ``lengths`` real tokens (:func:`qkv.padding_mask`)."""
    return padding_mask(np.asarray(lengths), n)


def random_masked_softmax_calls(rng: np.random.Generator) -> list[Call]:
    """Random scores under every kind of mask the visible checks try: causal, padding, n_q != n_k, large scores."""
    n = int(rng.integers(3, 8))
    calls = [masked_softmax_call(rng.normal(scale=3.0, size=(n, n)), causal_mask(n),
                                 what=_("scores ({n}, {n}), causal_mask({n})").format(n=n),
                                 behaviour=N_("causal mask"))]
    batch, n = int(rng.integers(2, 5)), int(rng.integers(3, 7))
    lengths = rng.integers(1, n + 1, size=batch)
    calls.append(masked_softmax_call(rng.normal(scale=3.0, size=(batch, n, n)), padding_mask_of(lengths, n),
                                     what=_("scores ({batch}, {n}, {n}), a padding mask ({batch}, 1, {n})").format(
                                         batch=batch, n=n),
                                     behaviour=N_("padding mask, broadcast over the queries")))
    n_q, n_k = int(rng.integers(1, 5)), int(rng.integers(5, 9))
    mask = rng.random((n_q, n_k)) < 0.6
    mask[np.arange(n_q), rng.integers(0, n_k, size=n_q)] = True  # every query keeps a key
    calls.append(masked_softmax_call(rng.normal(scale=3.0, size=(n_q, n_k)), mask,
                                     what=_("scores ({n_q}, {n_k}), a mask ({n_q}, {n_k})").format(n_q=n_q, n_k=n_k),
                                     behaviour="n_q != n_k"))
    n = int(rng.integers(3, 7))
    calls.append(masked_softmax_call(800 + rng.normal(scale=3.0, size=(n, n)), causal_mask(n),
                                     what=_("scores near 800 ({n}, {n}), causal_mask({n})").format(n=n),
                                     behaviour=LARGE_SCORES))
    return calls


def judge_masked_softmax(call: Call, result, reveal: bool) -> Verdict:
    """Compare with :func:`qkv.softmax` of the scores with the blocked ones at -inf; name the slip."""
    scores, mask = call.args
    candidates = [MASK_ZERO_NOT_NEG_INF, MASK_AFTER_SOFTMAX, MASK_INVERTED, MASK_NOT_APPLIED]
    full = np.broadcast_to(mask, scores.shape)
    if full.shape[-1] == full.shape[-2] and np.array_equal(full, np.broadcast_to(causal_mask(full.shape[-1]),
                                                                                full.shape)):
        candidates.append(MASK_WRONG_TRIANGLE)
    with np.errstate(over="ignore", invalid="ignore"):
        slip_values = [(slip, masked_softmax_steps(scores, mask, slip).get("A")) for slip in candidates]
    expectation = Expectation(masked_softmax_steps(scores, mask)["A"], CODE_TOLERANCE,
                              shape_help=N_("the shape of the scores"), slip_values=slip_values,
                              nonfinite_hint=masked_nonfinite_hint(scores), what=N_("an array"))
    return judge_value(result, _(call.label), expectation, reveal=reveal)


def explain_masked_softmax_error(call: Call, raised: Raised) -> str | None:
    """The likely slip behind an error: sums that do not broadcast back (no keepdims), a mask used as numbers."""
    if "broadcast" in raised.message:
        return slips.MISSING_KEEPDIMS.advice + " " + _("The mask may have fewer axes of size > 1 than the scores "
                                                       "(a padding mask is (batch, 1, n)): np.where broadcasts it.")
    if raised.type_name == "TypeError" and "boolean" in raised.message:
        return _("the mask holds True/False: use it to choose entries (np.where(mask, ...)), not in arithmetic.")
    return None


# --------------------------------------------------------------------------- position (problem set 8)
# sinusoidal_position_encoding(n, d_model)

ENCODING = "sinusoidal_position_encoding"


def encoding_call(n: int, d_model: int, *, behaviour: str) -> Call:
    return Call(args=(int(n), int(d_model)), label=f"{ENCODING}({int(n)}, {int(d_model)})", behaviour=behaviour)


def random_encoding_calls(rng: np.random.Generator) -> list[Call]:
    """Random tables of the kinds the visible checks try: d_model = 4, wider, one position."""
    return [encoding_call(int(rng.integers(2, 9)), 4, behaviour="d_model = 4"),
            encoding_call(int(rng.integers(10, 60)), 2 * int(rng.integers(3, 33)), behaviour=N_("wider d_model")),
            encoding_call(1, 2 * int(rng.integers(2, 9)), behaviour=N_("one position"))]


_ENCODING_FUNCTION_SLIPS = (SIN_COS_SWAPPED, SINES_THEN_COSINES, EXPONENT_I_NOT_2I,
                            EXPONENT_SIGN, POSITIONS_FROM_ONE, DEGREES_NOT_RADIANS)


def judge_encoding(call: Call, result, reveal: bool) -> Verdict:
    """Compare with :func:`qkv.sinusoidal_position_encoding`; name the slip (sin and cos swapped, i for 2i, ...)."""
    n, d_model = call.args
    positions = np.arange(n)
    expectation = Expectation(
        sinusoidal_position_encoding(n, d_model), CODE_TOLERANCE,
        shape_help=_("one row per position ({n}), one column per dimension ({d_model})").format(n=n, d_model=d_model),
        slip_values=lambda: [(slip, encoding_with_slip(positions, d_model, slip)) for slip in _ENCODING_FUNCTION_SLIPS],
        what=N_("an array"))
    return judge_value(result, _(call.label), expectation, reveal=reveal)



# --------------------------------------------------------------------------- layer_norm(X, gamma, beta, eps=1e-5)

LAYER_NORM = "layer_norm"
EPS_HINT = N_("A row whose entries are all equal has variance 0: divide by sqrt(variance + eps), so that the "
               "division stays finite.")


def layer_norm_call(X, gamma, beta, eps: float | None = None, *, what: str, behaviour: str) -> Call:
    """``layer_norm(X, gamma, beta)`` (``eps`` None: the default eps) or ``layer_norm(X, gamma, beta, eps=eps)``."""
    X, gamma, beta = (np.asarray(v, dtype=float) for v in (X, gamma, beta))
    kwargs = {} if eps is None else {"eps": float(eps)}
    label = f"{LAYER_NORM}({what}{'' if eps is None else f', eps={eps:g}'})"
    return Call(args=(X, gamma, beta), kwargs=kwargs, label=label, behaviour=behaviour)


def _norm_parameters(rng: np.random.Generator, d: int) -> tuple[np.ndarray, np.ndarray]:
    """gamma in halves from 0.5 to 2, beta in halves from -1 to 1."""
    return random_halves(rng, (d,), 0.5, 2), random_halves(rng, (d,), -1, 1)


def layer_norm_rows_call(rng: np.random.Generator, shape: tuple[int, int]) -> Call:
    X = random_halves(rng, shape, -3, 3)
    return layer_norm_call(X, np.ones(shape[-1]), np.zeros(shape[-1]),
                           what=_("an array of shape {shape}, gamma = 1, beta = 0").format(shape=shape_str(shape)),
                           behaviour=N_("rows"))


def layer_norm_gamma_beta_call(rng: np.random.Generator, shape: tuple[int, ...],
                               behaviour: str = N_("gamma and beta")) -> Call:
    gamma, beta = _norm_parameters(rng, shape[-1])
    return layer_norm_call(random_halves(rng, shape, -3, 3), gamma, beta,
                           what=_("an array of shape {shape}, gamma, beta").format(shape=shape_str(shape)),
                           behaviour=behaviour)


def layer_norm_eps_call(rng: np.random.Generator, eps: float | None, d: int) -> Call:
    """Two rows, the first of equal entries (variance 0: only eps keeps it finite); ``eps`` None: the default."""
    X = np.stack([np.full(d, float(rng.integers(-3, 4))), random_halves(rng, (d,), -2, 2)])  # (2, d)
    gamma, beta = _norm_parameters(rng, d)
    return layer_norm_call(X, gamma, beta, eps,
                           what=_("a row of equal entries and one more ({shape})").format(shape=shape_str(X.shape)),
                           behaviour="eps")


def layer_norm_large_call(rng: np.random.Generator, shape: tuple[int, int]) -> Call:
    """Rows near a million or more, spread by about 1: the variance from squares loses every digit."""
    offsets = 10.0 ** rng.integers(6, 8, size=(shape[0], 1)) * rng.integers(1, 10, size=(shape[0], 1))
    gamma, beta = _norm_parameters(rng, shape[1])
    return layer_norm_call(offsets + rng.normal(size=shape), gamma, beta,
                           what=_("rows near a million or more ({shape})").format(shape=shape_str(shape)),
                           behaviour=N_("large values"))


def random_layer_norm_calls(rng: np.random.Generator) -> list[Call]:
    """Random inputs trying every behaviour of layer_norm: rows, gamma and beta, eps, 3-D input, large values."""
    return [layer_norm_rows_call(rng, (int(rng.integers(2, 6)), int(rng.integers(3, 9)))),
            layer_norm_gamma_beta_call(rng, (int(rng.integers(2, 6)), int(rng.integers(3, 9)))),
            layer_norm_eps_call(rng, [None, 0.01, 0.1, 0.5, 2.0][int(rng.integers(5))], int(rng.integers(3, 7))),
            layer_norm_gamma_beta_call(rng, (2, int(rng.integers(2, 4)), int(rng.integers(3, 7))), N_("3-D input")),
            layer_norm_large_call(rng, (int(rng.integers(2, 4)), int(rng.integers(4, 8))))]


def judge_layer_norm(call: Call, result, reveal: bool) -> Verdict:
    """Compare ``layer_norm(X, gamma, beta, eps)`` with :func:`qkv.layer_norm`; name a slip."""
    X, gamma, beta = call.args
    eps = call.kwargs.get("eps", 1e-5)
    expectation = Expectation(
        layer_norm(X, gamma, beta, eps), CODE_TOLERANCE, shape_help=N_("the shape of X: each row normalised"),
        slip_values=lambda: [(slip, layer_norm_with_slip(X, gamma, beta, eps, slip)) for slip in LAYER_NORM_SLIPS],
        nonfinite_hint=_(EPS_HINT), what=N_("an array"))
    return judge_value(result, _(call.label), expectation, reveal=reveal)


def explain_layer_norm_error(call: Call, raised: Raised) -> str | None:
    """The likely slip behind an error: a mean or variance without keepdims that does not broadcast back."""
    if "broadcast" in raised.message:
        return STATISTICS_WITHOUT_KEEPDIMS.advice
    return None


# --------------------------------------------------------------------------- layer_attention(X, W_Q, ..., num_heads)

LAYER_ATTENTION = "layer_attention"


def layer_attention_call(X, arrays, num_heads: int, *, what: str, behaviour: str) -> Call:
    """``layer_attention(X, W_Q, b_Q, W_K, b_K, W_V, b_V, W_O, b_O, num_heads)`` with the fused ``arrays``
    (named as :data:`~qkv_exercises.expectations.LAYER_ARRAYS`)."""
    values = tuple(np.asarray(arrays[name], dtype=float) for name in LAYER_ARRAYS)
    return Call(args=(np.asarray(X, dtype=float), *values, int(num_heads)), label=f"{LAYER_ATTENTION}({what})",
                behaviour=behaviour)


def small_layer_call(rng: np.random.Generator, n: int, d_model: int, num_heads: int) -> Call:
    """A small layer of halves: ``n`` tokens of width ``d_model``, ``num_heads`` heads."""
    arrays = {name: random_halves(rng, (d_model, d_model) if name.startswith("W") else (d_model,), -1, 1)
              for name in LAYER_ARRAYS}
    return layer_attention_call(random_halves(rng, (n, d_model), -2, 2), arrays, num_heads,
                                what=_("{n} tokens of width {d_model}, {heads} heads").format(
                                    n=n, d_model=d_model, heads=num_heads),
                                behaviour=N_("a small layer"))


def random_small_layer_calls(rng: np.random.Generator) -> list[Call]:
    sizes = [(4, 6, 3), (5, 8, 4), (3, 6, 2), (1, 4, 2)]  # (n, d_model, h)
    n, d_model, num_heads = sizes[int(rng.integers(len(sizes)))]
    return [small_layer_call(rng, n, d_model, num_heads)]


def judge_layer_attention(call: Call, result, reveal: bool) -> Verdict:
    """Compare ``(output, weights)`` with :func:`qkv.fused_multi_head_attention` on the layer's arrays; name a slip."""
    X, W_Q, b_Q, W_K, b_K, W_V, b_V, W_O, b_O, num_heads = call.args
    not_a_pair = not_a_tuple(call, result, "output, weights")
    if not_a_pair:
        return not_a_pair
    output, weights = result
    expected_output, expected_weights = fused_multi_head_attention(X, W_Q, W_K, W_V, W_O, num_heads,
                                                                   b_Q, b_K, b_V, b_O)
    if _looks_swapped(output, weights, {"A": expected_weights, "O": expected_output}):
        return Verdict(False, _("{call} returned the weights first.").format(call=_(call.label)) + "\n"
                       + likely_slip(slips.OUTPUT_AND_WEIGHTS_SWAPPED.advice))
    slipped = functools.cache(lambda: [(slip, layer_attention_with_slip(*call.args, slip))
                                       for slip in LAYER_ATTENTION_SLIPS])
    n, d_out = expected_output.shape
    label = _(call.label)
    parts = ((weights, expected_weights, 1, _("the weights of {call}").format(call=label),
              _("(h, n, n) = {shape}: one map per head, one row per query token").format(
                  shape=shape_str(expected_weights.shape))),
             (output, expected_output, 0, _("the output of {call}").format(call=label),
              _("(n, d_model) = ({n}, {d_out}): one row per token").format(n=n, d_out=d_out)))
    for part, expected, index, name, shape_help in parts:
        expectation = Expectation(expected, CODE_TOLERANCE, shape_help=shape_help,
                                  slip_values=slips.each_part(slipped, index),
                                  nonfinite_hint=_(OVERFLOW_HINT), what=N_("an array"))
        verdict = judge_value(part, name, expectation, reveal=reveal)
        if not verdict.passed:
            return verdict
    return Verdict(True, _("{call} is correct.").format(call=label))


def explain_layer_attention_error(call: Call, raised: Raised) -> str | None:
    """The likely slip behind an error: K where K^T belongs, heads cut with a reshape that does not fit."""
    if raised.type_name == "ValueError" and any(word in raised.message for word in ("matmul", "not aligned",
                                                                                    "core dimension")):
        return _("the scores of every head are Q K^T: with Q and K of shape (h, n, d_k), write "
                 "Q @ K.transpose(0, 2, 1) (K.T would reverse all three axes).")
    if "reshape" in raised.message:
        return slips.RESHAPED_WITHOUT_TRANSPOSE.advice
    if "broadcast" in raised.message:
        return slips.MISSING_KEEPDIMS.advice
    return None
