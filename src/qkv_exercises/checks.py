"""The checks of a problem set: one per graded cell, the same code while solving and at grading.

A problem set (:class:`ProblemSet`) names, for each graded cell of its notebook (by
its nbgrader ``grade_id``), what the cell checks:

- :class:`ValueCheck`: a value the student computed by hand (a matrix, a number),
  compared with the value qkv computes from the student's variant;
- :class:`ChoiceCheck`: an answer that is one of a few choices (a token, an option);
- :class:`FunctionCheck`: a function the student wrote, called on inputs the check
  chooses, each result compared with qkv's.

While a student solves, :mod:`qkv_exercises.notebook` runs a check in the notebook
itself and prints its verdict without the expected value (``reveal=False``). At
grading, the notebook runs in a sandbox that only hands back the answer values (and
the results of the student's functions on the inputs the grader chose); the grader,
outside, calls the same :meth:`judge` on them. So the two never disagree about an
answer.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .checking import Expectation, Verdict, judge_value, likely_slip
from .language import _

Givens = Mapping[str, Any]


@dataclass(frozen=True)
class ValueCheck:
    """A value answer: ``answer`` (a notebook variable) against ``expect(givens)``."""

    grade_id: str
    answer: str
    expect: Callable[[Givens], Expectation]
    description: str
    points: float = 1
    hidden: bool = False
    kind = "value"

    def judge(self, observed, givens: Givens, *, reveal: bool, expectation: Expectation | None = None) -> Verdict:
        """The verdict on ``observed``; ``expectation``: ``self.expect(givens)``, when the caller has it
        already (it judges many answers on the same givens)."""
        expected = self.expect(givens) if expectation is None else expectation
        return judge_value(observed, self.answer, expected, reveal=reveal)


@dataclass(frozen=True)
class Choice:
    """The right choice among ``choices``, and what the typical wrong ones mean.

    ``explain_wrong`` maps a wrong choice to the advice a student reads when they give
    it (for example "you read the column, not the row"); ``explain_right`` is the pass
    message; ``reveal_text`` says, after grading, what the right choice was and why.
    """

    right: str
    choices: Sequence[str]
    explain_right: str = ""
    explain_wrong: Mapping[str, str] = field(default_factory=dict)
    reveal_text: str = ""


@dataclass(frozen=True)
class ChoiceCheck:
    """An answer that is one of a few choices (a token, an option letter), written as text."""

    grade_id: str
    answer: str
    expect: Callable[[Givens], Choice]
    description: str
    points: float = 1
    hidden: bool = False
    kind = "choice"

    def judge(self, observed, givens: Givens, *, reveal: bool) -> Verdict:
        choice = self.expect(givens)
        options = _(", ").join(f'"{c}"' for c in choice.choices)
        if observed is None or observed is Ellipsis:
            return Verdict(False, _("{name} is {value}: replace it with one of {options}, in quotes.").format(
                name=self.answer, value=repr(observed), options=options))
        if not isinstance(observed, str):
            shown = repr(observed) if len(repr(observed)) <= 40 else repr(observed)[:37] + "..."
            return Verdict(False, _("{name} is {value} ({type}): write one of {options}, in quotes.").format(
                name=self.answer, value=shown, type=type(observed).__name__, options=options))
        written = _normalised(observed, choice.choices)
        if written not in choice.choices:
            shown = repr(observed) if len(observed) <= 40 else repr(observed[:37] + "...")
            return Verdict(False, _("{name} is {value}, which is not one of {options}.").format(
                name=self.answer, value=shown, options=options))
        if written == choice.right:
            if choice.explain_right:
                return Verdict(True, _("{name} is correct: {because}.").format(
                    name=self.answer, because=_(choice.explain_right).rstrip(".。")))
            return Verdict(True, _("{name} is correct.").format(name=self.answer))
        lines = [_("{name} is {value}: not the right choice.").format(name=self.answer, value=repr(written))]
        if written in choice.explain_wrong:
            lines.append(likely_slip(_(choice.explain_wrong[written])))
        if reveal and choice.reveal_text:
            lines.append(_(choice.reveal_text))
        return Verdict(False, "\n".join(lines))


def _normalised(written: str, choices: Sequence[str]) -> str:
    """The answer as the choices are written: without spaces or quotes around it, and for
    options named by a letter, without brackets ("(B)" -> "b")."""
    text = written.strip().strip("'\"").strip()
    if all(len(c) == 1 and c.isalpha() for c in choices):
        text = text.strip("()[]. ").lower()
    return text


@dataclass(frozen=True)
class Call:
    """One call of a student's function: ``func(*args, **kwargs)``, named ``label`` in messages.

    ``behaviour`` names what the call tries (``"along axis 0"``, ``"n_q != n_k"``): every
    behaviour a hidden check tries, a visible check of the same function tries too.
    """

    args: tuple = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)
    label: str = ""
    behaviour: str = ""


@dataclass(frozen=True)
class Returned:
    """A call returned ``value``."""

    value: Any


@dataclass(frozen=True)
class Raised:
    """A call raised: the exception's type name, its message and the student's traceback as text."""

    type_name: str
    message: str
    traceback: str = ""


Outcome = Returned | Raised

NOT_AVAILABLE = "QkvNotAvailable"  # the type name of a call that reached for qkv while it was switched off


@dataclass(frozen=True)
class FunctionCheck:
    """A function the student writes (the notebook name ``answer``), called on ``calls(givens, rng)``.

    ``judge_result(call, result, reveal)`` compares one call's result with qkv's;
    ``judge_together(calls, results, reveal)``, when given, judges the results of all
    the calls at once after each has passed (for example: two generators with the
    same seed give the same samples). ``explain_raised(call, raised)`` may add the
    likely slip behind an error the student's function raised.

    Visible checks choose their calls from the givens (and a generator seeded from
    the problem set and check); a ``hidden`` check draws them with ``rng``, which at
    grading is seeded from the course's grading key, so that no one can know them in
    advance.
    """

    grade_id: str
    answer: str
    calls: Callable[[Givens, np.random.Generator], list[Call]]
    judge_result: Callable[[Call, Any, bool], Verdict]
    description: str
    points: float = 1
    hidden: bool = False
    judge_together: Callable[[Sequence[Call], Sequence[Any], bool], Verdict] | None = None
    explain_raised: Callable[[Call, Raised], str | None] | None = None
    kind = "function"

    def judge(self, outcomes: Sequence[Outcome], calls: Sequence[Call], *, reveal: bool) -> Verdict:
        """The verdict on all the calls: the first call that failed, or a pass."""
        return self.first_failure(outcomes, calls, reveal=reveal)[1]

    def first_failure(self, outcomes: Sequence[Outcome], calls: Sequence[Call], *,
                      reveal: bool) -> tuple[int | None, Verdict]:
        """The index of the first call that failed (None if none did, or the calls together) and the verdict."""
        if len(outcomes) != len(calls):
            return None, Verdict(False, _("{name} was not called on every input (did the notebook stop early?).").format(
                name=self.answer))
        for index, (call, outcome) in enumerate(zip(calls, outcomes)):
            verdict = self._judge_one(call, outcome, reveal)
            if not verdict.passed:
                return index, verdict
        if self.judge_together is not None:
            verdict = self.judge_together(calls, [outcome.value for outcome in outcomes], reveal)
            if not verdict.passed:
                return None, verdict
        if len(calls) == 1:
            return None, Verdict(True, _("{name} is correct: {call}.").format(name=self.answer, call=_(calls[0].label)))
        tried = _("; ").join(dict.fromkeys(_(c.behaviour) for c in calls if c.behaviour))
        if tried:
            return None, Verdict(True, _("{name} is correct on {count} inputs: {tried}.").format(
                name=self.answer, count=len(calls), tried=tried))
        return None, Verdict(True, _("{name} is correct on {count} inputs.").format(name=self.answer, count=len(calls)))

    def _judge_one(self, call: Call, outcome: Outcome, reveal: bool) -> Verdict:
        label = _(call.label) if call.label else f"{self.answer}(...)"
        if isinstance(outcome, Raised):
            if outcome.type_name == "NotImplementedError":
                return Verdict(False, _("{call} raised NotImplementedError: write the body of the function (replace "
                                        "the line raise NotImplementedError()).").format(call=label))
            if outcome.type_name == NOT_AVAILABLE:
                return Verdict(False, _("{call} {calls_qkv}: write the computation yourself with numpy. qkv is the "
                                        "reference your function is checked against, and it is not available to "
                                        "your function when the notebook is graded.").format(
                    call=label, calls_qkv=outcome.message))
            detail = f": {outcome.message}" if outcome.message else ""
            message = _("{call} raised {error}").format(call=label, error=outcome.type_name) + detail
            advice = self.explain_raised(call, outcome) if self.explain_raised is not None else None
            return Verdict(False, message + ("\n" + likely_slip(advice) if advice else ""))
        if outcome.value is None:
            return Verdict(False, _("{call} returned None: write the body of the function and return its "
                                    "result.").format(call=label))
        return self.judge_result(call, outcome.value, reveal)


def function_checks(answer: str, judge_result, explain_raised=None):
    """A maker of the checks of the student's function ``answer``, all judged by ``judge_result`` (and
    ``explain_raised``): ``make(grade_id, calls, description, hidden=False)`` returns a :class:`FunctionCheck`."""

    def make(grade_id: str, calls, description: str, *, hidden: bool = False) -> FunctionCheck:
        return FunctionCheck(grade_id, answer, calls=calls, judge_result=judge_result, description=description,
                             hidden=hidden, explain_raised=explain_raised)

    return make


Check = ValueCheck | ChoiceCheck | FunctionCheck


@dataclass(frozen=True)
class ProblemSet:
    """A problem set: its notebook's name, the givens of each variant, and one check per graded cell.

    ``givens(variant)`` returns the named inputs that the notebook's set-up cells bind
    (``ps.X``, ``ps.head_1``, ...): arrays, numbers, tuples of tokens, heads.
    """

    name: str
    title: str
    givens: Callable[[int], dict[str, Any]]
    checks: tuple[Check, ...]

    def check(self, grade_id: str) -> Check:
        for check in self.checks:
            if check.grade_id == grade_id:
                return check
        raise KeyError(f"{self.name} has no check {grade_id!r}; its checks are "
                       f"{', '.join(c.grade_id for c in self.checks)}")

    def visible_calls(self, check: FunctionCheck, givens: Givens) -> list[Call]:
        """The calls of a visible function check: the same for every run of the same variant."""
        return check.calls(givens, np.random.default_rng(seed_for(self.name, check.grade_id)))


def seed_for(*parts: str) -> int:
    """A whole number from text, the same on every machine: for seeding the inputs of a check."""
    return int.from_bytes(hashlib.sha256("/".join(parts).encode()).digest()[:8], "big")
