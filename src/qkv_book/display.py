"""Show matrices the way the seed articles print them: a name, a shape and the entries.

The book displays every matrix that :mod:`qkv` computes as LaTeX, for example

.. math:: Q^{(1)}\\ (3\\times 2) = \\begin{bmatrix} 1 & 0 \\\\ 0 & 1 \\\\ 1 & 1 \\end{bmatrix}

:func:`labelled` and :func:`shaped` build the LaTeX pieces; :func:`show` joins
pieces into one displayed equation (an :class:`IPython.display.Math`, which the
website typesets with MathJax). Import it explicitly: ``import qkv_book.display``.
"""

from __future__ import annotations

import inspect
import re
import textwrap

import numpy as np
from IPython.display import Math

from qkv.validate import as_real_array

DEFAULT_DECIMALS = 6  # the seeds print six decimals: 0.707107, 0.665241


def format_entry(x: float, decimals: int = DEFAULT_DECIMALS) -> str:
    """``x`` as the seeds print it: an exact short value short, a rounded one with all ``decimals``.

    ``0.5`` -> ``0.5`` and ``2.0`` -> ``2`` (nothing was rounded away), but ``0.50648044`` ->
    ``0.506480``: trailing zeros are dropped only when the shorter number is ``x`` itself (up to
    floating-point noise), so a reader never takes a rounded value for an exact one. A value
    that rounds to zero prints as ``0`` (never ``-0``).
    """
    if isinstance(decimals, bool) or not isinstance(decimals, (int, np.integer)) or decimals < 0:
        raise ValueError(f"decimals must be a whole number >= 0, got {decimals!r}")
    x = float(x)
    text = f"{x:.{decimals}f}"
    if "." in text:
        short = text.rstrip("0").rstrip(".")
        if abs(float(short) - x) <= 1e-9 * max(1.0, abs(x)):  # the shorter number is x: nothing rounded away
            text = short
    return "0" if float(text) == 0 else text


def shape_latex(M) -> str:
    r"""The shape of ``M`` in the seeds' form: ``(3\times 2)``; a vector ``(n,)`` counts as one row."""
    shape = np.shape(M)
    if len(shape) == 1:
        shape = (1, shape[0])
    return "(" + r"\times ".join(str(s) for s in shape) + ")"


def bmatrix(M, decimals: int = DEFAULT_DECIMALS, row_labels=None) -> str:
    r"""``M`` (a matrix, or a vector shown as one row) as ``\begin{bmatrix} ... \end{bmatrix}``.

    ``row_labels`` (one per row, e.g. the tokens) are written to the right of the rows.
    """
    M = as_real_array("M", M)
    if M.ndim == 1:
        M = M[None, :]  # (1, n): a row
    if M.ndim != 2:
        raise ValueError(f"bmatrix shows a vector or a matrix, got shape {M.shape}")
    rows = [" & ".join(format_entry(x, decimals) for x in row) for row in M]
    latex = r"\begin{bmatrix} " + r" \\ ".join(rows) + r" \end{bmatrix}"
    if row_labels is None:
        return latex
    row_labels = [str(label) for label in row_labels]
    if len(row_labels) != M.shape[0]:
        raise ValueError(f"row_labels has {len(row_labels)} labels but the matrix has {M.shape[0]} rows")
    notes = r" \\ ".join(rf"\leftarrow \text{{{label}}}" for label in row_labels)
    return latex + r" \begin{matrix} " + notes + r" \end{matrix}"


def shaped(name: str, M) -> str:
    r"""A matrix's name with its shape, no entries: ``X\ (3\times 4)``."""
    return rf"{name}\ {shape_latex(M)}"


def labelled(name: str, M, decimals: int = DEFAULT_DECIMALS, row_labels=None) -> str:
    r"""Name, shape and entries: ``Q\ (3\times 2) = \begin{bmatrix} ... \end{bmatrix}``.

    ``row_labels`` (e.g. the tokens) are written to the right of the rows.
    """
    return rf"{shaped(name, M)} = {bmatrix(M, decimals, row_labels)}"


