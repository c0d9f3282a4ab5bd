"""The engine's incremental prompt assembly equals the reference assembly.

:class:`~turnledger.pipeline.engine.prompt_cache.PromptCache` answers from what it kept
of earlier prompts; :func:`~turnledger.pipeline.engine.prompting.assemble_prompt`
shapes the whole history every time. A Hypothesis property folds random session
streams (clean and broken pairing, reused and orphan call ids, budget trims,
media, system prompt changes, removals, rewinds, memory blocks, tight budgets,
small result bounds) event by event and asks both after every event, the cache
kept across the whole stream: messages and events must be identical.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any
from uuid import uuid4

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from turnledger.ledger.envelope import Recorded
from turnledger.ledger.events import (
    AssistantMessage,
    Event,
    HistoryTrimmed,
    ItemsRemoved,
    MediaAttached,
    SessionOpened,
    SessionRewound,
    SystemPromptSet,
    ToolCallRecord,
    ToolResultRecorded,
    TurnCompleted,
    TurnStarted,
)
from turnledger.pipeline.config.sections import RuntimeConfig
from turnledger.pipeline.engine.prompt_cache import PromptCache
from turnledger.pipeline.engine.prompting import assemble_prompt
from turnledger.policies.recall import MEMORY_CONTEXT_OPEN
from turnledger.projections.base import fold
from turnledger.projections.history import (
    SESSION_HISTORY,
    SESSION_TRANSCRIPT,
    SessionHistory,
    SessionHistoryState,
)

STREAM = uuid4()
KEY = str(STREAM)
AT = datetime(2026, 1, 1, tzinfo=UTC)
SYSTEMS = ("You are terse.", "You are careful.")
CALL_IDS = ("c1", "c2", "c3", "c4", "c5", "c6")
WORDS = st.text(alphabet="abcdefgh xyz", min_size=0, max_size=40)


@st.composite
def session_events(draw: st.DrawFn) -> list[Event]:
    """A random session stream, mostly well formed, sometimes not."""
    events: list[Event] = [SessionOpened(agent="a", session_key="k")]
    ids = iter(f"id{n}" for n in range(10_000))
    for turn in range(draw(st.integers(1, 8))):
        turn_id = f"t{turn}"
        user = draw(st.one_of(WORDS, st.just(f"{MEMORY_CONTEXT_OPEN}\nalready there")))
        events.append(
            TurnStarted(turn_id=turn_id, origin="interactive", user_input=user)
        )
        if draw(st.integers(0, 9)) == 0:
            events.append(
                MediaAttached(
                    turn_id=turn_id,
                    file_name="x.png",
                    mime="image/png",
                    kind="image",
                    size_bytes=3,
                    sha256="a" * 64,
                )
            )
        for iteration in range(draw(st.integers(0, 3))):
            fresh = draw(st.booleans())
            calls = tuple(
                ToolCallRecord(
                    id=next(ids) if fresh else draw(st.sampled_from(CALL_IDS)),
                    name="grep",
                    arguments="{}",
                )
                for _ in range(draw(st.integers(0, 2)))
            )
            events.append(
                AssistantMessage(
                    turn_id=turn_id,
                    text=draw(WORDS),
                    tool_calls=calls,
                    iteration=iteration,
                )
            )
            answered = [c.id for c in calls if draw(st.integers(0, 5))]
            if draw(st.integers(0, 6)) == 0:
                answered.append(draw(st.sampled_from(CALL_IDS)))  # orphan / dupe
            events.extend(
                ToolResultRecorded(
                    turn_id=turn_id,
                    call_id=call_id,
                    tool="grep",
                    success=draw(st.booleans()),
                    output=draw(WORDS) * draw(st.integers(1, 30)),
                    error="boom",
                )
                for call_id in answered
            )
        choice = draw(st.integers(0, 12))
        version = len(events)
        if choice == 0:
            events.append(
                HistoryTrimmed(
                    turn_id=turn_id,
                    dropped_messages=1,
                    dropped_turns=1,
                    kept_turns=1,
                    tokens_before=10,
                    tokens_after=5,
                    reason="budget_exceeded",
                    dropped_through_version=draw(st.integers(0, version)),
                )
            )
        elif choice == 1:
            events.append(SystemPromptSet.of(draw(st.sampled_from(SYSTEMS))))
        elif choice == 2:
            low = draw(st.integers(1, version))
            events.append(ItemsRemoved(first_version=low, last_version=low + 1))
        elif choice == 3:
            events.append(SessionRewound(to_version=draw(st.integers(1, version))))
        if draw(st.integers(0, 3)):
            events.append(TurnCompleted(turn_id=turn_id))
    return events


def _recorded(events: list[Event]) -> list[Recorded]:
    return [
        Recorded(
            stream_id=STREAM,
            version=i + 1,
            position=i + 1,
            recorded_at=AT,
            event=e,  # type: ignore[arg-type]
        )
        for i, e in enumerate(events)
    ]


@settings(
    max_examples=200,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)
@given(
    events=session_events(),
    projection=st.sampled_from([SESSION_HISTORY, SESSION_TRANSCRIPT]),
    budget=st.sampled_from([0, 60, 400, 32_000]),
    bound=st.sampled_from([0, 40, 50_000]),
    data=st.data(),
)
def test_the_cache_answers_exactly_what_the_reference_assembly_does(
    events: list[Event],
    projection: SessionHistory,
    budget: int,
    bound: int,
    data: st.DataObject,
):
    """Messages and events equal after every event, one cache for the stream."""
    runtime = RuntimeConfig(context_budget_tokens=budget, max_tool_result_chars=bound)
    cache = PromptCache()
    state = projection.initial(KEY)
    fast = 0
    for i, recorded in enumerate(_recorded(events)):
        state = fold(projection, [recorded], {KEY: state})[KEY]
        block = data.draw(st.sampled_from(["", f"{MEMORY_CONTEXT_OPEN}\n- k: v\n"]))
        system = data.draw(st.sampled_from([*SYSTEMS, ""]))
        arguments: dict[str, Any] = {
            "turn_id": f"t{i}",
            "iteration": i % 3,
            "system": system,
            "memory_block": block,
            "runtime": runtime,
        }
        expected = assemble_prompt(state, **arguments)
        assert cache.assemble(state, **arguments) == expected
        fast += cache._fast(state, **arguments) is not None
    event(f"fast path taken: {'some' if fast else 'none'}")


def test_a_clean_growing_session_is_served_from_the_cache():
    """Turns that pair and fit the budget never fall back to the full assembly.

    Prompts are asked where the engine asks them: after the user's message and
    after each round of tool results.
    """
    runtime = RuntimeConfig(context_budget_tokens=32_000, max_tool_result_chars=50)
    cache = PromptCache()
    state: SessionHistoryState = SESSION_HISTORY.initial(KEY)
    events: list[Event] = [SessionOpened(agent="a", session_key="k")]
    for turn in range(20):
        turn_id = f"t{turn}"
        call = ToolCallRecord(id=f"call{turn}", name="grep")
        events += [
            TurnStarted(turn_id=turn_id, origin="interactive", user_input=f"q{turn}"),
            AssistantMessage(turn_id=turn_id, text="look", tool_calls=(call,)),
            ToolResultRecorded(
                turn_id=turn_id, call_id=call.id, tool="grep", output="x" * 80
            ),
            AssistantMessage(turn_id=turn_id, text="done", iteration=1),
            TurnCompleted(turn_id=turn_id),
        ]
    for i, recorded in enumerate(_recorded(events)):
        state = fold(SESSION_HISTORY, [recorded], {KEY: state})[KEY]
        if not isinstance(recorded.event, TurnStarted | ToolResultRecorded):
            continue
        arguments: dict[str, Any] = {
            "turn_id": f"p{i}",
            "iteration": 0,
            "system": SYSTEMS[0],
            "memory_block": f"{MEMORY_CONTEXT_OPEN}\n- k: v\n",
            "runtime": runtime,
        }
        served = cache._fast(state, **arguments)
        assert served is not None
        assert served == assemble_prompt(state, **arguments)
