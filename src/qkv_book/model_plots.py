"""Figures of trained models: every head of every layer, a head view, pattern scores, and class-token
maps over images. Built on :mod:`qkv_book.plots` (same fonts, colours and conventions).

These figures hold many panels, so they are laid out with fixed margins rather than matplotlib's
layout engine, and panels that share axes are drawn into one ``Axes``: every chapter runs at every
build, and this keeps the trained-model chapter quick.
"""

from __future__ import annotations

import matplotlib
import numpy as np
from matplotlib.collections import LineCollection, PatchCollection
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from qkv.validate import as_real_array, shape_str

from .language import _
from .plots import PIXEL_DENSITY, WEIGHTS_CMAP, figure_png, for_display, text_inches

HEAD_COLOURS = ("#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b",
                "#e377c2", "#7f7f7f", "#bcbd22", "#17becf", "#393b79", "#637939")
QUERY_COLOUR = "#d9541a"
HEAD_VIEW_FONTSIZE = 6.5  # points: the token labels of a head view


def _check(name, array, ndim):
    array = as_real_array(name, array)
    if array.ndim != ndim:
        raise ValueError(f"{name} must have {ndim} axes, got shape {shape_str(array.shape)}")
    return array


class _PlacedFigure(Figure):
    """A figure whose panels are placed by hand (no layout engine). In IPython it is shown as laid
    out, drawn once, instead of being drawn twice to crop it tight: every chapter runs at every build."""


def _show_placed_figures_as_laid_out() -> None:
    try:
        from IPython import get_ipython
    except ImportError:  # pragma: no cover - IPython comes with the book's requirements
        return
    shell = get_ipython()
    if shell is not None:
        shell.display_formatter.formatters["image/png"].for_type(
            _PlacedFigure, lambda fig: for_display(figure_png(fig, density=PIXEL_DENSITY)))


_show_placed_figures_as_laid_out()


def _fixed_figure(width, height, dpi):
    """A figure in inches whose panels are placed by hand (no layout engine)."""
    return _PlacedFigure(figsize=(width, height), dpi=dpi)


def _inches(fig, left, bottom, width, height):
    """An Axes placed in inches from the figure's bottom-left corner."""
    fig_width, fig_height = fig.get_size_inches()
    return fig.add_axes((left / fig_width, bottom / fig_height, width / fig_width, height / fig_height))


def _mosaic(blocks, gap=1):
    """Blocks ``(rows, cols, a, b)`` side by side in one array, ``gap`` NaN cells between them.

    Returns the array and the (row, column) offset of each block's top-left cell.
    """
    rows, cols, a, b = blocks.shape
    mosaic = np.full((rows * (a + gap) - gap, cols * (b + gap) - gap), np.nan)
    for r in range(rows):
        for c in range(cols):
            mosaic[r * (a + gap):r * (a + gap) + a, c * (b + gap):c * (b + gap) + b] = blocks[r, c]
    return mosaic


def _block_frames(ax, rows, cols, a, b, gap=1):
    """A thin grey frame around every block of a :func:`_mosaic`."""
    frames = [Rectangle((c * (b + gap) - 0.5, r * (a + gap) - 0.5), b, a) for r in range(rows) for c in range(cols)]
    ax.add_collection(PatchCollection(frames, facecolor="none", edgecolor="#888888", linewidth=0.5,
                                      clip_on=False))


def _weights_cmap():
    cmap = matplotlib.colormaps[WEIGHTS_CMAP].copy()
    cmap.set_bad("white")
    return cmap


def layer_head_grid(weights, tokens, *, cell: float = 0.78, dpi: int = 90) -> Figure:
    """Every head of every layer as a small map: ``weights`` ``(L, h, n, n)``, layers down, heads across.

    Each map has the same axes, query down and key across, tokens in sentence order; the maps are
    too small for token labels.
    """
    weights = _check("weights", weights, 4)
    num_layers, num_heads, n = weights.shape[:3]
    if len(tokens) != n:
        raise ValueError(f"{len(tokens)} tokens for maps of {n} x {n}")
    fig = _fixed_figure(cell * num_heads + 0.9, cell * num_layers + 0.75, dpi)
    ax = _inches(fig, 0.7, 0.3, cell * num_heads, cell * num_layers)
    ax.imshow(_mosaic(weights), cmap=_weights_cmap(), vmin=0, vmax=1, interpolation="nearest", aspect="auto")
    _block_frames(ax, num_layers, num_heads, n, n)
    centre = (n - 1) / 2
    ax.set_xticks([k * (n + 1) + centre for k in range(num_heads)], [_("head {number}").format(number=k + 1) for k in range(num_heads)],
                  fontsize=8)
    ax.set_yticks([l * (n + 1) + centre for l in range(num_layers)], [_("layer {number}").format(number=l + 1) for l in range(num_layers)],
                  fontsize=8)
    ax.xaxis.tick_top()
    ax.tick_params(length=0)
    for spine in ax.spines.values():
        spine.set_visible(False)
    ax.set_xlabel(_("each map: query (row) attends to key (column), tokens in sentence order"), fontsize=8)
    return fig


