"""Figures of attention at inference: times against n, query heads sharing key/value heads, ALiBi's
reach, masks as grids, and scores against the distance with the trained range shaded.

Built on :mod:`qkv_book.plots` (importing it registers the CJK font and shows figures in IPython).
Every function returns a :class:`matplotlib.figure.Figure` made without pyplot. The words a figure
draws of its own are in the reader's language (:mod:`qkv_book.language`); the titles and labels a
chapter passes in are drawn as given, and the chapter translates them.
"""

from __future__ import annotations

import matplotlib
import numpy as np
from matplotlib.colors import ListedColormap
from matplotlib.figure import Figure

from qkv.validate import as_real_array, shape_str

from . import plots  # noqa: F401  (the CJK font and IPython display)
from .language import _
from .plots import _arrow, _box

MASK_CMAP = ListedColormap(["#f2f2f2", "#3b75af"])  # blocked, may attend


def times_against_n(n, seconds: dict, *, title: str = "", ylabel: str | None = None,
                    size: float = 3.2, dpi: int = 90) -> Figure:
    """Measured times against the number of tokens ``n`` on log-log axes, one line per
    ``{label: seconds}``, each with the same length as ``n``. Two grey guides end on the last point
    of a line: one growing as n on the first line's, one growing as n² on the last line's. The
    y axis is labelled ``ylabel``, by default "time (milliseconds)" in the reader's language."""
    n = as_real_array("n", n)
    if n.ndim != 1 or not seconds:
        raise ValueError("times_against_n needs a vector n and at least one line of times")
    fig = Figure(figsize=(size * 1.55, size), dpi=dpi, layout="constrained")
    ax = fig.add_subplot()
    lines = []
    for (label, values), marker in zip(seconds.items(), "os^d"):
        values = as_real_array(f"seconds[{label!r}]", values)
        if values.shape != n.shape:
            raise ValueError(f"seconds[{label!r}] has shape {shape_str(values.shape)}, n has "
                             f"{shape_str(n.shape)}")
        ax.plot(n, values * 1e3, marker=marker, label=label)
        lines.append(values * 1e3)
    for power, line, style, guide in ((1, lines[0], ":", "n"), (2, lines[-1], "--", "$n^2$")):
        ax.plot(n, line[-1] * (n / n[-1]) ** power, style, color="#888888", lw=1,
                label=_("grows as {guide}").format(guide=guide))
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    ax.set_xlabel(_("$n$ (tokens)"))
    ax.set_ylabel(_("time (milliseconds)") if ylabel is None else ylabel)
    if title:
        ax.set_title(title, fontsize=10)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=8)
    return fig


def head_groups(h: int, groups: dict, *, dpi: int = 90) -> Figure:
    """Which key/value head each of ``h`` query heads reads, one row of boxes per
    ``{title: kv_of}``, where ``kv_of`` ``(h,)`` gives the key/value head of each query head
    (as :func:`qkv.kv_head_of` returns it). Heads are numbered from 0, as in the formula."""
    if not groups:
        raise ValueError("head_groups needs at least one grouping")
    fig = Figure(figsize=(1.0 + 0.62 * h, 1.55 * len(groups)), dpi=dpi)
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(-1.6, h)
    ax.set_ylim(-0.2, 2.2 * len(groups))
    ax.axis("off")
    for row, (title, kv_of) in enumerate(groups.items()):
        kv_of = np.asarray(kv_of)
        if kv_of.shape != (h,):
            raise ValueError(f"groups[{title!r}] has shape {shape_str(kv_of.shape)}; one key/value head "
                             f"per query head: ({h},)")
        g = int(kv_of.max()) + 1
        y = 2.2 * (len(groups) - 1 - row)
        ax.text(-1.5, y + 1.55, title, fontsize=10, va="center", ha="left")
        width = h / g
        for j in range(g):  # key/value heads, spread under their query heads
            left = width * j + 0.08
            _box(ax, (left, y), width - 0.26, 0.5, f"K, V {j}" if width > 1.2 else f"{j}",
                 color="#fbe3cf", edge="#b8560f", fontsize=8)
        for i in range(h):
            _box(ax, (i + 0.08, y + 1.0), 0.74, 0.42, f"Q {i}", fontsize=8)
            kv_centre = width * kv_of[i] + (width - 0.1) / 2
            _arrow(ax, (i + 0.45, y + 0.98), (kv_centre, y + 0.52), color="#777777")
        ax.text(-1.5, y + 1.2, _("query heads"), fontsize=8, va="center")
        ax.text(-1.5, y + 0.25, _("key/value\nheads"), fontsize=8, va="center")
    return fig


