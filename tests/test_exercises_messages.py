"""No message a student can trigger while solving contains an expected value.

For every check of every problem set, on the seed's variant and on students' variants,
the test triggers every kind of failure: a wrong entry (too large, too small), every
entry off, each typical slip, a wrong shape, a transposed matrix, None, text, a ragged
list, NaN, answers rounded to 1 decimal; and for the functions students write: one that
raises, returns None, returns text or the wrong shape, slightly wrong numbers, and each
typical slip. Each message (as ``ps.check`` prints it, ``reveal=False``) is searched for
the expected values written with 1 to 6 decimals; a number that the student's own answer
holds (or the inputs the student was given) does not count. A wrong choice's message
never names the right choice. Both languages are checked: English on every variant, 繁體中文
(the same checks speaking through their catalogue) on the seed's variant.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from qkv_book.language import speaking
from qkv_exercises.checking import format_number, qkv_switched_off
from qkv_exercises.checks import FunctionCheck, seed_for
from qkv_exercises.problem_sets import get_problem_set, names

from .notebook_support import givens_of, outcomes_of

VARIANTS_PER_SET = 8  # the seed's variant and the first students'
LANGUAGES = {"en": VARIANTS_PER_SET, "zh-TW": 1}  # a language, and how many variants are checked in it
DECIMALS = range(1, 7)
TOLERANCES = {"0.01", "0.05"}  # what every message may say of the tolerance


def variants(problem_set, language="en"):
    ps = get_problem_set(problem_set)
    return ([(0, ps.givens(0))] + list(givens_of(problem_set)[:VARIANTS_PER_SET - 1]))[:LANGUAGES[language]]


@pytest.fixture(params=list(LANGUAGES))
def language(request):
    """Each test of a message runs in each language the checks speak."""
    with speaking(request.param):
        yield request.param


def written(values) -> set[str]:
    """Every way a number of ``values`` may be written: 1 to 6 decimals, and as the checks print it."""
    found = set()
    for x in np.ravel(np.asarray(values, dtype=float)):
        if np.isfinite(x):
            found |= {f"{x:.{d}f}" for d in DECIMALS} | {format_number(x)}
    return found


class Numbers:
    """Numbers, and whether a text is one of them as :func:`written` writes it.

    The same answer as ``text in written(values)``, without writing out every number: a trained
    layer's matrices hold 10^5 of them, and a message quotes a handful. A text with k decimals can
    only be a number within 10^-k of it (rounded to k decimals, or to 6 by ``format_number``), so
    only those few numbers are written out and compared.
    """

    def __init__(self, *values):
        self.parts = []
        for value in values:
            flat = np.ravel(np.asarray(value, dtype=float))
            flat = np.sort(flat[np.isfinite(flat)])
            if flat.size:
                self.parts.append(flat)

    def __or__(self, other: Numbers) -> Numbers:
        joined = Numbers()
        joined.parts = self.parts + other.parts
        return joined

    def __contains__(self, text: str) -> bool:
        value = float(text)
        window = 10.0 ** -len(text.partition(".")[2]) + abs(value) * 1e-12
        for part in self.parts:
            low, high = np.searchsorted(part, value - window), np.searchsorted(part, value + window, "right")
            if text in written(part[low:high]):
                return True
        return False


def decimals_in(message: str) -> set[str]:
    return set(re.findall(r"-?\d+\.\d+", message))


def students_numbers(answer) -> Numbers:
    """The numbers of an answer, its row sums and total (what a hint may quote back)."""
    try:
        values = np.asarray(answer, dtype=float)
    except (TypeError, ValueError):
        return Numbers()
    if values.ndim == 0:
        return Numbers(values)
    with np.errstate(all="ignore"):
        return Numbers(values, values.sum(axis=-1), values.sum())


def assert_no_expected_value(message: str, expected, allowed: Numbers, what: str):
    expected = Numbers(expected)
    leaked = {text for text in decimals_in(message) - TOLERANCES if text in expected and text not in allowed}
    assert not leaked, f"{what}: the message gives away {sorted(leaked)}:\n{message}"


# ---------------------------------------------------------------- hand-computed answers


def wrong_answers(expectation) -> list[tuple[str, object]]:
    """Every kind of wrong answer to a value check."""
    expected = np.asarray(expectation.expected, dtype=float)
    rounded = np.round(expected, 2)
    answers = [("None", None), ("text", "0.5"), ("ragged", [[1.0, 2.0], [3.0]]), ("a word inside", [["x"]]),
               ("NaN", np.full(expected.shape, np.nan)), ("True", True), ("a dict", {"a": 1}), ("...", ...),
               ("all entries off", rounded + 0.13), ("rounded to 1 decimal", np.round(expected, 1)),
               ("too few entries", rounded.ravel()[:-1] if expected.size > 1 else [1.0, 2.0]),
               ("one entry more", np.append(rounded.ravel(), 0.5))]
    for sign, size in (("too large", 0.37), ("too small", -0.41)):
        off = rounded.copy()
        off.flat[0] += size
        answers.append((f"one entry {sign}", off))
    if expected.ndim == 2:
        answers.append(("transposed", rounded.T))
        later_rows_off = rounded.copy()
        later_rows_off[1:] += 0.3
        answers.append(("first row right", later_rows_off))
    for slip, value in expectation.slips():
        if value is not None:
            answers.append((f"slip {slip.key}", np.round(np.asarray(value, dtype=float), 2)))
    return answers


@pytest.mark.parametrize("problem_set", names())
def test_no_hand_answer_message_gives_the_expected_value(problem_set, language):
    ps = get_problem_set(problem_set)
    for variant, givens in variants(problem_set, language):
        given_numbers = Numbers(*(v for v in givens.values() if isinstance(v, np.ndarray)))
        for check in ps.checks:
            if check.kind != "value":
                continue
            expectation = check.expect(givens)
            for kind, answer in wrong_answers(expectation):
                verdict = check.judge(answer, givens, reveal=False)
                if verdict.passed:
                    continue
                assert_no_expected_value(verdict.message, expectation.expected,
                                         students_numbers(answer) | given_numbers,
                                         f"{problem_set} variant {variant}, {check.grade_id}, {kind}")


@pytest.mark.parametrize("problem_set", names())
def test_a_wrong_choice_never_names_the_right_one(problem_set, language):
    ps = get_problem_set(problem_set)
    for variant, givens in variants(problem_set, language):
        for check in ps.checks:
            if check.kind != "choice":
                continue
            choice = check.expect(givens)
            for wrong in choice.choices:
                if wrong == choice.right:
                    continue
                message = check.judge(wrong, givens, reveal=False).message
                right = re.escape(choice.right)
                named = (rf"['\"(]{right}['\")]" if len(choice.right) == 1  # an option's letter: 'b', (b)
                         else rf"(?<!\w){right}(?!\w)")
                assert not re.search(named, message), f"{problem_set} variant {variant}, {check.grade_id}: {message}"
            for unusable in (None, 2, "zzz", ["a"]):
                message = check.judge(unusable, givens, reveal=False).message
                assert all(f'"{c}"' in message for c in choice.choices), message  # every option, none singled out


# ---------------------------------------------------------------- functions students write


def difference(one_sided=False, halved=True):
    """A finite-difference estimate of dQ for L = sum(dO * O), computed here with numpy: the central
    difference, or one of its slips (one-sided; divided by h instead of 2h)."""
    def estimate(Q, K, V, dO, h=1e-5):
        def loss(x):
            return float(np.sum(dO * reference("scaled_dot_product_attention", x, K, V)[0]))
        gradient = np.zeros_like(Q)
        for index in np.ndindex(Q.shape):
            up, down = Q.copy(), Q.copy()
            up[index] += h
            down[index] -= 0 if one_sided else h
            gradient[index] = (loss(up) - loss(down)) / ((1 if one_sided else 2 if halved else 1) * h)
        return gradient
    return estimate


def reference(name: str, *args, **kwargs):
    """The right result, computed here with numpy."""
    if name == "softmax":
        x = np.asarray(args[0], dtype=float)
        axis = kwargs.get("axis", -1)
        e = np.exp(x - x.max(axis=axis, keepdims=True))
        return e / e.sum(axis=axis, keepdims=True)
    if name == "scaled_dot_product_attention":
        Q, K, V = args
        weights = reference("softmax", Q @ K.T / np.sqrt(Q.shape[1]))
        return weights @ V, weights
    if name == "split_heads":
        Z, h = args
        n, d = Z.shape
        return Z.reshape(n, h, d // h).swapaxes(0, 1)
    if name == "merge_heads":
        h, n, d_k = args[0].shape
        return args[0].swapaxes(0, 1).reshape(n, h * d_k)
    if name == "fold_block":
        m, l, block = args
        m_new = max(m, float(np.max(block)))
        return m_new, l * math.exp(m - m_new) + sum(math.exp(s - m_new) for s in block)
    if name == "online_softmax":
        m, l, running = -math.inf, 0.0, []
        for block in args[0]:
            m, l = reference("fold_block", m, l, block)
            running.append([m, l])
        return np.exp(np.concatenate(args[0]) - m) / l, np.array(running)
    if name == "gaussian_kernel_weights":
        Q, K, sigma = args
        exponents = np.array([[-sum((a - b) ** 2 for a, b in zip(q, k)) / (2 * sigma**2) for k in K] for q in Q])
        return reference("softmax", exponents)
    if name == "causal_mask":
        (n,) = args
        return np.array([[j <= i for j in range(n)] for i in range(n)])
    if name == "padding_mask":
        lengths, n = args
        return np.array([[[j < length for j in range(n)]] for length in lengths])
    if name == "masked_softmax":
        scores, mask = args
        masked = np.where(mask, scores, -np.inf)
        e = np.exp(masked - masked.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)
    if name == "sinusoidal_position_encoding":
        n, d_model = args
        return np.array([[math.sin(p / 10000 ** (j / d_model)) if j % 2 == 0 else
                          math.cos(p / 10000 ** ((j - 1) / d_model)) for j in range(d_model)] for p in range(n)])
    if name == "layer_norm":
        X, gamma, beta = args
        mean = X.mean(axis=-1, keepdims=True)
        variance = ((X - mean) ** 2).mean(axis=-1, keepdims=True)
        return (X - mean) / np.sqrt(variance + kwargs.get("eps", 1e-5)) * gamma + beta
    if name == "layer_attention":
        X, W_Q, b_Q, W_K, b_K, W_V, b_V, W_O, b_O, h = args
        d_k, d_v = W_Q.shape[1] // h, W_V.shape[1] // h
        weights, outputs = [], []
        for i in range(h):  # head i: its own columns of W_Q, W_K, W_V
            q, k = (X @ W_Q + b_Q)[:, i * d_k:(i + 1) * d_k], (X @ W_K + b_K)[:, i * d_k:(i + 1) * d_k]
            weights.append(reference("softmax", q @ k.T / np.sqrt(d_k)))
            outputs.append(weights[-1] @ (X @ W_V + b_V)[:, i * d_v:(i + 1) * d_v])
        return np.hstack(outputs) @ W_O + b_O, np.array(weights)
    if name == "attention_backward":
        Q, K, V, dO = args
        A = reference("scaled_dot_product_attention", Q, K, V)[1]
        dA = dO @ V.T
        dS = A * (dA - (A * dA).sum(axis=-1, keepdims=True))
        return dS @ K / np.sqrt(Q.shape[1]), dS.T @ Q / np.sqrt(Q.shape[1]), A.T @ dO
    if name == "central_difference_dQ":  # the estimate at the call's step, entry by entry
        return difference()(*args, **kwargs)
    if name == "grouped_query_attention":
        Q, K, V = args
        h, g = len(Q), len(K)
        heads = [reference("scaled_dot_product_attention", Q[i], K[i // (h // g)], V[i // (h // g)])
                 for i in range(h)]
        return np.array([o for o, _ in heads]), np.array([w for _, w in heads])
    if name == "sliding_window_mask":
        n, window = args
        return np.array([[abs(i - j) < window for j in range(n)] for i in range(n)])
    if name == "decode":
        X, W_Q, W_K, W_V = args
        return np.array([reference("scaled_dot_product_attention", (X[t] @ W_Q)[None, :], X[:t + 1] @ W_K,
                                   X[:t + 1] @ W_V)[0][0] for t in range(len(X))])
    d_k, n, rng = args
    return (rng.standard_normal((n, d_k)) * rng.standard_normal((n, d_k))).sum(axis=1)


def wrong_functions(name: str) -> list[tuple[str, object]]:
    def nudged(*args, **kwargs):
        result = reference(name, *args, **kwargs)
        if name == "sample_dot_products":
            return 1.5 * result  # a variance 2.25 times too large
        return tuple(r + 0.25 for r in result) if isinstance(result, tuple) else result + 0.25

    def raises(*args, **kwargs):
        raise ValueError("something of the student's went wrong")

    def not_implemented(*args, **kwargs):
        raise NotImplementedError()

    common = [("returns None", lambda *a, **k: None), ("raises", raises), ("not implemented", not_implemented),
              ("returns text", lambda *a, **k: "done"), ("wrong shape", lambda *a, **k: np.zeros(1)),
              ("nudged", nudged)]
    if name == "softmax":
        def no_exponential(x, axis=-1):
            x = np.asarray(x, dtype=float)
            return x / x.sum(axis=axis, keepdims=True)

        def no_keepdims(x, axis=-1):
            e = np.exp(x - np.max(x, axis=axis))
            return e / np.sum(e, axis=axis)

        def last_axis(x, axis=-1):
            return reference("softmax", x)

        def unnormalised(x, axis=-1):
            return np.exp(np.asarray(x, dtype=float))

        return common + [("no exponential", no_exponential), ("no keepdims", no_keepdims),
                         ("last axis", last_axis), ("not normalised", unnormalised)]
    if name == "scaled_dot_product_attention":
        def unscaled(Q, K, V):
            weights = reference("softmax", Q @ K.T)
            return weights @ V, weights

        def swapped(Q, K, V):
            return reference(name, Q, K, V)[::-1]

        def with_K(Q, K, V):
            weights = reference("softmax", Q @ K / np.sqrt(Q.shape[1]))
            return weights @ V, weights

        return common + [("unscaled", unscaled), ("swapped", swapped), ("K not transposed", with_K),
                         ("weights only", lambda Q, K, V: reference(name, Q, K, V)[1])]
    if name == "split_heads":
        return common + [("reshape only", lambda Z, h: Z.reshape(h, Z.shape[0], Z.shape[1] // h))]
    if name == "merge_heads":
        return common + [("reshape only", lambda Z: Z.reshape(Z.shape[1], Z.shape[0] * Z.shape[2]))]
    if name == "fold_block":
        def folding(rescale, measure_from):
            def fold(m, l, block):
                m_new = max(m, block.max())
                return m_new, l * rescale(m, m_new) + np.exp(block - measure_from(m_new, block)).sum()
            return fold

        right_rescale = lambda m, m_new: np.exp(m - m_new)  # noqa: E731
        return common + [("no rescaling", folding(lambda m, m_new: 1.0, lambda m_new, block: m_new)),
                         ("rescaled the other way", folding(lambda m, m_new: np.exp(m_new - m) if m > -np.inf else 0,
                                                            lambda m_new, block: m_new)),
                         ("terms from the block's max", folding(right_rescale, lambda m_new, block: block.max())),
                         ("max not subtracted", folding(lambda m, m_new: 1.0, lambda m_new, block: 0.0))]
    if name == "online_softmax":
        def stale_weights(blocks):
            weights, running = reference(name, blocks)
            stale = np.concatenate([np.exp(b - m) for b, (m, _) in zip(blocks, running)])
            return stale / running[-1][1], running

        def not_rescaled(blocks):
            m, l, running = -np.inf, 0.0, []
            for block in blocks:
                m = max(m, block.max())
                l = l + np.exp(block - m).sum()
                running.append([m, l])
            return np.exp(np.concatenate(blocks) - m) / l, np.array(running)

        return common + [("weights with each block's own max", stale_weights), ("no rescaling", not_rescaled),
                         ("swapped", lambda blocks: reference(name, blocks)[::-1]),
                         ("weights only", lambda blocks: reference(name, blocks)[0])]
    if name == "gaussian_kernel_weights":
        def kernel(scale, sign=-1, axis=-1, squared=True, subtract_max=True):
            def weights(Q, K, sigma):
                distances = ((Q[:, None, :] - K[None, :, :]) ** 2).sum(axis=-1)
                exponents = sign * (distances if squared else np.sqrt(distances)) / scale(sigma)
                e = np.exp(exponents - (exponents.max(axis=axis, keepdims=True) if subtract_max else 0))
                return e / e.sum(axis=axis, keepdims=True)
            return weights

        return common + [("no minus sign", kernel(lambda s: 2 * s**2, sign=1)),
                         ("no 1/2", kernel(lambda s: s**2)), ("sigma not squared", kernel(lambda s: 2 * s)),
                         ("distance not squared", kernel(lambda s: 2 * s**2, squared=False)),
                         ("over the queries", kernel(lambda s: 2 * s**2, axis=0)),
                         ("max not subtracted", kernel(lambda s: 2 * s**2, subtract_max=False))]
    if name == "causal_mask":
        return common + [("upper triangle", lambda n: reference(name, n).T),
                         ("inverted", lambda n: ~reference(name, n)),
                         ("diagonal blocked", lambda n: np.tril(reference(name, n), k=-1)),
                         ("ones and zeros", lambda n: reference(name, n).astype(float))]
    if name == "padding_mask":
        return common + [("no query axis", lambda lengths, n: reference(name, lengths, n)[:, 0, :]),
                         ("inverted", lambda lengths, n: ~reference(name, lengths, n)),
                         ("one too many", lambda lengths, n: reference(name, np.minimum(lengths + 1, n), n)),
                         ("ones and zeros", lambda lengths, n: reference(name, lengths, n).astype(float))]
    if name == "masked_softmax":
        def zero_not_minus_infinity(scores, mask):
            return reference("softmax", np.where(mask, scores, 0.0))

        def after_the_softmax(scores, mask):
            return reference("softmax", scores) * mask

        def multiplied(scores, mask):
            return reference("softmax", mask * scores + (1 - mask) * -np.inf)

        return common + [("zero, not -inf", zero_not_minus_infinity), ("after the softmax", after_the_softmax),
                         ("no mask", lambda scores, mask: reference("softmax", scores)),
                         ("inverted", lambda scores, mask: reference(name, scores, ~np.broadcast_to(mask, scores.shape)
                                                                     | np.eye(*scores.shape[-2:], dtype=bool))),
                         ("multiplied by the mask", multiplied)]
    if name == "sinusoidal_position_encoding":
        def swapped(n, d_model):
            PE = reference(name, n, d_model)
            return np.concatenate([PE[:, 1::2], PE[:, 0::2]], axis=1).reshape(n, 2, -1).swapaxes(1, 2).reshape(n, -1)

        def from_one(n, d_model):
            return reference(name, n + 1, d_model)[1:]

        def i_not_2i(n, d_model):
            angles = np.arange(n)[:, None] / 10000 ** (np.arange(d_model // 2)[None, :] / d_model)
            return np.stack([np.sin(angles), np.cos(angles)], axis=2).reshape(n, d_model)

        def sines_first(n, d_model):
            PE = reference(name, n, d_model)
            return np.concatenate([PE[:, 0::2], PE[:, 1::2]], axis=1)

        return common + [("sin and cos swapped", swapped), ("positions from 1", from_one), ("i, not 2i", i_not_2i),
                         ("sines first", sines_first)]
    if name == "attention_backward":
        def backward(scale=True, transposed=True, full_jacobian=True):
            def slipped(Q, K, V, dO):
                A = reference("scaled_dot_product_attention", Q, K, V)[1]
                dA = dO @ V.T
                dS = A * (dA - (A * dA).sum(axis=-1, keepdims=True)) if full_jacobian else A * dA
                root = np.sqrt(Q.shape[1]) if scale else 1.0
                return dS @ K / root, dS.T @ Q / root, (A.T if transposed else A) @ dO
            return slipped

        return common + [("no 1/sqrt(d_k)", backward(scale=False)), ("A not transposed", backward(transposed=False)),
                         ("diagonal only", backward(full_jacobian=False)),
                         ("dQ only", lambda Q, K, V, dO: reference(name, Q, K, V, dO)[0])]
    if name == "central_difference_dQ":
        return common + [("one-sided", difference(one_sided=True)), ("divided by h", difference(halved=False))]
    if name == "grouped_query_attention":
        def grouped(group_of, scale=True):
            def attention(Q, K, V):
                h, g = len(Q), len(K)
                groups = [group_of(i, h, g) for i in range(h)]
                scores = np.array([Q[i] @ K[groups[i]].T for i in range(h)]) / (np.sqrt(Q.shape[-1]) if scale else 1)
                weights = np.exp(scores - scores.max(axis=-1, keepdims=True))
                weights /= weights.sum(axis=-1, keepdims=True)
                return np.array([weights[i] @ V[groups[i]] for i in range(h)]), weights
            return attention

        return common + [("i % g", grouped(lambda i, h, g: i % g)),
                         ("no 1/sqrt(d_k)", grouped(lambda i, h, g: i // (h // g), scale=False)),
                         ("output only", lambda Q, K, V: reference(name, Q, K, V)[0]),
                         ("swapped", lambda Q, K, V: reference(name, Q, K, V)[::-1])]
    if name == "sliding_window_mask":
        return common + [("one too wide", lambda n, w: reference(name, n, w + 1)),
                         ("one side only", lambda n, w: np.tril(reference(name, n, w))),
                         ("inverted", lambda n, w: ~reference(name, n, w)),
                         ("ones and zeros", lambda n, w: reference(name, n, w).astype(float))]
    if name == "decode":
        def appended_after_use(X, W_Q, W_K, W_V):
            rows = []
            for t in range(len(X)):
                before = slice(0, t) if t else slice(0, 1)  # the first token, with nothing cached, reads itself
                rows.append(reference("scaled_dot_product_attention", (X[t] @ W_Q)[None, :], X[before] @ W_K,
                                      X[before] @ W_V)[0][0])
            return np.array(rows)

        def not_causal(X, W_Q, W_K, W_V):
            return reference("scaled_dot_product_attention", X @ W_Q, X @ W_K, X @ W_V)[0]

        def unscaled(X, W_Q, W_K, W_V):
            return reference(name, X, W_Q * np.sqrt(W_Q.shape[1]), W_K, W_V)

        return common + [("cache appended after use", appended_after_use), ("not causal", not_causal),
                         ("no 1/sqrt(d_k)", unscaled)]
    return common + [("constant", lambda d_k, n, rng: np.full(n, float(d_k))),
                     ("scaled", lambda d_k, n, rng: reference(name, d_k, n, rng) / np.sqrt(d_k)),
                     ("uniform", lambda d_k, n, rng: (rng.random((n, d_k)) * rng.random((n, d_k))).sum(axis=1)),
                     ("own generator", lambda d_k, n, rng: reference(name, d_k, n, np.random.default_rng()))]


def call_numbers(calls) -> Numbers:
    """The numbers of the calls' inputs (arrays, numbers, lists of arrays), which a call's label may show."""
    found = Numbers()
    for call in calls:
        for arg in list(call.args) + list(call.kwargs.values()):
            for part in arg if isinstance(arg, list) else [arg]:
                if isinstance(part, (np.ndarray, int, float)) and not isinstance(part, bool):
                    found |= Numbers(part)
    return found


def outcome_numbers(outcomes) -> Numbers:
    found = Numbers()
    for outcome in outcomes:
        value = getattr(outcome, "value", None)
        for part in value if isinstance(value, tuple) else (value,):
            found |= students_numbers(part)
    return found


@pytest.mark.parametrize("problem_set", [ps for ps in names()
                                         if any(c.kind == "function" for c in get_problem_set(ps).checks)])
def test_no_function_message_gives_the_expected_value(problem_set, language):
    ps = get_problem_set(problem_set)
    caught = set()
    for variant, givens in variants(problem_set, language)[:2]:
        for check in ps.checks:
            if not isinstance(check, FunctionCheck):
                continue
            calls = (check.calls(givens, np.random.default_rng(seed_for(problem_set, check.grade_id, "someone")))
                     if check.hidden else ps.visible_calls(check, givens))
            expected = []
            for call in calls:
                if check.answer == "sample_dot_products":
                    expected.append(float(call.args[0]))  # the exact variance
                else:
                    result = reference(check.answer, *call.args, **call.kwargs)
                    expected.extend(np.ravel(r) for r in (result if isinstance(result, tuple) else (result,)))
            expected = np.concatenate([np.ravel(e) for e in expected]) if expected else np.zeros(0)
            for kind, func in wrong_functions(check.answer):
                with qkv_switched_off(), np.errstate(all="ignore"):
                    outcomes = outcomes_of(func, calls)
                    verdict = check.judge(outcomes, calls, reveal=False)
                if verdict.passed:  # a sampler with its own generator has the right variance
                    continue
                caught.add((check.answer, kind))
                assert_no_expected_value(verdict.message, expected, outcome_numbers(outcomes) | call_numbers(calls),
                                         f"{problem_set} variant {variant}, {check.grade_id}, {kind}")
    functions = {c.answer for c in ps.checks if isinstance(c, FunctionCheck)}
    missed = {(f, kind) for f in functions for kind, _ in wrong_functions(f)} - caught
    assert not missed, f"{problem_set}: wrong functions that no check fails: {sorted(missed)}"


def named_function_slips():
    """The slips of the functions students write in problem sets 13 and 14 that the issue names, each with
    the wrong function of :func:`wrong_functions` that makes it and the advice its message must give."""
    from qkv_exercises.problem_sets import ps13_inference_slips as inference
    from qkv_exercises.problem_sets import ps14_training as training
    from qkv_exercises.slips import NO_SQRT_DK

    return [("ps13_inference", "grouped_query_attention", "i % g", inference.HEAD_MODULO),
            ("ps13_inference", "grouped_query_attention", "no 1/sqrt(d_k)", NO_SQRT_DK),
            ("ps13_inference", "decode", "cache appended after use", inference.APPENDED_AFTER_USE),
            ("ps13_inference", "decode", "not causal", inference.NOT_CAUSAL),
            ("ps14_training", "attention_backward", "no 1/sqrt(d_k)", NO_SQRT_DK),
            ("ps14_training", "attention_backward", "A not transposed", training.A_NOT_TRANSPOSED),
            ("ps14_training", "attention_backward", "diagonal only", training.DIAGONAL_ONLY),
            ("ps14_training", "central_difference_dQ", "one-sided", training.ONE_SIDED),
            ("ps14_training", "central_difference_dQ", "divided by h", training.DIVIDED_BY_H)]


@pytest.mark.parametrize("problem_set, function, kind, slip", named_function_slips(),
                         ids=lambda x: x if isinstance(x, str) else None)
def test_a_written_functions_slip_is_named_in_its_message(problem_set, function, kind, slip, language):
    """A student's function with one of the named slips (the head mapping i % g, the cache appended after
    use, A not transposed in dV, ...) fails its visible check and hidden check with that slip's advice,
    in the student's language: the message says what went wrong, not only that it did."""
    ps = get_problem_set(problem_set)
    wrong = dict(wrong_functions(function))[kind]
    givens = variants(problem_set, language)[-1][1]
    checks = [c for c in ps.checks if isinstance(c, FunctionCheck) and c.answer == function]
    assert {c.hidden for c in checks} == {False, True}, f"{function}: a visible and a hidden check"
    for check in checks:
        calls = (check.calls(givens, np.random.default_rng(seed_for(problem_set, check.grade_id, "someone")))
                 if check.hidden else ps.visible_calls(check, givens))
        with qkv_switched_off(), np.errstate(all="ignore"):
            verdict = check.judge(outcomes_of(wrong, calls), calls, reveal=False)
        assert not verdict.passed, f"{check.grade_id}: {kind} passed"
        assert slip.advice in verdict.message, f"{check.grade_id}, {kind}: the advice is missing:\n{verdict.message}"
