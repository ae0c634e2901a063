"""Figures for the book: attention heatmaps with Chinese labels, a grid of heads, maps over an image.

Importing this module registers Noto Sans TC (shipped by the pip package
``pylopdf-fonts-zh-tw``) with matplotlib and puts it first in the font list, so
tokens such as 外送, 晚到 and 補償 are drawn as characters and never as empty boxes.
Import it explicitly (``import qkv_book.plots``); ``import qkv`` alone needs only numpy.

Every function returns a :class:`matplotlib.figure.Figure` made without pyplot:
in a notebook the figure shows when it is the cell's value, and nothing is drawn twice.
Every word a figure draws of its own (axis labels, default titles, legends, the boxes of the
diagrams) is in the reader's language (:mod:`qkv_book.language`); the titles and labels a
chapter passes in are drawn as given, and the chapter translates them.

A figure shows as a PNG of :data:`PIXEL_DENSITY` pixels per CSS pixel, with its width in CSS
pixels in the display metadata, so that it is sharp on high-DPI screens and keeps its size on
the page (where a click opens the full picture). :func:`with_alt_text` gives a figure its
description, computed from the numbers it draws: the PNG carries it (an ``iTXt`` chunk named
:data:`ALT_TEXT_KEY`), and the book's build puts it on the page's ``<img>``.
"""

from __future__ import annotations

import io
import logging
import math
from typing import NamedTuple

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
from matplotlib.patches import Circle, FancyArrowPatch, FancyBboxPatch, Rectangle  # noqa: E402

from qkv.validate import as_real_array, shape_str  # noqa: E402

from .language import _  # noqa: E402

CJK_FONT_NAME = "Noto Sans TC"
WEIGHTS_CMAP = "Blues"  # weights run from 0 (white) to 1 (dark blue)
PIXEL_DENSITY = 2  # image pixels per CSS pixel (a "2x" picture): sharp on high-DPI screens
ALT_TEXT_KEY = "qkv:alt"  # the PNG text chunk that carries a figure's description


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


def with_alt_text(fig: Figure, alt: str) -> Figure:
    """Give ``fig`` its description for readers who cannot see it (the ``alt`` of its ``<img>``).

    Write it from the numbers the figure draws, so that it says what this picture shows. The
    PNG that :func:`figure_png` and :func:`cropped_png` make carries it. Returns ``fig``.
    """
    if not isinstance(alt, str) or len(alt.split()) < 5:
        raise ValueError(f"a figure's alt text describes it in a sentence or more, got {alt!r}")
    fig.qkv_alt_text = alt
    return fig


def alt_text(png: bytes) -> str | None:
    """The description a PNG made here carries (see :func:`with_alt_text`), or None."""
    from PIL import Image

    return Image.open(io.BytesIO(png)).text.get(ALT_TEXT_KEY)


def _render(fig: Figure, density: float, pad_inches: float | None = None) -> bytes:
    """Draw ``fig`` once at ``density`` times its dpi and return the PNG, cropped to its tight
    bounding box plus ``pad_inches`` unless that is None, with the figure's alt text."""
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from PIL import Image, PngImagePlugin

    if not density > 0:
        raise ValueError(f"density must be positive, got {density!r}")
    own_dpi = fig.dpi
    fig.set_dpi(own_dpi * density)
    try:  # everything measured at the drawing's dpi, before the figure gets its own back
        canvas = FigureCanvasAgg(fig)
        canvas.draw()
        width, height = canvas.get_width_height()
        picture = Image.frombuffer("RGBA", (width, height), canvas.buffer_rgba()).copy()
        if pad_inches is not None:
            x0, y0, x1, y1 = fig.get_tightbbox(canvas.get_renderer()).padded(pad_inches).extents * fig.dpi
            picture = picture.crop((max(0, math.floor(x0)), max(0, math.floor(height - y1)),  # rows from the top
                                    min(width, math.ceil(x1)), min(height, math.ceil(height - y0))))
    finally:
        fig.set_dpi(own_dpi)
    picture = with_palette(picture)
    info = PngImagePlugin.PngInfo()
    if getattr(fig, "qkv_alt_text", None):
        info.add_itxt(ALT_TEXT_KEY, fig.qkv_alt_text)
    buffer = io.BytesIO()
    picture.save(buffer, format="png", pnginfo=info, optimize=True)
    return buffer.getvalue()