def mask_grids(masks: dict, *, size: float = 2.2, dpi: int = 90) -> Figure:
    """Boolean masks ``(n, n)`` as grids side by side, one per ``{title: mask}``: dark where the query
    (row) may attend to the key (column), light where the pair is blocked."""
    if not masks:
        raise ValueError("mask_grids needs at least one mask")
    fig = Figure(figsize=(size * len(masks) + 0.3, size + 0.45), dpi=dpi, layout="constrained")
    axes = fig.subplots(1, len(masks), squeeze=False)[0]
    for ax, (title, mask) in zip(axes, masks.items()):
        mask = np.asarray(mask)
        if mask.dtype != np.bool_ or mask.ndim != 2:
            raise ValueError(f"masks[{title!r}] must be a boolean matrix, got {mask.dtype} "
                             f"{shape_str(mask.shape)}")
        n_q, n_k = mask.shape
        ax.imshow(mask, cmap=MASK_CMAP, vmin=0, vmax=1, interpolation="nearest")
        ax.set_xticks(np.arange(-0.5, n_k), minor=True)
        ax.set_yticks(np.arange(-0.5, n_q), minor=True)
        ax.grid(which="minor", color="white", linewidth=0.6)
        ax.tick_params(which="both", length=0, labelsize=7)
        ax.set_xticks(range(0, n_k, max(1, n_k // 4)))
        ax.set_yticks(range(0, n_q, max(1, n_q // 4)))
        ax.xaxis.tick_top()
        pairs = _("{kept} of {total} pairs").format(kept=int(mask.sum()), total=mask.size)
        ax.set_title(f"{title}\n{pairs}", fontsize=9)
    axes[0].set_ylabel(_("query i"))
    return fig


def alibi_reach(distances, slopes, *, size: float = 3.2, dpi: int = 90) -> Figure:
    """The factor :math:`e^{-m r}` by which ALiBi scales a key's share at distance ``r``, one line per
    slope, on a logarithmic distance axis: each head's reach is about ``1 / m`` tokens."""
    distances, slopes = as_real_array("distances", distances), as_real_array("slopes", slopes)
    fig = Figure(figsize=(size * 1.7, size), dpi=dpi, layout="constrained")
    ax = fig.add_subplot()
    colours = matplotlib.colormaps["viridis"](np.linspace(0, 0.9, len(slopes)))
    for k, (m, colour) in enumerate(zip(slopes, colours), start=1):
        label = _("head {number}: m = 1/{reach:g}").format(number=k, reach=1 / m)
        ax.plot(distances, np.exp(-m * distances), color=colour, label=label)
    ax.set_xscale("log", base=2)
    ax.set_xlabel(_("distance $r = i - j$ (tokens)"))
    ax.set_ylabel(_(r"factor $e^{-m r}$ on the key's share"))
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return fig


def scores_past_training(distances, curves: dict, trained: int, *, ylim=None,
                         ylabel: str | None = None, size: float = 3.2, dpi: int = 90) -> Figure:
    """Scores against the distance from the query, one line per ``{label: scores}``, with the
    distances a model trained on ``trained`` tokens has seen shaded. The y axis is labelled
    ``ylabel``, by default "score" in the reader's language."""
    distances = as_real_array("distances", distances)
    if not curves:
        raise ValueError("scores_past_training needs at least one curve")
    fig = Figure(figsize=(size * 1.8, size), dpi=dpi, layout="constrained")
    ax = fig.add_subplot()
    seen = _("distances seen in training (< {trained})").format(trained=trained)
    ax.axvspan(distances.min(), trained - 1, color="#e8f0e0", label=seen)
    styles = [dict(color="black", lw=2.2, alpha=0.45), *({"lw": 1.4} for _ in range(len(curves)))]
    for (label, values), style in zip(curves.items(), styles):
        values = as_real_array(f"curve {label!r}", values)
        if values.shape != distances.shape:
            raise ValueError(f"curve {label!r} has shape {shape_str(values.shape)}, distances has "
                             f"{shape_str(distances.shape)}")
        ax.plot(distances, values, label=label, **style)
    if ylim is not None:
        ax.set_ylim(*ylim)
    ax.set_xlabel(_("distance $r$ from the query to the key (tokens)"))
    ax.set_ylabel(_("score") if ylabel is None else ylabel)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    return fig
