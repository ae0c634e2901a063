"""The book's interactive explorer: move d_k and watch the softmax weights with and without scaling.

:class:`ScalingExplorer` is an ipywidgets box (a slider and a picture). In Jupyter
the slider is live and the picture is redrawn on every move. A page of the website
has no kernel, so the explorer also offers a static ``image/png`` of its current
state in its display data: the website shows that picture instead of an empty
widget area. Import it explicitly: ``import qkv_book.widgets``.
"""

from __future__ import annotations

import base64

import ipywidgets
import numpy as np

from qkv.attention import scaled_dot_product_attention, softmax
from .plots import figure_png, weight_bars

D_K_CHOICES = tuple(2**i for i in range(11))  # 1, 2, 4, ..., 1024


class ScalingExplorer(ipywidgets.VBox):
    """A slider for ``d_k`` and the weights one query gives ``n_keys`` keys, unscaled and scaled.

    The query and keys have independent standard-normal components (the
    assumption of the variance argument). Their first ``d_k`` components are used,
    so moving the slider adds or removes dimensions of the same vectors.

    Args:
        d_k: the starting width, one of 1, 2, 4, ..., 1024.
        n_keys: how many keys the query is compared with.
        seed: seed of the random vectors, so the picture is reproducible.
    """

    def __init__(self, d_k: int = 64, n_keys: int = 6, seed: int = 0):
        if d_k not in D_K_CHOICES:
            raise ValueError(f"d_k must be one of {', '.join(map(str, D_K_CHOICES))}; got {d_k!r}")
        if isinstance(n_keys, bool) or not isinstance(n_keys, int) or n_keys < 2:
            raise ValueError(f"n_keys must be a whole number >= 2, got {n_keys!r}")
        rng = np.random.default_rng(seed)
        self._query = rng.standard_normal((1, max(D_K_CHOICES)))  # (1, d_k_max)
        self._keys = rng.standard_normal((n_keys, max(D_K_CHOICES)))  # (n_keys, d_k_max)
        self.slider = ipywidgets.SelectionSlider(
            options=list(D_K_CHOICES), value=d_k, description="d_k", continuous_update=False,
            layout=ipywidgets.Layout(width="420px"),
        )
        self.picture = ipywidgets.Image(format="png")
        super().__init__([self.slider, self.picture])
        self.slider.observe(self._redraw, names="value")
        self._redraw()

    @property
    def d_k(self) -> int:
        """The width currently selected on the slider."""
        return int(self.slider.value)

    def scores(self) -> np.ndarray:
        """The raw scores ``q . k_j`` for the current ``d_k``, shape ``(n_keys,)``."""
        d = self.d_k
        return (self._query[:, :d] @ self._keys[:, :d].T)[0]  # (n_keys,)

    def weights(self) -> tuple[np.ndarray, np.ndarray]:
        """``(unscaled, scaled)``: ``softmax(q.k)`` and ``softmax(q.k / sqrt(d_k))``,
        each ``(n_keys,)``."""
        d = self.d_k
        q, K = self._query[:, :d], self._keys[:, :d]  # (1, d_k), (n_keys, d_k)
        unscaled = softmax(self.scores())
        _, scaled = scaled_dot_product_attention(q, K, K)  # (1, n_keys)
        return unscaled, scaled[0]

    def figure(self):
        """The current state as a matplotlib figure (two bar charts)."""
        unscaled, scaled = self.weights()
        labels = [f"k{j + 1}" for j in range(len(unscaled))]
        spread = float(np.std(self.scores()))
        return weight_bars(
            {r"softmax$(q\cdot k)$": unscaled, r"softmax$(q\cdot k/\sqrt{d_k})$": scaled},
            labels,
            suptitle=f"d_k = {self.d_k}: the raw scores spread by {spread:.1f} (standard deviation)",
            dpi=90,
        )

    def png(self) -> bytes:
        """The current state as PNG bytes."""
        return figure_png(self.figure())

    def _redraw(self, change=None) -> None:
        self.picture.value = self.png()

    def _repr_mimebundle_(self, **kwargs):
        """The live widget for Jupyter, plus a PNG of the current state for pages without a kernel."""
        bundle = dict(super()._repr_mimebundle_(**kwargs) or {})
        bundle["text/plain"] = f"ScalingExplorer(d_k={self.d_k})"
        bundle["image/png"] = base64.b64encode(self.picture.value).decode("ascii")
        return bundle
