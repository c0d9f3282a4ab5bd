"""Pairing by function name, for formats whose calls may carry no id.

Gemini ``functionCall`` parts (and legacy OpenAI ``function_call`` messages)
may have no id; a result then answers the first unanswered call of the same
name in the message immediately before it. The neutral model pairs by id, so
this module gives such calls a synthetic id and hands that id to the result
that answers them. A result that answers nothing gets a synthetic id no call
has, so it stays unpaired.
"""

from __future__ import annotations

from dataclasses import dataclass, field


@dataclass
class _OpenCall:
    name: str
    call_id: str
    has_own_id: bool


@dataclass
class NamePairing:
    """Hands out call ids, pairing results with the previous message's calls.

    Call :meth:`next_message` before each message, :meth:`call` for each call
    and :meth:`result` for each result of that message.

    Attributes:
        prefix: Prefix of the synthetic ids (e.g. ``"gemini"``).
    """

    prefix: str
    _previous: list[_OpenCall] = field(default_factory=list)
    _current: list[_OpenCall] = field(default_factory=list)
    _counter: int = 0

    def next_message(self) -> None:
        """Start a new message: only the last message's calls stay answerable."""
        self._previous = self._current
        self._current = []

    def call(self, name: str, call_id: str | None) -> str:
        """Register a call and return its id (a synthetic one if it has none)."""
        own = bool(call_id)
        resolved = call_id or self._synthetic(f"call:{name}")
        self._current.append(_OpenCall(name, resolved, own))
        return resolved

    def result(self, name: str, call_id: str | None) -> str:
        """Return the id of the call a result answers.

        Ids decide when both sides have one; otherwise names decide, in order.
        """
        for index, open_call in enumerate(self._previous):
            if _answers(open_call, name, call_id):
                del self._previous[index]
                return open_call.call_id
        return call_id or self._synthetic(f"unmatched:{name}")

    def _synthetic(self, label: str) -> str:
        self._counter += 1
        return f"{self.prefix}:{label}:{self._counter}"


def _answers(open_call: _OpenCall, name: str, call_id: str | None) -> bool:
    if open_call.has_own_id and call_id:
        return open_call.call_id == call_id
    return open_call.name == name