def show(*pieces: str) -> Math:
    r"""One displayed equation made of LaTeX pieces, joined by spaces.

    Example: ``show(labelled("Q_{raw}", Q_raw), "+", labelled("B_Q", B), "=", labelled("Q", Q))``.
    """
    for piece in pieces:
        if not isinstance(piece, str):
            raise TypeError(f"show() takes LaTeX strings (use labelled() or shaped()), got {type(piece).__name__}")
    return Math(" ".join(pieces))


def show_matrix(name: str, M, decimals: int = DEFAULT_DECIMALS, row_labels=None) -> Math:
    """One displayed matrix with its name and shape (and ``row_labels`` to the right of its rows)."""
    return show(labelled(name, M, decimals, row_labels))


def head_step_names(head: int) -> dict[str, str]:
    """LaTeX names of the steps of :meth:`qkv.HeadTrace.steps` for head number ``head`` (1-based)."""
    h = f"^{{({head})}}"
    return {
        "Q_raw": rf"Q_{{\mathrm{{raw}}}}{h}", "B_Q": rf"B_Q{h}", "Q": f"Q{h}",
        "K_raw": rf"K_{{\mathrm{{raw}}}}{h}", "B_K": rf"B_K{h}", "K": f"K{h}",
        "V_raw": rf"V_{{\mathrm{{raw}}}}{h}", "B_V": rf"B_V{h}", "V": f"V{h}",
        "K_T": rf"K^{{({head})\top}}", "S_raw": rf"S_{{\mathrm{{raw}}}}{h}", "S": f"S{h}",
        "A": f"A{h}", "O": f"O{h}",
    }


def chain(lhs: str, *steps: str) -> str:
    r"""An equation over several lines: ``lhs = steps[0]``, then ``= steps[1]``, ... aligned on ``=``.

    Long equations (a sum of two matrices and its result) fit the page this way.
    """
    if not steps:
        raise ValueError("chain needs at least one step after the left-hand side")
    lines = [rf"{lhs} &= {steps[0]}"] + [rf"&= {step}" for step in steps[1:]]
    return r"\begin{aligned} " + r" \\ ".join(lines) + r" \end{aligned}"


def projection_chain(name: str, projection, *, raw_name: str, bias_name: str, product: str | None = None,
                     decimals: int = DEFAULT_DECIMALS, row_labels=None) -> str:
    r"""A projection ``Z = XW + B`` from a :class:`qkv.Projection`, in three aligned lines.

    ``name (shape) = product + B (shape)``, then ``= [XW] + [B]``, then ``= [Z]``.
    ``product`` is the LaTeX of the product (for example ``shaped("X", X) + r"\cdot" + ...``);
    without it, ``raw_name`` with its shape stands in line 1.
    """
    first = product if product is not None else shaped(raw_name, projection.raw)
    raw, bias = bmatrix(projection.raw, decimals), bmatrix(projection.B, decimals)
    if np.shape(projection.raw)[-1] > 3:  # two wide matrices side by side would not fit a phone
        sum_lines = rf"{raw} \\ &\phantom{{=}} + {bias}"
    else:
        sum_lines = f"{raw} + {bias}"
    return chain(
        shaped(name, projection.Z),
        f"{first} + {shaped(bias_name, projection.B)}",
        sum_lines,
        bmatrix(projection.Z, decimals, row_labels),
    )


def head_trace_equations(trace, head: int, decimals: int = DEFAULT_DECIMALS, row_labels=None) -> list[str]:
    r"""Every step of one head's :class:`qkv.HeadTrace` as LaTeX equations, in seed 000's order.

    One equation per projection (``Q = Q_raw + B_Q``, likewise K and V), then
    ``K^T``, ``S_raw = Q K^T``, ``S = S_raw / sqrt(d_k)``, ``A = softmax(S)`` and ``O = A V``,
    each over two lines (the definition, then the matrix) so that it fits a narrow page.
    ``row_labels`` (the tokens) are written next to the rows of Q, K, V, A and O.
    The division is written ``\sqrt{d_k}`` with the number ``d_k``, never as a rounded root.
    """
    names = head_step_names(head)
    steps = dict(trace.steps())
    d_k = steps["Q"].shape[-1]

    def projection(role):
        return projection_chain(names[role], getattr(trace, role), raw_name=names[f"{role}_raw"],
                                bias_name=names[f"B_{role}"], decimals=decimals, row_labels=row_labels)

    def result(key, *definition, labels=None):
        return chain(shaped(names[key], steps[key]), " ".join(definition), bmatrix(steps[key], decimals, labels))

    return [
        projection("Q"),
        projection("K"),
        projection("V"),
        labelled(names["K_T"], steps["K_T"], decimals),
        result("S_raw", names["Q"], names["K_T"]),
        result("S", rf"\frac{{{names['S_raw']}}}{{\sqrt{{{d_k}}}}}"),
        result("A", rf"\mathrm{{softmax}}({names['S']})", labels=row_labels),
        result("O", names["A"], names["V"], labels=row_labels),
    ]


