"""Properties of the OTLP decoding and of recording batches of spans."""

from __future__ import annotations

import contextlib
import json
import tempfile
from collections import Counter
from pathlib import Path
from typing import Any

import msgspec
import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from tests.pipeline.collect.spans import (
    ANSWER,
    CALL,
    RESULT,
    USER,
    json_request,
    json_span,
    text,
)
from turnledger.ledger.errors import InvalidEventError
from turnledger.ledger.store import EventStore, open_store
from turnledger.pipeline.collect import CollectError, Recorder, decode_json, recording
from turnledger.pipeline.collect.decode import (
    LogRecord,
    decode_logs_json,
    spans_of_document,
)
from turnledger.pipeline.collected import PART_NOT_RECORDED, not_recorded
from turnledger.pipeline.sessions import list_sessions, load_history

TRACE = "5b8efff798038103d269b633813fc60c"
FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "otlp"

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8),
    lambda inner: (
        st.lists(inner, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                [
                    "resourceSpans",
                    "scopeSpans",
                    "spans",
                    "traceId",
                    "spanId",
                    "attributes",
                ]
            )
            | st.text(max_size=5),
            inner,
            max_size=4,
        )
    ),
    max_leaves=20,
)


@given(json_values)
def test_any_json_document_decodes_or_is_a_collect_error(document: object) -> None:
    try:
        spans = spans_of_document(document)
    except CollectError as e:
        assert "\n" not in str(e)
    else:
        assert all(len(s.trace_id) == 32 for s in spans)


@given(st.binary(max_size=200))
def test_any_bytes_decode_or_are_a_collect_error(body: bytes) -> None:
    with contextlib.suppress(CollectError):
        decode_json(body)


IMAGE = {"type": "blob", "modality": "image", "content": "iVBORw0KGgo="}
SUMMARY = {"role": "user", "parts": [text("Summary of what was dropped")]}


def _conversation(
    turns: int,
    trace: str = TRACE,
    images: frozenset[int] = frozenset(),
    summarised: tuple[int, int] | None = None,
) -> list[dict[str, object]]:
    """A chat span per turn, each carrying the whole conversation so far.

    The user's message of each turn in ``images`` holds an image too. With
    ``summarised`` (a turn, a number of messages), from that turn on the
    client sends :data:`SUMMARY` instead of that many first messages (the
    last one kept).
    """
    history: list[dict[str, object]] = []
    spans = []
    for i in range(turns):
        parts = [text(f"q{i}"), IMAGE] if i in images else [text(f"q{i}")]
        history.append({"role": "user", "parts": parts})
        inputs = history
        if summarised is not None and i >= summarised[0]:
            inputs = [SUMMARY, *history[min(summarised[1], len(history) - 1) :]]
        answer = {"role": "assistant", "parts": [text(f"a{i}")]}
        attrs = {
            "gen_ai.operation.name": "chat",
            "gen_ai.input.messages": json.dumps(inputs),
            "gen_ai.output.messages": json.dumps([answer]),
        }
        spans.append(json_span(trace, f"{i + 1:016x}", attrs, start=i + 1))
        history.append(answer)
    return spans


@settings(max_examples=25)
@given(
    st.integers(min_value=1, max_value=6),
    st.lists(st.integers(min_value=0, max_value=5), max_size=8),
    st.frozensets(st.integers(min_value=0, max_value=5)),
)
def test_batches_and_retries_record_the_conversation_once(
    turns: int, retried: list[int], images: frozenset[int]
) -> None:
    """However the spans are cut into batches and sent again, the history is the
    conversation, each message once, in order; each image (sent again in every
    later span's input) is counted once, never written as text."""
    spans = _conversation(turns, images=images)
    batches = [[s] for s in spans]
    for i in retried:  # an exporter resends an earlier batch
        batches.insert(min(i + 1, len(batches)), batches[min(i, len(batches) - 1)])
    with (
        tempfile.TemporaryDirectory() as folder,
        open_store(str(Path(folder) / "ledger.db")) as store,
    ):
        recorder = Recorder(store)
        for batch in batches:
            recorder.record(decode_json(json.dumps(json_request(batch)).encode()))
        (session,) = list_sessions(store)
        history = load_history(store, session.stream_id).entries
        left_out = not_recorded(store, [session.stream_id])
    expected = [t for i in range(turns) for t in (f"q{i}", f"a{i}")]
    assert [e.message.text for e in history] == expected
    shown = len(images & set(range(turns)))
    assert left_out == ({PART_NOT_RECORDED.format("blob"): shown} if shown else {})