PALETTE_TOLERANCE = 16  # out of 255: the change of a channel that a 256-colour palette may make ...
PALETTE_OUTLIERS = 1e-4  # ... in all but this fraction of the pixels (a few anti-aliased crossings)
PHOTO_COLOURS = 2**14  # a picture with more distinct colours than this holds a photograph


def with_palette(picture):
    """An opaque RGBA picture as 256 colours, which makes its PNG about three times smaller.

    A chart or heatmap has few colours beyond its anti-aliased edges: its palette changes no
    channel by more than :data:`PALETTE_TOLERANCE` in all but :data:`PALETTE_OUTLIERS` of the
    pixels. A picture that holds a photograph gets its palette with Floyd-Steinberg dithering
    instead. Anything else, and any picture with transparent pixels, is returned unchanged.
    """
    from PIL import Image

    rgba = np.asarray(picture)
    if picture.mode != "RGBA" or (rgba[..., 3] != 255).any():
        return picture
    rgb = picture.convert("RGB")
    flat = rgb.quantize(256, method=Image.Quantize.FASTOCTREE, dither=Image.Dither.NONE)
    change = np.abs(np.asarray(rgb, dtype=np.int16) - np.asarray(flat.convert("RGB"), dtype=np.int16)).max(axis=-1)
    if np.mean(change > PALETTE_TOLERANCE) <= PALETTE_OUTLIERS:
        return flat
    if rgb.getcolors(PHOTO_COLOURS) is None:  # more colours than a chart has: a photograph
        return rgb.quantize(256, method=Image.Quantize.FASTOCTREE, dither=Image.Dither.FLOYDSTEINBERG)
    return picture


def cropped_png(fig: Figure, pad_inches: float = 0.1, density: float = 1) -> bytes:
    """Render ``fig`` to PNG bytes cropped to its content plus ``pad_inches``, drawing it once.

    This is the picture of ``savefig(bbox_inches="tight")`` (what ``%matplotlib inline`` shows),
    without its second drawing: the figure is drawn at its own size, then the pixels outside
    its tight bounding box (measured on that drawing) are cut away. ``density`` multiplies its
    pixels per inch (2 for a sharp picture on a high-DPI screen).
    """
    return _render(fig, density, pad_inches)


def png_size(png: bytes) -> tuple[int, int]:
    """``(width, height)`` of a PNG, in pixels."""
    from PIL import Image

    return Image.open(io.BytesIO(png)).size


def for_display(png: bytes) -> tuple[bytes, dict]:
    """A PNG of :data:`PIXEL_DENSITY` and its display metadata: its width in CSS pixels."""
    return png, {"width": max(1, round(png_size(png)[0] / PIXEL_DENSITY))}


def show_figures_in_ipython() -> bool:
    """In IPython or Jupyter, let a :class:`~matplotlib.figure.Figure` that is a cell's value show as a PNG.

    ``%matplotlib inline`` does this only once pyplot is imported, and this module
    does not use pyplot. The picture is :func:`cropped_png` (what ``%matplotlib inline``
    shows, drawn once) at :data:`PIXEL_DENSITY`, shown at its size in CSS pixels. A PNG
    format the user has already chosen is kept. Returns whether a shell was found.
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
        png_formatter.for_type(Figure, lambda fig: for_display(cropped_png(fig, density=PIXEL_DENSITY)))
    return True


use_cjk_font()
show_figures_in_ipython()


def _labels(name: str, labels, count: int, axis: str) -> list[str]:
    labels = [str(label) for label in labels]
    if len(labels) != count:
        raise ValueError(f"{name} has {len(labels)} labels but the matrix has {count} {axis}")
    return labels


def draw_heatmap(ax, weights, row_labels, col_labels, *, annotate: bool = True, decimals: int = 2,
                 vmax: float | None = 1.0, cmap: str = WEIGHTS_CMAP, key_rotation: float = 0):
    """Draw a weight matrix ``(n_q, n_k)`` on ``ax``: one row per query, one column per key.

    Rows are labelled with the query tokens (left), columns with the key tokens
    (top), and each cell shows its value to ``decimals`` places when ``annotate``.
    ``vmax=None`` scales the colours to the largest entry instead of 1; ``key_rotation`` turns
    the key labels (90 writes them upwards, for long tokens in narrow columns).
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
    ax.set_xticks(range(n_k), cols, rotation=key_rotation)
    ax.set_yticks(range(n_q), rows)
    ax.xaxis.tick_top()
    ax.xaxis.set_label_position("top")
    ax.set_xlabel(_("key (attended to)"))
    ax.set_ylabel(_("query (attending)"))
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


