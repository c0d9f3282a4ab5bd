"""What a message says, in neutral terms, and how its parts become text.

Every reader of a wire form (:mod:`.current`, :mod:`.events`,
:mod:`.openllmetry`, :mod:`.openinference`, :mod:`.ai_sdk`) turns a
message into these: a user's words, an assistant's words and tool calls, a
tool's result. A message's text is its text parts joined by newlines; a part
of another type (an image, a file, a reasoning part) is not text: its type is
kept in ``skipped``, to be counted.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Final, TypeAlias

import msgspec

from turnledger.pipeline.collect.genai.values import (
    arguments_text,
    as_text,
    get,
    joined,
    json_of,
    string,
)
from turnledger.pipeline.collected import NO_PARTS


# The structs here hold text, numbers, values decoded from JSON and tuples of
# one another: no reference cycle can pass through them, so the cycle collector
# does not track them (gc=False). A receiver keeps thousands of them between
# batches (each session's last input read), which its full collections would
# otherwise walk again and again.
class UserSaid(msgspec.Struct, frozen=True, gc=False):
    """A user message (``skipped``: the types of its parts that hold no text)."""

    text: str
    skipped: tuple[str, ...] = ()


class ToolCallSaid(msgspec.Struct, frozen=True, gc=False):
    """A tool call an assistant message made."""

    id: str
    name: str
    arguments: str


class AssistantSaid(msgspec.Struct, frozen=True, gc=False):
    """An assistant message, the tool calls it made, the parts it left out.

    ``skipped``: the types of its parts that are neither text nor a tool call
    (a reasoning part, an image...): not recorded, counted.
    """

    text: str
    calls: tuple[ToolCallSaid, ...] = ()
    skipped: tuple[str, ...] = ()


class ToolSaid(msgspec.Struct, frozen=True, gc=False):
    """A tool result (``skipped``: what its message held besides, :func:`said_of`)."""

    call_id: str
    content: str
    name: str = ""
    is_error: bool = False
    skipped: tuple[str, ...] = ()


Said: TypeAlias = UserSaid | AssistantSaid | ToolSaid
"""One message of a conversation, in order."""


System: TypeAlias = tuple[str | None, tuple[str, ...]]
"""The system instructions' text (``None``: none sent), and their skipped parts."""


Content: TypeAlias = tuple[System, list[Said], list[AssistantSaid], int, bool]
"""A call's content as a reader gives it: the system instructions, the input
messages, the first choice's messages, the choices after it, and whether any
content was captured."""


def no_content() -> Content:
    """A call whose content was not captured: usage only."""
    return (None, ()), [], [], 0, False


Text: TypeAlias = tuple[str, tuple[str, ...]]
"""Text read from message parts, and the types of the parts that hold none."""


TEXT_PARTS: Final = frozenset({"text", "input_text", "output_text"})
"""The part types whose ``content`` (or ``text``) is text. A part of another type
(``blob``, ``file``, ``uri``, ``reasoning``...) is not recorded as text: its type
is counted, and ``audit`` reports it (:data:`~pipeline.collected.PART_NOT_RECORDED`)."""


def system_of(texts: Sequence[Text]) -> System:
    """The system messages' texts as one (``None``: no text), their skipped parts."""
    if len(texts) == 1:
        only, skipped = texts[0]
        return only or None, skipped
    joined = "\n".join(t for t, _ in texts if t) or None
    return joined, tuple(kind for _, skipped in texts for kind in skipped)


NO_TEXT: Final[Text] = ("", ())


SYSTEM_ROLES: Final = frozenset({"system", "developer"})
"""The roles of system instructions: OpenAI's ``developer`` is its newer name
for them (its clients and the instrumentations send the role as the
application gave it)."""


ASSISTANT_ROLES: Final = frozenset({"assistant", "model"})
"""The roles of the model's messages: ``model`` is Gemini's own name for it
(OpenInference's Google GenAI instrumentation sends it)."""


TOOL_ROLES: Final = frozenset({"tool", "function"})
"""The roles of a tool's result: ``function`` is OpenAI's legacy function
calling's (a result named by its function, without a call id)."""


NO_PARTS_TEXT: Final[Text] = ("", (NO_PARTS,))
"""A message sent without any part: no text, and its content counted missing."""


def said_of(
    role: str, text: Text, calls: list[ToolCallSaid], results: list[ToolSaid]
) -> list[Said]:
    """What one message says (``role``: not a system role, :data:`SYSTEM_ROLES`).

    A message holding tool results is those results, and a user message of
    its text when it is a user's and has text too. What else it holds is then
    the last result's ``skipped`` (counted when that result is recorded):
    parts without text, and the text of a message of another role (a tool
    message's text besides its results). A message of a tool's role
    (:data:`TOOL_ROLES`) holding none is one result without a call id, its
    text the result: never a user's words.
    """
    words, skipped = text
    if not results and role in TOOL_ROLES:
        return [ToolSaid(call_id="", content=words, skipped=skipped)]
    if results:
        found: list[Said] = list(results)
        if words and role == "user":
            found.append(UserSaid(words, skipped))
            return found
        if words:
            skipped = (*skipped, "text")
        if skipped:
            found[-1] = msgspec.structs.replace(results[-1], skipped=skipped)
        return found
    if role in ASSISTANT_ROLES:
        return [AssistantSaid(words, tuple(calls), skipped)]
    return [UserSaid(words, skipped)]


def parts_text(parts: Sequence[object]) -> Text:
    """The text of parts as decoded JSON (strings, or objects with a ``type``).

    A part's words are its ``content``, else its ``text`` (as the previous
    form's content arrays have them); see :func:`text_of_parts`.
    """
    return text_of_parts(
        p
        if isinstance(p, str)
        else (
            string(get(p, "type")),
            get(p, "text") if get(p, "content") is None else get(p, "content"),
        )
        for p in parts
    )


def text_of_parts(parts: Iterable[str | tuple[str, object]]) -> Text:
    """Parts (a string, or a type and its words) as text and skipped types.

    A string, or a part of a text type (or of none) whose words are a string,
    is text; any other part is skipped, by its type (a text part without
    words adds nothing).
    """
    texts: list[str] = []
    skipped: list[str] = []
    for part in parts:
        if isinstance(part, str):
            texts.append(part)
            continue
        kind, words = part
        if isinstance(words, str) and (kind in TEXT_PARTS or not kind):
            texts.append(words)
        elif words is not None or kind not in TEXT_PARTS:
            skipped.append(kind or "untyped")
    return joined(texts), tuple(skipped)


def message_text(value: object) -> Text:
    """A message's ``content`` (previous form, OpenLLMetry) as text.

    Text as it is; an array of parts (strings and objects, as the provider's
    API has them: ``{"type": "text", "text": ...}``, an image...) as
    :func:`parts_text` reads it; any other value as JSON.
    """
    content = json_of(value)
    if isinstance(content, (list, tuple)) and all(
        isinstance(p, (str, dict)) for p in content
    ):
        return parts_text(content)
    return as_text(content), ()


def calls_of(
    found: Mapping[int, Mapping[str, object]], name: str, arguments: str
) -> tuple[ToolCallSaid, ...]:
    """Indexed calls' fields (by index) as calls, in order.

    ``id``, then ``name`` and ``arguments`` under the keys each form gives them.
    """
    return tuple(
        ToolCallSaid(
            id=string(c.get("id")),
            name=string(c.get(name)),
            arguments=arguments_text(c.get(arguments)),
        )
        for _, c in sorted(found.items())
    )
