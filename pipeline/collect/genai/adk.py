"""Google ADK's own record of a model call, in its previous telemetry form.

ADK's previous form (``ADK_TELEMETRY_SCHEMA_VERSION_OPT_IN=1``, the form of
ADK 1.x) wraps each model call in a ``call_llm`` span of its own
(``gen_ai.system`` ``gcp.vertex.agent``): the usage, and, unless
``ADK_CAPTURE_MESSAGE_CONTENT_IN_SPANS=false`` (then ``{}``), the request and
the response as JSON (:data:`LLM_REQUEST`, :data:`LLM_RESPONSE`), whatever
OpenTelemetry's content capture says. ADK 2's ``call_llm`` span is the parent
of the call's own ``generate_content`` span, which carries the usage again, and
the content only by log records, when capture is on.

So a ``call_llm`` span is its model call's record: the call span reads the
request and the response when it carries no content attribute of its own
(:func:`with_request`), and the ``call_llm`` span is counted (:data:`CARRIED`).
Its call span, a child, ends first: in the same batch (or file), or in an
earlier batch (a simple span processor exports each span alone), whose session
then records what the ``call_llm`` span says when its call span held no content
(:meth:`.session.SessionBatch.carry`). One whose call span no session recorded
stays of no known shape (ADK 1.x's only model span is not read).

The request's messages are ``google-genai`` ``Content`` objects (:mod:`.gemini`);
ADK leaves a part's inline data (an image, audio) out of the request it records,
and writes it in the response as the words ``<inline_data: MIME, N bytes>``:
that is a part of inline data, counted, not text.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Final

import msgspec

from turnledger.pipeline.collect.decode import Span
from turnledger.pipeline.collect.genai.gemini import (
    gemini_answer,
    gemini_content,
    gemini_said,
    gemini_text,
)
from turnledger.pipeline.collect.genai.said import (
    NO_PARTS_TEXT,
    AssistantSaid,
    Content,
    Said,
    System,
    message_text,
    no_content,
    said_of,
    system_of,
)
from turnledger.pipeline.collect.genai.values import get, json_of, seq, string

CALL_LLM: Final = "call_llm"
"""The name of ADK's span of a model call (its previous form)."""
ADK_SYSTEM: Final = "gcp.vertex.agent"
"""What ADK sends as its ``call_llm`` span's ``gen_ai.system``."""
LLM_REQUEST: Final = "gcp.vertex.agent.llm_request"
LLM_RESPONSE: Final = "gcp.vertex.agent.llm_response"

CARRIED: Final = "adk call_llm (its model call span is the call)"
"""The label a ``call_llm`` span is counted by when its call span is in the batch."""


def is_call_llm(span: Span) -> bool:
    """Whether a span is ADK's ``call_llm`` span."""
    return span.name == CALL_LLM and span.attributes.get("gen_ai.system") == ADK_SYSTEM


def carried(spans: Iterable[Span], calls: Iterable[Span]) -> dict[str, Span]:
    """The ``call_llm`` spans among ``spans`` whose model call span is in ``calls``.

    By the ``call_llm`` span's id.
    """
    wrappers = {span.span_id: span for span in spans if is_call_llm(span)}
    if not wrappers:
        return {}
    return {
        c.parent_id: wrappers[c.parent_id] for c in calls if c.parent_id in wrappers
    }


def with_request(span: Span, wrapper: Span) -> Span:
    """A model call span given its ``call_llm`` span's request and response."""
    attrs = dict(span.attributes)
    for key in (LLM_REQUEST, LLM_RESPONSE):
        if key in wrapper.attributes:
            attrs.setdefault(key, wrapper.attributes[key])
    return msgspec.structs.replace(span, attributes=attrs)


def adk_content(attrs: Mapping[str, object]) -> Content:
    """A call's content from ADK's request and response (``{}``: none captured)."""
    request = json_of(attrs.get(LLM_REQUEST))
    response = json_of(attrs.get(LLM_RESPONSE))
    contents = seq(get(request, "contents"))
    answer = gemini_content(get(response, "content"))
    instruction = get(get(request, "config"), "system_instruction")
    if not contents and answer is None and instruction is None:
        return no_content()  # capture off: {} and {}
    inputs: list[Said] = []
    for message in contents:
        found = gemini_content(message)
        if found is not None:
            inputs += gemini_said(found)
        elif get(message, "parts") == []:  # its parts were inline data alone
            inputs += said_of(string(get(message, "role")), NO_PARTS_TEXT, [], [])
    outputs: list[AssistantSaid] = [] if answer is None else [gemini_answer(answer)]
    return _system(instruction), inputs, outputs, 0, True


def _system(instruction: object) -> System:
    """The request's system instruction, as text.

    A text as sent (one that reads as JSON too), a ``Content`` object's text,
    or its parts' (a list of texts).
    """
    if instruction is None:
        return None, ()
    if isinstance(instruction, str):
        return instruction or None, ()
    found = gemini_content(instruction)
    return system_of([gemini_text(found) if found else message_text(instruction)])