def text_inches(text: str, fontsize: float) -> float:
    """The width of ``text`` in inches, set in the figures' font at ``fontsize`` points."""
    from matplotlib.font_manager import FontProperties
    from matplotlib.textpath import TextPath

    return TextPath((0, 0), text, size=fontsize, prop=FontProperties()).get_extents().width / 72


CELL_INCHES = 0.45  # the smallest cell of a map whose weights are printed in it (9 pt, 2 decimals)


def head_grid(weights, tokens, *, titles=None, columns: int | None = None, annotate: bool = True,
              size: float | None = None, dpi: int = 90) -> Figure:
    """One heatmap per head, side by side: ``weights`` ``(h, n, n)`` with the same tokens on both axes.

    ``titles`` defaults to ``head 1``, ``head 2``, ... (in the reader's language); ``columns`` to all
    heads in one row. Each map is ``size`` inches square. By default it is large enough that every
    cell holds its printed weight (2.8 inches, more for more than 4 tokens), and the key labels
    turn upwards when a token is wider than its column.
    """
    weights = as_real_array("weights", weights)
    if weights.ndim != 3:
        raise ValueError(f"head_grid needs weights of shape (h, n, n), got {shape_str(weights.shape)}")
    h, n = weights.shape[0], weights.shape[-1]
    key_rotation = 0
    if size is None:
        size = max(2.8, CELL_INCHES * n + 1.0)  # the cells, and room for the labels
        if max(text_inches(str(token), 10) for token in tokens) > 0.9 * (size - 1.0) / n:
            key_rotation = 90
    titles = ([_("head {number}").format(number=i + 1) for i in range(h)] if titles is None
              else _labels("titles", titles, h, "heads"))
    columns = h if columns is None else max(1, min(columns, h))
    rows = -(-h // columns)
    fig = Figure(figsize=(size * columns + 0.8, size * rows + 0.3), dpi=dpi, layout="constrained")
    axes = fig.subplots(rows, columns, squeeze=False)
    for index, ax in enumerate(axes.flat):
        if index >= h:
            ax.set_visible(False)
            continue
        image = draw_heatmap(ax, weights[index], tokens, tokens, annotate=annotate, key_rotation=key_rotation)
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
    axes[0].set_title(_("image"))
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
    axes[0].set_ylabel(_("weight"))
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
    ax.plot(d_k, d_k, "--", color="#3b75af", alpha=0.6, label=_("prediction: $d_k$"))
    ax.plot(d_k, np.ones_like(d_k), "--", color="#d9541a", alpha=0.6, label=_("prediction: 1"))
    ax.plot(d_k, var_raw, "o-", color="#3b75af", label=_(r"measured Var$(q\cdot k)$"))
    ax.plot(d_k, var_scaled, "s-", color="#d9541a", label=_(r"measured Var$(q\cdot k/\sqrt{d_k})$"))
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    ax.set_xlabel("$d_k$")
    ax.set_ylabel(_("variance of the score"))
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
    ax.plot(scale, largest_weight, color="#3b75af", label=_("largest weight"))
    ax.plot(scale, gradient_norm, color="#d9541a", label=_(r"largest $|\partial p_i / \partial s_j|$"))
    base = ", ".join(f"{x:g}" for x in as_real_array("base_scores", base_scores))
    ax.set_xlabel(_("scores = $c$ × [{base}]").format(base=base))
    ax.set_ylim(0, 1.05)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    return fig


# Colours of the block diagram: one per kind of sublayer.
BLOCK_COLOURS = {"attention": "#f6d7b0", "feed-forward": "#c9def2", "LayerNorm": "#e4efc9"}


def _sublayer_kind(label: str) -> str:
    return "feed-forward" if "feed-forward" in label else "attention"


def block_diagram(blocks: dict, *, size: float = 2.9, dpi: int = 90) -> Figure:
    """Draw Transformer blocks side by side, from the input (bottom) to the output (top).

    ``blocks`` is ``{title: (sublayers, norm_first)}``: the labels of the sublayers in order
    (e.g. ``("self-attention", "feed-forward")``) and whether the layer norm comes first (pre-LN)
    or after the residual sum (post-LN). Every sublayer gets a residual connection (a line that
    goes around it to a ⊕) and a LayerNorm box; a sublayer whose label starts with ``cross``
    also gets an arrow from the side, the encoder's output.
    """
    if not blocks:
        raise ValueError("block_diagram needs at least one block")
    tallest = max(3 * len(sublayers) for sublayers, _ in blocks.values())
    step, box_w, box_h = 0.62, 1.5, 0.36
    fig = Figure(figsize=(size * len(blocks), step * (tallest + 2) * 0.75 + 0.6), dpi=dpi,
                 layout="constrained")
    axes = fig.subplots(1, len(blocks), squeeze=False)[0]
    for ax, (title, (sublayers, norm_first)) in zip(axes, blocks.items()):
        _draw_block(ax, list(sublayers), bool(norm_first), step, box_w, box_h)
        ax.set_xlim(-1.25, 1.45)
        ax.set_ylim(-0.45, step * (tallest + 1) + 0.35)
        ax.set_title(title, fontsize=10)
        ax.set_axis_off()
    return fig


def _draw_block(ax, sublayers, norm_first, step, box_w, box_h) -> None:
    """One column of the block diagram (see :func:`block_diagram`), drawn with :func:`_box` and
    :func:`_arrow`."""
    residual = "#b03a2e"
    y = 0.0
    ax.text(0, y - 0.3, _("input tokens"), ha="center", va="center", fontsize=8)
    bottom = y - 0.15
    for label in sublayers:
        order = ["LayerNorm", label, "+"] if norm_first else [label, "+", "LayerNorm"]
        skip_from = bottom + 0.12  # the residual line leaves the main path here
        for item in order:
            y += step
            _arrow(ax, (0, bottom), (0, y - (0.09 if item == "+" else box_h / 2)))
            if item == "+":
                ax.add_patch(Circle((0, y), 0.09, facecolor="white", edgecolor="#333333", lw=1.0))
                ax.text(0, y, "+", ha="center", va="center", fontsize=9)
                ax.plot([0, 1.0, 1.0], [skip_from, skip_from, y], color=residual, lw=1.1)
                _arrow(ax, (1.0, y), (0.09, y), color=residual)
                bottom = y + 0.09
                continue
            kind = "LayerNorm" if item == "LayerNorm" else _sublayer_kind(item)
            _box(ax, (-box_w / 2, y - box_h / 2), box_w, box_h, _(item), color=BLOCK_COLOURS[kind],
                 edge="#555555", fontsize=8)
            bottom = y + box_h / 2
            if item.startswith("cross"):
                _arrow(ax, (-1.2, y), (-box_w / 2, y))
                ax.text(-1.2, y + 0.12, _("encoder\noutput"), ha="left", va="bottom", fontsize=7)
    y += step * 0.8
    _arrow(ax, (0, bottom), (0, y - 0.12))
    ax.text(0, y, _("output tokens"), ha="center", va="center", fontsize=8)


def depth_norms(norms: dict, *, size: float = 3.2, dpi: int = 90) -> Figure:
    """The average length of the token vectors after each block of a stack, one line per
    ``{label: lengths}`` entry (``lengths[0]`` is the input, ``lengths[l]`` the output of block ``l``)."""
    if not norms:
        raise ValueError("depth_norms needs at least one line")
    fig = Figure(figsize=(size * 1.5, size), dpi=dpi, layout="constrained")
    ax = fig.add_subplot()
    for (label, lengths), marker in zip(norms.items(), "osd^v"):
        lengths = as_real_array(f"lengths of {label!r}", lengths)
        ax.plot(range(len(lengths)), lengths, marker=marker, label=label)
    ax.set_xlabel(_("number of blocks the tokens have passed through"))
    ax.set_ylabel(_(r"average length $\|x\|$ of a token"))
    ax.set_ylim(bottom=0)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    return fig


def attention_cost(n, seconds, peak_bytes: dict, *, size: float = 3.2, dpi: int = 90) -> Figure:
    """Two log-log panels against the number of tokens ``n``: the measured time of full attention,
    with a dashed line growing as n², and the measured peak memory of each method in
    ``peak_bytes`` (``{label: bytes}``), with the size of one n x n float64 matrix dashed."""
    n = as_real_array("n", n)
    seconds = as_real_array("seconds", seconds)
    if n.ndim != 1 or seconds.shape != n.shape:
        raise ValueError(f"n and seconds must be vectors of one length, got {shape_str(n.shape)} "
                         f"and {shape_str(seconds.shape)}")
    fig = Figure(figsize=(size * 2.6, size), dpi=dpi, layout="constrained")
    time_ax, memory_ax = fig.subplots(1, 2)
    time_ax.plot(n, seconds * 1e3, "o-", color="#3b75af", label=_("full attention, measured"))
    time_ax.plot(n, seconds[-1] * 1e3 * (n / n[-1]) ** 2, "--", color="#888888", label=_("grows as $n^2$"))
    time_ax.set_ylabel(_("time (milliseconds)"))
    memory_ax.plot(n, n**2 * 8 / 2**20, "--", color="#888888", label=_(r"one $n \times n$ float64 matrix"))
    for (label, values), marker in zip(peak_bytes.items(), "os^"):
        values = as_real_array(f"peak_bytes[{label!r}]", values)
        if values.shape != n.shape:
            raise ValueError(f"peak_bytes[{label!r}] has shape {shape_str(values.shape)}, n has {shape_str(n.shape)}")
        memory_ax.plot(n, values / 2**20, marker=marker, label=label)
    memory_ax.set_ylabel(_("peak memory (MiB)"))
    for ax in (time_ax, memory_ax):
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel(_("$n$ (tokens)"))
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    return fig


def kernel_regression(keys, values, queries, fits: dict, weights, *, truth=None, weights_title: str = "",
                      size: float = 3.2, dpi: int = 90) -> Figure:
    """Nadaraya-Watson regression in one dimension, two panels.

    Left: the observations (``keys``, ``values``), the curve ``truth`` at ``queries`` if given, and
    one fitted curve per ``{label: predictions at queries}``. Right: the weights ``(n_q, n_k)``
    of one fit as an image, query position against key position.
    """
    keys, values, queries = (as_real_array(name, a) for name, a in
                             (("keys", keys), ("values", values), ("queries", queries)))
    weights = as_real_array("weights", weights)
    if weights.shape != (queries.shape[0], keys.shape[0]):
        raise ValueError(f"weights has shape {shape_str(weights.shape)}, expected "
                         f"({queries.shape[0]}, {keys.shape[0]}): one row per query, one column per key")
    fig = Figure(figsize=(size * 2.7, size), dpi=dpi, layout="constrained")
    fit_ax, weights_ax = fig.subplots(1, 2, width_ratios=[1.4, 1])
    fit_ax.plot(keys, values, "o", color="#999999", markersize=4, label=_("observations (keys, values)"))
    if truth is not None:
        fit_ax.plot(queries, as_real_array("truth", truth), color="black", lw=1, ls=":", label=_("true function"))
    for label, prediction in fits.items():
        fit_ax.plot(queries, as_real_array(f"fits[{label!r}]", prediction), lw=1.6, label=label)
    fit_ax.set_xlabel(_("$x$ (queries and keys)"))
    fit_ax.set_ylabel(_("$y$ (values and predictions)"))
    fit_ax.legend(fontsize=7)
    fit_ax.grid(alpha=0.3)
    by_key, by_query = np.argsort(keys), np.argsort(queries)  # cells in the order of position
    image = weights_ax.pcolormesh(_cell_edges(keys[by_key]), _cell_edges(queries[by_query]),
                                  weights[np.ix_(by_query, by_key)], cmap=WEIGHTS_CMAP)
    weights_ax.set_xlabel(_("key position $x_j$"))
    weights_ax.set_ylabel(_("query position $x$"))
    weights_ax.set_title(weights_title, fontsize=10)
    fig.colorbar(image, ax=weights_ax, shrink=0.8, label=_("weight"))
    return fig


def _cell_edges(centres: np.ndarray) -> np.ndarray:
    """Edges of cells around sorted positions: midway between neighbours, half a gap beyond the ends."""
    if centres.size == 1:
        return np.array([centres[0] - 0.5, centres[0] + 0.5])
    middle = (centres[1:] + centres[:-1]) / 2
    return np.concatenate([[2 * centres[0] - middle[0]], middle, [2 * centres[-1] - middle[-1]]])


def figure_png(fig: Figure, dpi: int | None = None, density: float = 1) -> bytes:
    """Render ``fig`` whole to PNG bytes (no pyplot, no screen), at ``dpi`` (the figure's own by
    default) times ``density``, with its alt text (:func:`with_alt_text`)."""
    return _render(fig, (fig.dpi if dpi is None else dpi) / fig.dpi * density)


class Panel(NamedTuple):
    """One heatmap of :func:`heatmap_panels`: ``weights`` ``(n_q, n_k)``, the query tokens
    ``rows``, the key tokens ``cols``, and optionally ``blocked`` ``(n_q, n_k)``, True where the
    mask blocked the pair (those cells are hatched)."""

    weights: np.ndarray
    rows: tuple
    cols: tuple
    blocked: np.ndarray | None = None


def draw_blocked(ax, blocked) -> None:
    """Hatch the cells of a heatmap on ``ax`` that a mask blocked (True in ``blocked`` ``(n_q, n_k)``).

    The hatching covers the cell's number: a blocked weight is exactly 0 and says nothing.
    """
    blocked = np.asarray(blocked, dtype=bool)
    if blocked.ndim != 2:
        raise ValueError(f"blocked must be a matrix (n_q, n_k), got shape {shape_str(blocked.shape)}")
    for i, j in np.argwhere(blocked):
        ax.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, facecolor="#e6e6e6", edgecolor="#9a9a9a",
                               hatch="///", linewidth=0, zorder=4))