@settings(max_examples=40, deadline=None)
@given(
    st.integers(min_value=2, max_value=7),
    st.integers(min_value=1, max_value=6),
    st.integers(min_value=1, max_value=4),
    st.lists(st.integers(min_value=1, max_value=4), min_size=1, max_size=6),
)
def test_a_summary_ahead_of_the_kept_turns_records_each_message_once(
    turns: int, summarised_at: int, dropped: int, cuts: list[int]
) -> None:
    """From one turn on, the client sends a summary of the messages it dropped
    (``dropped`` of them), then the rest: the history is the conversation, each
    message once, with the summary where it was first sent; whatever the
    batches, and a receiver restarted for every batch records the same."""
    spans = _conversation(turns, summarised=(summarised_at, dropped))
    expected = [t for i in range(turns) for t in (f"q{i}", f"a{i}")]
    if summarised_at < turns:  # where the summary was first sent
        expected.insert(2 * summarised_at, "Summary of what was dropped")
    batches = _batches(spans, cuts, [])
    found = []
    with tempfile.TemporaryDirectory() as folder:
        for restart in (False, True):
            with open_store(str(Path(folder) / f"l-{restart}.db")) as store:
                recorder = Recorder(store)
                for batch in batches:
                    if restart:
                        recorder = Recorder(store)
                    _send(recorder, batch)
                (session,) = list_sessions(store)
                history_read = load_history(store, session.stream_id).entries
                found.append([e.message.text for e in history_read])
    assert found[0] == found[1] == expected


