"""qkv_book.plots: Chinese labels drawn with a CJK font and no missing glyph, maps on the right cells."""

from __future__ import annotations

import subprocess
import sys
import textwrap
import warnings
from pathlib import Path

import matplotlib
import numpy as np
import pylopdf_fonts_zh_tw
import pytest
from matplotlib import font_manager
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

import qkv
import qkv_book.plots

NOTO_SANS_TC = Path(pylopdf_fonts_zh_tw.sans_path()).resolve()


def draw(fig: Figure) -> list[warnings.WarningMessage]:
    """Render ``fig`` with Agg and return every warning raised while drawing."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        FigureCanvasAgg(fig).draw()
    return list(caught)


def glyph_warnings(caught) -> list[str]:
    return [str(w.message) for w in caught if "missing from" in str(w.message) or "Glyph" in str(w.message)]


def tick_labels(ax) -> list:
    return [label for label in ax.get_xticklabels() + ax.get_yticklabels() if label.get_text()]


def test_heatmap_draws_every_token_in_noto_sans_tc_without_missing_glyphs():
    """Every token of seed 000 is a tick label on both axes, set in Noto Sans TC, and drawing warns of nothing."""
    ex = qkv.examples.delivery_example()
    weights = qkv.multi_head_attention(ex.X, ex.heads, ex.W_O, ex.b_O)[1][0]
    fig = qkv_book.plots.heatmap(weights, ex.tokens, title="補償 看 晚到")
    caught = draw(fig)
    assert not glyph_warnings(caught), f"missing glyphs while drawing: {glyph_warnings(caught)}"
    ax = fig.axes[0]
    assert [t.get_text() for t in ax.get_xticklabels()] == list(ex.tokens)
    assert [t.get_text() for t in ax.get_yticklabels()] == list(ex.tokens)
    for label in tick_labels(ax) + [ax.title]:
        font_file = Path(font_manager.findfont(label.get_fontproperties(), fallback_to_default=False)).resolve()
        assert font_file == NOTO_SANS_TC, f"{label.get_text()!r} is set in {font_file.name}, not Noto Sans TC"


def test_without_the_cjk_font_the_same_labels_warn_of_missing_glyphs():
    """The check above can fail: with DejaVu Sans alone, drawing 補償 reports missing glyphs."""
    with matplotlib.rc_context({"font.family": "sans-serif", "font.sans-serif": ["DejaVu Sans"]}):
        fig = Figure()
        fig.add_subplot().set_title("外送 晚到 補償")
        caught = draw(fig)
    assert glyph_warnings(caught), "DejaVu Sans drew Chinese without a warning; the glyph check proves nothing"


@pytest.mark.parametrize("make", [
    lambda: qkv_book.plots.head_grid(np.full((2, 4, 4), 0.25), ("中和", "有", "一個", "永和路")),
    lambda: qkv_book.plots.weight_bars({"softmax([20, 10, 0] / √100)": np.array([0.1, 0.2, 0.7])},
                                  ["token 1", "token 2", "token 3"], suptitle="d_k = 64"),
    lambda: qkv_book.plots.score_variance(np.array([1.0, 2.0, 4.0]), np.array([1.1, 1.9, 4.2]), np.ones(3)),
    lambda: qkv_book.plots.softmax_gradient(np.linspace(0, 10, 5), np.linspace(0.4, 1, 5), np.linspace(0.2, 0, 5),
                                       [2, 1, 0]),
    lambda: qkv_book.plots.encoder_decoder_diagram(),
    lambda: qkv_book.plots.heatmap_panels({"晚到 補償 [PAD]": (np.full((3, 3), 1 / 3), ["晚到", "補償", "[PAD]"],
                                                              ["晚到", "補償", "[PAD]"], np.eye(3, dtype=bool))}),
    lambda: qkv_book.plots.offset_curves(np.arange(3), {r"formula $\sum_i \cos(k\,\omega_i)$": np.ones(3)},
                                         ylabel=r"$PE_p \cdot PE_{p+k}$", xlabel="offset n − m"),
])
def test_every_figure_of_the_book_draws_without_missing_glyphs(make):
    """The symbols the chapters use (√, ×, −, Chinese tokens) all have glyphs."""
    caught = draw(make())
    assert not glyph_warnings(caught), f"missing glyphs: {glyph_warnings(caught)}"


def test_heatmap_writes_each_weight_in_its_own_cell():
    """Cell (i, j) carries weight[i, j] to two decimals: rows are queries, columns keys."""
    weights = np.array([[0.1, 0.9], [0.75, 0.25], [0.5, 0.5]])  # 3 queries, 2 keys
    fig = qkv_book.plots.heatmap(weights, ["q1", "q2", "q3"], ["k1", "k2"])
    cells = {(round(t.get_position()[1]), round(t.get_position()[0])): t.get_text() for t in fig.axes[0].texts}
    assert cells == {(0, 0): "0.10", (0, 1): "0.90", (1, 0): "0.75", (1, 1): "0.25", (2, 0): "0.50", (2, 1): "0.50"}


def test_heatmap_names_the_labels_that_do_not_fit():
    with pytest.raises(ValueError, match="row_labels has 2 labels but the matrix has 3 rows"):
        qkv_book.plots.heatmap(np.eye(3), ["外送", "晚到"])
    with pytest.raises(ValueError, match=r"shows a matrix \(n_q, n_k\), got shape \(2, 2, 2\)"):
        qkv_book.plots.heatmap(np.ones((2, 2, 2)), ["a", "b"])


def test_head_grid_has_one_titled_panel_per_head():
    weights = np.stack([np.eye(3), np.full((3, 3), 1 / 3), np.roll(np.eye(3), 1, axis=1)])  # (h, n, n)
    fig = qkv_book.plots.head_grid(weights, ("外送", "晚到", "補償"), columns=2)
    panels = [ax for ax in fig.axes if ax.get_visible() and ax.get_title()]
    assert [ax.get_title() for ax in panels] == ["head 1", "head 2", "head 3"]
    for index, ax in enumerate(panels):
        np.testing.assert_array_equal(ax.images[0].get_array(), weights[index])
    with pytest.raises(ValueError, match=r"\(h, n, n\)"):
        qkv_book.plots.head_grid(np.eye(3), ("a", "b", "c"))


def test_patch_map_lays_the_weights_on_the_patch_grid():
    """Patch (r, c) of a 2x3 grid over a 4x6-pixel image covers pixels [2r, 2r+2) x [2c, 2c+2)."""
    image = np.arange(4 * 6 * 3, dtype=float).reshape(4, 6, 3) / 72.0
    grid = qkv.to_patch_grid(np.arange(6, dtype=float) / 15.0, (2, 3))
    fig = Figure()
    ax = fig.add_subplot()
    overlay = qkv_book.plots.draw_patch_attention(ax, image, grid, query_patch=(1, 2))
    np.testing.assert_array_equal(overlay.get_array(), grid)
    assert tuple(overlay.get_extent()) == (0, 6, 4, 0)
    box = [p for p in ax.patches if isinstance(p, Rectangle)][0]
    assert (box.get_x(), box.get_y(), box.get_width(), box.get_height()) == (4, 2, 2, 2)


def test_patch_attention_draws_the_image_and_one_panel_per_query():
    image = np.zeros((4, 6, 3))
    maps = {"face": (np.full((2, 3), 1 / 6), (0, 0)), "sky": (np.eye(2, 3) / 2, (1, 1))}
    fig = qkv_book.plots.patch_attention(image, maps)
    titled = [ax.get_title() for ax in fig.axes if ax.get_title()]
    assert titled == ["image", "face", "sky"]
    np.testing.assert_array_equal(fig.axes[2].images[1].get_array(), maps["sky"][0])
    with pytest.raises(ValueError, match="at least one map"):
        qkv_book.plots.patch_attention(image, {})


def test_patch_map_rejects_a_grid_that_does_not_fit_the_image():
    fig = Figure()
    with pytest.raises(ValueError, match="4x6 pixels does not split into a 3x3 patch grid"):
        qkv_book.plots.draw_patch_attention(fig.add_subplot(), np.zeros((4, 6)), np.ones((3, 3)))


BLOCKS = {
    "post-LN encoder": (("self-attention", "feed-forward"), False),
    "pre-LN encoder": (("self-attention", "feed-forward"), True),
    "decoder": (("masked self-attention", "cross-attention", "feed-forward"), False),
}


@pytest.mark.parametrize("make", [
    lambda: qkv_book.plots.block_diagram(BLOCKS),
    lambda: qkv_book.plots.depth_norms({"post-LN": np.full(13, 8.0), "pre-LN": np.linspace(8, 27, 13)}),
    lambda: qkv_book.plots.attention_cost(np.array([128, 256]), np.array([0.01, 0.04]),
                                          {"full": np.array([4e5, 1.6e6]), "blockwise": np.array([3e5, 4e5])}),
    lambda: qkv_book.plots.kernel_regression(np.array([0.0, 1.0, 2.0]), np.array([1.0, 0.0, 1.0]),
                                             np.array([0.5, 1.5]), {"σ = 0.3": np.array([0.5, 0.5])},
                                             np.full((2, 3), 1 / 3), truth=np.array([0.4, 0.6]),
                                             weights_title="weights, σ = 0.3"),
])
def test_the_block_cost_and_lookup_figures_draw_without_missing_glyphs(make):
    caught = draw(make())
    assert not glyph_warnings(caught), f"missing glyphs: {glyph_warnings(caught)}"


def test_block_diagram_draws_each_sublayer_with_its_norm_and_residual_sum():
    """Per column, bottom to top: a box per sublayer and per layer norm, a ⊕ per sublayer; LayerNorm first
    in pre-LN, after the ⊕ in post-LN; the cross-attention gets an arrow from the encoder."""
    fig = qkv_book.plots.block_diagram(BLOCKS)
    for ax, (title, (sublayers, norm_first)) in zip(fig.axes, BLOCKS.items()):
        assert ax.get_title() == title
        words = [t for t in ax.texts if t.get_text()]  # the arrows are annotations without text
        labels = [t.get_text() for t in sorted(words, key=lambda t: t.get_position()[1])
                  if t.get_position()[0] == 0]
        expected = ["input tokens"]
        for sublayer in sublayers:
            expected += ["LayerNorm", sublayer, "+"] if norm_first else [sublayer, "+", "LayerNorm"]
        assert labels == expected + ["output tokens"], f"{title}: {labels}"
        sides = [t.get_text() for t in words if t.get_position()[0] != 0]
        assert sides == (["encoder\noutput"] if "decoder" in title else [])
    with pytest.raises(ValueError, match="at least one block"):
        qkv_book.plots.block_diagram({})


def test_depth_norms_plots_one_labelled_line_per_stack():
    lengths = {"post-LN": np.full(4, 8.0), "pre-LN": np.array([8.0, 9.5, 11.0, 12.5])}
    ax = qkv_book.plots.depth_norms(lengths).axes[0]
    assert [line.get_label() for line in ax.lines] == ["post-LN", "pre-LN"]
    np.testing.assert_array_equal(ax.lines[1].get_ydata(), lengths["pre-LN"])
    np.testing.assert_array_equal(ax.lines[1].get_xdata(), [0, 1, 2, 3])
    assert ax.get_xlabel() and ax.get_ylabel()


def test_attention_cost_draws_time_and_memory_against_n():
    n = np.array([128.0, 256.0, 512.0])
    fig = qkv_book.plots.attention_cost(n, np.array([1.0, 3.0, 9.0]) / 1e3, {"full": 24 * n**2})
    time_ax, memory_ax = fig.axes
    np.testing.assert_allclose(time_ax.lines[0].get_ydata(), [1.0, 3.0, 9.0])  # milliseconds
    np.testing.assert_allclose(time_ax.lines[1].get_ydata(), 9.0 * (n / 512) ** 2)  # the n^2 guide
    np.testing.assert_allclose(memory_ax.lines[0].get_ydata(), n**2 * 8 / 2**20)  # one n x n matrix in MiB
    np.testing.assert_allclose(memory_ax.lines[1].get_ydata(), 24 * n**2 / 2**20)
    for ax in (time_ax, memory_ax):
        assert ax.get_xlabel() and ax.get_ylabel() and ax.get_xscale() == "log"
    with pytest.raises(ValueError, match=r"peak_bytes\['full'\] has shape \(2,\), n has \(3,\)"):
        qkv_book.plots.attention_cost(n, np.ones(3), {"full": np.ones(2)})


def test_kernel_regression_puts_each_weight_at_its_key_and_query_position():
    """Keys and queries given out of order are drawn in order of position, each weight in its cell."""
    keys, queries = np.array([2.0, 0.0, 1.0]), np.array([1.5, 0.5])
    weights = np.arange(6.0).reshape(2, 3)  # weights[i, j]: query i, key j
    fig = qkv_book.plots.kernel_regression(keys, np.zeros(3), queries, {}, weights)
    mesh = fig.axes[1].collections[0]
    np.testing.assert_array_equal(np.asarray(mesh.get_array()).reshape(2, 3), [[4.0, 5.0, 3.0], [1.0, 2.0, 0.0]])
    assert fig.axes[0].get_xlabel() and fig.axes[1].get_xlabel() and fig.axes[1].get_ylabel()
    with pytest.raises(ValueError, match=r"weights has shape \(3, 2\), expected \(2, 3\)"):
        qkv_book.plots.kernel_regression(keys, np.zeros(3), queries, {}, weights.T)


def test_figure_png_is_a_png():
    assert qkv_book.plots.figure_png(qkv_book.plots.heatmap(np.eye(2), ["a", "b"])).startswith(b"\x89PNG\r\n\x1a\n")


def run_python(code: str) -> str:
    result = subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                            timeout=120)
    assert result.returncode == 0, result.stderr
    return result.stdout.strip()


def test_import_qkv_needs_only_numpy():
    """``import qkv`` loads neither matplotlib, IPython nor ipywidgets: the book's helpers are opt-in."""
    loaded = run_python("""
        import sys
        import qkv
        print(sorted(m for m in ("matplotlib", "IPython", "ipywidgets") if m in sys.modules))
    """)
    assert loaded == "[]", f"import qkv also imported {loaded}"


