"""Problem set 14: training attention, the backward pass.

Part 1 runs head 1 of the student's variant of seed 000
(:func:`qkv_exercises.variants.delivery_example`)
backwards by hand, for a gradient ``dO`` at its output drawn per variant (variant 0: the chapter's,
1 at 補償's first output entry): for the query 補償, the gradient ``dA`` at its weights, one row of
the softmax's Jacobian, the gradient ``dS`` at its scores; then one entry of ``dV`` and one of ``dQ``.
Part 2: the student writes ``attention_backward(Q, K, V, dO)`` and a central-difference estimate of
``dQ``, ``central_difference_dQ(Q, K, V, dO, h)``, judged against :func:`qkv.attention_backward` and
:func:`qkv.central_differences` (hidden checks on inputs drawn at grading). The estimate is judged
against the central difference at the same ``h``, not the exact ``dQ``: at a step as large as 1e-2
only the central difference is within 1e-6, so a one-sided difference (off by about h/2 times the
second derivative) cannot pass for a small one.

The slips this set names live here, beside the checks that look for them: the 1/sqrt(d_k) left out,
``A`` not transposed in ``dV = A^T dO``, only the Jacobian's diagonal used, the weighted mean replaced
by a plain mean, and, for the finite difference, a one-sided difference or a division by ``h``.
"""

from __future__ import annotations

import functools

import numpy as np

from qkv.attention import linear, scaled_dot_product_attention
from qkv.backward import attention_backward, central_differences, softmax_backward
from qkv.validate import shape_str

from .. import variants
from ..checking import CODE_TOLERANCE, HAND_TOLERANCE, Expectation, Verdict, judge_value
from ..checks import Call, ProblemSet, Raised, ValueCheck, function_checks
from ..functions import not_a_tuple
from ..slips import NO_SQRT_DK, Slip, each_part
from ..variants import VariantDraw, apart_from_seed
from ..language import N_, _

TOKENS = ("外送", "晚到", "補償")
QUERY = 2  # the row of 補償
DISTINCT = 0.03  # a slip's answer differs from the right one by more than this (three hand tolerances)

DIAGONAL_ONLY = Slip(
    "diagonal_only",
    "did you use only the diagonal of the softmax's Jacobian? Raising one weight lowers the others: "
    "dS = A * (dA - rowsum(dA * A)), and the subtracted weighted mean is the off-diagonal part.",
)
PLAIN_MEAN = Slip(
    "plain_mean",
    "did you subtract the plain mean of dA? The softmax's backward step subtracts the WEIGHTED mean, "
    "sum_j A_j dA_j.",
)
A_NOT_TRANSPOSED = Slip(
    "a_not_transposed",
    "did you forget to transpose A? dV = A^T dO: value j collects from every query that read it, "
    "down column j of A.",
)
JACOBIAN_WITHOUT_DELTA = Slip(
    "jacobian_without_delta",
    "did you leave out the delta? d a_j / d s_m = a_j (delta_jm - a_m): on the diagonal (m = j) it is "
    "a_j (1 - a_j).",
)
ONE_SIDED = Slip(
    "one_sided_difference",
    "is this a one-sided difference, (L(x + h) - L(x)) / h? The central difference nudges both ways: "
    "(L(x + h) - L(x - h)) / (2h), whose error falls like h^2.",
)
DIVIDED_BY_H = Slip(
    "divided_by_h",
    "did you divide by h instead of 2h? The two nudges are 2h apart: (L(x + h) - L(x - h)) / (2h).",
)
KEYS_NUDGED = Slip(
    "keys_nudged",
    "this is the gradient at K: nudge the entries of Q, one at a time, and leave K as it is.",
)


# --------------------------------------------------------------------------- the backward pass, with slips