def show_head_trace(trace, head: int, decimals: int = DEFAULT_DECIMALS, row_labels=None) -> None:
    """Display every step of one head (see :func:`head_trace_equations`), one equation per output."""
    from IPython.display import display

    for equation in head_trace_equations(trace, head, decimals, row_labels):
        display(Math(equation))


def head_parameter_equations(head, number: int, decimals: int = DEFAULT_DECIMALS, roles: str = "QKV") -> list[str]:
    r"""One head's parameters as LaTeX, one equation per role: ``W_Q^{(i)} = [...]`` above ``b_Q^{(i)} = [...]``.

    ``head`` is a :class:`qkv.Head` (a missing bias shows as zeros); ``number`` is its
    1-based number in the text; ``roles`` picks some of ``"QKV"``.
    """
    lines = []
    for role in roles:
        W, b = getattr(head, f"W_{role}"), getattr(head, f"b_{role}")
        b = np.zeros(W.shape[1]) if b is None else b
        rows = [(f"W_{role}^{{({number})}}", W), (f"b_{role}^{{({number})}}", b)]
        aligned = r" \\ ".join(rf"{shaped(name, M)} &= {bmatrix(M, decimals)}" for name, M in rows)
        lines.append(r"\begin{aligned} " + aligned + r" \end{aligned}")
    return lines


def show_head_parameters(head, number: int, decimals: int = DEFAULT_DECIMALS) -> None:
    """Display one head's parameters (see :func:`head_parameter_equations`)."""
    from IPython.display import display

    for equation in head_parameter_equations(head, number, decimals):
        display(Math(equation))


def masked_bmatrix(M, allowed, decimals: int = DEFAULT_DECIMALS) -> str:
    r"""Scores ``M`` ``(n_q, n_k)`` after masking, as a bmatrix: blocked entries show as ``-\infty``.

    ``allowed`` is a boolean mask of the same shape (True = may attend), as :mod:`qkv` uses it.
    """
    M = as_real_array("M", M)
    allowed = np.asarray(allowed)
    if M.ndim != 2 or allowed.shape != M.shape or allowed.dtype != np.bool_:
        raise ValueError(f"masked_bmatrix needs a matrix and a boolean mask of its shape, got shapes "
                         f"{M.shape} and {allowed.shape} (dtype {allowed.dtype})")
    rows = [" & ".join(format_entry(x, decimals) if ok else r"-\infty" for x, ok in zip(row, ok_row))
            for row, ok_row in zip(M, allowed)]
    return r"\begin{bmatrix} " + r" \\ ".join(rows) + r" \end{bmatrix}"


class Source:
    """The source of a function, class or method as a highlighted Python block.

    A chapter shows the exact code of :mod:`qkv` with ``show_source(qkv.linear)``: the text is
    read from the installed module, so it is always the code that runs. The block is Markdown
    (a fenced ``python`` block), which the website and JupyterLab both render.
    """

    def __init__(self, obj):
        try:
            self.code = textwrap.dedent(inspect.getsource(obj)).rstrip()
        except (TypeError, OSError) as error:
            raise TypeError(f"show_source needs a function, class or method defined in a file, got {obj!r}") from error
        self.name = getattr(obj, "__qualname__", repr(obj))

    def _repr_markdown_(self) -> str:
        longest_run = max((len(run) for run in re.findall(r"`+", self.code)), default=0)
        fence = "`" * max(3, longest_run + 1)
        return f"{fence}python\n{self.code}\n{fence}"

    def __repr__(self) -> str:
        return self.code


def show_source(obj) -> Source:
    """The exact source of ``obj`` (for example ``qkv.linear``), shown as a Python block."""
    return Source(obj)