def test_a_figure_that_is_a_cell_value_shows_as_png_in_ipython():
    """In an IPython shell, a Figure returned by qkv_book.plots displays as image/png, not as "<Figure ...>" text."""
    formats = run_python("""
        from IPython.core.interactiveshell import InteractiveShell
        shell = InteractiveShell.instance()
        import numpy as np
        import qkv_book.plots
        data, _ = shell.display_formatter.format(qkv_book.plots.heatmap(np.eye(2), ["外送", "晚到"]))
        print(sorted(data))
    """)
    assert "image/png" in formats, f"the figure displays only as {formats}"


def test_only_the_font_cache_notice_is_kept_out_of_a_chapter_s_stderr():
    """The one matplotlib notice that is harmless (and would fail a build on a fresh machine) is dropped;
    every other font warning still gets through."""
    import logging

    logger = logging.getLogger("matplotlib.font_manager")
    notice = logger.makeRecord(logger.name, logging.WARNING, __file__, 0,
                               "Matplotlib is building the font cache; this may take a moment.", (), None)
    other = logger.makeRecord(logger.name, logging.WARNING, __file__, 0, "findfont: Font family 'X' not found.",
                              (), None)
    assert not logger.filter(notice)
    assert logger.filter(other)


def test_heatmap_panels_draw_each_panel_with_its_own_tokens_and_hatch_the_blocked_cells():
    Panel = qkv_book.plots.Panel
    cross = np.array([[0.1, 0.7, 0.2], [0.6, 0.1, 0.3]])  # 2 queries, 3 keys
    padded = np.array([[0.5, 0.5, 0.0], [0.5, 0.5, 0.0], [0.5, 0.5, 0.0]])
    blocked = np.zeros((3, 3), dtype=bool)
    blocked[:, 2] = True
    fig = qkv_book.plots.heatmap_panels({
        "2 x 3": Panel(cross, ["late", "delivery"], ["外送", "晚到", "補償"]),
        "padded": Panel(padded, ["晚到", "補償", "[PAD]"], ["晚到", "補償", "[PAD]"], blocked),
    })
    panels = [ax for ax in fig.axes if ax.get_title()]
    assert [ax.get_title() for ax in panels] == ["2 x 3", "padded"]
    np.testing.assert_array_equal(panels[0].images[0].get_array(), cross)
    assert [t.get_text() for t in panels[0].get_yticklabels()] == ["late", "delivery"]
    assert [t.get_text() for t in panels[0].get_xticklabels()] == ["外送", "晚到", "補償"]
    hatched = sorted((round(r.get_y() + 0.5), round(r.get_x() + 0.5)) for r in panels[1].patches if r.get_hatch())
    assert hatched == [(0, 2), (1, 2), (2, 2)]
    assert not [r for r in panels[0].patches if r.get_hatch()]
    assert panels[0].get_xlabel() and panels[0].get_ylabel()
    with pytest.raises(ValueError, match="heatmap_panels needs at least one panel"):
        qkv_book.plots.heatmap_panels({})


