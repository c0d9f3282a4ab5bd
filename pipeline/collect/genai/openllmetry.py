"""OpenLLMetry's indexed attributes, read: ``gen_ai.prompt.N.*`` and the like."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Final

from turnledger.pipeline.collect.genai.said import (
    ASSISTANT_ROLES,
    SYSTEM_ROLES,
    TOOL_ROLES,
    AssistantSaid,
    Content,
    Said,
    Text,
    ToolCallSaid,
    ToolSaid,
    UserSaid,
    calls_of,
    message_text,
    system_of,
)
from turnledger.pipeline.collect.genai.values import (
    as_text,
    json_of,
    string,
)


def openllmetry_call(attrs: Mapping[str, object]) -> bool:
    """Whether a span without ``gen_ai.operation.name`` is OpenLLMetry's model call."""
    if string(attrs.get("llm.request.type")) in ("chat", "completion"):
        return True
    return "gen_ai.prompt.0.role" in attrs or "gen_ai.completion.0.role" in attrs


_INDEXED: Final = re.compile(r"gen_ai\.(prompt|completion)\.([0-9]{1,9})\.(.+)")
"""OpenLLMetry's indexed attributes (an index of ASCII digits, at most nine)."""


_INDEX: Final = re.compile("[0-9]{1,9}")


def openllmetry_content(attrs: Mapping[str, object]) -> Content:
    """A call's content from the indexed prompt and completion attributes."""
    rows: dict[tuple[str, int], dict[str, object]] = {}
    for key, value in attrs.items():
        match = _INDEXED.fullmatch(key)
        if match is not None:
            side, index, field = match.groups()
            rows.setdefault((side, int(index)), {})[field] = value
    system: list[Text] = []
    inputs: list[Said] = []
    outputs: list[AssistantSaid] = []
    extra = 0
    for (side, _index), row in sorted(rows.items()):
        role = string(row.get("role"))
        content = row.get("content")
        text, skipped = message_text(content)
        calls = _indexed_calls(row)
        if side == "completion":
            if outputs:
                extra += 1
            else:
                outputs.append(AssistantSaid(text, calls, skipped))
        elif role in SYSTEM_ROLES:
            system.append((text, skipped))
        elif role in ASSISTANT_ROLES:
            inputs.append(AssistantSaid(text, calls, skipped))
        elif role in TOOL_ROLES:
            call_id = string(row.get("tool_call_id"))
            result = as_text(json_of(content))
            name = string(row.get("name"))
            inputs.append(ToolSaid(call_id=call_id, content=result, name=name))
        else:
            inputs.append(UserSaid(text, skipped))
    return system_of(system), inputs, outputs, extra, True


def _indexed_calls(row: Mapping[str, object]) -> tuple[ToolCallSaid, ...]:
    found: dict[int, dict[str, object]] = {}
    for field, value in row.items():
        head, _, rest = field.partition(".")
        number, _, name = rest.partition(".")
        if head == "tool_calls" and _INDEX.fullmatch(number):
            found.setdefault(int(number), {})[name] = value
    return calls_of(found, "name", "arguments")
