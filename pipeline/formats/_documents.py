"""Loading whole-document JSON transcripts (as opposed to JSON Lines)."""

from __future__ import annotations

from turnledger.pipeline.formats._common import (
    Items,
    JSONObject,
    as_list,
    as_object,
    decode_json,
    describe,
)
from turnledger.pipeline.formats.model import TranscriptError


def load_json(data: bytes, *, expected: str) -> object:
    """Decode a whole-document JSON transcript.

    Args:
        data: The file's bytes.
        expected: What the format expects, for the error message.

    Returns:
        The decoded document.

    Raises:
        TranscriptError: The data is not valid JSON.
    """
    try:
        return decode_json(data)
    except TranscriptError as error:
        msg = f"Expected {expected}; {str(error)[:1].lower()}{str(error)[1:]}"
        raise TranscriptError(msg) from error


def describe_document(value: object) -> str:
    """Describe a document for an error message, naming an object's keys."""
    obj = as_object(value)
    if obj is None:
        return describe(value)
    keys = ", ".join(f"`{key}`" for key in list(obj)[:8])
    return f"an object with keys {keys}" if keys else "an empty object"


def item_list(
    document: object, *, key: str, expected: str
) -> tuple[Items, JSONObject | None]:
    """Return the items of a document: a JSON array, or an object's ``key`` array.

    Args:
        document: The decoded document.
        key: The key holding the array in the object form (e.g. ``"messages"``).
        expected: What the format expects, for the error message.

    Returns:
        The items with their labels, and the enclosing object (``None`` for the
        bare-array form) so that callers can read e.g. its ``system`` field.

    Raises:
        TranscriptError: The document has neither form.
    """
    values = as_list(document)
    if values is not None:
        return Items.of(values, ""), None
    obj = as_object(document)
    if obj is not None:
        values = as_list(obj.get(key))
        if values is not None:
            return Items.of(values, key), obj
    msg = f"Expected {expected}, found {describe_document(document)}"
    raise TranscriptError(msg)
