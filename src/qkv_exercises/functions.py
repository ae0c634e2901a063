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

from collections.abc import Sequence

import numpy as np

from qkv.attention import softmax
from qkv.multihead import merge_heads, split_heads
from qkv.validate import shape_str

from . import slips
from .answers import Rng
from .checking import CODE_TOLERANCE, Expectation, Verdict, _Unusable, as_numbers, judge_value
from .checks import Call, Raised
from .expectations import step_meaning

SIMULATION_TOLERANCE = 0.10  # a simulated variance passes within 10% of the exact one
SIMULATION_SAMPLES = 20_000

OVERFLOW_HINT = ("Large scores overflow e^s: subtract the maximum along the axis from the scores before taking "
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
    cases = [((int(rng.integers(4, 9)),), None, "1-D, default axis"), ((4, 5), -1, "rows of a matrix"),
             ((5, 3), 0, "axis 0"), ((3, 4, 6), 1, "3-D, middle axis"), ((2, 3, 5), -1, "3-D, last axis")]
    calls = []
    for shape, axis, behaviour in cases:
        scores = rng.normal(scale=4.0, size=shape)
        calls.append(softmax_call(scores, axis, what=f"an array of shape {shape_str(shape)}", behaviour=behaviour))
    large = 500 + rng.normal(scale=4.0, size=6)
    calls.append(softmax_call(large, None, what="scores near 500", behaviour="large scores"))
    return calls


def judge_softmax(call: Call, result, reveal: bool) -> Verdict:
    """Compare ``softmax(scores, axis)`` with :func:`qkv.softmax`; name a slip (wrong axis, no exponential, ...)."""
    (scores,) = call.args
    axis = call.kwargs.get("axis", -1)
    slip_values = list(slips.softmax_slip_values(scores, axis))
    for other in range(scores.ndim):
        if other != axis % scores.ndim:
            slip = slips.SOFTMAX_OVER_COLUMNS if scores.ndim == 2 and axis % 2 == 1 else slips.WRONG_AXIS
            slip_values.append((slip, softmax(scores, axis=other)))
    expectation = Expectation(softmax(scores, axis=axis), CODE_TOLERANCE, shape_help="the shape of the scores",
                              slip_values=slip_values, nonfinite_hint=OVERFLOW_HINT, what="an array")
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
                                          (6, 4, 8, 2, "n_q != n_k, d_v != d_k"), (1, 7, 16, 3, "one query")]:
        Q, K, V = rng.normal(size=(n_q, d_k)), rng.normal(size=(n_k, d_k)), rng.normal(size=(n_k, d_v))
        calls.append(attention_call(Q, K, V, behaviour=behaviour))
    return calls


def judge_attention(call: Call, result, reveal: bool) -> Verdict:
    """Compare ``(output, weights)`` with :func:`qkv.scaled_dot_product_attention`; name a slip."""
    Q, K, V = call.args
    if not isinstance(result, (tuple, list)) or len(result) != 2:
        kind = f"a {type(result).__name__} of {len(result)}" if isinstance(result, (tuple, list)) else (
            f"one {type(result).__name__}")
        return Verdict(False, f"{call.label} returned {kind}; it must return a pair: return output, weights")
    output, weights = result
    steps = slips.attention_steps(Q, K, V)
    if _looks_swapped(output, weights, steps):
        return Verdict(False, f"{call.label} returned the weights first.\n"
                              f"Likely slip: {slips.OUTPUT_AND_WEIGHTS_SWAPPED.advice}")
    slip_steps = [(slip, slips.attention_steps(Q, K, V, slip)) for slip in slips.ATTENTION_SLIPS]
    for part, step in ((weights, "A"), (output, "O")):
        expectation = Expectation(steps[step], CODE_TOLERANCE, shape_help=step_meaning(step, steps[step]),
                                  slip_values=[(s, v.get(step)) for s, v in slip_steps],
                                  nonfinite_hint=OVERFLOW_HINT, what="an array")
        name = f"the {'weights' if step == 'A' else 'output'} of {call.label}"
        verdict = judge_value(part, name, expectation, reveal=reveal)
        if not verdict.passed:
            return verdict
    return Verdict(True, f"{call.label} is correct.")


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
        Q, K, _ = call.args
        return (f"{slips.K_NOT_TRANSPOSED.advice} Q is {shape_str(Q.shape)} and K is {shape_str(K.shape)}: "
                f"Q K does not fit, Q K^T is {shape_str((Q.shape[0], K.shape[0]))}.")
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


_RANDOM_HEAD_SHAPES = [(5, 2, 3, "2 heads"), (4, 4, 2, "more than 2 heads"), (7, 3, 5, "more than 2 heads"),
                       (1, 8, 4, "one token")]  # (n, h, d_k, behaviour)


def random_split_calls(rng: np.random.Generator) -> list[Call]:
    return [split_call(rng.normal(size=(n, h * d_k)), h, behaviour=b) for n, h, d_k, b in _RANDOM_HEAD_SHAPES]


def random_merge_calls(rng: np.random.Generator) -> list[Call]:
    calls = [merge_call(rng.normal(size=(h, n, d_k)), behaviour=b) for n, h, d_k, b in _RANDOM_HEAD_SHAPES]
    n, h, d_k = 3, 4, 2
    Z = rng.normal(size=(n, h * d_k))
    calls.append(merge_call(split_heads(Z, h), what=f"split_heads(Z {shape_str(Z.shape)}, {h})",
                            behaviour="undoes split_heads"))
    return calls


