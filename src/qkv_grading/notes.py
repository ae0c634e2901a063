"""Notes on a submission that the student reads on the feedback page, in the student's language.

A :class:`Note` is the English sentence the instructor reads on the console (it *is* that string),
and keeps its message and named fields, so that the feedback page can show it in the submission's
language (:meth:`Note.shown`, inside :func:`qkv_book.language.speaking`). The messages are whole
sentences of the problem sets' catalogue (``qkv_exercises``: ``locales/extract_messages.py``
extracts every ``Note(...)`` and ``PluralNote(...)`` of ``src/qkv_grading``); a field may be a
:class:`Note` itself (a cell's name), shown in the same language. What a field quotes (an error's
message, a sandbox's reason) is shown as it came.

A note the grader writes for the instructor alone stays a plain string, in English.
"""

from __future__ import annotations

from qkv_exercises.language import _, ngettext


def _field(value):
    return value.shown() if isinstance(value, Note) else value


class Note(str):
    """``message.format(**fields)`` in English; :meth:`shown` in the current language."""

    def __new__(cls, message: str, /, **fields):
        note = super().__new__(cls, message.format(**fields))
        note.message, note.fields = message, fields
        return note

    def _translated(self) -> str:
        return _(self.message)

    def shown(self) -> str:
        """The note in the current language (English when its catalogue has no usable translation)."""
        try:
            return self._translated().format(**{key: _field(value) for key, value in self.fields.items()})
        except (KeyError, IndexError, ValueError):  # a translation whose fields do not match the message's
            return str(self)

    def __reduce__(self):
        return (_rebuilt, (type(self), self._arguments(), self.fields))

    def _arguments(self) -> tuple:
        return (self.message,)


class PluralNote(Note):
    """A note whose words follow ``count`` (a field too): ``singular`` or ``plural``, as :func:`ngettext` chooses."""

    def __new__(cls, singular: str, plural: str, count: int, /, **fields):
        note = super().__new__(cls, singular if count == 1 else plural, count=count, **fields)
        note.singular, note.plural = singular, plural
        return note

    def _translated(self) -> str:
        return ngettext(self.singular, self.plural, self.fields["count"])

    def _arguments(self) -> tuple:
        return (self.singular, self.plural, self.fields["count"])


def _rebuilt(cls, arguments: tuple, fields: dict) -> Note:
    fields = {key: value for key, value in fields.items() if not (cls is PluralNote and key == "count")}
    return cls(*arguments, **fields)


def shown(note: str) -> str:
    """A note as the feedback page shows it: a :class:`Note` in the current language, any other as written."""
    return note.shown() if isinstance(note, Note) else note
