"""The book's interactive explorers, each an ipywidgets box of controls and a picture.

- :class:`ScalingExplorer`: move d_k and watch the softmax weights with and without scaling.
- :class:`TrainedModelExplorer`: pick a sentence, a layer, a head and a token of a trained model.

In Jupyter the controls are live and the picture is redrawn on every move. A page of the
website has no kernel, so each explorer also offers a static ``image/png`` of its current
state in its display data: the website shows that picture instead of an empty widget
area. Import it explicitly: ``import qkv_book.widgets``. Their labels and pictures speak the
reader's language (:mod:`qkv_book.language`).
"""

from __future__ import annotations

import base64

import ipywidgets
import numpy as np

from qkv.attention import scaled_dot_product_attention, softmax
from .language import _
from .plots import PIXEL_DENSITY, figure_png, for_display, png_size, weight_bars, with_alt_text

D_K_CHOICES = tuple(2**i for i in range(11))  # 1, 2, 4, ..., 1024


class StaticPicture:
    """For an explorer whose ``picture`` (an ``ipywidgets.Image``) shows its state: the display data
    carries the live widget for Jupyter and that picture as a PNG for pages without a kernel.

    The picture has :data:`~qkv_book.plots.PIXEL_DENSITY` pixels per CSS pixel and is shown at its
    CSS width, in the widget and on the page."""

    def _repr_mimebundle_(self, **kwargs):
        bundle = dict(super()._repr_mimebundle_(**kwargs) or {})
        bundle["text/plain"] = self.describe()
        png, metadata = for_display(self.picture.value)
        bundle["image/png"] = base64.b64encode(png).decode("ascii")
        return bundle, {"image/png": metadata}

    def _show(self, png: bytes) -> None:
        """Show ``png`` in the widget at its CSS width."""
        self.picture.value = png
        self.picture.width = str(round(png_size(png)[0] / PIXEL_DENSITY))


class ScalingExplorer(StaticPicture, ipywidgets.VBox):
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
        scaled = scaled_dot_product_attention(q, K, K)[1]  # (1, n_keys)
        return unscaled, scaled[0]

    def figure(self):
        """The current state as a matplotlib figure (two bar charts), with its alt text."""
        unscaled, scaled = self.weights()
        n_keys = len(unscaled)
        labels = [f"k{j + 1}" for j in range(n_keys)]
        spread = float(np.std(self.scores()))
        fig = weight_bars(
            {r"softmax$(q\cdot k)$": unscaled, r"softmax$(q\cdot k/\sqrt{d_k})$": scaled},
            labels,
            suptitle=_("$d_k = {d_k}$: these {count} raw scores have standard deviation {spread:.1f} "
                       "(expected about $\\sqrt{{d_k}}$ = {expected:.3g})").format(
                d_k=self.d_k, count=n_keys, spread=spread, expected=np.sqrt(self.d_k)),
            dpi=90,
        )
        return with_alt_text(fig, self.alt_text(unscaled, scaled, spread))

    def alt_text(self, unscaled, scaled, spread) -> str:
        """What the picture shows, in words: the slider's value and the two panels' largest bars."""
        def largest(weights):
            return _("{weight:.2f}, on k{key_number}").format(weight=weights.max(), key_number=int(np.argmax(weights)) + 1)

        return _("The d_k explorer at d_k = {d_k}: a slider for d_k above two bar charts of the weights one "
                 "query gives {count} keys, k1 to k{count}, whose raw scores have standard deviation {spread:.1f}. "
                 "Left, the softmax of the raw scores, its largest bar {left}; right, the softmax of the scaled "
                 "scores, its largest bar {right}.").format(d_k=self.d_k, count=len(unscaled), spread=spread,
                                                           left=largest(unscaled), right=largest(scaled))

    def png(self) -> bytes:
        """The current state as PNG bytes."""
        return figure_png(self.figure(), density=PIXEL_DENSITY)

    def _redraw(self, change=None) -> None:
        self._show(self.png())

    def describe(self) -> str:
        return f"ScalingExplorer(d_k={self.d_k})"