def judge_split_heads(call: Call, result, reveal: bool) -> Verdict:
    """Compare with :func:`qkv.split_heads`; name the reshape without the transpose."""
    Z, num_heads = call.args
    expectation = Expectation(
        split_heads(Z, num_heads), CODE_TOLERANCE,
        shape_help="(h, n, d_k): one block per head, one row per token in each",
        slip_values=[(slips.RESHAPED_WITHOUT_TRANSPOSE,
                      slips.split_heads_with_slip(Z, num_heads, slips.RESHAPED_WITHOUT_TRANSPOSE))],
        what="an array")
    return judge_value(result, call.label, expectation, reveal=reveal)


def judge_merge_heads(call: Call, result, reveal: bool) -> Verdict:
    """Compare with :func:`qkv.merge_heads`; name the reshape without the transpose."""
    (Z,) = call.args
    expectation = Expectation(
        merge_heads(Z), CODE_TOLERANCE,
        shape_help="(n, h * d_k): one row per token, the heads' columns side by side",
        slip_values=[(slips.MERGED_WITHOUT_TRANSPOSE,
                      slips.merge_heads_with_slip(Z, slips.MERGED_WITHOUT_TRANSPOSE))],
        what="an array")
    return judge_value(result, call.label, expectation, reveal=reveal)


# --------------------------------------------------------------------------- sample_dot_products(d_k, n_samples, rng)

SAMPLE = "sample_dot_products"


def sample_call(d_k: int, n_samples: int, seed: int, *, behaviour: str) -> Call:
    """``sample_dot_products(d_k, n_samples, rng)`` with ``rng = np.random.default_rng(seed)``."""
    return Call(args=(int(d_k), int(n_samples), Rng(int(seed))),
                label=f"{SAMPLE}({d_k}, {n_samples}, rng)", behaviour=behaviour)


def _samples(call: Call, result) -> np.ndarray:
    """The result as an array of ``n_samples`` numbers, or raise :class:`_Unusable` saying why not."""
    samples = as_numbers(result, call.label, what="an array of sample dot products")
    n_samples = call.args[1]
    if samples.shape != (n_samples,):
        raise _Unusable(f"{call.label} has shape {shape_str(samples.shape)} but should have shape ({n_samples},): "
                        "one dot product q.k per sample.")
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
        what = f"Var(q.k) of {call.label}"
        if scaled:
            samples, exact, what = samples / np.sqrt(d_k), 1.0, f"Var(q.k / sqrt({d_k})) of {call.label}"
        variance = float(np.var(samples))
        if abs(variance - exact) <= SIMULATION_TOLERANCE * exact:
            return Verdict(True, f"the simulated {what} is within {SIMULATION_TOLERANCE:.0%} of the exact value.")
        lines = [f"the simulated {what} is {variance:.4g}: too {'large' if variance > exact else 'small'} "
                 f"(it counts within {SIMULATION_TOLERANCE:.0%} of the exact value)."]
        if abs(variance) < 1e-12:
            lines.append("All your samples are equal: draw new random q and k for every sample.")
        elif abs(variance - np.sqrt(exact)) <= SIMULATION_TOLERANCE * np.sqrt(exact) and exact != 1:
            lines.append("That is near the square root of the variance: is each component's variance 1 "
                         "(rng.standard_normal)?")
        elif not scaled and abs(variance - 1) <= SIMULATION_TOLERANCE:
            lines.append("That is the variance after dividing by sqrt(d_k): return the raw dot products q.k.")
        return Verdict(False, "\n".join(lines))

    return judge


def judge_samples_shape(call: Call, result, reveal: bool) -> Verdict:
    """One call of a simulation returned ``n_samples`` finite numbers."""
    try:
        _samples(call, result)
    except _Unusable as unusable:
        return Verdict(False, str(unusable))
    return Verdict(True, f"{call.label} returned {call.args[1]} samples.")


def rng_calls(rng: np.random.Generator, *, behaviour: str) -> list[Call]:
    """Four calls: two generators with the same seed, one with another seed, and many samples for the mean."""
    first, second, third = (int(s) for s in rng.integers(0, 2**31, size=3))
    return [sample_call(16, 200, first, behaviour=behaviour), sample_call(16, 200, first, behaviour=behaviour),
            sample_call(16, 200, second, behaviour=behaviour), sample_call(16, 2000, third, behaviour=behaviour)]


def judge_uses_its_rng(calls: Sequence[Call], results: Sequence, reveal: bool) -> Verdict:
    """The calls of :func:`rng_calls`: the same seed gives the same samples, another seed others, mean near 0."""
    same, again, other, many = (np.asarray(r, dtype=float) for r in results)
    if not np.array_equal(same, again):
        return Verdict(False, f"{SAMPLE} returned different samples for two generators made with the same seed: "
                              "draw q and k with the rng it is given (rng.standard_normal), not with np.random "
                              "or a generator of your own.")
    if np.allclose(same, other):
        return Verdict(False, f"{SAMPLE} returned the same samples for generators with different seeds: draw q "
                              "and k with the rng it is given.")
    if abs(many.mean()) > 0.5:  # the mean of 2000 samples of variance 16 has standard deviation ~0.09
        return Verdict(False, f"the mean of {calls[3].label} is {many.mean():.3f}, far from 0: q and k have "
                              "mean 0.")
    return Verdict(True, f"{SAMPLE} draws its samples from the rng it is given.")
