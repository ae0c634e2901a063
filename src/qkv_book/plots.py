"""Figures for the book: attention heatmaps with Chinese labels, a grid of heads, maps over an image.

Importing this module registers Noto Sans TC (shipped by the pip package
``pylopdf-fonts-zh-tw``) with matplotlib and puts it first in the font list, so
tokens such as 外送, 晚到 and 補償 are drawn as characters and never as empty boxes.
Import it explicitly (``import qkv_book.plots``); ``import qkv`` alone needs only numpy.

Every function returns a :class:`matplotlib.figure.Figure` made without pyplot:
in a notebook the figure shows when it is the cell's value, and nothing is drawn twice.
"""

from __future__ import annotations

import io
import logging

import matplotlib
import numpy as np
import pylopdf_fonts_zh_tw


class _NoFontCacheNotice(logging.Filter):
    """Drop matplotlib's "building the font cache" notice: on a fresh machine it would reach a
    chapter's stderr, which fails the book build, although nothing is wrong."""

    def filter(self, record: logging.LogRecord) -> bool:
        return "building the font cache" not in record.getMessage()


logging.getLogger("matplotlib.font_manager").addFilter(_NoFontCacheNotice())

from matplotlib import font_manager  # noqa: E402  (after the filter: importing it may build the cache)
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.patches import Rectangle  # noqa: E402

from qkv.validate import as_real_array, shape_str  # noqa: E402

CJK_FONT_NAME = "Noto Sans TC"
WEIGHTS_CMAP = "Blues"  # weights run from 0 (white) to 1 (dark blue)


def use_cjk_font() -> str:
    """Register Noto Sans TC with matplotlib and make it the first sans-serif font; return its name.

    DejaVu Sans stays second, as the fallback for any symbol Noto Sans TC lacks.
    Calling this again registers nothing new.
    """
    if CJK_FONT_NAME not in {font.name for font in font_manager.fontManager.ttflist}:
        font_manager.fontManager.addfont(str(pylopdf_fonts_zh_tw.sans_path()))
    matplotlib.rcParams["font.family"] = "sans-serif"
    matplotlib.rcParams["font.sans-serif"] = [CJK_FONT_NAME, "DejaVu Sans"]
    return CJK_FONT_NAME


def show_figures_in_ipython() -> bool:
    """In IPython or Jupyter, let a :class:`~matplotlib.figure.Figure` that is a cell's value show as a PNG.

    ``%matplotlib inline`` does this only once pyplot is imported, and this module
    does not use pyplot. A PNG format the user has already chosen is kept. Returns
    whether a shell was found.
    """
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - IPython comes with the book's requirements
        return False
    shell = get_ipython()
    if shell is None:
        return False
    png_formatter = shell.display_formatter.formatters["image/png"]
    try:
        png_formatter.lookup_by_type(Figure)
    except KeyError:
        from functools import partial

        from IPython.core.pylabtools import print_figure

        png_formatter.for_type(Figure, partial(print_figure, fmt="png", base64=True))
    return True


use_cjk_font()
show_figures_in_ipython()


def _labels(name: str, labels, count: int, axis: str) -> list[str]:
    labels = [str(label) for label in labels]
    if len(labels) != count:
        raise ValueError(f"{name} has {len(labels)} labels but the matrix has {count} {axis}")
    return labels


def draw_heatmap(ax, weights, row_labels, col_labels, *, annotate: bool = True, decimals: int = 2,
                 vmax: float | None = 1.0, cmap: str = WEIGHTS_CMAP):
    """Draw a weight matrix ``(n_q, n_k)`` on ``ax``: one row per query, one column per key.

    Rows are labelled with the query tokens (left), columns with the key tokens
    (top), and each cell shows its value to ``decimals`` places when ``annotate``.
    ``vmax=None`` scales the colours to the largest entry instead of 1.
    Returns the image, for a colour bar.
    """
    weights = as_real_array("weights", weights)
    if weights.ndim != 2:
        raise ValueError(f"a heatmap shows a matrix (n_q, n_k), got shape {shape_str(weights.shape)}")
    n_q, n_k = weights.shape
    rows = _labels("row_labels", row_labels, n_q, "rows")
    cols = _labels("col_labels", col_labels, n_k, "columns")
    top = weights.max() if vmax is None else vmax
    image = ax.imshow(weights, cmap=cmap, vmin=min(0.0, weights.min()), vmax=top)
    ax.set_xticks(range(n_k), cols)
    ax.set_yticks(range(n_q), rows)
    ax.xaxis.tick_top()
    ax.xaxis.set_label_position("top")
    ax.set_xlabel("key (attended to)")
    ax.set_ylabel("query (attending)")
    ax.tick_params(length=0)
    if annotate:
        for i in range(n_q):
            for j in range(n_k):
                dark = weights[i, j] > 0.6 * top
                ax.text(j, i, f"{weights[i, j]:.{decimals}f}", ha="center", va="center",
                        color="white" if dark else "black", fontsize=9)
    return image