class TrainedModelExplorer(StaticPicture, ipywidgets.VBox):
    """Pick a sentence, a layer, a head and a token of a trained text model; see that head's map
    (the token's row boxed) and the token's weights as bars.

    Every sentence is run through the whole model with :func:`qkv.models.encode` once, when it is
    first chosen. A sentence typed into the text box joins the list.

    Args:
        model: a :class:`qkv.models.TextEncoder` (for instance :func:`qkv.models.load_minilm`).
        sentences: the sentences offered at the start (at least one).
        layer, head: where to start, counted from 1 as in the book.
        token: the starting token, as text (its first occurrence); the last word before ``[SEP]`` if None.
    """

    def __init__(self, model, sentences, *, layer: int = 1, head: int = 1, token: str | None = None):
        from qkv.models import encode

        sentences = [str(sentence) for sentence in sentences]
        if not sentences:
            raise ValueError("TrainedModelExplorer needs at least one sentence")
        num_layers, num_heads = len(model.layers), model.num_heads
        for name, value, top in (("layer", layer, num_layers), ("head", head, num_heads)):
            if isinstance(value, bool) or not isinstance(value, int) or not 1 <= value <= top:
                raise ValueError(f"{name} must be a whole number from 1 to {top}, got {value!r}")
        self._model, self._encode, self._encodings = model, encode, {}
        tokens = self.encoding(sentences[0]).tokens
        if token is not None and token not in tokens:
            raise ValueError(f"token {token!r} is not among the tokens of {sentences[0]!r}: {', '.join(tokens)}")
        wide = ipywidgets.Layout(width="420px")
        self.sentence = ipywidgets.Dropdown(options=sentences, value=sentences[0], description=_("sentence"),
                                            layout=wide)
        self.typed = ipywidgets.Text(placeholder=_("type a sentence and press Enter"), description=_("or type"),
                                     continuous_update=False, layout=wide)
        self.layer = ipywidgets.IntSlider(value=layer, min=1, max=num_layers, description=_("layer"),
                                          continuous_update=False)
        self.head = ipywidgets.IntSlider(value=head, min=1, max=num_heads, description=_("head"),
                                         continuous_update=False)
        self.token = ipywidgets.Dropdown(options=self._token_options(tokens), description=_("token"))
        self.token.value = tokens.index(token) if token is not None else len(tokens) - 3
        self.picture = ipywidgets.Image(format="png")
        super().__init__([self.sentence, self.typed, ipywidgets.HBox([self.layer, self.head]), self.token,
                          self.picture])
        self.typed.observe(self._add_typed_sentence, names="value")
        self.sentence.observe(self._new_sentence, names="value")
        for control in (self.layer, self.head, self.token):
            control.observe(self._redraw, names="value")
        self._redraw()

    def encoding(self, sentence: str | None = None):
        """The :class:`qkv.models.Encoding` of ``sentence`` (the selected one by default)."""
        sentence = self.sentence.value if sentence is None else sentence
        if sentence not in self._encodings:
            self._encodings[sentence] = self._encode(self._model, sentence)
        return self._encodings[sentence]

    def weights(self) -> np.ndarray:
        """The selected head's map in the selected layer, ``(n, n)``."""
        return self.encoding().weights[self.layer.value - 1, self.head.value - 1]

    def figure(self):
        """The current state: the head's map with the token's row boxed, and that row as bars."""
        from matplotlib.figure import Figure
        from matplotlib.patches import Rectangle

        from .plots import draw_heatmap

        tokens, query, weights = self.encoding().tokens, self.token.value, self.weights()
        n = len(tokens)
        fig = Figure(figsize=(8.2, 4.2), dpi=90)  # fixed margins: quick to redraw on every move
        map_ax, bar_ax = fig.subplots(1, 2, gridspec_kw={"left": 0.14, "right": 0.97, "bottom": 0.12,
                                                         "top": 0.72, "wspace": 0.45})
        draw_heatmap(map_ax, weights, tokens, tokens, annotate=False)
        map_ax.tick_params(axis="x", labelrotation=90, labelsize=7)
        map_ax.tick_params(axis="y", labelsize=7)
        map_ax.add_patch(Rectangle((-0.5, query - 0.5), n, 1, fill=False, edgecolor="#d9541a", linewidth=2))
        bar_ax.barh(range(n), weights[query], color="#3b75af")
        bar_ax.set_yticks(range(n), tokens, fontsize=7)
        bar_ax.invert_yaxis()
        bar_ax.set_xlim(0, 1)
        bar_ax.set_xlabel(_("weight"))
        bar_ax.set_title(_("row of {token!r}: its weight on each key").format(token=tokens[query]), fontsize=9)
        fig.suptitle(_("layer {layer}, head {head}, query {token!r}").format(
            layer=self.layer.value, head=self.head.value, token=tokens[query]), fontsize=10, y=0.99)
        top = int(np.argmax(weights[query]))
        return with_alt_text(fig, _(
            "The trained-model explorer: a heatmap of layer {layer}, head {head}'s weights over the {n} tokens of "
            "\"{sentence}\", the row of {token!r} (token {query_position}) boxed, and beside it that row as bars, one per "
            "key token, the tallest on {top_token!r} (token {top}, weight {weight:.2f}).").format(
            layer=self.layer.value, head=self.head.value, n=n, sentence=self.sentence.value, token=tokens[query],
            query_position=query, top_token=tokens[top], top=top, weight=weights[query, top]))

    def png(self) -> bytes:
        return figure_png(self.figure(), density=PIXEL_DENSITY)

    def describe(self) -> str:
        token = self.encoding().tokens[self.token.value]
        return (f"TrainedModelExplorer(sentence={self.sentence.value!r}, layer={self.layer.value}, "
                f"head={self.head.value}, token={token!r})")

    @staticmethod
    def _token_options(tokens):
        return [(f"{i}: {token}", i) for i, token in enumerate(tokens)]

    def _add_typed_sentence(self, change) -> None:
        sentence = change["new"].strip()
        if not sentence:
            return
        self.encoding(sentence)  # a sentence the model cannot read raises here, before anything changes
        if sentence not in self.sentence.options:
            self.sentence.options = [*self.sentence.options, sentence]
        self.sentence.value = sentence

    def _new_sentence(self, change) -> None:
        tokens, previous = self.encoding().tokens, self.token.value
        with self.hold_trait_notifications():
            self.token.options = self._token_options(tokens)
            self.token.value = min(previous, len(tokens) - 1)
        self._redraw()

    def _redraw(self, change=None) -> None:
        self._show(self.png())