def test_stacked_heatmap_panels_put_each_step_below_the_last_with_cells_of_one_size():
    """The decoding chapter's steps, 1 x 1, 1 x 2 and 1 x 3, one below the other: their first keys
    aligned, every cell the same size, and the figure no wider than a phone's column (360 px)."""
    Panel = qkv_book.plots.Panel
    tokens = ["外送", "晚到", "補償"]
    fig = qkv_book.plots.heatmap_panels({f"step {t}": Panel(np.full((1, t), 1 / t), [tokens[t - 1]], tokens[:t])
                                         for t in (1, 2, 3)}, stacked=True)
    fig.draw_without_rendering()  # the constrained layout places the axes
    panels = [ax for ax in fig.axes if ax.get_title()]
    assert [ax.get_title() for ax in panels] == ["step 1", "step 2", "step 3"]
    boxes = [ax.get_position(original=False) for ax in panels]  # as drawn, each cell square
    assert boxes[0].y0 > boxes[1].y1 and boxes[1].y0 > boxes[2].y1, "each step below the one before"
    assert boxes[0].x0 == pytest.approx(boxes[1].x0) == pytest.approx(boxes[2].x0)
    cells = [(box.width / n, box.height) for box, n in zip(boxes, (1, 2, 3))]
    for width, height in cells[1:]:
        assert (width, height) == (pytest.approx(cells[0][0], rel=0.05), pytest.approx(cells[0][1], rel=0.05))
    assert fig.get_size_inches()[0] * fig.dpi <= 360
    assert [ax.get_xlabel() != "" for ax in panels] == [True, False, False], "the key label once, on top"


