"""OpenAI Agents SDK saved run state (``RunState.to_json()``).

The conversation of a run is its ``original_input`` (a string, one user message,
or a list of Responses input items) followed by the ``raw_item`` of each of its
``generated_items`` (tool calls, tool outputs, messages, handoffs, reasoning),
which are OpenAI Responses items: calls and outputs pair by ``call_id``, as in
:mod:`pipeline.formats.openai_responses`. The SDK's session items (a JSON array
of Responses items, what ``Session.get_items`` and ``to_input_list`` give) are
read by that reader. ``session_items`` and ``model_responses`` repeat the
generated items and are not read twice; a ``pending_session_write`` (items held
for a session, not yet part of the run's record) is counted as skipped, and so
is a ``tool_approval_item`` (an interruption asking to approve a tool call that
its own ``tool_call_item`` already holds; the SDK never sends it as input).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from turnledger.pipeline.formats._common import (
    Items,
    Sink,
    as_object,
    conversation,
    get_list,
    get_object,
    get_str,
)
from turnledger.pipeline.formats._documents import describe_document, load_json
from turnledger.pipeline.formats.model import TranscriptError
from turnledger.pipeline.formats.openai_agents_items import (
    SQLITE_MAGIC,
    parse_agents_database,
)
from turnledger.pipeline.formats.openai_responses import (
    request_history,
    responses_messages,
)

if TYPE_CHECKING:
    from turnledger.pipeline.formats._common import JSONObject
    from turnledger.pipeline.formats.model import ParsedTranscript

EXPECTED = "an OpenAI Agents SDK run state (`$schemaVersion`, `generated_items`)"
_APPROVAL = "tool_approval_item"


def is_run_state(obj: JSONObject) -> bool:
    """Whether a JSON object is a saved run state."""
    return "$schemaVersion" in obj and "generated_items" in obj


def parse_openai_agents(data: bytes, *, name: str) -> ParsedTranscript:
    """Read a saved run state.

    Args:
        data: The file's bytes.
        name: The file name (the conversation id when the run has none).

    A ``SQLiteSession`` database file is read by
    :func:`pipeline.formats.openai_agents_items.parse_agents_database`.

    Returns:
        One conversation (one per session for a database).

    Raises:
        TranscriptError: The document is not a run state.
    """
    if data.startswith(SQLITE_MAGIC):
        return parse_agents_database(data, name=name)
    document = load_json(data, expected=EXPECTED)
    state = as_object(document)
    if state is None or not is_run_state(state):
        msg = f"Expected {EXPECTED}, found {describe_document(document)}"
        raise TranscriptError(msg)
    sink = Sink()
    values = request_history({"input": state.get("original_input")})
    origins = [f"original_input[{index}]" for index in range(len(values))]
    for index, raw in enumerate(get_list(state, "generated_items")):
        item = as_object(raw)
        if item is not None and get_str(item, "type") == _APPROVAL:
            sink.skip(_APPROVAL)  # repeats a tool call item; never model input
            continue
        inner = get_object(item, "raw_item") if item is not None else None
        if inner is None:
            sink.begin("item", f"generated_items[{index}]", raw)
            sink.unknown("generated item without raw_item")
            continue
        values.append(inner)
        origins.append(f"generated_items[{index}].raw_item")
    pending = get_object(state, "pending_session_write")
    for _ in get_list(pending, "items") if pending is not None else []:
        sink.skip("pending_session_write item")
    items = Items(values, origins)
    found = conversation(
        conversation_id=get_str(state, "conversation_id") or name,
        indexed=responses_messages(items, sink),
        origins=origins,
        source=name,
    )
    return sink.transcript("openai-agents", [found])
