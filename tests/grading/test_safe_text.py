"""Student-controlled text is stored and shown safely: nothing a terminal, a page or a UTF-8 file would act on."""

from __future__ import annotations

import pytest

from qkv_grading.safe_text import for_terminal, stored

HOSTILE = {
    "lone surrogate": "a\ud800b\udfffc",
    "terminal escape": "0 / 9\x1b[1A\x1b[2K\r9 / 9",
    "bidirectional override": "score \u202e9 / 0\u202c",
    "isolates and marks": "\u2066x\u2069\u200e\u200f\u061c",
    "C1 control (a one-byte CSI)": "\x9b31m red",
    "line separator": "one\u2028two\u2029three",
    "NUL and DEL": "\x00\x7f",
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_stored_text_encodes_as_utf8_and_holds_no_control_or_bidi_character(name):
    text = stored(HOSTILE[name])
    text.encode("utf-8")  # a lone surrogate would raise here
    assert not [ch for ch in text if ord(ch) < 0x20 and ch not in "\t\n"]
    assert not [ch for ch in text if 0x7f <= ord(ch) <= 0x9f or ch in "\u202a\u202b\u202c\u202d\u202e\u2066\u2067"
                "\u2068\u2069\u200e\u200f\u061c\u2028\u2029"]


def test_what_was_hidden_stays_visible_as_an_escape():
    assert stored("0\x1b[2K") == "0\\x1b[2K"
    assert stored("a\u202eb") == "a\\u202eb"
    assert stored("x\ud800y") == "x\ufffdy"


@pytest.mark.parametrize("text", ["外送 晚到 補償", "naïve café", "e\u0301", "👩\u200d🔬", "tab\tand\nnewline",
                                  "plain ASCII, with (brackets) and \"quotes\""])
def test_ordinary_text_of_any_script_is_stored_as_it_is(text):
    assert stored(text) == text


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_a_terminal_line_holds_only_printable_characters(name):
    line = for_terminal(HOSTILE[name])
    assert line.isprintable(), repr(line)
    assert for_terminal(line) == line, "escaping twice changes nothing"


def test_a_terminal_line_cannot_become_two_lines():
    assert for_terminal("a\nb\tc") == "a\\nb\\tc"
    assert for_terminal("外送") == "外送"


def test_anything_is_text_even_an_object_whose_str_raises():
    class Hostile:
        def __str__(self):
            raise RuntimeError("no")

    assert stored(Hostile()) == "<Hostile>"
    assert stored(3) == "3"