def heatmap(weights, row_labels, col_labels=None, *, title: str | None = None, annotate: bool = True,
            decimals: int = 2, size: float = 3.2, dpi: int = 90) -> Figure:
    """A figure with one labelled heatmap of ``weights`` ``(n_q, n_k)``; keys default to the row labels."""
    fig = Figure(figsize=(size + 0.9, size), dpi=dpi, layout="constrained")
    ax = fig.add_subplot()
    image = draw_heatmap(ax, weights, row_labels, row_labels if col_labels is None else col_labels,
                         annotate=annotate, decimals=decimals)
    fig.colorbar(image, ax=ax, shrink=0.8)
    if title:
        ax.set_title(title)
    return fig


def head_grid(weights, tokens, *, titles=None, columns: int | None = None, annotate: bool = True,
              size: float = 2.8, dpi: int = 90) -> Figure:
    """One heatmap per head, side by side: ``weights`` ``(h, n, n)`` with the same tokens on both axes.

    ``titles`` defaults to ``head 1``, ``head 2``, ...; ``columns`` to all heads in one row.
    """
    weights = as_real_array("weights", weights)
    if weights.ndim != 3:
        raise ValueError(f"head_grid needs weights of shape (h, n, n), got {shape_str(weights.shape)}")
    h = weights.shape[0]
    titles = [f"head {i + 1}" for i in range(h)] if titles is None else _labels("titles", titles, h, "heads")
    columns = h if columns is None else max(1, min(columns, h))
    rows = -(-h // columns)
    fig = Figure(figsize=(size * columns + 0.8, size * rows + 0.3), dpi=dpi, layout="constrained")
    axes = fig.subplots(rows, columns, squeeze=False)
    for index, ax in enumerate(axes.flat):
        if index >= h:
            ax.set_visible(False)
            continue
        image = draw_heatmap(ax, weights[index], tokens, tokens, annotate=annotate)
        ax.set_title(titles[index])
        if index % columns:
            ax.set_ylabel("")
    fig.colorbar(image, ax=axes, shrink=0.8)
    return fig


def draw_patch_attention(ax, image, grid_weights, *, query_patch: tuple[int, int] | None = None,
                         alpha: float = 0.6, cmap: str = "inferno"):
    """Draw ``image`` with one query's weights over its patch grid ``(rows, cols)`` on top.

    Each patch is tinted by its weight (bright = much attention); thin lines mark
    the patch borders, and a box marks ``query_patch`` (row, column) if given.
    Returns the overlay image, for a colour bar.
    """
    image = np.asarray(image)
    grid_weights = as_real_array("grid_weights", grid_weights)
    if grid_weights.ndim != 2:
        raise ValueError(f"grid_weights must be (rows, cols), got shape {shape_str(grid_weights.shape)}")
    height, width = image.shape[:2]
    rows, cols = grid_weights.shape
    if height % rows or width % cols:
        raise ValueError(f"an image of {height}x{width} pixels does not split into a {rows}x{cols} patch grid")
    patch_h, patch_w = height // rows, width // cols
    ax.imshow(image, cmap="gray" if image.ndim == 2 else None)
    overlay = ax.imshow(grid_weights, cmap=cmap, alpha=alpha, extent=(0, width, height, 0),
                        interpolation="nearest", vmin=0.0, vmax=grid_weights.max())
    for r in range(1, rows):
        ax.axhline(r * patch_h, color="white", linewidth=0.4, alpha=0.5)
    for c in range(1, cols):
        ax.axvline(c * patch_w, color="white", linewidth=0.4, alpha=0.5)
    if query_patch is not None:
        r, c = query_patch
        ax.add_patch(Rectangle((c * patch_w, r * patch_h), patch_w, patch_h, fill=False,
                               edgecolor="cyan", linewidth=2))
    ax.set_xticks([])
    ax.set_yticks([])
    return overlay


def patch_attention(image, maps: dict, *, size: float = 2.9, dpi: int = 90) -> Figure:
    """The image, then one panel per query: ``maps`` is ``{title: (grid_weights, query_patch)}``.

    ``grid_weights`` is one query's weights laid on the patch grid ``(rows, cols)`` (see
    :func:`qkv.to_patch_grid`); ``query_patch`` is that query's (row, column), boxed, or None.
    """
    if not maps:
        raise ValueError("patch_attention needs at least one map")
    height, width = np.shape(image)[:2]
    fig = Figure(figsize=(size * (1 + len(maps)) + 0.5, size * height / width + 0.3), dpi=dpi,
                 layout="constrained")
    axes = fig.subplots(1, 1 + len(maps), squeeze=False)[0]
    axes[0].imshow(image, cmap="gray" if np.ndim(image) == 2 else None)
    axes[0].set_xticks([])
    axes[0].set_yticks([])
    axes[0].set_title("image")
    for ax, (title, (grid_weights, query_patch)) in zip(axes[1:], maps.items()):
        overlay = draw_patch_attention(ax, image, grid_weights, query_patch=query_patch)
        ax.set_title(title)
        fig.colorbar(overlay, ax=ax, shrink=0.7)
    return fig


def weight_bars(panels: dict, labels, *, size: float = 2.6, dpi: int = 90, suptitle: str | None = None) -> Figure:
    """Side-by-side bar charts of weight vectors, one panel per ``{title: weights (n,)}`` entry.

    The y axis runs from 0 to 1 in every panel so that panels compare at a glance,
    and each bar carries its value to two decimals.
    """
    if not panels:
        raise ValueError("weight_bars needs at least one panel")
    fig = Figure(figsize=(size * len(panels) + 0.4, size), dpi=dpi, layout="constrained")
    axes = fig.subplots(1, len(panels), squeeze=False)[0]
    for ax, (title, weights) in zip(axes, panels.items()):
        weights = as_real_array(f"panel {title!r}", weights)
        if weights.ndim != 1:
            raise ValueError(f"panel {title!r} must be a vector of weights, got shape {shape_str(weights.shape)}")
        names = _labels(f"labels of panel {title!r}", labels, weights.shape[0], "weights")
        bars = ax.bar(range(len(names)), weights, color="#3b75af")
        ax.bar_label(bars, labels=[f"{w:.2f}" for w in weights], fontsize=8, padding=1)
        ax.set_xticks(range(len(names)), names)
        ax.set_ylim(0, 1.12)
        ax.set_title(title, fontsize=10)
    axes[0].set_ylabel("weight")
    if suptitle:
        fig.suptitle(suptitle, fontsize=10)
    return fig


def score_variance(d_k, var_raw, var_scaled, *, size: float = 3.4, dpi: int = 90) -> Figure:
    """Log-log plot of the measured variance of q.k (raw and divided by sqrt(d_k)) against d_k,
    with the predictions Var = d_k and Var = 1 as dashed lines."""
    d_k = as_real_array("d_k", d_k)
    var_raw, var_scaled = as_real_array("var_raw", var_raw), as_real_array("var_scaled", var_scaled)
    if not (d_k.shape == var_raw.shape == var_scaled.shape) or d_k.ndim != 1:
        raise ValueError(
            f"d_k, var_raw and var_scaled must be vectors of one length, got {shape_str(d_k.shape)}, "
            f"{shape_str(var_raw.shape)} and {shape_str(var_scaled.shape)}"
        )
    fig = Figure(figsize=(size * 1.3, size), dpi=dpi, layout="constrained")
    ax = fig.add_subplot()
    ax.plot(d_k, d_k, "--", color="#3b75af", alpha=0.6, label="prediction: $d_k$")
    ax.plot(d_k, np.ones_like(d_k), "--", color="#d9541a", alpha=0.6, label="prediction: 1")
    ax.plot(d_k, var_raw, "o-", color="#3b75af", label=r"measured Var$(q\cdot k)$")
    ax.plot(d_k, var_scaled, "s-", color="#d9541a", label=r"measured Var$(q\cdot k/\sqrt{d_k})$")
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.set_xlabel("$d_k$")
    ax.set_ylabel("variance of the score")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    return fig


def softmax_gradient(scale, largest_weight, gradient_norm, base_scores, *, size: float = 3.2,
                     dpi: int = 90) -> Figure:
    """How softmax saturates as its scores grow: the largest weight and the size of the
    Jacobian (its largest entry in absolute value) against the factor ``c`` that multiplies
    ``base_scores``."""
    scale = as_real_array("scale", scale)
    largest_weight = as_real_array("largest_weight", largest_weight)
    gradient_norm = as_real_array("gradient_norm", gradient_norm)
    if not (scale.shape == largest_weight.shape == gradient_norm.shape) or scale.ndim != 1:
        raise ValueError("scale, largest_weight and gradient_norm must be vectors of one length")
    fig = Figure(figsize=(size * 1.3, size), dpi=dpi, layout="constrained")
    ax = fig.add_subplot()
    ax.plot(scale, largest_weight, color="#3b75af", label="largest weight")
    ax.plot(scale, gradient_norm, color="#d9541a", label=r"largest $|\partial p_i / \partial s_j|$")
    base = ", ".join(f"{x:g}" for x in as_real_array("base_scores", base_scores))
    ax.set_xlabel(f"scores = $c$ × [{base}]")
    ax.set_ylim(0, 1.05)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    return fig


def figure_png(fig: Figure, dpi: int | None = None) -> bytes:
    """Render ``fig`` to PNG bytes (no pyplot, no screen)."""
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=dpi)
    return buffer.getvalue()
