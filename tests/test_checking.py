"""qkv_exercises.checking and qkv_exercises.slips: answers are compared with qkv, and each typical slip is recognised.

The right answers come from the seeds' printed tables (seed 000, seed 002); every wrong answer
is computed here with plain numpy the way a student who made that slip would, never with the
checker's own code. A test passes when the check accepts what it should, and when a wrong
answer fails with a message that names the entry, both values and the slip.
"""

from __future__ import annotations

import numpy as np
import pytest

import qkv
from qkv_exercises import checking as check
from qkv_exercises import slips
from qkv_grading.nbgrader_feedback import HideHiddenTests

from .seeds import SEED_000, SEED_000_O_CONCAT

# ---------------------------------------------------------------- seed 000, as printed
EXAMPLE = qkv.examples.delivery_example()
X, TOKENS = EXAMPLE.X, EXAMPLE.tokens
HEAD_1, HEAD_2 = EXAMPLE.heads
K1_RAW, K1, Q1, V1 = (np.array(SEED_000[1][step]) for step in ("K_raw", "K", "Q", "V"))
S_RAW1, S1, A1, O1 = (np.array(SEED_000[1][step]) for step in ("S_raw", "S", "A", "O"))
O2 = np.array(SEED_000[2]["O"])
O_CONCAT = np.array(SEED_000_O_CONCAT)
W_O_MIXING = np.array([[0.5, 0, 1, 0], [0, 0.5, 0, 1], [0.5, 0, 0, 0], [0, 0.5, 0, 0]])

# ---------------------------------------------------------------- seed 002
Q1_EXAMPLE = qkv.examples.q1_example()


def row_softmax(S, axis=1):
    """Softmax written out for the tests: exp, then divide by the sum along ``axis``."""
    e = np.exp(np.asarray(S, dtype=float))
    return e / e.sum(axis=axis, keepdims=True)


def failure(check_call, *args, **kwargs) -> str:
    with pytest.raises(check.AnswerMismatch) as caught:
        check_call(*args, **kwargs)
    return str(caught.value)


def passes(capsys, check_call, *args, **kwargs) -> str:
    result = check_call(*args, **kwargs)
    assert result is None, "a check must return None: nbgrader reads a number shown by a test cell as its score"
    out = capsys.readouterr().out
    assert out.startswith("\u2713"), out
    return out


# ---------------------------------------------------------------- right answers pass


@pytest.mark.parametrize("step, table", [("K", K1), ("Q", Q1), ("V", V1), ("S_raw", S_RAW1), ("S", S1),
                                         ("A", A1), ("O", O1)])
def test_seed_tables_rounded_to_two_decimals_pass(capsys, step, table):
    passes(capsys, check.head_step, np.round(table, 2).tolist(), step, X, HEAD_1, name=step, tokens=TOKENS)


def test_seed_002_hand_example_passes(capsys):
    keys = ("k1", "k2", "k3")
    args = (Q1_EXAMPLE.Q, Q1_EXAMPLE.K, Q1_EXAMPLE.V)
    passes(capsys, check.attention_step, [1, 0, 1], "S_raw", *args, name="scores", keys=keys)
    passes(capsys, check.attention_step, [0.707, 0, 0.707], "S", *args, name="scaled", keys=keys)
    passes(capsys, check.attention_step, [0.40, 0.20, 0.40], "A", *args, name="weights", keys=keys)
    passes(capsys, check.attention_step, [0.80, 0.60], "O", *args, name="output")
    passes(capsys, check.attention_step, [[0.80, 0.60]], "O", *args, name="output")  # as a 1 x 2 matrix too


def test_seed_002_softmax_figures_pass(capsys):
    passes(capsys, check.softmax_values, [0.67, 0.24, 0.09], [2, 1, 0], name="s")
    passes(capsys, check.softmax_values, [0.99995, 0.000045, 0.000000002], [20, 10, 0], name="s")


def test_concatenation_and_projections_pass(capsys):
    passes(capsys, check.multi_head_step, O_CONCAT, "O_concat", X, EXAMPLE.heads, EXAMPLE.W_O, name="O_concat")
    passes(capsys, check.multi_head_step, O_CONCAT, "Y", X, EXAMPLE.heads, EXAMPLE.W_O, name="Y")
    passes(capsys, check.multi_head_step, O_CONCAT @ W_O_MIXING, "Y", X, EXAMPLE.heads, W_O_MIXING, name="Y")