def heatmap_panels(panels: dict, *, size: float = 2.5, dpi: int = 90, stacked: bool = False) -> Figure:
    """Heatmaps side by side, one per ``{title: Panel}``, each with its own query and key tokens.

    Panels may differ in shape (a ``2 x 3`` cross-attention beside a ``3 x 3`` one); widths
    follow the number of keys. Blocked cells are hatched (:func:`draw_blocked`); one colour bar
    from 0 to 1 serves every panel. ``stacked`` puts the panels one below the other instead, their
    cells the same size and their first keys aligned (a figure narrow enough for a phone's screen,
    when the panels are a few keys wide): the key label on the top panel, the query label once for
    all.
    """
    if not panels:
        raise ValueError("heatmap_panels needs at least one panel")
    panels = {title: Panel(*panel) for title, panel in panels.items()}
    shapes = [as_real_array(f"panel {title!r}", p.weights).shape for title, p in panels.items()]
    widths = [shape[-1] for shape in shapes]
    if stacked:
        heights = [shape[0] if len(shape) == 2 else 1 for shape in shapes]
        cell = size / 3
        fig = Figure(figsize=(cell * max(widths) + 1.5, cell * sum(heights) + 0.75 * len(panels) + 0.2), dpi=dpi,
                     layout="constrained")
        grid = fig.add_gridspec(len(panels), max(widths), height_ratios=heights)
        axes = [fig.add_subplot(grid[index, :width]) for index, width in enumerate(widths)]
    else:
        fig = Figure(figsize=(size / 3 * sum(widths) + 0.9 * len(panels) + 0.6, size + 0.4), dpi=dpi,
                     layout="constrained")
        axes = fig.subplots(1, len(panels), squeeze=False, width_ratios=widths)[0]
    for index, (ax, (title, panel)) in enumerate(zip(axes, panels.items())):
        image = draw_heatmap(ax, panel.weights, panel.rows, panel.cols)
        if panel.blocked is not None:
            draw_blocked(ax, panel.blocked)
        ax.set_title(title, fontsize=10)
        if stacked or index:
            ax.set_ylabel("")
        if stacked and index:
            ax.set_xlabel("")
    if stacked:
        fig.supylabel(_("query (attending)"), fontsize=10)
    fig.colorbar(image, ax=list(axes), shrink=0.8, label=_("weight"))
    return fig


