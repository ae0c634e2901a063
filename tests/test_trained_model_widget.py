"""qkv_book.widgets.TrainedModelExplorer: its controls pick the map qkv.models.encode computes, it
redraws on every move, and it always carries a static picture for the website."""

from __future__ import annotations

import base64

import numpy as np
import pytest

import qkv.models
import qkv_book.widgets

SENTENCES = ["The delivery was late, so I want compensation.", "Hello world."]


@pytest.fixture(scope="module")
def model():
    return qkv.models.load_minilm()


@pytest.fixture
def explorer(model):
    return qkv_book.widgets.TrainedModelExplorer(model, SENTENCES, layer=3, head=10, token="compensation")


def test_the_picture_shows_the_selected_map(model, explorer):
    expected = qkv.models.encode(model, SENTENCES[0]).weights[2, 9]
    np.testing.assert_array_equal(explorer.weights(), expected)
    assert explorer.encoding().tokens[explorer.token.value] == "compensation"


@pytest.mark.parametrize("control, value", [("layer", 6), ("head", 1), ("token", 0)])
def test_every_control_redraws_the_picture(explorer, control, value):
    before = explorer.picture.value
    getattr(explorer, control).value = value
    assert explorer.picture.value != before, f"moving {control} did not change the picture"
    assert explorer.picture.value == explorer.png()


def test_a_new_sentence_keeps_a_valid_token(model, explorer):
    explorer.sentence.value = "Hello world."  # 4 tokens: the selected index 9 no longer exists
    assert explorer.encoding().tokens == ("[CLS]", "hello", "world", ".", "[SEP]")
    assert explorer.token.value == 4, "the token index should be clamped to the last token"
    np.testing.assert_array_equal(explorer.weights(), qkv.models.encode(model, "Hello world.").weights[2, 9])


def test_a_typed_sentence_joins_the_list_and_is_shown(explorer):
    explorer.typed.value = "I want my money back."
    assert explorer.sentence.value == "I want my money back."
    assert "I want my money back." in explorer.sentence.options
    assert "money" in explorer.encoding().tokens


def test_display_data_carries_the_widget_and_a_png_of_its_state(explorer):
    explorer.head.value = 4
    bundle, metadata = explorer._repr_mimebundle_()
    assert "application/vnd.jupyter.widget-view+json" in bundle
    assert str(metadata["image/png"]["width"]) == explorer.picture.width
    png = base64.b64decode(bundle["image/png"])
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and png == explorer.picture.value
    assert bundle["text/plain"] == ("TrainedModelExplorer(sentence='The delivery was late, so I want compensation.', "
                                    "layer=3, head=4, token='compensation')")


@pytest.mark.parametrize("kwargs, message", [
    ({"layer": 7}, "layer must be a whole number from 1 to 6"),
    ({"head": 0}, "head must be a whole number from 1 to 12"),
    ({"token": "pizza"}, "token 'pizza' is not among the tokens"),
])
def test_bad_settings_are_refused(model, kwargs, message):
    with pytest.raises(ValueError, match=message):
        qkv_book.widgets.TrainedModelExplorer(model, SENTENCES, **kwargs)


def test_no_sentence_is_refused(model):
    with pytest.raises(ValueError, match="at least one sentence"):
        qkv_book.widgets.TrainedModelExplorer(model, [])
