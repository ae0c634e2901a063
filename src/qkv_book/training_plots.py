"""Figures of the chapter on training attention: how close a finite difference gets to a gradient,
how much gradient gets through the softmax, a loss curve, and what removing a head does.

Built on :mod:`qkv_book.plots` (same fonts and conventions); every function returns a matplotlib
``Figure`` and computes nothing that the chapter does not show. The words a figure draws of its own
are in the reader's language (:mod:`qkv_book.language`); the labels a chapter passes in are drawn as
given, and the chapter translates them.
"""

from __future__ import annotations

import numpy as np
from matplotlib.figure import Figure

from qkv.validate import as_real_array, shape_str

from .language import _
from .plots import figure_png  # noqa: F401  (importing plots sets the fonts and the IPython display)

BLUE, ORANGE, GREY = "#3b75af", "#d9541a", "#888888"


def _vectors(**named) -> list[np.ndarray]:
    arrays = [as_real_array(name, value) for name, value in named.items()]
    if any(a.ndim != 1 for a in arrays) or len({a.shape for a in arrays}) != 1:
        shapes = ", ".join(f"{name} {shape_str(a.shape)}" for name, a in zip(named, arrays))
        raise ValueError(f"expected vectors of one length, got {shapes}")
    return arrays


def difference_error(steps, errors, *, size: float = 3.2, dpi: int = 90) -> Figure:
    """Log-log plot of the largest error of a central difference against its step ``h``."""
    steps, errors = _vectors(steps=steps, errors=errors)
    fig = Figure(figsize=(size * 1.3, size), dpi=dpi, layout="constrained")
    ax = fig.add_subplot()
    ax.plot(steps, errors, "o-", color=BLUE, label=_("measured: largest |difference − gradient|"))
    reference = errors[np.argmax(steps)] * (steps / steps.max()) ** 2
    ax.plot(steps, reference, "--", color=GREY, alpha=0.7, label=_("slope 2: error ∝ $h^2$"))
    ax.plot(steps, 1e-16 / steps, ":", color=ORANGE, alpha=0.8, label=_("rounding: $10^{-16}/h$"))
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_ylim(errors.min() / 10, errors.max() * 10)
    ax.set_xlabel(_("step $h$"))
    ax.set_ylabel(_("largest error"))
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)
    return fig


def gradient_share(d_k, scaled, unscaled, *, size: float = 3.2, dpi: int = 90) -> Figure:
    """Log-log plot of how much of the gradient at the weights reaches the scores, against ``d_k``,
    with and without the division by sqrt(d_k)."""
    d_k, scaled, unscaled = _vectors(d_k=d_k, scaled=scaled, unscaled=unscaled)
    fig = Figure(figsize=(size * 1.3, size), dpi=dpi, layout="constrained")
    ax = fig.add_subplot()
    ax.plot(d_k, scaled, "s-", color=ORANGE, label=_(r"scores $QK^\top/\sqrt{d_k}$"))
    ax.plot(d_k, unscaled, "o-", color=BLUE, label=_(r"scores $QK^\top$ (not divided)"))
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel("$d_k$")
    ax.set_ylabel(_(r"median $\|dS_i\| \,/\, \|dA_i\|$"))
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    return fig


def loss_curve(curves: dict, *, floor: float | None = None, floor_label: str = "", size: float = 3.2,
               dpi: int = 90) -> Figure:
    """Loss against training step, one line per entry of ``curves`` (``{label: (steps, losses)}``),
    and an optional dashed line at ``floor`` (the loss of a uniform guess)."""
    fig = Figure(figsize=(size * 1.6, size), dpi=dpi, layout="constrained")
    ax = fig.add_subplot()
    colours = iter((BLUE, ORANGE, GREY))
    for label, (steps, losses) in curves.items():
        steps, losses = _vectors(steps=steps, losses=losses)
        ax.plot(steps, losses, color=next(colours), linewidth=1.0, label=label)
    if floor is not None:
        ax.axhline(floor, linestyle="--", color=GREY, alpha=0.7, label=floor_label)
    ax.set_xlabel(_("training step"))
    ax.set_ylabel(_("loss (cross-entropy)"))
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    return fig


def ablation_bars(labels, accuracies, *, full: float, size: float = 3.2, dpi: int = 90) -> Figure:
    """One horizontal bar per ablation: the accuracy of the model without that part, and the whole
    model's accuracy ``full`` as a dashed line."""
    labels = [str(label) for label in labels]
    (accuracies,) = _vectors(accuracies=accuracies)
    if len(labels) != len(accuracies):
        raise ValueError(f"{len(labels)} labels for {len(accuracies)} accuracies")
    fig = Figure(figsize=(size * 1.6, 0.32 * len(labels) + 0.9), dpi=dpi, layout="constrained")
    ax = fig.add_subplot()
    rows = np.arange(len(labels))[::-1]
    ax.barh(rows, accuracies, color=[ORANGE if a < 0.5 * full else BLUE for a in accuracies])
    for row, accuracy in zip(rows, accuracies):
        ax.text(accuracy + 0.01, row, f"{accuracy:.0%}", va="center", fontsize=8)
    ax.axvline(full, linestyle="--", color=GREY,
               label=_("whole model: {full:.0%}").format(full=full))
    ax.set_yticks(rows, labels, fontsize=8)
    ax.set_xlim(0, 1.12)
    ax.set_xlabel(_("next tokens of the repeat predicted correctly"))
    ax.legend(fontsize=8, loc="lower right")
    return fig