def _box(ax, xy, width, height, text, *, color="#dce9f5", edge="#3b75af", fontsize=9):
    """A rounded box with centred text on a diagram's axes (coordinates in axis units)."""
    ax.add_patch(FancyBboxPatch(xy, width, height, boxstyle="round,pad=0.02,rounding_size=0.08",
                                facecolor=color, edgecolor=edge, linewidth=1.2))
    ax.text(xy[0] + width / 2, xy[1] + height / 2, text, ha="center", va="center", fontsize=fontsize)


def _arrow(ax, start, end, *, color="#444444", text=None, text_offset=(0.0, 0.0)):
    """An arrow on a diagram, with an optional label beside its middle."""
    ax.add_patch(FancyArrowPatch(start, end, arrowstyle="-|>", mutation_scale=12, color=color,
                                 linewidth=1.2, connectionstyle="arc3,rad=0"))
    if text:
        middle = ((start[0] + end[0]) / 2 + text_offset[0], (start[1] + end[1]) / 2 + text_offset[1])
        ax.text(*middle, text, fontsize=8, color=color, ha="center", va="center")


def _mask_icon(ax, corner, allowed, cell: float = 0.17):
    """A small picture of a mask: dark cells may attend, light cells are blocked (rows = queries)."""
    allowed = np.asarray(allowed, dtype=bool)
    rows, cols = allowed.shape
    x0, y0 = corner
    for i in range(rows):
        for j in range(cols):
            ax.add_patch(Rectangle((x0 + j * cell, y0 + (rows - 1 - i) * cell), cell, cell,
                                   facecolor="#3b75af" if allowed[i, j] else "#e8e8e8",
                                   edgecolor="white", linewidth=0.8))
    ax.text(x0 + cols * cell / 2, y0 - 0.12, _("mask"), ha="center", va="top", fontsize=7, color="#555555")