def test_numpy_arrays_and_integers_are_accepted(capsys):
    passes(capsys, check.head_step, np.array([[1, 0], [0, 1], [1, 1]], dtype=np.int64), "Q", X, HEAD_1, name="Q1")


# ---------------------------------------------------------------- the tolerance, and the message


def test_hand_answers_are_accepted_within_one_hundredth(capsys):
    near = A1.copy()
    near[2, 1] += 0.0099
    passes(capsys, check.head_step, near, "A", X, HEAD_1, name="A1", tokens=TOKENS)
    off = A1.copy()
    off[2, 1] += 0.011
    message = failure(check.head_step, off, "A", X, HEAD_1, name="A1", tokens=TOKENS)
    assert message.startswith("A1[2, 1] (row 補償, column 晚到) is 0.676241, expected 0.665241 (within 0.01); "
                              "1 of 9 entries is off.")


def test_code_answers_are_checked_to_one_millionth():
    def nearly(x, axis=-1):
        return row_softmax(x, axis=axis) + 2e-6

    message = failure(check.softmax_function, nearly, [2.0, 1.0, 0.0])
    assert "(within 1e-06); 3 of 3 entries are off" in message


# ---------------------------------------------------------------- each slip is recognised


@pytest.mark.parametrize("step, slipped, slip", [
    ("S", S_RAW1, slips.NO_SQRT_DK),
    ("A", row_softmax(S_RAW1), slips.NO_SQRT_DK),
    ("O", row_softmax(S_RAW1) @ V1, slips.NO_SQRT_DK),
    ("S", S_RAW1 / 2, slips.DIVIDED_BY_D_K),
    ("A", row_softmax(S1, axis=0), slips.SOFTMAX_OVER_COLUMNS),
    ("O", row_softmax(S1, axis=0) @ V1, slips.SOFTMAX_OVER_COLUMNS),
    ("A", S1 / S1.sum(axis=1, keepdims=True), slips.NO_EXPONENTIAL),
    ("K", K1_RAW, slips.BIAS_DROPPED),
    ("S_raw", K1 @ Q1.T, slips.SCORES_TRANSPOSED),
    ("O", A1 @ K1, slips.WEIGHTS_APPLIED_TO_K),
])
def test_head_slip_is_named(step, slipped, slip):
    message = failure(check.head_step, np.round(slipped, 2), step, X, HEAD_1, name="answer", tokens=TOKENS)
    assert message.endswith(f"Likely slip: {slip.advice}"), message


def test_k_instead_of_k_transposed_is_named_from_the_shape():
    message = failure(check.head_step, np.round(Q1.T @ K1, 2), "S_raw", X, HEAD_1, name="S_raw1")
    assert message.startswith("S_raw1 has shape (2, 2) but should have shape (3, 3): one row per query (3), "
                              "one column per key (3).")
    assert message.endswith(f"Likely slip: {slips.K_NOT_TRANSPOSED.advice}")


def test_bias_written_once_is_named_from_the_shape():
    message = failure(check.head_step, [[0.71, 0.71]], "B_K", X, HEAD_1, name="B_K1")
    assert message.endswith(f"Likely slip: {slips.BIAS_NOT_BROADCAST.advice}")


def test_heads_in_the_wrong_order_are_named():
    swapped = np.hstack([O2, O1])
    message = failure(check.multi_head_step, swapped, "O_concat", X, EXAMPLE.heads, EXAMPLE.W_O, name="O_concat")
    assert message.endswith(f"Likely slip: {slips.HEADS_IN_WRONG_ORDER.advice}")
    message = failure(check.multi_head_step, swapped @ W_O_MIXING, "Y", X, EXAMPLE.heads, W_O_MIXING, name="Y")
    assert message.endswith(f"Likely slip: {slips.HEADS_IN_WRONG_ORDER.advice}")


