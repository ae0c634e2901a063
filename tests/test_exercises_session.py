"""What a student sees from ``start``, ``ps.check`` and ``ps.summary`` while solving.

Checked in this process with a real :class:`qkv_exercises.notebook.Session`: whose numbers
a notebook uses, that a check prints its verdict and carries on (and raises only under
nbgrader), that warnings and stray output of a correct answer never reach stderr nor fail
it, and that the summary lists every check.
"""

from __future__ import annotations

import sys
import warnings

import numpy as np
import pytest

from qkv_exercises import start
from qkv_exercises.checking import AnswerMismatch
from qkv_exercises.identity import HUB_USER_VARIABLE, student_variant
from qkv_exercises.notebook import NBGRADER_VARIABLE


@pytest.fixture
def solving(monkeypatch):
    """A student solving outside nbgrader, with no hub around."""
    monkeypatch.delenv(NBGRADER_VARIABLE, raising=False)
    monkeypatch.delenv(HUB_USER_VARIABLE, raising=False)


def softmax(x, axis=-1):
    e = np.exp(x - np.max(x, axis=axis, keepdims=True))
    return e / np.sum(e, axis=axis, keepdims=True)


def test_without_an_id_the_notebook_says_it_uses_practice_numbers(solving, capsys):
    ps = start("ps2_scaled_dot_product", "", 3)
    assert ps.variant == 3
    out = capsys.readouterr().out
    assert "no STUDENT_ID, so these are practice numbers (practice variant 3)" in out
    assert "PRACTICE = 0 gives the book's own" in out
    assert start("ps2_scaled_dot_product", "", 0).variant == 0


def test_a_typed_id_or_the_hubs_user_chooses_the_variant(solving, capsys, monkeypatch):
    assert start("ps1_qkv", "ab1234").variant == student_variant("ps1_qkv", "ab1234")
    assert "the numbers of student ab1234" in capsys.readouterr().out
    monkeypatch.setenv(HUB_USER_VARIABLE, "hub-user-7")
    ps = start("ps1_qkv", "")
    assert ps.variant == student_variant("ps1_qkv", "hub-user-7")
    assert "student hub-user-7 (from JupyterHub)" in capsys.readouterr().out


def test_givens_are_copies(solving):
    ps = start("ps1_qkv", "ab1234")
    X = ps.X
    X[0, 0] = 99
    assert ps.X[0, 0] != 99


def test_a_failed_check_prints_and_carries_on_and_raises_only_under_nbgrader(solving, capsys, monkeypatch):
    ps = start("ps2_scaled_dot_product", "ab1234")
    ps.check("scores_q1", None)  # no exception: Run All goes on to the next cell
    out = capsys.readouterr().out
    assert "\u2717" in out and "scores_q1 is None" in out
    monkeypatch.setenv(NBGRADER_VARIABLE, "validate")
    with pytest.raises(AnswerMismatch, match="scores_q1 is None"):
        ps.check("scores_q1", None)


def test_warnings_and_stray_output_of_a_correct_function_never_reach_stderr_nor_fail(solving, capsys):
    """A correct function that warned scored 1/10: its warning's stderr output failed every nbgrader cell."""

    def chatty_softmax(x, axis=-1):
        warnings.warn("my softmax is experimental")
        print("computing ...", file=sys.stderr)
        print("computing on stdout too")
        with np.errstate(over="warn"):
            np.exp(np.array([1000.0]))  # a RuntimeWarning from numpy
        return softmax(x, axis=axis)

    ps = start("ps4_single_head", "ab1234")
    capsys.readouterr()
    for grade_id in ("softmax_one_row", "softmax_rows_of_matrix", "softmax_large_scores", "softmax_along_axis"):
        ps.check(grade_id, chatty_softmax)
    out, err = capsys.readouterr()
    assert err == "", f"stderr in a test cell fails it under nbgrader: {err!r}"
    assert out.count("\u2713") == 4 and "\u2717" not in out
    assert "(softmax warned on 3 calls: UserWarning: my softmax is experimental)" in out
    assert "computing ..." in out


def test_the_traceback_shown_is_that_of_the_call_named(solving, capsys):
    def breaks_on_3d(x, axis=-1):
        if np.ndim(x) == 3:
            raise IndexError("only matrices, please")
        return softmax(x, axis=axis)

    ps = start("ps4_single_head", "ab1234")
    capsys.readouterr()
    ps.check("softmax_along_axis", breaks_on_3d)
    out = capsys.readouterr().out
    assert "IndexError: only matrices, please" in out
    assert "softmax(an array of shape (2, 3, 4), axis=1) raised IndexError: only matrices, please" in out


def test_calling_qkv_from_an_answer_fails_with_the_reason(solving, capsys):
    import qkv

    ps = start("ps4_single_head", "ab1234")
    ps.check("softmax_one_row", lambda x, axis=-1: qkv.softmax(x, axis))
    assert "calls qkv.softmax: write the computation yourself with numpy" in capsys.readouterr().out


def test_the_summary_lists_every_visible_check_and_the_hidden_points(solving, capsys):
    ps = start("ps4_single_head", "ab1234")
    ps.check("softmax_one_row", softmax)
    ps.check("attention_q1", None)
    capsys.readouterr()
    ps.summary()
    out = capsys.readouterr().out
    assert "softmax_one_row" in out and "attention_q1" in out and "not run yet" in out
    assert "1 of 8 points from the checks above." in out
    assert "2 more points come from checks run only when your notebook is graded" in out


def test_one_hidden_point_is_counted_in_the_singular(solving, capsys):
    start("ps8_position", "ab1234").summary()
    out = capsys.readouterr().out
    assert "1 more point comes from checks run only when your notebook is graded" in out
    assert "1 more points" not in out