def test_a_session_forgotten_between_batches_is_read_again_from_its_stream(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(recording, "MAX_SESSIONS", 1)
    first, second = _conversation(2)
    other = json_span(
        "6b8efff798038103d269b633813fc60c", "00000000000000aa", {}, start=9
    )
    other["attributes"] = first["attributes"]
    with open_store(str(tmp_path / "ledger.db")) as store:
        recorder = Recorder(store)
        for batch in ([first], [other], [first, second]):  # the retry and the next
            recorder.record(decode_json(json.dumps(json_request(batch)).encode()))
        keys = {s.key: s for s in list_sessions(store)}
        history = load_history(store, keys[TRACE].stream_id).entries
    assert len(keys) == 2
    assert [e.message.text for e in history] == ["q0", "a0", "q1", "a1"]


_STEP = st.tuples(
    st.sampled_from(["q", "again"]),  # the user's words (repeats happen)
    st.lists(st.sampled_from(["call_1", "call_2", ""]), max_size=2),  # tool calls
    # The tool's own execute_tool span sent too ("failed": an error, no result).
    st.sampled_from([False, True, True, "failed"]),
    st.sampled_from(["whole", "whole", "trimmed", "system", "spaced", "summary"]),
    st.booleans(),  # the next input carries another answer than the one sent
)


def _agent_spans(
    steps: list[tuple[str, list[str], bool | str, str, bool]],
    *,
    arguments: bool = True,
    unique: bool = False,
    ids: bool = True,
    answered: bool = True,
) -> list[dict]:
    """An agent's spans: tool round trips, each chat span carrying its input.

    A tool's span carries its arguments unless ``arguments`` is false, and its
    result unless it failed (then its status is an error, and the next input's
    result for its call is that failure); with
    ``unique``, a call id names one call (a step's ids get its number);
    without ``ids``, a tool span says its call's name and arguments, not its
    id; without ``answered``, a chat span holds no answer (the next one's input
    brings it). A call's arguments name its id.
    """
    history: list[dict[str, object]] = []
    spans: list[dict[str, object]] = []

    def chat(inputs: str, output: dict[str, object]) -> None:
        attrs = {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": "gpt-4o",
            "gen_ai.input.messages": inputs,
        }
        if answered:
            attrs["gen_ai.output.messages"] = json.dumps([output])
        spans.append(
            json_span(TRACE, f"{len(spans) + 1:016x}", attrs, start=len(spans))
        )

    summary = {"role": "user", "parts": [text("Summary of the turns dropped")]}
    for step, (words, calls, executed, form, edited) in enumerate(steps):
        # Asked again, the user shows a picture: not text, counted once.
        parts = [text(words), IMAGE] if words == "again" else [text(words)]
        history.append({"role": "user", "parts": parts})
        for said_id in calls:
            call_id = f"{said_id}-{step}" if unique and said_id else said_id
            said = {"q": call_id}
            call = {
                "role": "assistant",
                "parts": [
                    {"type": "tool_call", "id": call_id, "name": "t", "arguments": said}
                ],
            }
            chat(json.dumps(history), call)
            history.append(call)
            if executed:
                tool = {
                    "gen_ai.operation.name": "execute_tool",
                    "gen_ai.tool.name": "t",
                }
                if executed != "failed":
                    tool["gen_ai.tool.call.result"] = f"ran {call_id}"
                if ids or not call_id:
                    tool["gen_ai.tool.call.id"] = call_id
                if arguments:
                    tool["gen_ai.tool.call.arguments"] = json.dumps(said)
                status = 2 if executed == "failed" else 0
                spans.append(
                    json_span(
                        TRACE,
                        f"{len(spans) + 1:016x}",
                        tool,
                        start=len(spans),
                        status=status,
                    )
                )
            response = {"type": "tool_call_response", "id": call_id, "response": "r"}
            history.append({"role": "tool", "parts": [response]})
        inputs = {
            "whole": json.dumps(history),
            "trimmed": json.dumps(history[2:]),  # a client that cut its history
            "system": json.dumps([{"role": "system", "parts": [text("s")]}, *history]),
            "spaced": " " + json.dumps(history, indent=1),
            # A client's summary of the turns it dropped, ahead of the rest.
            "summary": json.dumps([summary, *history[2:]]),
        }[form]
        answer = {"role": "assistant", "parts": [text(f"a{len(history)}")]}
        chat(inputs, answer)
        history.append(
            {"role": "assistant", "parts": [text("edited")]} if edited else answer
        )
    return spans


_STEPS = st.lists(_STEP, min_size=1, max_size=6)
_CUTS = st.lists(st.integers(min_value=1, max_value=4), min_size=1, max_size=12)
"""Batch sizes, cycled through."""
_RETRIED = st.lists(st.integers(min_value=0, max_value=20), max_size=3)
"""Indexes of batches sent twice."""


def _batches(
    spans: list[dict], cuts: list[int], retried: list[int]
) -> list[list[dict]]:
    """The spans cut into batches of the sizes ``cuts`` cycles through, then the
    batch at each index of ``retried`` sent again right after itself."""
    batches: list[list[dict]] = []
    while spans:
        size = cuts[len(batches) % len(cuts)]
        batches.append(spans[:size])
        spans = spans[size:]
    for i in retried:
        batches.insert(min(i + 1, len(batches)), batches[min(i, len(batches) - 1)])
    return batches


def _send(recorder: Recorder, batch: list[dict]) -> None:
    recorder.record(decode_json(json.dumps(json_request(batch)).encode()))


def _everything(store: EventStore) -> list:
    return [
        (r.stream_id, r.version, msgspec.to_builtins(r.event)) for r in store.iter_all()
    ]


def _recorded(folder: Path, batches: list[list[dict]], *, restart: bool) -> list:
    with open_store(str(folder / f"ledger-{restart}.db")) as store:
        recorder = Recorder(store)
        for batch in batches:
            if restart:  # nothing remembered: each batch read from the stream
                recorder = Recorder(store)
            _send(recorder, batch)
        return _everything(store)


@settings(max_examples=40, deadline=None)
@given(_STEPS, _CUTS, _RETRIED)
@example(  # a failure answered, its call made again in that batch: the new one succeeds
    steps=[
        ("q", ["call_1", "call_1"], "failed", "whole", False),
        ("q", ["call_1"], False, "whole", False),
    ],
    cuts=[2, 4],
    retried=[],
)
def test_a_receiver_remembering_conversations_records_what_a_restarted_one_does(
    steps: list[tuple[str, list[str], bool | str, str, bool]],
    cuts: list[int],
    retried: list[int],
) -> None:
    """What a receiver remembers between spans (each conversation's last input
    read, each session's last input walked) changes nothing it records: the
    same events as a receiver started afresh for every batch, whatever the
    inputs (trimmed, reformatted, a system message first, an answer other than
    the one sent, tool results without an id), the cuts and the retries."""
    batches = _batches(_agent_spans(steps), cuts, retried)
    with tempfile.TemporaryDirectory() as folder:
        kept = _recorded(Path(folder), batches, restart=False)
        fresh = _recorded(Path(folder), batches, restart=True)
    assert kept == fresh


def test_a_tool_span_placed_after_its_call_in_one_batch_is_folded_as_written(
    tmp_path: Path,
) -> None:
    """A tool span before the model's message asking for its call, both in
    one batch: the message the span made for the call is taken out again in
    that batch. A receiver folding the batch (restarted) then knows what the
    one that wrote it knows, and records a later span alike.

    The batch's item listed the call's stand-in message as awaiting the
    model's, though the batch had placed it: folded last, it came back, and
    a restarted receiver took the call said later as the model's own,
    taking the result out and placing it again, where the one that wrote the
    batch recorded the message alone. Found by ``benchmarks/fuzz_collect.py``.
    """
    trace = "a" * 32

    def chat(span: str, start: int, inputs: list, output: dict) -> dict:
        attrs = {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": "gpt-4o",
            "gen_ai.input.messages": json.dumps(inputs),
            "gen_ai.output.messages": json.dumps([output]),
        }
        return json_span(trace, span, attrs, start=start)

    tool = {
        "gen_ai.operation.name": "execute_tool",
        "gen_ai.tool.name": "get_weather",
        "gen_ai.tool.call.id": "call_1",
        "gen_ai.tool.call.arguments": '{"city": "Paris"}',
        "gen_ai.tool.call.result": "18C, sunny",
    }
    batches = [
        [  # the tool span first, then the call answering with its result
            json_span(trace, "1" * 16, tool, start=10, name="execute_tool"),
            chat("2" * 16, 20, [USER, CALL, RESULT], ANSWER),
        ],
        [chat("3" * 16, 5, [USER], CALL)],  # the call asking for it, sent late
    ]
    kept = _recorded(tmp_path, batches, restart=False)
    fresh = _recorded(tmp_path, batches, restart=True)
    assert kept == fresh
    with open_store(str(tmp_path / "state.db")) as store:  # what each knows
        live = Recorder(store)
        _send(live, batches[0])
        (written,) = live._states.values()
        folded = Recorder(store)._state(written.agent, written.key)
        assert (folded.seen, folded.stand_ins) == (written.seen, written.stand_ins)


def test_a_call_id_named_again_after_its_result_is_read_alike_when_restarted(
    tmp_path: Path,
) -> None:
    """The model names a call's id again after its result (a call of its own);
    a later input repeats the last one, the old result in it: a receiver that
    read the last input records what a restarted one does.

    The receiver skipped the repeated head of an input, its tool results
    having been recorded by their ids; the id named again was no longer among
    them, and a restarted receiver, walking the whole input, recorded the old
    result as the new call's. The requests are the ones
    ``benchmarks/fuzz_collect.py --seed 7`` found it with (Semantic Kernel's
    recorded spans and log events, mutated), cut to the six it needs.
    """
    requests = json.loads((FIXTURES / "fuzz-said-again.json").read_text())
    found = []
    for restart in (False, True):
        with open_store(str(tmp_path / f"ledger-{restart}.db")) as store:
            recorder = Recorder(store)
            for request in requests:
                if restart:
                    recorder = Recorder(store)
                body = json.dumps(request["request"]).encode()
                if request["signal"] == "logs":
                    recorder.record_logs(decode_logs_json(body))
                else:
                    recorder.record(decode_json(body))
            found.append(_everything(store))
    assert found[0] == found[1]


def test_a_response_sent_again_leaves_its_link_where_the_ledger_has_it(
    tmp_path: Path,
) -> None:
    """A call's response recorded in one session, then (its span sent under
    another trace) in another: a continuation naming it goes to the latter,
    even after the first batch was sent again, as the ledger's items say.

    The receiver noted where each span of a batch went while mapping it,
    spans sent again (written nowhere) included: the resend moved the link
    back, and the continuation went elsewhere than a restarted receiver's.
    Found by ``benchmarks/fuzz_collect.py``.
    """

    def chat(trace: str, span: str, start: int, **ids: str) -> dict:
        attrs = {
            "gen_ai.operation.name": "chat",
            "gen_ai.request.model": "gpt-4o",
            "gen_ai.input.messages": json.dumps(
                [{"role": "user", "parts": [text(f"q{start}")]}]
            ),
            "gen_ai.output.messages": json.dumps(
                [{"role": "assistant", "parts": [text(f"a{start}")]}]
            ),
        }
        if "conversation" in ids:
            attrs["gen_ai.conversation.id"] = ids["conversation"]
        if "response" in ids:
            attrs["gen_ai.response.id"] = ids["response"]
        return json_span(trace, span, attrs, start=start)

    first = [chat("a" * 32, "1" * 16, 10, conversation="conv", response="resp_1")]
    batches = [
        first,
        [chat("b" * 32, "1" * 16, 10, response="resp_1")],  # under another trace
        first,  # sent again: nothing written
        [chat("c" * 32, "2" * 16, 20, conversation="resp_1")],  # continues it
    ]
    kept = _recorded(tmp_path, batches, restart=False)
    fresh = _recorded(tmp_path, batches, restart=True)
    assert kept == fresh


@settings(max_examples=30, deadline=None)
@given(_STEPS, _CUTS, _RETRIED)
def test_a_tool_spans_arguments_add_nothing_when_the_model_call_said_the_call(
    steps: list[tuple[str, list[str], bool | str, str, bool]],
    cuts: list[int],
    retried: list[int],
) -> None:
    """Model content captured: every call is recorded from the chat span that
    asked for it, so the tool spans' arguments record no call of their own."""
    sent = _batches(_agent_spans(steps), cuts, retried)
    bare = _batches(_agent_spans(steps, arguments=False), cuts, retried)
    with tempfile.TemporaryDirectory() as one, tempfile.TemporaryDirectory() as two:
        with_arguments = _recorded(Path(one), sent, restart=False)
        without = _recorded(Path(two), bare, restart=False)
    assert with_arguments == without


@settings(max_examples=40, deadline=None)
@given(_STEPS, _CUTS, _RETRIED)
def test_tool_spans_without_call_ids_record_what_spans_with_them_do(
    steps: list[tuple[str, list[str], bool | str, str, bool]],
    cuts: list[int],
    retried: list[int],
) -> None:
    """A tool span without its call's id is paired with the one unanswered call
    of its name and arguments: with each call's arguments its own, the ledger
    holds what the same spans carrying their ids record, whatever the cuts, the
    retries and a receiver restarted between batches (what calls are
    unanswered is read from the stream)."""
    assume(all(len(set(calls)) == len(calls) for _, calls, *_ in steps))
    with_ids = _batches(_agent_spans(steps, unique=True), cuts, retried)
    bare = _batches(_agent_spans(steps, unique=True, ids=False), cuts, retried)
    with tempfile.TemporaryDirectory() as one, tempfile.TemporaryDirectory() as two:
        expected = _recorded(Path(one), with_ids, restart=False)
        assert _recorded(Path(two), bare, restart=True) == expected


def _histories(folder: Path, batches: list[list[dict]], *, restart: bool) -> list:
    """What each session recorded holds, message by message."""
    with open_store(str(folder / f"histories-{restart}.db")) as store:
        recorder = Recorder(store)
        for batch in batches:
            if restart:
                recorder = Recorder(store)
            _send(recorder, batch)
        return [
            [
                (
                    e.message.role,
                    e.message.text,
                    [(c.id, c.name) for c in e.message.tool_calls],
                    [
                        (r.call_id, r.content, r.is_error)
                        for r in e.message.tool_results
                    ],
                )
                for e in load_history(store, session.stream_id).entries
            ]
            for session in list_sessions(store)
        ]


_KEPT_STEPS = st.lists(
    st.tuples(
        st.sampled_from(["q", "again"]),
        st.lists(st.sampled_from(["call_1", "call_2", ""]), max_size=2, unique=True),
        st.sampled_from([False, True, True]),
        st.sampled_from(["whole", "system", "spaced"]),
        st.booleans(),
    ),
    min_size=1,
    max_size=6,
)
"""Steps whose runs do not fail and whose inputs keep every message: a run
failed without its result, or a call no input brings (a client that cut it),
is known by its id alone."""


def _unpaired(history: list) -> list[str]:
    """What breaks the pairing of a history: a result of no call made and
    unanswered, a call left unanswered (by id; a call without one included)."""
    open_calls: Counter[str] = Counter()
    broken: list[str] = []
    for _role, _text, calls, results in history:
        for call_id, _name in calls:
            open_calls[call_id] += 1
        for call_id, _content, _error in results:
            if open_calls[call_id]:
                open_calls[call_id] -= 1
            else:
                broken.append(f"result of {call_id}")
    broken += [f"call {c}" for c, n in sorted(open_calls.items()) for _ in range(n)]
    return broken


@settings(max_examples=40, deadline=None)
@given(_KEPT_STEPS, _CUTS, _RETRIED, st.booleans())
def test_a_call_id_named_again_is_a_call_of_its_own(
    steps: list[tuple[str, list[str], bool | str, str, bool]],
    cuts: list[int],
    retried: list[int],
    restart: bool,
) -> None:
    """Turns whose calls reuse the ids of earlier turns' (ADK names a call the
    model gave no id by its tool and place: get_weather_0 at every turn): each
    call's result is recorded once, after it, whatever the cuts, the retries
    and a receiver restarted between batches. Fails when an answered id named
    again is not a call of its own (the later results were dropped). Each
    input carries the answer sent (one edited reads as said, its own test's),
    and each call an id (a run of a call made without one is not paired)."""
    steps = [
        (words, [c for c in calls if c], run, form, False)
        for words, calls, run, form, _ in steps
    ]
    named = [c for _, calls, *_ in steps for c in calls]
    assume(len(set(named)) < len(named))  # some id is named again
    batches = _batches(_agent_spans(steps), cuts, retried)
    with tempfile.TemporaryDirectory() as folder:
        (history,) = _histories(Path(folder), batches, restart=restart)
    assert _unpaired(history) == []
    made = sum(len(calls) for _, calls, *_ in steps)
    assert sum(len(calls) for _, _, calls, _ in history) == made


@settings(max_examples=40, deadline=None)
@given(_KEPT_STEPS, _CUTS, _RETRIED, st.booleans())
def test_a_tool_run_before_its_call_is_known_records_what_its_call_id_does(
    steps: list[tuple[str, list[str], bool | str, str, bool]],
    cuts: list[int],
    retried: list[int],
    restart: bool,
) -> None:
    """Model call spans without their answer (the next call's input brings the
    model's message): tool spans without their call's id record the history
    spans carrying the ids do, each run's result after the message asking for
    it, whatever the cuts, the retries and restarts between batches. (Not a
    failed run's: without its result nor its id, nothing says which call's
    result is the failure.)"""
    with_ids = _batches(_agent_spans(steps, unique=True, answered=False), cuts, retried)
    bare = _batches(
        _agent_spans(steps, unique=True, ids=False, answered=False), cuts, retried
    )
    with tempfile.TemporaryDirectory() as one, tempfile.TemporaryDirectory() as two:
        expected = _histories(Path(one), with_ids, restart=False)
        assert _histories(Path(two), bare, restart=restart) == expected


def _recorded_by_two(folder: Path, batches: list[list[dict]], turns: list[int]) -> list:
    """Each batch recorded by one of two recorders of one ledger, in turn."""
    with open_store(str(folder / "ledger-two.db")) as store:
        recorders = (Recorder(store), Recorder(store))
        for n, batch in enumerate(batches):
            _send(recorders[turns[n % len(turns)] % 2], batch)
        return _everything(store)


@settings(max_examples=40, deadline=None)
@given(
    _STEPS,
    _CUTS,
    _RETRIED,
    st.lists(st.integers(min_value=0, max_value=1), min_size=1, max_size=12),
)
def test_two_receivers_of_one_ledger_record_what_a_restarted_one_does(
    steps: list[tuple[str, list[str], bool | str, str, bool]],
    cuts: list[int],
    retried: list[int],
    turns: list[int],
) -> None:
    """A recorder keeps each session's state between batches; when another
    writer appended to the session meanwhile (here another recorder of the same
    ledger, retries included), its next batch of that session is still
    recorded as a receiver started afresh records it."""
    batches = _batches(_agent_spans(steps), cuts, retried)
    with tempfile.TemporaryDirectory() as folder:
        two = _recorded_by_two(Path(folder), batches, turns)
        fresh = _recorded(Path(folder), batches, restart=True)
    assert two == fresh


class Counted:
    """Counts a real store's session reads and batch appends (and makes them)."""

    def __init__(self, store: EventStore) -> None:
        self.reads = 0
        self.appends = 0
        read_stream, append_atomic = store.read_stream, store.append_atomic

        def counted_read(*args: Any, **kwargs: Any) -> Any:
            self.reads += 1
            return read_stream(*args, **kwargs)

        def counted_append(*args: Any, **kwargs: Any) -> Any:
            self.appends += 1
            return append_atomic(*args, **kwargs)

        store.read_stream = counted_read  # type: ignore[method-assign]
        store.append_atomic = counted_append  # type: ignore[method-assign]


def _body(*spans: dict[str, object]) -> list[recording.Span]:
    return decode_json(json.dumps(json_request(list(spans))).encode())


def test_a_lone_writer_reads_a_session_once_not_per_batch(tmp_path: Path) -> None:
    """While nobody else writes, a session is read when first seen only; each
    later batch of it is mapped from the recorder's own state."""
    spans = _conversation(4)
    with open_store(str(tmp_path / "ledger.db")) as store:
        counted = Counted(store)
        recorder = Recorder(store)
        for span in spans:
            recorder.record(_body(span))
        counts = (counted.reads, counted.appends)
        (session,) = list_sessions(store)
        history = load_history(store, session.stream_id).entries
    assert [e.message.text for e in history] == [
        t for i in range(4) for t in (f"q{i}", f"a{i}")
    ]
    assert counts == (1, 4)


def test_after_another_writer_every_cached_session_is_read_again(
    tmp_path: Path,
) -> None:
    """Another writer moves session B while we write session A: our next batch
    of B reads B again first, finds its span recorded, and appends nothing
    (no stale append to be refused and mapped again)."""
    a1, a2 = _conversation(2, "a" * 32)
    b1, b2 = _conversation(2, "b" * 32)
    with open_store(str(tmp_path / "ledger.db")) as store:
        ours, theirs = Recorder(store), Recorder(store)
        ours.record(_body(a1, b1))
        theirs.record(_body(b2))
        counted = Counted(store)
        ours.record(_body(a2))
        assert (counted.reads, counted.appends) == (1, 1)  # A read again: moved
        again = ours.record(_body(b2))
        assert (counted.reads, counted.appends) == (2, 1)
        sessions = {s.key: s for s in list_sessions(store)}
        histories = {
            k: [e.message.text for e in load_history(store, s.stream_id).entries]
            for k, s in sessions.items()
        }
    assert (again.duplicates, again.events) == (1, 0)
    assert histories == {k * 32: ["q0", "a0", "q1", "a1"] for k in "ab"}


def test_a_batch_after_another_writer_moved_the_session_is_mapped_again(
    tmp_path: Path,
) -> None:
    first, second, third = _conversation(3)
    with open_store(str(tmp_path / "ledger.db")) as store:
        ours, theirs = Recorder(store), Recorder(store)
        ours.record(decode_json(json.dumps(json_request([first])).encode()))
        theirs.record(decode_json(json.dumps(json_request([second])).encode()))
        again = ours.record(decode_json(json.dumps(json_request([second])).encode()))
        report = ours.record(decode_json(json.dumps(json_request([third])).encode()))
        (session,) = list_sessions(store)
        history = load_history(store, session.stream_id).entries
    assert [e.message.text for e in history] == ["q0", "a0", "q1", "a1", "q2", "a2"]
    assert (again.duplicates, again.events) == (1, 0)
    assert (report.mapped, report.duplicates) == (1, 0)


@pytest.mark.parametrize(
    ("sent", "read"),
    [("NaN", "nan"), ("Infinity", "inf"), ("-Infinity", "-inf"), ("-2.5e3", "-2500.0")],
)
def test_doubles_in_proto3_json_strings_are_read(sent: str, read: str) -> None:
    span = json_span(TRACE, "1" * 16, {}, start=1)
    span["attributes"] = [{"key": "x", "value": {"doubleValue": sent}}]
    (decoded,) = decode_json(json.dumps(json_request([span])).encode())
    assert repr(decoded.attributes["x"]) == read


_ODD_NUMBERS = [
    float("nan"),
    float("inf"),
    float("-inf"),
    1e300,
    -3.0,
    2**70,
    -(2**70),
    "\u00b2",
    "\u0663",
    "9" * 5_000,
    "-12",
    " 12",
]


@pytest.mark.parametrize("value", _ODD_NUMBERS, ids=lambda v: repr(v)[:24])
def test_a_token_count_that_is_not_one_reads_as_not_reported(
    value: object, tmp_path: Path
) -> None:
    span = recording.Span(
        trace_id="a" * 32,
        span_id="b" * 16,
        attributes={
            "gen_ai.operation.name": "chat",
            "gen_ai.usage.input_tokens": value,
            "gen_ai.usage.output_tokens": 7,
        },
    )
    with open_store(str(tmp_path / "ledger.db")) as store:
        report = Recorder(store).record([span])
        calls = [
            r.event
            for r in store.read_all(after=0, limit=100)
            if type(r.event).__name__ == "ModelCalled"
        ]
    assert report.mapped == 1
    assert [(c.input_tokens, c.output_tokens) for c in calls] == [(0, 7)]


_GENAI_KEYS = [
    "gen_ai.operation.name",
    "gen_ai.usage.input_tokens",
    "gen_ai.usage.prompt_tokens",
    "gen_ai.usage.cache_read.input_tokens",
    "gen_ai.usage.cache_creation.input_tokens",
    "gen_ai.usage.reasoning.output_tokens",
    "gen_ai.input.messages",
    "gen_ai.output.messages",
    "gen_ai.system_instructions",
    "gen_ai.tool.call.id",
    "gen_ai.tool.call.arguments",
    "gen_ai.tool.call.result",
    "gen_ai.conversation.id",
    "gen_ai.prompt.0.role",
    "gen_ai.prompt.0.content",
    "gen_ai.prompt.0.tool_calls.\u00b2.id",
    "gen_ai.prompt.0.tool_calls.0.arguments",
    "gen_ai.completion.0.role",
    "gen_ai.prompt." + "1" * 5_000 + ".role",
    "llm.request.type",
    # OpenInference's own.
    "openinference.span.kind",
    "session.id",
    "llm.input_messages.0.message.role",
    "llm.input_messages.0.message.content",
    "llm.input_messages.1.message.contents.0.message_content.type",
    "llm.input_messages.1.message.contents.0.message_content.text",
    "llm.input_messages.1.message.tool_call_id",
    "llm.output_messages.0.message.tool_calls.0.tool_call.id",
    "llm.output_messages.0.message.tool_calls.0.tool_call.function.arguments",
    "llm.output_messages.1.message.content",
    "llm.prompts",
    "llm.prompts.0.prompt.text",
    "llm.choices.0.completion.text",
    "llm.token_count.prompt",
    "llm.token_count.prompt_details.cache_write",
    "llm.model_name",
    "tool.name",
    "tool_call.id",
    "input.value",
    "output.value",
]

_attribute_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats()
    | st.sampled_from(
        [
            *("chat", "execute_tool", "\u00b2", "\u0663", "9" * 5_000, "[]"),
            *("LLM", "TOOL", "AGENT", "__REDACTED__"),
        ]
    )
    | st.text(max_size=6),
    lambda inner: (
        st.lists(inner, max_size=3).map(tuple)
        | st.dictionaries(st.text(max_size=4), inner, max_size=3)
    ),
    max_leaves=8,
)


