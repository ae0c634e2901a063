"""What sharp figures cost: the book's kinds of figure drawn as before (1x, full colour) and as now
(2x, PALETTE: qkv_book.plots.PIXEL_DENSITY pixels per CSS pixel, a 256-colour palette when it
changes no pixel visibly).

    .venv/bin/python bench/figure_density.py            # best of 3 per figure
    .venv/bin/python bench/figure_density.py --repeat 5

For each figure it prints the seconds to draw and encode it and the PNG's size both ways, then the
totals. The figures are the chapters' heaviest kinds: the 72-head grid and the head view of the
trained model, the photograph's patch maps, a two-head heatmap, the kernel regression and the
sinusoidal map. Prints the figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import time

import matplotlib.cbook
import matplotlib.image
import numpy as np

import qkv
import qkv.models
import qkv_book.model_plots
import qkv_book.plots
from qkv_book import plots


def figures():
    """(name, a function that makes the figure afresh, whether it is laid out by hand)."""
    model = qkv.models.load_minilm()
    encoding = qkv.models.encode(model, "The delivery was late, so I want compensation.")
    query = encoding.tokens.index("compensation")
    ex = qkv.examples.delivery_example()
    _, weights = qkv.multi_head_attention(ex.X, ex.heads, ex.W_O, ex.b_O)
    photo = matplotlib.image.imread(matplotlib.cbook.get_sample_data("grace_hopper.jpg", asfileobj=False))
    image = photo[::2, ::2][:288, 8:248] / 255.0
    grid = np.random.default_rng(0).dirichlet(np.ones(18 * 15), size=1)[0].reshape(18, 15)
    rng = np.random.default_rng(0)
    x_keys = np.sort(rng.uniform(0, 5, size=50))
    y_values = np.sin(2 * x_keys) + rng.normal(scale=0.3, size=50)
    x_queries = np.linspace(0, 5, 101)
    fits = {f"σ = {s}": qkv.nadaraya_watson(x_queries[:, None], x_keys[:, None], y_values[:, None], s)[0][:, 0]
            for s in (0.1, 0.3, 1.5)}
    kernel = qkv.gaussian_kernel_weights(x_queries[:, None], x_keys[:, None], 0.3)
    return [
        ("72-head grid", lambda: qkv_book.model_plots.layer_head_grid(encoding.weights, encoding.tokens), True),
        ("head view", lambda: qkv_book.model_plots.head_view(encoding.weights[2], encoding.tokens, query), True),
        ("photo and patch maps", lambda: plots.patch_attention(image, {"a": (grid, (7, 7)), "b": (grid, (3, 13))}),
         False),
        ("two heads", lambda: plots.head_grid(weights, ex.tokens), False),
        ("kernel regression", lambda: plots.kernel_regression(x_keys, y_values, x_queries, fits, kernel), False),
        ("sinusoidal map", lambda: plots.position_encoding_map(qkv.sinusoidal_position_encoding(64, 64)), False),
    ]


def render(make, placed: bool, density: float, palette: bool) -> tuple[float, int]:
    """Seconds to draw and encode the figure ``make()`` once, and the PNG's bytes."""
    original = plots.with_palette
    if not palette:
        plots.with_palette = lambda picture: picture
    try:
        fig = make()
        start = time.perf_counter()
        png = plots.figure_png(fig, density=density) if placed else plots.cropped_png(fig, density=density)
        return time.perf_counter() - start, len(png)
    finally:
        plots.with_palette = original


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs per figure and way; the best is shown")
    repeat = parser.parse_args().repeat
    ways = {"1x, full colour": (1, False), f"{plots.PIXEL_DENSITY}x, palette": (plots.PIXEL_DENSITY, True)}
    totals = {way: [0.0, 0] for way in ways}
    print(f"{'figure':22s}" + "".join(f"{way:>28s}" for way in ways))
    for name, make, placed in figures():
        cells = []
        for way, (density, palette) in ways.items():
            runs = [render(make, placed, density, palette) for _ in range(repeat)]
            seconds, size = min(r[0] for r in runs), runs[0][1]
            totals[way][0] += seconds
            totals[way][1] += size
            cells.append(f"{seconds:8.3f} s {size / 1024:9.1f} KiB")
        print(f"{name:22s}" + "".join(f"{cell:>28s}" for cell in cells))
    print(f"{'total':22s}" + "".join(f"{s:8.3f} s {b / 1024:9.1f} KiB".rjust(28) for s, b in totals.values()))


if __name__ == "__main__":
    main()