def backward_with_slip(Q, K, V, dO, slip: Slip | None = None) -> tuple[np.ndarray, ...] | None:
    """``(dQ, dK, dV)`` as :func:`qkv.attention_backward` computes them, or with one slip
    (None where the slip cannot be made: A not transposed needs n_q = n_k)."""
    Q, K, V, dO = (np.asarray(M, dtype=float) for M in (Q, K, V, dO))
    _, A = scaled_dot_product_attention(Q, K, V)
    scale = 1.0 if slip is NO_SQRT_DK else np.sqrt(Q.shape[-1])
    dA = dO @ V.T
    if slip is DIAGONAL_ONLY:
        dS = A * dA
    elif slip is PLAIN_MEAN:
        dS = A * (dA - dA.mean(axis=-1, keepdims=True))
    else:
        dS = softmax_backward(A, dA)
    if slip is A_NOT_TRANSPOSED:
        if A.shape[0] != A.shape[1]:
            return None
        dV = A @ dO
    else:
        dV = A.T @ dO
    return dS @ K / scale, dS.T @ Q / scale, dV


BACKWARD_SLIPS = (NO_SQRT_DK, A_NOT_TRANSPOSED, DIAGONAL_ONLY, PLAIN_MEAN)


def row_steps(Q, K, V, dO, key: int, column: int, slip: Slip | None = None) -> dict[str, np.ndarray]:
    """The hand steps of part 1 for the query 補償 (with one slip, the steps it changes).

    Written with plain numpy on 3 x 2 arrays, since drawing a variant calls it many times; the tests
    check it against :func:`qkv.attention_backward`."""
    Q, K, V, dO = (np.asarray(M, dtype=float) for M in (Q, K, V, dO))
    scale = np.sqrt(Q.shape[-1])
    scores = Q @ K.T / scale  # (n, n)
    A = np.exp(scores - scores.max(axis=-1, keepdims=True))
    A /= A.sum(axis=-1, keepdims=True)
    a = A[QUERY]  # (n_k,): 補償's weights
    dA_row = dO[QUERY] @ V.T  # (n_k,)
    delta = np.eye(len(a))[key]
    if slip is DIAGONAL_ONLY:
        jacobian, dS_row = a[key] * (1 - a[key]) * delta, a * dA_row
    else:
        jacobian = -a[key] * a if slip is JACOBIAN_WITHOUT_DELTA else a[key] * (delta - a)
        mean = dA_row.mean() if slip is PLAIN_MEAN else a @ dA_row
        dS_row = a * (dA_row - mean)
    # the plain mean is named where it is made, in dS; the entries of dV and dQ name the other slips
    dS_for_dQ = a * (dA_row - a @ dA_row) if slip is PLAIN_MEAN else dS_row
    dQ_entry = dS_for_dQ @ K[:, column] / (1.0 if slip is NO_SQRT_DK else scale)
    weights = A if slip is A_NOT_TRANSPOSED else A.T  # dV = A^T dO
    return {"dA_row": dA_row, "jacobian_row": jacobian, "dS_row": dS_row,
            "dV_entry": np.array(weights[key] @ dO[:, column]), "dQ_entry": np.array(dQ_entry)}


ROW_SLIPS = (DIAGONAL_ONLY, JACOBIAN_WITHOUT_DELTA, PLAIN_MEAN, NO_SQRT_DK, A_NOT_TRANSPOSED)


# --------------------------------------------------------------------------- givens and their variants


def givens(variant: int) -> dict:
    """Head 1 of a delivery example, its Q, K, V and weights A, a gradient dO at its output, and which
    key (row of dV) and column the entries asked for are in. Variant 0 is seed 000 and the chapter's dO;
    another variant draws a variant of the delivery example and a dO until every answer is workable."""
    if variant == 0:
        Q, K, V = _head_1(0)
        dO, key, column = _seed_gradient()
    else:
        head, dO, key, column = _variant(variant)
        Q, K, V = (M.copy() for M in head)
    _, A = scaled_dot_product_attention(Q, K, V)
    return {"tokens": TOKENS, "Q": Q, "K": K, "V": V, "A": A, "dO": dO, "key": key, "column": column,
            "key_token": TOKENS[key]}


EXAMPLE_VARIANTS = 500  # the delivery examples a variant draws its head from (each made once)