def test_heads_stacked_as_rows_and_w_o_transposed_are_named():
    message = failure(check.multi_head_step, np.vstack([O1, O2]), "O_concat", X, EXAMPLE.heads, EXAMPLE.W_O,
                      name="O_concat")
    assert message.endswith(f"Likely slip: {slips.HEADS_STACKED_AS_ROWS.advice}")
    message = failure(check.multi_head_step, O_CONCAT @ W_O_MIXING.T, "Y", X, EXAMPLE.heads, W_O_MIXING, name="Y")
    assert message.endswith(f"Likely slip: {slips.W_O_TRANSPOSED.advice}")


@pytest.mark.parametrize("answer, slip", [
    ([2 / 3, 1 / 3, 0], slips.NO_EXPONENTIAL),
    (np.exp([2.0, 1.0, 0.0]), slips.NOT_NORMALISED),
])
def test_softmax_slips_are_named(answer, slip):
    message = failure(check.softmax_values, answer, [2, 1, 0], name="s")
    assert message.endswith(f"Likely slip: {slip.advice}")


def test_variance_slips_are_named():
    assert failure(check.dot_product_variance, 8, 64, name="v").endswith(slips.STANDARD_DEVIATION_GIVEN.advice)
    assert failure(check.dot_product_variance, 64, 64, name="v", scaled=True).endswith(slips.SCALING_NOT_APPLIED.advice)
    assert failure(check.dot_product_variance, 8, 64, name="v", scaled=True).endswith(slips.SCALED_BY_SQRT_ONCE.advice)
    assert failure(check.dot_product_typical_size, 64, 64, name="t").endswith(slips.VARIANCE_GIVEN.advice)


def test_expected_dot_product_variance_agrees_with_a_simulation():
    rng = np.random.default_rng(0)
    for d_k, var_q, var_k in [(4, 1.0, 1.0), (64, 1.0, 1.0), (16, 2.0, 0.5)]:
        q = rng.normal(scale=np.sqrt(var_q), size=(100_000, d_k))
        k = rng.normal(scale=np.sqrt(var_k), size=(100_000, d_k))
        measured = np.var((q * k).sum(axis=1))
        assert measured == pytest.approx(check.expected_dot_product_variance(d_k, var_q, var_k), rel=0.03)


def test_reading_a_column_instead_of_a_row_is_named():
    # 補償's column in head 1 (how much each token attends to 補償) is largest for 外送 (ties broken first).
    column = np.round(A1[:, 2], 6)
    assert TOKENS[int(np.argmax(column))] == "外送"
    message = failure(check.most_attended_token, "外送", X, EXAMPLE.heads, head=1, query="補償", tokens=TOKENS,
                      name="most")
    assert message.startswith("most is 外送, expected 晚到")
    assert message.endswith(f"Likely slip: {slips.READ_COLUMN_NOT_ROW.advice}")


def test_patch_grid_filled_by_columns_is_named():
    image = np.array([[0, 0, 1, 1, 0, 0], [0, 0, 1, 1, 0, 0], [0, 1, 1, 0, 2, 2], [0, 1, 1, 0, 2, 2]], float)
    patches = np.stack([image[r:r + 2, c:c + 2].ravel() for r in (0, 2) for c in (0, 2, 4)])  # row by row
    scores = patches @ patches.T / 2  # d_k = 4
    weights = row_softmax(scores)[4]
    message = failure(check.patch_grid, weights.reshape(3, 2).T, image, 2, 4, name="grid")
    assert message.endswith(f"Likely slip: {slips.GRID_FILLED_BY_COLUMNS.advice}")
    check.patch_grid(weights.reshape(2, 3), image, 2, 4, name="grid")
    best = divmod(int(np.argmax(weights)), 3)
    check.most_attended_patch(best, image, 2, 4, name="cell")
    message = failure(check.most_attended_patch, best[::-1], image, 2, 4, name="cell")
    assert message.endswith(f"Likely slip: {slips.ROW_AND_COLUMN_SWAPPED.advice}")


def test_a_slip_that_changes_nothing_is_not_named():
    # Head 1's query bias is zero: a Q without it is right, and must pass rather than be called a slip.
    check.head_step(Q1, "Q", X, HEAD_1, name="Q1")