def _layer_frame(ax, xy, width, height, label):
    """A dashed frame around the boxes of one layer, with how often the layer repeats."""
    ax.add_patch(Rectangle(xy, width, height, fill=False, edgecolor="#888888", linestyle="--",
                           linewidth=1.0))
    ax.text(xy[0] + 0.08, xy[1] + height - 0.08, label, ha="left", va="top", fontsize=8,
            color="#555555")


def encoder_decoder_diagram(source="外送 晚到 補償", target="late delivery compensation", *,
                            size: float = 6.6, dpi: int = 90) -> Figure:
    """The three places attention sits in an encoder-decoder Transformer, with their masks.

    Encoder (left): self-attention over the source tokens, padding mask only. Decoder
    (right): masked (causal) self-attention over the target tokens, then cross-attention whose
    queries come from the decoder and whose keys and values come from the encoder's output.
    Each attention box carries a small picture of its mask (rows = queries, columns = keys,
    dark = may attend). Residual connections and layer normalisation are left out.
    """
    n_source, n_target = len(source.split()), len(target.split())
    fig = Figure(figsize=(size, size * 0.8), dpi=dpi, layout="constrained")
    ax = fig.add_subplot()
    ax.set_xlim(-0.1, 10.4)
    ax.set_ylim(0, 8.2)
    ax.set_axis_off()
    encoder, decoder, attention = "#dce9f5", "#fbe3d3", "#fff4c2"
    ax.text(2.2, 7.9, _("encoder"), ha="center", fontsize=12)
    ax.text(7.3, 7.9, _("decoder"), ha="center", fontsize=12)
    # Encoder: source tokens -> [self-attention -> feed-forward] x N -> output
    _box(ax, (0.6, 0.3), 3.2, 0.8, _("source tokens + positions") + f"\n{source}", color=encoder)
    _layer_frame(ax, (0.2, 1.65), 4.4, 3.1, "× N")
    _box(ax, (0.6, 1.9), 3.2, 1.0, _("① self-attention\nmask: padding only"), color=attention)
    _box(ax, (0.6, 3.65), 3.2, 0.7, _("feed-forward"), color=encoder)
    _box(ax, (0.6, 5.3), 3.2, 0.8, _("encoder output\n(one vector per source token)"), color=encoder)
    _arrow(ax, (2.2, 1.1), (2.2, 1.9), text="Q, K, V", text_offset=(0.55, 0))
    _arrow(ax, (2.2, 2.9), (2.2, 3.65))
    _arrow(ax, (2.2, 4.35), (2.2, 5.3))
    _mask_icon(ax, (3.95, 2.15), np.ones((n_source, n_source)))
    # Decoder: target tokens -> [masked self-attention -> cross-attention -> feed-forward] x N
    _box(ax, (5.7, 0.3), 3.2, 0.8, _("target tokens + positions") + f"\n{target}", color=decoder, fontsize=8)
    _layer_frame(ax, (5.3, 1.45), 4.95, 4.75, "× N")
    _box(ax, (5.7, 1.7), 3.2, 1.0, _("② masked self-attention\nmask: causal (+ padding)"), color=attention)
    _box(ax, (5.7, 3.3), 3.2, 1.0, _("③ cross-attention\nQ: decoder; K, V: encoder"), color=attention)
    _box(ax, (5.7, 5.0), 3.2, 0.7, _("feed-forward"), color=decoder)
    _box(ax, (5.7, 6.75), 3.2, 0.7, _("next-token probabilities"), color=decoder)
    _arrow(ax, (7.3, 1.1), (7.3, 1.7), text="Q, K, V", text_offset=(0.55, 0))
    _arrow(ax, (7.3, 2.7), (7.3, 3.3), text="Q", text_offset=(0.25, 0))
    _arrow(ax, (7.3, 4.3), (7.3, 5.0))
    _arrow(ax, (7.3, 5.7), (7.3, 6.75))
    _arrow(ax, (3.8, 5.7), (5.7, 3.8), color="#b8560f", text="K, V", text_offset=(0.35, 0.3))
    _mask_icon(ax, (9.1, 1.95), np.tril(np.ones((n_target, n_target))))
    _mask_icon(ax, (9.1, 3.55), np.ones((n_target, n_source)))
    return fig