@settings(max_examples=200, deadline=None)
@given(
    st.dictionaries(st.sampled_from(_GENAI_KEYS), _attribute_values, max_size=8),
    st.sampled_from(["chat", "execute_tool", "text_completion"]),
)
def test_any_attribute_values_record_or_are_refused_typed(
    attrs: dict[str, object], operation: str
) -> None:
    """Whatever values a span's GenAI attributes hold, recording it succeeds or
    raises the ledger's typed refusal; never another exception."""
    span = recording.Span(
        trace_id="a" * 32,
        span_id="b" * 16,
        attributes={"gen_ai.operation.name": operation, **attrs},
    )
    with (
        tempfile.TemporaryDirectory() as folder,
        open_store(f"{folder}/l.db") as store,
        contextlib.suppress(InvalidEventError),
    ):
        Recorder(store).record([span])


_CONTENT_KEYS = ("gen_ai.input.messages", "gen_ai.output.messages")


def _apart(spans: list[dict]) -> tuple[list[dict], list[dict]]:
    """The spans without their content, and that content as each chat span's
    details log event (what ``event_only`` capture sends)."""
    bare: list[dict] = []
    records: list[dict] = []
    for span in spans:
        content = [a for a in span["attributes"] if a["key"] in _CONTENT_KEYS]
        if content:
            records.append(
                {
                    "timeUnixNano": span["endTimeUnixNano"],
                    "eventName": "gen_ai.client.inference.operation.details",
                    "traceId": span["traceId"],
                    "spanId": span["spanId"],
                    "attributes": content,
                }
            )
        kept = [a for a in span["attributes"] if a["key"] not in _CONTENT_KEYS]
        bare.append({**span, "attributes": kept})
    return bare, records