def test_draw_blocked_needs_a_matrix():
    with pytest.raises(ValueError, match=r"blocked must be a matrix \(n_q, n_k\), got shape \(3,\)"):
        qkv_book.plots.draw_blocked(Figure().add_subplot(), np.ones(3, dtype=bool))


def test_encoder_decoder_diagram_names_the_three_places_and_draws_their_masks():
    fig = qkv_book.plots.encoder_decoder_diagram()
    texts = " ".join(t.get_text() for t in fig.axes[0].texts)
    for words in ("① self-attention", "② masked self-attention", "③ cross-attention", "外送 晚到 補償",
                  "late delivery compensation", "K, V"):
        assert words in texts, f"the diagram does not say {words!r}"
    mask_cells = [p for p in fig.axes[0].patches if isinstance(p, Rectangle) and p.get_width() < 0.2]
    assert len(mask_cells) == 3 * 9, "three 3 x 3 mask pictures expected"
    dark = sum(p.get_facecolor()[2] > 0.6 and p.get_facecolor()[0] < 0.3 for p in mask_cells)
    assert dark == 9 + 6 + 9, "encoder and cross-attention masks full, the causal mask a lower triangle"


def test_position_encoding_map_shows_the_table_with_labelled_axes():
    PE = qkv.sinusoidal_position_encoding(8, 6)
    fig = qkv_book.plots.position_encoding_map(PE)
    ax = fig.axes[0]
    np.testing.assert_array_equal(ax.images[0].get_array(), PE)
    assert "position" in ax.get_ylabel() and "dimension" in ax.get_xlabel()
    with pytest.raises(ValueError, match=r"PE must be a matrix \(n, d_model\), got shape \(4,\)"):
        qkv_book.plots.position_encoding_map(np.ones(4))