# ---------------------------------------------------------------- answers that are not answers


@pytest.mark.parametrize("answer, start", [
    (None, "Q1 is None: replace None with your answer, a list of rows of numbers."),
    (..., "Q1 is still ... : replace it with your answer"),
    ("[[1, 0], [0, 1], [1, 1]]", "Q1 is the text '[[1, 0], [0, 1], [1, 1]]': write numbers without quotes"),
    ([[1, 0], [0, 1], [1, "1"]], "Q1[2, 1] is '1' (str), not a number"),
    ([[1, 0], [0, 1], [1, None]], "Q1[2, 1] is None (NoneType), not a number"),
    ([[1, 0], [0, 1], [1]], "Q1 is not rectangular: its rows have 2, 2, 1 entries."),
    ([[1, 0], [0, 1], [1, np.nan]], "Q1[2, 1] is nan, not a finite number."),
    ([[True, False]] * 3, "Q1 holds True/False values"),
    ({"Q": 1}, "Q1 is a dict"),
    ([[1, 0, 1], [0, 1, 1]], "Q1 has shape (2, 3) but should have shape (3, 2): one row per token (3), "
                             "one column per query dimension (d_k = 2).\nDid you transpose it?"),
    ([1, 0, 0, 1, 1, 1], "Q1 has shape (6,) but should have shape (3, 2)"),
])
def test_unusable_answers_get_a_clear_message(answer, start):
    assert failure(check.head_step, answer, "Q", X, HEAD_1, name="Q1").startswith(start)


def test_a_token_answer_must_be_one_of_the_tokens():
    common = dict(X=X, heads=EXAMPLE.heads, head=1, query="補償", tokens=TOKENS, name="most")
    assert "replace it with one of the tokens 外送, 晚到, 補償" in failure(check.most_attended_token, None, **common)
    assert "write the token itself in quotes" in failure(check.most_attended_token, 1, **common)
    assert "not one of the tokens" in failure(check.most_attended_token, "外賣", **common)


# ---------------------------------------------------------------- functions students write


def loop_softmax(x, axis=-1):
    """An independent softmax: loops over every slice along ``axis``."""
    x = np.moveaxis(np.asarray(x, dtype=float), axis, -1)
    out = np.empty_like(x)
    for index in np.ndindex(x.shape[:-1]):
        row = x[index]
        e = [np.exp(v - max(row)) for v in row]
        out[index] = [v / sum(e) for v in e]
    return np.moveaxis(out, -1, axis)


def loop_attention(Q, K, V):
    Q, K, V = (np.asarray(M, dtype=float) for M in (Q, K, V))
    weights = np.array([[sum(q * k) / np.sqrt(len(q)) for k in K] for q in Q])
    weights = loop_softmax(weights)
    return np.array([[sum(w * V[j, c] for j, w in enumerate(row)) for c in range(V.shape[1])] for row in weights]), weights


def test_independent_functions_pass_on_seed_and_random_inputs(capsys):
    check.softmax_function(loop_softmax, [2.0, 1.0, 0.0])
    check.softmax_function(loop_softmax, [1000.0, 999.0, 998.0])
    check.softmax_function_on_random_inputs(loop_softmax, seed=1)
    check.attention_function(loop_attention, Q1_EXAMPLE.Q, Q1_EXAMPLE.K, Q1_EXAMPLE.V)
    check.attention_function_on_random_inputs(loop_attention, seed=2)
    assert "\u2713" in capsys.readouterr().out


def test_softmax_without_the_max_overflows_with_a_hint():
    def naive(x, axis=-1):
        e = np.exp(np.asarray(x, dtype=float))
        return e / e.sum(axis=axis, keepdims=True)

    with np.errstate(over="ignore", invalid="ignore"):
        message = failure(check.softmax_function, naive, [1000.0, 999.0, 998.0])
    assert message.startswith("softmax([1000, 999, 998], axis=-1)[0] is nan, not a finite number.")
    assert "subtract each row's maximum" in message


def test_softmax_along_the_wrong_axis_is_named():
    def columns(x, axis=-1):
        return loop_softmax(x, axis=0)

    message = failure(check.softmax_function, columns, S1, axis=-1)
    assert message.endswith(f"Likely slip: {slips.SOFTMAX_OVER_COLUMNS.advice}")


