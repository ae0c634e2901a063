"""What a problem-set notebook calls: :func:`start`, then ``ps.check(...)`` under each answer.

The notebook's first code cell says who is solving::

    STUDENT_ID = ""   # your student id; on the course's JupyterHub leave it "" (the hub says who you are)
    PRACTICE = 1      # with no id: which practice numbers (0 = the book's own numbers)
    LANGUAGE = ""     # the checks' language, "en" or "zh-TW"; "" = the notebook's own

and its set-up cell starts the problem set, in the notebook's language
(:func:`qkv_exercises.language.notebook_language`), and takes the student's own numbers::

    from qkv_exercises import start

    ps = start("ps2_scaled_dot_product", STUDENT_ID, PRACTICE, LANGUAGE)
    X, head_1, tokens = ps.X, ps.head_1, ps.tokens

Each test cell then checks one answer, ``ps.check("weights_head1", A1)``: it prints
a pass mark, or what is wrong (which entry, too large or too small, the likely slip),
never the expected value. A failed check does not stop *Run All*: every check shows
its verdict, and the last cell, ``ps.summary()``, lists them all. Under nbgrader
(``nbgrader validate``, the Validate button) a failed check raises, so that nbgrader
counts it as failed.

At grading the notebook does not run this module at all: the grader runs the
student's cells in a sandbox with the givens of the variant of the id the submission
is filed under, and judges the answers outside it (:mod:`qkv_grading`).
"""

from __future__ import annotations

import ast
import contextlib
import copy
import io
import os
import warnings
from dataclasses import dataclass, field

import numpy as np

from qkv_book.language import set_language

from .answers import Rng, call_student_function
from .checking import AnswerMismatch, Verdict, qkv_switched_off
from .checks import NOT_AVAILABLE, Call, FunctionCheck, Raised, Returned, seed_for
from .identity import Solver, solver
from .language import _, ngettext, notebook_language
from .problem_sets import get_problem_set

NBGRADER_VARIABLE = "NBGRADER_EXECUTION"  # set by nbgrader to "validate" or "autograde" while it runs a notebook
GREEN, RED, GREY, RESET = "\x1b[32m", "\x1b[31m", "\x1b[90m", "\x1b[0m"


def start(problem_set: str, student_id="", practice=1, language="") -> Session:
    """Start ``problem_set`` for the student ``student_id`` (or a practice variant), speaking ``language`` (``""``:
    the notebook's own, see :func:`~qkv_exercises.language.notebook_language`); print whose numbers these are."""
    set_language(notebook_language(problem_set, language))
    session = Session(get_problem_set(problem_set), solver(student_id, practice))
    _quiet_lone_docstrings()
    print(session.banner())
    return session


class _LoneDocstring(ast.NodeTransformer):
    """A cell that is nothing but a string shows nothing: in a released notebook, a test cell whose
    hidden tests were taken out keeps only its docstring, which IPython would show as the cell's result
    (and nbgrader would read as a score)."""

    def visit_Module(self, node: ast.Module) -> ast.Module:
        if (len(node.body) == 1 and isinstance(node.body[0], ast.Expr)
                and isinstance(node.body[0].value, ast.Constant) and isinstance(node.body[0].value.value, str)):
            node.body = [ast.copy_location(ast.Pass(), node.body[0])]
        return node


def _quiet_lone_docstrings() -> None:
    """In IPython, install :class:`_LoneDocstring` (once)."""
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - the course installs IPython with JupyterLab
        return
    shell = get_ipython()
    if shell is not None and not any(isinstance(t, _LoneDocstring) for t in shell.ast_transformers):
        shell.ast_transformers.append(_LoneDocstring())