def test_offset_curves_draw_one_labelled_line_per_curve():
    offsets = np.arange(5)
    curves = {"p = 0": np.arange(5.0), "p = 3": np.arange(5.0) ** 2}
    fig = qkv_book.plots.offset_curves(offsets, curves, ylabel="dot product")
    ax = fig.axes[0]
    assert [line.get_label() for line in ax.lines] == ["p = 0", "p = 3"]
    np.testing.assert_array_equal(ax.lines[1].get_ydata(), curves["p = 3"])
    assert ax.get_xlabel() == "offset k" and ax.get_ylabel() == "dot product"
    with pytest.raises(ValueError, match=r"curve 'bad' has shape \(3,\) but offsets has \(5,\)"):
        qkv_book.plots.offset_curves(offsets, {"bad": np.ones(3)}, ylabel="y")
    with pytest.raises(ValueError, match="offset_curves needs at least one curve"):
        qkv_book.plots.offset_curves(offsets, {}, ylabel="y")


def ink_box(rgba: np.ndarray) -> tuple[int, int, int, int]:
    """Rows and columns (top, bottom, left, right) of the pixels that are not the white background."""
    rows, cols = np.nonzero((rgba[..., :3] < 250).any(axis=-1))
    return rows.min(), rows.max(), cols.min(), cols.max()