@functools.cache
def _head_1(example_variant: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Q, K and V of head 1 of variant ``example_variant`` of seed 000's delivery example
    (:func:`qkv_exercises.variants.delivery_example`); callers copy before changing them."""
    ex = variants.delivery_example(example_variant)
    head = ex.heads[0]
    return tuple(linear(ex.X, W, b) for W, b in ((head.W_Q, head.b_Q), (head.W_K, head.b_K), (head.W_V, head.b_V)))


def _seed_gradient() -> tuple[np.ndarray, int, int]:
    """The chapter's: L = the first output entry of 補償, and the entries of 晚到's value, column 1."""
    dO = np.zeros((3, 2))
    dO[QUERY, 0] = 1.0
    return dO, 1, 0


@functools.cache
def _seed_steps() -> dict[str, np.ndarray]:
    g = givens(0)
    return row_steps(g["Q"], g["K"], g["V"], g["dO"], g["key"], g["column"])


def _workable(Q, K, V, dO, key: int, column: int) -> bool:
    """Every hand answer differs from every slip's and from the seed's; no answer is nearly 0."""
    steps = row_steps(Q, K, V, dO, key, column)
    if min(abs(float(steps["dV_entry"])), abs(float(steps["dQ_entry"])), np.abs(steps["dS_row"]).max()) < 0.05:
        return False
    for slip in ROW_SLIPS:
        slipped = row_steps(Q, K, V, dO, key, column, slip)
        for name, value in slipped.items():
            difference = float(np.abs(value - steps[name]).max())
            if 1e-12 < difference <= DISTINCT:  # the slip changes the answer, but too little to be seen
                return False
    return all(apart_from_seed(value, _seed_steps()[name]) for name, value in steps.items())


def _variant(variant: int):
    """A variant of the delivery example's head 1 and a gradient (halves from -1 to 1), key and column."""
    def draw_once(draw: VariantDraw):
        head = _head_1(draw.integer(1, EXAMPLE_VARIANTS))
        dO = np.array(draw.integers(-2, 2, (3, 2)), dtype=float) / 2
        return head, dO, draw.integer(0, 2), draw.integer(0, 1)

    return VariantDraw("ps14_gradient", variant).until(
        draw_once, lambda c: np.count_nonzero(c[1]) >= 3 and _workable(*c[0], *c[1:]), "head and gradient dO")


# --------------------------------------------------------------------------- the hand answers


_FORMULAS = {
    "dA_row": ("do_補償 V^T", N_("one entry per key: 外送, 晚到, 補償")),
    "jacobian_row": (N_("d a_j / d s_m = a_j (delta_jm - a_m), for m = 外送, 晚到, 補償"),
                     N_("one entry per score")),
    "dS_row": ("a * (dA - sum_j a_j dA_j)", N_("one entry per key: 外送, 晚到, 補償")),
    "dV_entry": ("(A^T dO)[key, column]", N_("one number")),
    "dQ_entry": ("(dS K)[補償, column] / sqrt(d_k)", N_("one number")),
}


def _hand(step: str):
    def expect(g) -> Expectation:
        args = (g["Q"], g["K"], g["V"], g["dO"], g["key"], g["column"])
        formula, shape_help = _FORMULAS[step]
        value = row_steps(*args)[step]
        return Expectation(
            value, HAND_TOLERANCE, formula=formula, shape_help=shape_help,
            labels=None if value.ndim == 0 else (list(TOKENS),),
            slip_values=lambda: [(slip, row_steps(*args, slip).get(step)) for slip in ROW_SLIPS],
            what=_("your answer, one number") if value.ndim == 0 else _("your answer, a list of 3 numbers"))

    return expect


# --------------------------------------------------------------------------- attention_backward(Q, K, V, dO)

ATTENTION_BACKWARD = "attention_backward"
CENTRAL_DIFFERENCE = "central_difference_dQ"


def backward_call(Q, K, V, dO, *, what: str, behaviour: str) -> Call:
    Q, K, V, dO = (np.asarray(M, dtype=float) for M in (Q, K, V, dO))
    return Call(args=(Q, K, V, dO), label=f"{ATTENTION_BACKWARD}({what})", behaviour=behaviour)


def _random_inputs(rng: np.random.Generator, n_q: int, n_k: int, d_k: int, d_v: int):
    return (rng.normal(size=(n_q, d_k)), rng.normal(size=(n_k, d_k)), rng.normal(size=(n_k, d_v)),
            rng.normal(size=(n_q, d_v)))


def _shapes(Q, K, V, dO) -> str:
    return ", ".join(f"{name} {shape_str(np.shape(M))}" for name, M in zip(("Q", "K", "V", "dO"), (Q, K, V, dO)))


def random_backward_call(rng: np.random.Generator, n_q: int, n_k: int, d_k: int, d_v: int, behaviour: str) -> Call:
    inputs = _random_inputs(rng, n_q, n_k, d_k, d_v)
    return backward_call(*inputs, what=_shapes(*inputs), behaviour=behaviour)


def random_backward_calls(rng: np.random.Generator) -> list[Call]:
    """Random inputs of every kind the visible checks try: square, n_q != n_k and d_v != d_k, wide heads."""
    calls = []
    for behaviour, shapes in (("n_q = n_k", (4, 4, 3, 3)), ("n_q != n_k, d_v != d_k", (2, 5, 3, 4)),
                              ("n_q != n_k, d_v != d_k", (5, 3, 2, 6)), (N_("wide heads"), (3, 4, 16, 2))):
        calls.append(random_backward_call(rng, *shapes, behaviour))
    return calls


def judge_attention_backward(call: Call, result, reveal: bool) -> Verdict:
    """Compare ``(dQ, dK, dV)`` with :func:`qkv.attention_backward`; name a slip."""
    not_three = not_a_tuple(call, result, "dQ, dK, dV", count=3)
    if not_three:
        return not_three
    expected = attention_backward(*call.args)
    slipped = functools.cache(lambda: [(slip, backward_with_slip(*call.args, slip)) for slip in BACKWARD_SLIPS])
    for index, name in enumerate(("dQ", "dK", "dV")):
        expectation = Expectation(
            expected[index], CODE_TOLERANCE, shape_help=_("the shape of {array}").format(array=name[1]),
            slip_values=each_part(slipped, index),
            what=_("an array"))
        verdict = judge_value(result[index], _("{array} of {call}").format(array=name, call=_(call.label)),
                              expectation, reveal=reveal)
        if not verdict.passed:
            return verdict
    return Verdict(True, _("{call} is correct.").format(call=_(call.label)))


def explain_backward_error(call: Call, raised: Raised) -> str | None:
    """The likely slip behind an error: A (n_q, n_k) not transposed before dO (n_q, d_v)."""
    if raised.type_name == "ValueError" and any(word in raised.message for word in ("matmul", "not aligned",
                                                                                    "core dimension")):
        Q, K = call.args[:2]
        return A_NOT_TRANSPOSED.advice + " " + _("A is {A} and dO has {rows} rows: A^T dO fits, A dO does not.").format(
            A=shape_str((Q.shape[0], K.shape[0])), rows=Q.shape[0])
    return None


# --------------------------------------------------------------------------- central_difference_dQ(Q, K, V, dO, h)


def difference_call(Q, K, V, dO, h: float, *, what: str, behaviour: str) -> Call:
    Q, K, V, dO = (np.asarray(M, dtype=float) for M in (Q, K, V, dO))
    return Call(args=(Q, K, V, dO), kwargs={"h": float(h)}, label=f"{CENTRAL_DIFFERENCE}({what}, h={h:g})",
                behaviour=behaviour)


def _differences(Q, K, V, dO, h: float, *, one_sided: bool = False, of: str = "Q") -> np.ndarray:
    """The central (:func:`qkv.central_differences`) or one-sided difference of L = sum(dO * O) in every
    entry of Q (or K)."""
    def loss(y):
        return float(np.sum(dO * scaled_dot_product_attention(*((y, K) if of == "Q" else (Q, y)), V)[0]))

    x = Q if of == "Q" else K
    if not one_sided:
        return central_differences(loss, x, h)
    gradient = np.zeros_like(x)
    for index in np.ndindex(x.shape):
        up = x.copy()
        up[index] += h
        gradient[index] = (loss(up) - loss(x)) / h
    return gradient


def judge_central_difference(call: Call, result, reveal: bool) -> Verdict:
    """Compare the estimate with qkv's central difference at the call's h (to 1e-6); name a one-sided
    difference, a division by h or the gradient at K."""
    Q, K, V, dO = call.args
    h = call.kwargs["h"]
    estimate = _differences(Q, K, V, dO, h)

    def slip_values():  # computed only for an estimate that is wrong
        values = [(ONE_SIDED, _differences(Q, K, V, dO, h, one_sided=True)), (DIVIDED_BY_H, 2 * estimate)]
        if K.shape == Q.shape:
            values.append((KEYS_NUDGED, _differences(Q, K, V, dO, h, of="K")))
        return values

    expectation = Expectation(estimate, CODE_TOLERANCE, shape_help=_("the shape of Q: one estimate per entry of Q"),
                              slip_values=slip_values, what=_("an array"))
    return judge_value(result, call.label, expectation, reveal=reveal)


def random_difference_calls(rng: np.random.Generator) -> list[Call]:
    calls = []
    for shapes, h in (((3, 4, 2, 3), 1e-5), ((2, 2, 3, 2), 1e-4)):
        inputs = _random_inputs(rng, *shapes)
        calls.append(difference_call(*inputs, h, what=_shapes(*inputs), behaviour=N_("random inputs")))
    return calls


# --------------------------------------------------------------------------- the checks


def _yours(g) -> tuple:
    return g["Q"], g["K"], g["V"], g["dO"]


_backward_check = function_checks(ATTENTION_BACKWARD, judge_attention_backward, explain_backward_error)
_difference_check = function_checks(CENTRAL_DIFFERENCE, judge_central_difference)

PROBLEM_SET = ProblemSet(
    name="ps14_training",
    title=N_("Problem set 14: training attention"),
    givens=givens,
    checks=(
        ValueCheck("gradient_at_weights", "dA_row", _hand("dA_row"),
                   "dA_row is the gradient at 補償's weights, do V^T, each entry within 0.01."),
        ValueCheck("jacobian_row", "jacobian_row", _hand("jacobian_row"),
                   "jacobian_row is the row of the softmax's Jacobian for the key asked, each entry within 0.01."),
        ValueCheck("gradient_at_scores", "dS_row", _hand("dS_row"),
                   "dS_row is the gradient at 補償's scores, a * (dA - rowsum(dA * a)), each entry within 0.01."),
        ValueCheck("value_gradient_entry", "dV_entry", _hand("dV_entry"),
                   "dV_entry is the entry of dV = A^T dO asked for, within 0.01."),
        ValueCheck("query_gradient_entry", "dQ_entry", _hand("dQ_entry"),
                   "dQ_entry is the entry of dQ = dS K / sqrt(d_k) asked for, within 0.01."),
        _backward_check("attention_backward_yours",
                        lambda g, rng: [backward_call(*_yours(g), what=_("your Q, K, V and dO"),
                                                      behaviour="n_q = n_k")],
                        "attention_backward gives the dQ, dK and dV of your head 1, to 1e-6."),
        _backward_check("attention_backward_rectangular",
                        lambda g, rng: [random_backward_call(rng, 2, 5, 3, 4, "n_q != n_k, d_v != d_k"),
                                        random_backward_call(rng, 5, 3, 2, 6, "n_q != n_k, d_v != d_k")],
                        "attention_backward works when n_q != n_k and d_v != d_k (2 x 5 and 5 x 3 weights), to 1e-6."),
        _backward_check("attention_backward_wide_heads",
                        lambda g, rng: [random_backward_call(rng, 3, 4, 16, 2, "wide heads")],
                        "attention_backward divides by sqrt(d_k) for a wide head (d_k = 16), to 1e-6."),
        _backward_check("attention_backward_random_inputs", lambda g, rng: random_backward_calls(rng),
                        "attention_backward matches qkv.attention_backward on random inputs of every kind, to 1e-6.",
                        hidden=True),
        _difference_check("central_difference_yours",
                          lambda g, rng: [difference_call(*_yours(g), h, what=_("your Q, K, V and dO"),
                                                          behaviour=N_("random inputs")) for h in (1e-5, 1e-2)],
                          "central_difference_dQ gives the central differences of your head 1 at h = 1e-5 and "
                          "h = 1e-2, to 1e-6."),
        _difference_check("central_difference_random_inputs", lambda g, rng: random_difference_calls(rng),
                          "central_difference_dQ estimates dQ on random inputs (h = 1e-5 and 1e-4), to 1e-6.",
                          hidden=True),
    ),
)