def position_encoding_map(PE, *, size: float = 3.4, dpi: int = 90) -> Figure:
    """The position encodings ``(n, d_model)`` as an image: one row per position, one column per
    dimension, colour from -1 to 1."""
    PE = as_real_array("PE", PE)
    if PE.ndim != 2:
        raise ValueError(f"PE must be a matrix (n, d_model), got shape {shape_str(PE.shape)}")
    fig = Figure(figsize=(size * 1.35, size), dpi=dpi, layout="constrained")
    ax = fig.add_subplot()
    image = ax.imshow(PE, cmap="RdBu_r", vmin=-1, vmax=1, aspect="auto", interpolation="nearest")
    ax.set_xlabel(_("dimension (even: sin, odd: cos)"))
    ax.set_ylabel(_("position p"))
    fig.colorbar(image, ax=ax, label=_("value"))
    return fig


def offset_curves(offsets, curves: dict, *, ylabel: str, xlabel: str | None = None,
                  size: float = 3.2, dpi: int = 90) -> Figure:
    """Lines of a quantity against an offset, one per ``{label: values}``, same length as
    ``offsets``. Curves that lie on top of each other show the quantity depends on the offset
    alone: later curves are drawn thinner and dashed so that the ones below stay visible."""
    offsets = as_real_array("offsets", offsets)
    if not curves:
        raise ValueError("offset_curves needs at least one curve")
    fig = Figure(figsize=(size * 1.4, size), dpi=dpi, layout="constrained")
    ax = fig.add_subplot()
    styles = [dict(linewidth=5, alpha=0.35), dict(linewidth=2.2), dict(linewidth=1.2, linestyle="--"),
              dict(linewidth=1.0, linestyle=":")]
    for index, (label, values) in enumerate(curves.items()):
        values = as_real_array(f"curve {label!r}", values)
        if values.shape != offsets.shape:
            raise ValueError(f"curve {label!r} has shape {shape_str(values.shape)} but offsets has "
                             f"{shape_str(offsets.shape)}")
        ax.plot(offsets, values, label=label, **styles[index % len(styles)])
    ax.set_xlabel(_("offset k") if xlabel is None else xlabel)
    ax.set_ylabel(ylabel)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    return fig