def _history(store: EventStore) -> list[tuple[object, ...]]:
    """The session's messages, then what it left out (its images, counted)."""
    (session,) = list_sessions(store)
    return [
        *(
            (
                e.message.role,
                e.message.text,
                tuple(c.id for c in e.message.tool_calls),
                tuple((r.call_id, r.content) for r in e.message.tool_results),
            )
            for e in load_history(store, session.stream_id).entries
        ),
        ("left out", not_recorded(store, [session.stream_id])),
    ]


@settings(max_examples=40, deadline=None)
@given(
    _STEPS,
    _CUTS,
    _CUTS,
    st.lists(st.booleans(), max_size=24),
    st.booleans(),
)
def test_content_sent_as_log_events_records_what_content_on_spans_records(
    steps: list[tuple[str, list[str], bool | str, str, bool]],
    span_cuts: list[int],
    log_cuts: list[int],
    order: list[bool],
    arguments: bool,
) -> None:
    """Each signal's batches in the order sent, the two interleaved anyhow
    (logs first, spans first, or alternating), a resend of the first log batch
    at the end: the session's history is what the same spans carrying their
    content record, each message once; and a receiver restarted for every
    batch records the same events as one that remembers. Every call has an id (a tool span's
    result without one cannot be placed after a call said later), one of its own: a
    run of an id named again, before the model's message naming it again comes,
    finds that id answered (the next input's result is recorded, what the model was
    sent; see test_collect_adk)."""
    steps = [
        (w, [f"{c or 'call_3'}.{i}" for i, c in enumerate(calls)], *rest)
        for w, calls, *rest in steps
    ]
    spans = _agent_spans(steps, arguments=arguments, unique=True)
    bare, records = _apart(spans)
    span_batches = _batches(bare, span_cuts, [])
    log_batches = _batches(records, log_cuts, [])
    deliveries: list[tuple[str, list[dict]]] = []
    picks = iter(order)
    while span_batches or log_batches:
        logs_next = next(picks, True)
        if log_batches and (logs_next or not span_batches):
            deliveries.append(("logs", log_batches.pop(0)))
        else:
            deliveries.append(("spans", span_batches.pop(0)))
    first_logs = next(b for kind, b in deliveries if kind == "logs")
    deliveries.append(("logs", first_logs))
    with tempfile.TemporaryDirectory() as folder:
        with open_store(str(Path(folder) / "on-spans.db")) as store:
            recorder = Recorder(store)
            for batch in _batches(spans, span_cuts, []):
                _send(recorder, batch)
            expected = _history(store)
        recorded = []
        for restart in (False, True):  # restarted: every batch read from the ledger
            with open_store(str(Path(folder) / f"apart-{restart}.db")) as store:
                recorder = Recorder(store)
                for kind, batch in deliveries:
                    if restart:
                        recorder = Recorder(store)
                    if kind == "spans":
                        _send(recorder, batch)
                    else:
                        recorder.record_logs(_log_batch(batch))
                assert _history(store) == expected
                recorded.append(_everything(store))
        assert recorded[0] == recorded[1]


def _log_batch(records: list[dict]) -> list[LogRecord]:
    resource = json_request([])["resourceSpans"][0]["resource"]
    document = {
        "resourceLogs": [{"resource": resource, "scopeLogs": [{"logRecords": records}]}]
    }
    return decode_logs_json(json.dumps(document).encode())