def test_attention_function_slips_and_return_values():
    def unscaled(Q, K, V):
        weights = loop_softmax(np.asarray(Q) @ np.asarray(K).T)
        return weights @ V, weights

    message = failure(check.attention_function, unscaled, Q1_EXAMPLE.Q, Q1_EXAMPLE.K, Q1_EXAMPLE.V)
    assert message.endswith(f"Likely slip: {slips.NO_SQRT_DK.advice}")
    message = failure(check.attention_function, lambda Q, K, V: loop_attention(Q, K, V)[0], Q1, K1, V1)
    assert "returned ndarray; it must return a pair (output, weights)" in message


def test_a_function_that_raises_or_returns_none_is_explained():
    def crashes(x, axis=-1):
        return x.nonexistent

    def unfinished(x, axis=-1):
        """Only the docstring, as released."""

    def stub(x, axis=-1):
        raise NotImplementedError()

    with pytest.raises(check.AnswerMismatch) as caught:
        check.softmax_function(crashes, [2.0, 1.0, 0.0])
    assert str(caught.value).startswith("softmax([2, 1, 0], axis=-1) raised AttributeError:")
    assert isinstance(caught.value.__cause__, AttributeError)
    assert "returned None: write the body" in failure(check.softmax_function, unfinished, [2.0, 1.0, 0.0])
    assert "raised NotImplementedError: write the body" in failure(check.softmax_function, stub, [2.0, 1.0, 0.0])