@dataclass
class Session:
    """A problem set being solved: the solver's variant, its givens, and the verdicts so far.

    The givens are attributes: ``ps.X``, ``ps.head_1``, ``ps.tokens`` ...
    """

    problem_set: object
    solver: Solver
    verdicts: dict = field(default_factory=dict)

    # The methods a set-up cell may call besides reading givens; at grading they do nothing.
    DISPLAY_METHODS = ("show", "show_maps", "show_options", "show_tokens")

    def __post_init__(self):
        self.variant = self.solver.variant(self.problem_set.name)
        self.givens = self.problem_set.givens(self.variant)

    def __getattr__(self, name):
        givens = self.__dict__.get("givens", {})
        if name in givens:
            return copy.deepcopy(givens[name])
        raise AttributeError(f"problem set {self.problem_set.name} gives no {name!r}; it gives "
                             f"{', '.join(sorted(givens))}")

    def banner(self) -> str:
        title, who = _(self.problem_set.title), self.solver.describe()
        if self.solver.student_id is not None:
            return _("{title}: the numbers of {who} (variant {variant}). These are the numbers you are graded "
                     "on.").format(title=title, who=who, variant=self.variant)
        return _("{title}: no STUDENT_ID, so these are practice numbers ({who}).\nType your student id in the first "
                 "code cell to get your own numbers, the ones you are graded on. For other practice numbers set "
                 "PRACTICE = 2, 3, ...; PRACTICE = 0 gives the book's own.").format(title=title, who=who)

    # ----------------------------------------------------------------------- showing givens

    def show(self, name: str, value, row_labels=None) -> None:
        """Display ``value`` as a matrix named ``name`` (LaTeX), with ``row_labels`` beside its rows;
        a single number as ``name = value``, and text (a dtype's name) as ``name = text``."""
        from IPython.display import Math, display

        from qkv_book.display import format_entry, show_matrix

        if isinstance(value, str):
            display(Math(rf"{name} = \text{{{value}}}"))
        elif np.ndim(value) == 0:
            display(Math(f"{name} = {format_entry(value)}"))
        else:
            display(show_matrix(name, value, row_labels=row_labels))

    def show_maps(self, weights, tokens, titles=None) -> None:
        """Display attention maps: one heatmap per head of ``weights`` ``(h, n, n)``, tokens on both axes."""
        from IPython.display import display

        from qkv_book.plots import head_grid

        display(head_grid(weights, tokens, titles=titles))

    def show_options(self, options) -> None:
        """Print the options of a multiple-choice question, lettered (a), (b), ..."""
        print("\n".join(f"({letter}) {_(text)}" for letter, text in zip("abcdefgh", options)))

    def show_tokens(self, tokens) -> None:
        """Print the tokens with their positions, counting from 0: ``0 [CLS]   1 the   2 delivery ...``."""
        print("   ".join(f"{position} {token}" for position, token in enumerate(tokens)))

    # ----------------------------------------------------------------------- checking

    def check(self, grade_id: str, answer) -> None:
        """Check ``answer`` with the check of the graded cell ``grade_id``; print its verdict.

        Under nbgrader a failed check raises :class:`AnswerMismatch` instead, so that
        nbgrader counts the cell as failed.
        """
        check = self.problem_set.check(grade_id)
        stray = io.StringIO()  # nothing reaches stderr: nbgrader would fail the cell for it
        with contextlib.redirect_stderr(stray), warnings.catch_warnings(), np.errstate(all="ignore"):
            warnings.simplefilter("ignore")
            if isinstance(check, FunctionCheck):
                verdict = self._check_function(check, answer)
            else:
                verdict = check.judge(answer, self.givens, reveal=False)
        _print_aside(_("output"), stray.getvalue())
        self.verdicts[grade_id] = verdict
        if not verdict.passed and os.environ.get(NBGRADER_VARIABLE):
            raise AnswerMismatch(verdict.message)
        mark, colour = ("\u2713", GREEN) if verdict.passed else ("\u2717", RED)
        print(f"{colour}{mark}{RESET} {verdict.message}")

    def _check_function(self, check: FunctionCheck, func) -> Verdict:
        if not callable(func):
            return Verdict(False, _("{name} is {type}, not a function: run the cell that defines it.").format(
                name=check.answer, type=type(func).__name__))
        if check.hidden:
            who = self.solver.student_id or f"practice {self.variant}"
            calls = check.calls(self.givens, np.random.default_rng(seed_for(self.problem_set.name, check.grade_id,
                                                                             who)))
        else:
            calls = self.problem_set.visible_calls(check, self.givens)
        outcomes, asides = [], {}
        for call in calls:
            outcome, printed = self._call(func, call)
            outcomes.append(outcome)
            for aside in printed:
                asides[aside] = asides.get(aside, 0) + 1
        for (what, text), count in asides.items():
            said = {"printed": ngettext("{name} printed", "{name} printed on {count} calls", count),
                    "warned": ngettext("{name} warned", "{name} warned on {count} calls", count)}[what]
            _print_aside(said.format(name=check.answer, count=count), text)
        failed, verdict = check.first_failure(outcomes, calls, reveal=False)
        if failed is not None and isinstance(outcomes[failed], Raised):
            print(outcomes[failed].traceback, end="")  # the student's own error, in their own frames
        return verdict

    @staticmethod
    def _call(func, call: Call) -> tuple[Returned | Raised, list[tuple[str, str]]]:
        """Call the student's function on a copy of the inputs, with qkv switched off.

        Returns the outcome, and what the function printed (to stdout or stderr) and the
        warnings it emitted: shown as ordinary output, greyed, they never fail a check.
        """
        args, kwargs = _fresh(call.args), _fresh(dict(call.kwargs))
        printed = io.StringIO()
        with qkv_switched_off(), contextlib.redirect_stdout(printed), contextlib.redirect_stderr(printed):
            result = call_student_function(func, args, kwargs)
        if result[0] == "returned":
            _, value, warned = result
            outcome = Returned(value)
        else:
            _, type_name, message, traceback_text, warned = result
            if type_name == "QkvNotAvailable":
                type_name, traceback_text = NOT_AVAILABLE, ""
            outcome = Raised(type_name, message, traceback_text)
        asides = [("printed", printed.getvalue().strip())] if printed.getvalue().strip() else []
        return outcome, asides + [("warned", text) for text in warned]

    # ----------------------------------------------------------------------- summary

    def summary(self) -> None:
        """Print every check of the problem set: passed, failed (and why) or not run yet."""
        lines = [_("Summary of {title} ({who}):").format(title=_(self.problem_set.title), who=self.solver.describe())]
        earned = possible = 0.0
        width = max(len(c.grade_id) for c in self.problem_set.checks)
        hidden_points = 0.0
        for check in self.problem_set.checks:
            if check.hidden:
                hidden_points += check.points
                continue
            possible += check.points
            verdict = self.verdicts.get(check.grade_id)
            if verdict is None:
                lines.append(f"  - {check.grade_id:<{width}}  " + _("not run yet"))
            elif verdict.passed:
                earned += check.points
                lines.append(f"  {GREEN}\u2713{RESET} {check.grade_id:<{width}}")
            else:
                first_line = verdict.message.splitlines()[0]
                lines.append(f"  {RED}\u2717{RESET} {check.grade_id:<{width}}  {first_line}")
        lines.append(_("{earned} of {possible} points from the checks above.").format(
            earned=f"{earned:g}", possible=f"{possible:g}"))
        if hidden_points:
            lines.append(ngettext("{count} more point comes from checks run only when your notebook is graded: they "
                                  "test the same things on other inputs.",
                                  "{count} more points come from checks run only when your notebook is graded: "
                                  "they test the same things on other inputs.",
                                  1 if hidden_points == 1 else 2).format(count=f"{hidden_points:g}"))
        print("\n".join(lines))


def _print_aside(what: str, text: str, limit: int = 500) -> None:
    """Print ``text`` greyed, on stdout, as an aside: ``(what: text)``."""
    text = text.strip()
    if text:
        shown = text if len(text) <= limit else text[:limit] + " ..."
        print(f"{GREY}({what}: {shown}){RESET}")


def _fresh(value):
    """A deep copy of a call's inputs, with each :class:`Rng` turned into a new generator."""
    if isinstance(value, Rng):
        return np.random.default_rng(value.seed)
    if isinstance(value, tuple) and not hasattr(value, "_fields"):
        return tuple(_fresh(v) for v in value)
    if isinstance(value, list):
        return [_fresh(v) for v in value]
    if isinstance(value, dict):
        return {k: _fresh(v) for k, v in value.items()}
    return copy.deepcopy(value)