def head_view(weights, tokens, query: int, *, columns: int = 4, titles=None, lines: float = 0.6,
              dpi: int = 90) -> Figure:
    """One token's attention in every head of one layer, drawn as lines (in the spirit of BertViz).

    ``weights`` ``(h, n, n)``; in each head's panel the query token on the left (in orange) is joined
    to every key on the right by a line whose width and opacity grow with the weight. (BertViz lists
    every token on the left too; only the query's lines are drawn, so only the query is named.)
    The panels are as wide as their longest token needs, with a gap between them, so that no label
    runs into the next panel's; ``lines`` is the width of the lines, in inches.
    """
    weights = _check("weights", weights, 3)
    h, n = weights.shape[:2]
    tokens = [str(token) for token in tokens]
    if len(tokens) != n or not 0 <= query < n:
        raise ValueError(f"head_view: {len(tokens)} tokens for {n} x {n} weights, query {query}")
    titles = [_("head {number}").format(number=i + 1) for i in range(h)] if titles is None else list(titles)
    rows = -(-h // columns)
    label = max(text_inches(token, HEAD_VIEW_FONTSIZE) for token in tokens) + 0.03  # inches
    gap, between = 0.06, 0.3  # inches: label to lines, panel to panel
    panel = 2 * label + 2 * gap + lines
    width = columns * panel + (columns - 1) * between
    row_height = n + 2.5  # in token rows: the tokens, the title and a gap
    fig = _fixed_figure(width + 0.1, 0.19 * row_height * rows, dpi)
    ax = fig.add_axes((0, 0, 1, 1))  # x in inches from the left edge, y in token rows
    ax.set_axis_off()
    ax.set_xlim(-0.05, width + 0.05)
    ax.set_ylim(-row_height * rows + 1, 1.2)
    for index in range(h):
        left, y0 = (index % columns) * (panel + between), -(index // columns) * row_height - 1.5
        start, end = left + label + gap, left + label + gap + lines  # where the lines begin and end
        colour = HEAD_COLOURS[index % len(HEAD_COLOURS)]
        line_weights = weights[index, query]  # (n,)
        segments = [[(start, y0 - query), (end, y0 - key)] for key in range(n)]
        colours = [matplotlib.colors.to_rgba(colour, min(1.0, 0.08 + w)) for w in line_weights]
        ax.add_collection(LineCollection(segments, colors=colours, linewidths=0.3 + 4 * line_weights,
                                         capstyle="butt"))
        ax.text(start - gap / 2, y0 - query, tokens[query], ha="right", va="center",
                fontsize=HEAD_VIEW_FONTSIZE, color=QUERY_COLOUR)
        for i, token in enumerate(tokens):
            ax.text(end + gap / 2, y0 - i, token, ha="left", va="center", fontsize=HEAD_VIEW_FONTSIZE)
        ax.text(left + panel / 2, y0 + 1.2, titles[index], ha="center", va="center", fontsize=8, color=colour)
    return fig


def pattern_score_grids(scores: dict, threshold: float, *, columns: int = 3, cell: float = 0.21,
                        dpi: int = 90) -> Figure:
    """One small table per pattern: each head's score ``(L, h)``, layers down and heads across.

    Scores at or above ``threshold`` carry their value (``.95`` for 0.95); the colour runs from 0
    (white) to 1.
    """
    if not scores:
        raise ValueError("pattern_score_grids needs at least one pattern")
    tables = np.stack([_check(f"scores[{pattern!r}]", values, 2) for pattern, values in scores.items()])
    count, num_layers, num_heads = tables.shape
    rows = -(-count // columns)
    padded = np.full((rows * columns, num_layers, num_heads), np.nan)
    padded[:count] = tables
    gap = 3  # cells between tables, room for the titles
    blocks = padded.reshape(rows, columns, num_layers, num_heads)
    fig = _fixed_figure(cell * (columns * (num_heads + gap) - gap) + 1.4, cell * rows * (num_layers + gap) + 0.4, dpi)
    ax = _inches(fig, 0.45, 0.1, cell * (columns * (num_heads + gap) - gap), cell * (rows * (num_layers + gap) - 1))
    image = ax.imshow(_mosaic(blocks, gap)[:rows * (num_layers + gap) - 1], cmap=_weights_cmap(), vmin=0, vmax=1,
                      interpolation="nearest", aspect="auto")
    for index, (pattern, values) in enumerate(zip(scores, tables)):
        top, left = (index // columns) * (num_layers + gap), (index % columns) * (num_heads + gap)
        ax.add_patch(Rectangle((left - 0.5, top - 0.5), num_heads, num_layers, fill=False, edgecolor="#888888",
                               linewidth=0.5, clip_on=False))
        ax.text(left + (num_heads - 1) / 2, top - 1.1, pattern, ha="center", va="bottom", fontsize=9)
        for layer, head in zip(*np.nonzero(values >= threshold)):
            value = values[layer, head]
            ax.text(left + head, top + layer, f"{value:.2f}".removeprefix("0"), ha="center", va="center",
                    fontsize=5.5, color="white" if value > 0.6 else "black")
    ax.set_xticks([k * (num_heads + gap) for k in range(columns)] +
                  [k * (num_heads + gap) + num_heads - 1 for k in range(columns)],
                  [_("head {number}").format(number=1)] * columns
                  + [_("head {number}").format(number=num_heads)] * columns, fontsize=6)
    ax.set_yticks([r * (num_layers + gap) for r in range(rows)] +
                  [r * (num_layers + gap) + num_layers - 1 for r in range(rows)],
                  [_("layer {number}").format(number=1)] * rows + [_("layer {number}").format(number=num_layers)] * rows, fontsize=6)
    ax.tick_params(length=0, pad=1)
    for spine in ax.spines.values():
        spine.set_visible(False)
    fig.colorbar(image, cax=_inches(fig, fig.get_figwidth() - 0.75, 0.3, 0.12, fig.get_figheight() - 0.7),
                 label=_("score"))
    return fig


def head_maps(weights, tokens, *, titles, columns: int = 2, size: float = 3.0, dpi: int = 90) -> Figure:
    """Labelled maps of a few heads ``(k, n, n)``, ``columns`` per row, sharing their token labels:
    query tokens on the left of each row of maps, key tokens above each column."""
    weights = _check("weights", weights, 3)
    k, n = weights.shape[:2]
    tokens = [str(token) for token in tokens]
    if len(tokens) != n or len(titles) != k:
        raise ValueError(f"head_maps: {len(tokens)} tokens and {len(titles)} titles for weights {weights.shape}")
    rows = -(-k // columns)
    padded = np.full((rows * columns, n, n), np.nan)
    padded[:k] = weights
    gap = 3 if rows > 1 else 1
    label_room = 0.075 * max(len(token) for token in tokens) + 0.3  # inches for the token labels
    mosaic = _mosaic(padded.reshape(rows, columns, n, n), gap)
    cell = size / n
    width, height = cell * mosaic.shape[1], cell * mosaic.shape[0]
    fig = _fixed_figure(width + label_room + 0.95, height + label_room + 0.35, dpi)
    ax = _inches(fig, label_room, 0.1, width, height)
    image = ax.imshow(mosaic, cmap=_weights_cmap(), vmin=0, vmax=1, interpolation="nearest", aspect="auto")
    for index in range(k):
        top, left = (index // columns) * (n + gap), (index % columns) * (n + gap)
        ax.add_patch(Rectangle((left - 0.5, top - 0.5), n, n, fill=False, edgecolor="#888888", linewidth=0.5,
                               clip_on=False))
        if index >= columns:  # maps below the first row: their title sits in the gap above them
            ax.text(left + (n - 1) / 2, top - 1.0, titles[index], ha="center", va="bottom", fontsize=9)
    ax.set_yticks([r * (n + gap) + i for r in range(rows) for i in range(n)], tokens * rows, fontsize=7)
    ax.set_xticks([c * (n + gap) + j for c in range(columns) for j in range(n)], tokens * columns, fontsize=7,
                  rotation=90)
    ax.xaxis.tick_top()
    ax.tick_params(length=0, pad=1)
    for spine in ax.spines.values():
        spine.set_visible(False)
    for index in range(min(columns, k)):  # titles of the first row, above the key labels
        ax.text((index % columns) * (n + gap) + (n - 1) / 2, -0.5 - label_room / cell, titles[index],
                ha="center", va="bottom", fontsize=9)
    ax.set_ylabel(_("query (attending)"), fontsize=8)
    fig.colorbar(image, cax=_inches(fig, width + label_room + 0.3, 0.3, 0.12, height - 0.4), label=_("weight"))
    return fig


def residual_similarity(own, others, *, size: float = 3.0, dpi: int = 90) -> Figure:
    """How much of each word survives the layers: the cosine of a token's vector after layer ``l``
    with its own input vector (``own``), and with the other tokens' input vectors (``others``), by layer."""
    own, others = as_real_array("own", own), as_real_array("others", others)
    if own.shape != others.shape or own.ndim != 1:
        raise ValueError(f"own and others must be vectors of one length, got {shape_str(own.shape)} "
                         f"and {shape_str(others.shape)}")
    layers = np.arange(len(own))
    fig = _fixed_figure(size * 1.45, size, dpi)
    ax = _inches(fig, 0.6, 0.5, size * 1.45 - 0.75, size - 0.65)
    ax.plot(layers, own, "o-", color="#3b75af", label=_("with its own input vector"))
    ax.plot(layers, others, "s-", color="#d9541a", label=_("with the other tokens' input vectors"))
    ax.set_xticks(layers, [_("input")] + [str(i) for i in layers[1:]])
    ax.set_xlabel(_("after layer"))
    ax.set_ylabel(_("cosine similarity (average)"))
    ax.set_ylim(-0.05, 1.05)
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    return fig


def overlay(image, grid_weights, *, ink: float = 0.55, cmap: str = "YlOrRd") -> np.ndarray:
    """An RGB picture ``(H, W, 3)``: one query's weights over the patch grid ``(rows, cols)``, each patch
    coloured by its weight (bright = much attention, scaled to the largest), with the greyscale
    ``image`` printed over it: full ink darkens a pixel by the fraction ``ink``."""
    image = _check("image", image, 2)
    grid_weights = _check("grid_weights", grid_weights, 2)
    (height, width), (rows, cols) = image.shape, grid_weights.shape
    if height % rows or width % cols:
        raise ValueError(f"an image of {height}x{width} pixels does not split into a {rows}x{cols} patch grid")
    top = grid_weights.max() or 1.0
    tint = matplotlib.colormaps[cmap](0.85 * grid_weights / top)[..., :3]  # (rows, cols, 3), pale to red
    tint = tint.repeat(height // rows, axis=0).repeat(width // cols, axis=1)  # (H, W, 3)
    amount = (image - image.min()) / ((image.max() - image.min()) or 1.0)  # (H, W): 0 paper .. 1 ink
    return tint * (1 - ink * amount)[..., None]


def class_token_maps(images, maps: dict, *, titles=None, across: bool = False, size: float = 1.25,
                     dpi: int = 90) -> Figure:
    """A table of maps over images: one row per image (one column if ``across``), one column per map.

    ``images`` ``(k, H, W)``; ``maps`` is ``{map title: grids}`` with ``grids`` ``(k, rows, cols)``,
    each one query's weights laid on the patch grid (see :func:`overlay`; each panel is scaled to
    its own largest weight). The first column (row) shows the images themselves, named by ``titles``.
    """
    images = as_real_array("images", images, min_ndim=3)
    k, height, width = images.shape
    titles = [_("image {number}").format(number=i + 1) for i in range(k)] if titles is None else list(titles)
    panels = [[np.repeat(1 - images[i][..., None] / (images[i].max() or 1.0), 3, axis=2)]
              + [overlay(images[i], np.asarray(grids)[i]) for grids in maps.values()] for i in range(k)]
    table = np.array(panels)  # (k, 1 + maps, H, W, 3)
    if across:
        table = table.swapaxes(0, 1)
    rows, cols = table.shape[:2]
    gap = max(1, height // 8)
    mosaic = np.ones((rows * (height + gap) - gap, cols * (width + gap) - gap, 3))
    for r in range(rows):
        for c in range(cols):
            mosaic[r * (height + gap):r * (height + gap) + height, c * (width + gap):c * (width + gap) + width] = table[r, c]
    left = 1.0 if across else 0.7
    fig = _fixed_figure(size * cols + left + 0.1, size * rows + 0.35, dpi)
    ax = _inches(fig, left, 0.05, size * cols, size * rows)
    ax.imshow(mosaic, interpolation="nearest", aspect="auto")
    column_titles = titles if across else [_("image"), *maps]
    row_titles = [_("image"), *maps] if across else titles
    ax.set_xticks([c * (width + gap) + (width - 1) / 2 for c in range(cols)], column_titles, fontsize=8)
    ax.set_yticks([r * (height + gap) + (height - 1) / 2 for r in range(rows)], row_titles, fontsize=8)
    ax.xaxis.tick_top()
    ax.tick_params(length=0)
    for spine in ax.spines.values():
        spine.set_visible(False)
    return fig


def weights_and_moved(weights, moved, tokens, *, titles, size: float = 3.1, dpi: int = 90) -> Figure:
    """Two maps of one head side by side: its weights, and the share of what it moves from each key."""
    return head_maps(np.stack([weights, moved]), tokens, titles=titles, columns=2, size=size, dpi=dpi)