def test_a_figure_shown_in_ipython_is_cropped_to_its_content_and_loses_none_of_it():
    """The picture of a figure in a chapter is its full drawing with the empty margins cut away to
    0.1 inch: every drawn pixel is kept, and no side keeps more than the pad of white."""
    import io

    from PIL import Image

    def fig():  # fixed-aspect maps in a wide figure: the layout leaves white bands that the crop removes
        panels = {"中和 有 一個 永和路": qkv_book.plots.Panel(np.eye(4) * 0.8, list("甲乙丙丁"), list("甲乙丙丁")),
                  "b": qkv_book.plots.Panel(np.full((3, 4), 0.25), list("甲乙丙"), list("甲乙丙丁"))}
        return qkv_book.plots.heatmap_panels(panels)

    full = np.asarray(Image.open(io.BytesIO(qkv_book.plots.figure_png(fig()))).convert("RGBA"))
    figure = fig()
    cropped = np.asarray(Image.open(io.BytesIO(qkv_book.plots.cropped_png(figure))).convert("RGBA"))
    pad = 0.1 * figure.dpi
    assert cropped.shape[1] < full.shape[1] - 2 * pad, "nothing was cropped from the wide figure"
    top, bottom, left, right = ink_box(full)
    drawn = full[top:bottom + 1, left:right + 1]
    assert ((drawn[..., :3] < 250).any(axis=-1).sum()
            == (cropped[..., :3] < 250).any(axis=-1).sum()), "the crop cut drawn pixels away"
    top, bottom, left, right = ink_box(cropped)
    margins = (top, cropped.shape[0] - 1 - bottom, left, cropped.shape[1] - 1 - right)
    assert all(margin <= pad + 2 for margin in margins), f"margins {margins} px, more than the {pad} px pad"


