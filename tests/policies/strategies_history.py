"""Hypothesis strategies for message histories.

``clean_histories`` builds well-paired histories: optional leading system
messages and breadcrumb, optional messages before the first turn, then turns of
a user message, tool rounds (parallel calls answered by ``tool`` rows or by one
Anthropic-style carrier) and an optional final answer. ``messy_histories`` takes
a clean one and breaks it: dangling calls, orphan, duplicate, early and late
results, reused call ids, stray breadcrumbs, a cut-off tail.
"""

from __future__ import annotations

from hypothesis import strategies as st

from turnledger.policies.messages import (
    BREADCRUMB_TEXT,
    Message,
    ToolCall,
    ToolResult,
    make_message,
)

TOOL_NAMES = ("shell", "read_file", "image_gen")


SIZES = (0, 3, 40, 120, 400)

# Built once: making strategies inside draws is what makes generation slow.
TEXTS = st.sampled_from(SIZES).map(lambda n: "x" * n)
SHORT_TEXTS = st.sampled_from((0, 3, 40)).map(lambda n: "x" * n)
_BOOLS = st.booleans()
_CALLS = st.integers(1, 3)
_ROUNDS = st.integers(0, 2)
_ANSWER = st.sampled_from(["", "", "Let me check."])


def breadcrumb() -> Message:
    """A fresh breadcrumb message."""
    return make_message("user", BREADCRUMB_TEXT)


def tool_round(draw: st.DrawFn, first_id: int) -> list[Message]:
    """Draw an assistant message with 1-3 parallel calls and their results."""
    count = draw(_CALLS)
    calls = tuple(
        ToolCall(id=f"c{first_id + k}", name=TOOL_NAMES[k]) for k in range(count)
    )
    results = [
        ToolResult(call_id=call.id, content=draw(TEXTS), name=call.name)
        for call in calls
    ]
    if draw(_BOOLS):  # results need not come in call order
        results.reverse()
    round_ = [make_message("assistant", draw(_ANSWER), tool_calls=calls)]
    if draw(_BOOLS):
        round_.append(make_message("user", tool_results=tuple(results)))
    else:
        round_ += [make_message("tool", tool_results=(r,)) for r in results]
    return round_


def turn(draw: st.DrawFn, first_id: int) -> list[Message]:
    """Draw a user message, 0-2 tool rounds and an optional final answer."""
    messages = [make_message("user", "u" + draw(TEXTS))]
    for index in range(draw(_ROUNDS)):
        messages += tool_round(draw, first_id + 3 * index)
    if draw(_BOOLS):
        messages.append(make_message("assistant", draw(TEXTS)))
    return messages


@st.composite
def clean_histories(
    draw: st.DrawFn, *, max_turns: int = 4, min_turns: int = 0
) -> list[Message]:
    """A well-paired history (see the module docstring)."""
    history = [make_message("system", draw(TEXTS)) for _ in range(draw(_ROUNDS))]
    if draw(_BOOLS):
        history.append(breadcrumb())
    if draw(_ROUNDS) == 0:
        history.append(make_message("assistant", draw(TEXTS)))
    for index in range(draw(st.integers(min_turns, max_turns))):
        history += turn(draw, first_id=100 * index)
    return history


def _result_slots(history: list[Message]) -> list[tuple[int, int]]:
    return [
        (i, j)
        for i, message in enumerate(history)
        for j in range(len(message.tool_results))
    ]


def _call_ids(history: list[Message]) -> list[str]:
    return [call.id for message in history for call in message.tool_calls]


def _replace_results(
    message: Message, results: tuple[ToolResult, ...]
) -> Message | None:
    if not results and (message.role == "tool" or not message.text):
        return None
    return make_message(
        message.role,
        message.text,
        tool_calls=message.tool_calls,
        tool_results=results,
        kind=message.kind,
    )


def _drop_result(draw: st.DrawFn, history: list[Message]) -> None:
    slots = _result_slots(history)
    if not slots:
        return
    i, j = slots[draw(st.integers(0, len(slots) - 1))]
    results = history[i].tool_results
    replaced = _replace_results(history[i], results[:j] + results[j + 1 :])
    if replaced is None:
        del history[i]
    else:
        history[i] = replaced


def _insert_result(draw: st.DrawFn, history: list[Message], call_id: str) -> None:
    result = ToolResult(call_id=call_id, content=draw(SHORT_TEXTS))
    position = draw(st.integers(0, len(history)))
    if draw(st.booleans()):
        history.insert(position, make_message("tool", tool_results=(result,)))
    else:
        history.insert(position, make_message("user", tool_results=(result,)))


def _orphan_result(draw: st.DrawFn, history: list[Message]) -> None:
    _insert_result(draw, history, draw(_ORPHAN_IDS))


def _known_id_result(draw: st.DrawFn, history: list[Message]) -> None:
    """A result for an existing call anywhere: duplicate, early or late."""
    ids = _call_ids(history)
    if ids:
        _insert_result(draw, history, ids[draw(st.integers(0, len(ids) - 1))])


def _reuse_call_id(draw: st.DrawFn, history: list[Message]) -> None:
    ids = _call_ids(history)
    if not ids:
        return
    call = ToolCall(id=ids[draw(st.integers(0, len(ids) - 1))], name="shell")
    position = draw(st.integers(0, len(history)))
    history.insert(position, make_message("assistant", tool_calls=(call,)))


def _stray_breadcrumb(draw: st.DrawFn, history: list[Message]) -> None:
    history.insert(draw(st.integers(0, len(history))), breadcrumb())


def _cut_tail(draw: st.DrawFn, history: list[Message]) -> None:
    del history[draw(st.integers(0, len(history))) :]


_ORPHAN_IDS = st.sampled_from(["zz1", "zz2", "c999"])
_MUTATIONS = (
    _drop_result,
    _orphan_result,
    _known_id_result,
    _reuse_call_id,
    _stray_breadcrumb,
    _cut_tail,
)


_MUTATION_LISTS = st.lists(st.sampled_from(_MUTATIONS), max_size=5)


@st.composite
def messy_histories(draw: st.DrawFn, *, max_turns: int = 4) -> list[Message]:
    """A clean history with 0-5 pairing faults and stray breadcrumbs."""
    history = draw(clean_histories(max_turns=max_turns))
    for mutation in draw(_MUTATION_LISTS):
        mutation(draw, history)
    return history


def image_outputs() -> st.SearchStrategy[str]:
    """Tool outputs made of text, newlines and ``[IMAGE:...]`` markers."""
    piece = st.one_of(
        st.text(alphabet="ab [].:/\n", max_size=12),
        st.sampled_from(
            [
                "[IMAGE:/tmp/a.png]",
                "[IMAGE:data:image/png;base64,AAAA]",
                "[IMAGE:]",
                "[IMAGE:/x/y/z/long/path/picture.jpeg]",
                "[IMAGE:",
                "]",
            ]
        ),
    )
    return st.lists(piece, max_size=12).map("".join)