def test_split_and_merge_without_the_transpose_are_named(capsys):
    def split_by_reshape(Z, h):
        n, d = np.shape(Z)
        return np.reshape(Z, (h, n, d // h))

    def merge_by_reshape(Z):
        h, n, d_k = np.shape(Z)
        return np.reshape(Z, (n, h * d_k))

    Z = np.arange(12.0).reshape(3, 4)
    message = failure(check.split_heads_function, split_by_reshape, Z, 2)
    assert message.endswith(f"Likely slip: {slips.RESHAPED_WITHOUT_TRANSPOSE.advice}")
    message = failure(check.merge_heads_function, merge_by_reshape, np.arange(12.0).reshape(2, 3, 2))
    assert message.endswith(f"Likely slip: {slips.RESHAPED_WITHOUT_TRANSPOSE.advice}")

    def split_by_loops(Z, h):
        n, d = np.shape(Z)
        return np.array([[[Z[t][i * (d // h) + c] for c in range(d // h)] for t in range(n)] for i in range(h)])

    def merge_by_loops(Z):
        return np.array([[v for head in Z for v in head[t]] for t in range(len(Z[0]))])

    check.split_heads_function_on_random_inputs(split_by_loops, seed=3)
    check.merge_heads_function_on_random_inputs(merge_by_loops, split_by_loops, seed=4)
    assert "\u2713" in capsys.readouterr().out


# ---------------------------------------------------------------- the student's own code


def uses_qkv(x, axis=-1):
    return qkv.softmax(x, axis)


from qkv import softmax as renamed_softmax  # noqa: E402  (a student's alias, at the top of their notebook)


def uses_an_alias(x, axis=-1):
    return renamed_softmax(x, axis)


def uses_a_helper(x, axis=-1):
    return uses_qkv(x, axis)


def imports_inside(x, axis=-1):
    import importlib

    return importlib.import_module("qkv").softmax(x, axis)


@pytest.mark.parametrize("func, named", [
    (uses_qkv, "softmax uses qkv (qkv)"),
    (uses_an_alias, "softmax uses qkv (renamed_softmax)"),
    (uses_a_helper, "softmax uses qkv (qkv)"),
    (imports_inside, "softmax calls qkv.softmax"),
])
def test_calling_qkv_is_caught(func, named):
    original = qkv.softmax
    message = failure(check.own_code, func, "softmax", np.ones((2, 3)))
    assert message.startswith(named), message
    assert qkv.softmax is original and qkv.attention.softmax is original, "qkv must be restored after the check"


def test_own_code_passes_for_numpy_code_and_needs_a_result(capsys):
    check.own_code(loop_softmax, "softmax", np.ones((2, 3)))
    assert "does its own computation" in capsys.readouterr().out
    assert "returned None" in failure(check.own_code, lambda x: None, "softmax", np.ones(3))


def test_switched_off_qkv_refuses_outside_callers_but_still_serves_the_checks(capsys):
    with check.qkv_switched_off():
        with pytest.raises(RuntimeError, match="qkv.scaled_dot_product_attention"):
            qkv.scaled_dot_product_attention(Q1_EXAMPLE.Q, Q1_EXAMPLE.K, Q1_EXAMPLE.V)
        check.attention_step([0.80, 0.60], "O", Q1_EXAMPLE.Q, Q1_EXAMPLE.K, Q1_EXAMPLE.V, name="output")
    assert "output is correct" in capsys.readouterr().out
    qkv.scaled_dot_product_attention(Q1_EXAMPLE.Q, Q1_EXAMPLE.K, Q1_EXAMPLE.V)  # works again afterwards


# ---------------------------------------------------------------- simulations


def sample_dot_products(d_k, n_samples, rng):
    return np.einsum("ij,ij->i", rng.standard_normal((n_samples, d_k)), rng.standard_normal((n_samples, d_k)))


def test_a_correct_simulation_passes_by_range(capsys):
    for d_k in (4, 64, 256):
        check.simulated_variance(sample_dot_products, d_k, seed=d_k)
        check.simulated_variance(sample_dot_products, d_k, scaled=True, seed=d_k + 1)
    check.simulation_draws_samples(sample_dot_products, seed=5)
    assert "within 10% of 64" in capsys.readouterr().out


def test_wrong_simulations_fail_with_a_reason():
    scaled = lambda d_k, n, rng: sample_dot_products(d_k, n, rng) / np.sqrt(d_k)  # noqa: E731
    assert "return the raw dot products" in failure(check.simulated_variance, scaled, 64)
    constant = lambda d_k, n, rng: np.full(n, float(d_k))  # noqa: E731
    assert "All your samples are equal" in failure(check.simulated_variance, constant, 64)
    assert "returns the same samples for two different rngs" in failure(check.simulation_draws_samples, constant)
    short = lambda d_k, n, rng: sample_dot_products(d_k, 10, rng)  # noqa: E731
    assert "should have shape (20000,)" in failure(check.simulated_variance, short, 64)


# ---------------------------------------------------------------- how Jupyter and the feedback show it


def test_jupyter_shows_only_the_message_or_the_students_own_traceback():
    try:
        check.head_step(None, "Q", X, HEAD_1, name="Q1")
    except check.AnswerMismatch as err:
        lines = err._render_traceback_()
    assert lines == ["\x1b[0;31mAnswerMismatch\x1b[0m: Q1 is None: replace None with your answer, a list of rows "
                     "of numbers."]

    def crashes(x, axis=-1):
        raise ZeroDivisionError("in the student's code")

    try:
        check.softmax_function(crashes, [1.0, 2.0])
    except check.AnswerMismatch as err:
        shown = "".join(err._render_traceback_())
    assert "ZeroDivisionError: in the student's code" in shown and "raise ZeroDivisionError" in shown


def test_feedback_removes_hidden_tests_and_their_tracebacks():
    import nbformat

    cell = nbformat.v4.new_code_cell(
        '"""softmax on random inputs."""\n### BEGIN HIDDEN TESTS\ncheck.secret_test(softmax)\n### END HIDDEN TESTS\n')
    cell.metadata["nbgrader"] = {"grade": True, "solution": False, "locked": True, "points": 1,
                                 "grade_id": "hidden", "schema_version": 3}
    cell.outputs = [nbformat.v4.new_output("error", ename="AnswerMismatch", evalue="softmax is wrong",
                                           traceback=["Cell In[3], line 3", "----> 3 check.secret_test(softmax)"])]
    nb = nbformat.v4.new_notebook(cells=[cell])
    nb, _ = HideHiddenTests().preprocess(nb, {})
    assert nb.cells[0].source == '"""softmax on random inputs."""\n'
    assert nb.cells[0].outputs[0].traceback == ["AnswerMismatch: softmax is wrong"]