def test_a_figure_shown_in_ipython_has_two_pixels_per_css_pixel_and_keeps_its_size():
    """On a page a figure is a "2x" PNG shown at half its pixel width: as large as before, and sharp
    on a high-DPI screen. Its crop matches the 1x picture's, scaled."""
    import io

    from IPython.core.interactiveshell import InteractiveShell
    from PIL import Image

    shell = InteractiveShell.instance()
    qkv_book.plots.show_figures_in_ipython()
    figure = qkv_book.plots.heatmap(np.eye(3), ["外送", "晚到", "補償"])
    data, metadata = shell.display_formatter.format(figure)
    png = data["image/png"]
    one_x = Image.open(io.BytesIO(qkv_book.plots.cropped_png(figure))).size
    two_x = Image.open(io.BytesIO(png)).size
    assert metadata["image/png"]["width"] == round(two_x[0] / 2)
    # text is hinted to whole pixels at each density, so the tight crop can differ by a few pixels
    np.testing.assert_allclose(two_x, np.multiply(one_x, 2), rtol=0.02, err_msg="the 2x picture is not the 1x one")
    assert figure.dpi == 90, "drawing at twice the density changed the figure's own dpi"


def test_a_figure_carries_the_alt_text_it_is_given_in_its_png():
    """with_alt_text's description travels inside the PNG (UTF-8, Chinese included), at any density."""
    alt = "A heatmap of 3 by 3 weights over 外送 晚到 補償, darkest on the diagonal."
    figure = qkv_book.plots.with_alt_text(qkv_book.plots.heatmap(np.eye(3), ["外送", "晚到", "補償"]), alt)
    for png in (qkv_book.plots.cropped_png(figure, density=2), qkv_book.plots.figure_png(figure)):
        assert qkv_book.plots.alt_text(png) == alt
    assert qkv_book.plots.alt_text(qkv_book.plots.figure_png(qkv_book.plots.heatmap(np.eye(2), "ab"))) is None
    with pytest.raises(ValueError, match="alt text describes it in a sentence"):
        qkv_book.plots.with_alt_text(figure, "a map")


def test_a_chart_gets_a_palette_that_changes_no_pixel_visibly_and_a_smaller_png(monkeypatch):
    """A heatmap's PNG is drawn with 256 colours: every channel of all but one pixel in 10,000 within 16
    of the full-colour drawing of the same figure, in a file at least twice smaller."""
    import io

    from PIL import Image

    def figure():
        weights = np.random.default_rng(0).dirichlet(np.ones(4), size=(2, 4))
        return qkv_book.plots.head_grid(weights, ["中和", "有", "一個", "永和路"])

    png = qkv_book.plots.figure_png(figure())
    monkeypatch.setattr(qkv_book.plots, "with_palette", lambda picture: picture)
    full_png = qkv_book.plots.figure_png(figure())
    shown, full = Image.open(io.BytesIO(png)), Image.open(io.BytesIO(full_png))
    assert shown.mode == "P" and full.mode == "RGBA", (shown.mode, full.mode)
    change = np.abs(np.asarray(shown.convert("RGB"), dtype=int) - np.asarray(full.convert("RGB"), dtype=int))
    assert np.mean(change.max(axis=-1) > qkv_book.plots.PALETTE_TOLERANCE) <= qkv_book.plots.PALETTE_OUTLIERS
    assert 2 * len(png) < len(full_png), (len(png), len(full_png))


def test_a_map_of_a_long_sentence_keeps_its_weights_and_labels_apart():
    """head_grid of one head over 12 word pieces (problem set 12's show_maps): every printed weight and
    every token label is drawn apart from every other one."""
    import itertools

    tokens = ["[CLS]", "the", "delivery", "was", "late", ",", "so", "i", "want", "compensation", ".", "[SEP]"]
    weights = np.random.default_rng(1).dirichlet(np.ones(12), size=(1, 12))
    fig = qkv_book.plots.head_grid(weights, tokens)
    canvas = FigureCanvasAgg(fig)
    canvas.draw()
    renderer = canvas.get_renderer()
    ax = fig.axes[0]
    texts = [*ax.texts, *ax.get_xticklabels(), *ax.get_yticklabels()]
    boxes = [(t.get_text(), t.get_window_extent(renderer)) for t in texts if t.get_text()]
    touching = [(a, b) for (a, p), (b, q) in itertools.combinations(boxes, 2) if p.overlaps(q)]
    assert not touching, f"texts that run into each other: {touching[:5]}"
