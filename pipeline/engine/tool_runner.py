"""Tool execution: run a model's tool calls and turn their outcomes into events.

Calls of one assistant message run concurrently under a gate
(``[runtime] tool_concurrency``). Arguments that are not a JSON object, an
unknown tool and a tool that raises all become failed results, never an
exception out of the turn. Each outcome is image-promoted (producing tools
only) and bounded once, then recorded as ``tool_result.recorded`` with its
original and kept sizes. An outcome whose text UTF-8 cannot encode (a lone
surrogate) is recorded as a failed result naming the character, never
dropped and never written half.
"""

from __future__ import annotations

import asyncio
import json
import os
from collections.abc import Mapping, Sequence

from turnledger.ledger.events import ToolCallRecord, ToolResultRecorded
from turnledger.pipeline.providers.base import ToolSpec
from turnledger.pipeline.tools.base import Tool, ToolContext, ToolOutcome
from turnledger.policies.bounding import make_result_bounder
from turnledger.policies.images import promote_image_paths
from turnledger.policies.recordable import text_problem
from turnledger.policies.scrubbing import scrub_text, summarize


class ToolRunner:
    """Runs tool calls for the engine.

    Args:
        tools: The tools the model may call, by name.
        max_result_chars: The bound on each result (0: none).
        concurrency: How many tools may run at once.

    Attributes:
        tools: The tools, by name.
        specs: Their specs, in that order (what each model call offers).
    """

    def __init__(
        self, tools: Mapping[str, Tool], *, max_result_chars: int, concurrency: int
    ) -> None:
        self.tools = dict(tools)
        self.specs: tuple[ToolSpec, ...] = tuple(t.spec for t in self.tools.values())
        self._bound = make_result_bounder(max_result_chars)
        self._gate = asyncio.Semaphore(max(1, concurrency))

    async def run(
        self, turn_id: str, calls: Sequence[ToolCallRecord], context: ToolContext
    ) -> list[ToolResultRecorded]:
        """Run every call (concurrently, gated) and return their results in order."""
        outcomes = await asyncio.gather(
            *(self._run_one(call.name, call.arguments, context) for call in calls)
        )
        return [
            self.result_event(turn_id, call.id, call.name, outcome)
            for call, outcome in zip(calls, outcomes, strict=True)
        ]

    async def _run_one(
        self, name: str, arguments: str, context: ToolContext
    ) -> ToolOutcome:
        tool = self.tools.get(name)
        if tool is None:
            return ToolOutcome(success=False, error=f"Unknown tool: {name}")
        try:
            parsed = json.loads(arguments or "{}")
        except (ValueError, RecursionError):
            return ToolOutcome(
                success=False,
                error=f"Expected JSON object arguments for {name}, found invalid JSON",
            )
        if not isinstance(parsed, dict):
            return ToolOutcome(
                success=False,
                error=f"Expected JSON object arguments for {name}, "
                f"found {type(parsed).__name__}",
            )
        async with self._gate:
            try:
                return await tool.run(parsed, context)
            except Exception as e:  # noqa: BLE001 - a tool crash is a failed result
                return ToolOutcome(
                    success=False,
                    error=f"Error executing {name}: {summarize(scrub_text(str(e)))}",
                )

    def result_event(
        self, turn_id: str, call_id: str, name: str, outcome: ToolOutcome
    ) -> ToolResultRecorded:
        """Promote, bound and record one outcome."""
        raw = outcome.output if outcome.success else (outcome.error or outcome.output)
        promoted = promote_image_paths(raw, os.path.isfile, tool_name=name).text
        bounded = self._bound(promoted)
        text = bounded.text
        success = outcome.success
        problem = text_problem("output" if success else "error", text)
        if problem is not None:  # never recorded: the call fails with why
            success, text = False, f"Tool {name} returned unrecordable text: {problem}"
        return ToolResultRecorded(
            turn_id=turn_id,
            call_id=call_id or "unknown",
            tool=name or "unknown",
            success=success,
            output=text if success else "",
            error=None if success else text,
            original_chars=bounded.original_chars,
            kept_chars=bounded.kept_chars,
            truncated=bounded.truncated,
        )
