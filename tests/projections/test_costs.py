"""Cost records: buckets per model, session, day and month; agents; budgets."""

from __future__ import annotations

import itertools
import uuid
from collections import Counter
from datetime import UTC, datetime, timedelta, timezone

import msgspec
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from turnledger.ledger.envelope import Recorded
from turnledger.ledger.events import (
    AssistantMessage,
    ModelCalled,
    SessionOpened,
    ToolCallRecord,
    ToolResultRecorded,
    TurnFailed,
    TurnStarted,
)
from turnledger.ledger.ids import session_stream_id
from turnledger.ledger.store import open_store
from turnledger.policies.budgets import make_budget_checker
from turnledger.policies.lifecycle import render_ownership_table, validate_declaration
from turnledger.policies.pricing import PricingError
from turnledger.projections.base import digest, fold
from turnledger.projections.costs import (
    COST_RECORDS,
    CostBucket,
    CostTotals,
    budget_keys,
    budget_status,
    grand_total,
    sessions_of,
    totals,
)
from turnledger.projections.runner import ProjectionRunner
from turnledger.projections.views import SQLiteViewStore

S1, S2, S3 = (uuid.UUID(int=n) for n in (1, 2, 3))
JAN_31_LATE = datetime(2026, 1, 31, 23, 30, tzinfo=UTC)


def recorded(*items):
    """Envelope ``(stream, event, at)`` triples with positions and versions."""
    versions: Counter[uuid.UUID] = Counter()
    out = []
    for position, (stream, event, at) in enumerate(items, start=1):
        versions[stream] += 1
        out.append(
            Recorded(
                stream_id=stream,
                version=versions[stream],
                position=position,
                recorded_at=at,
                event=event,
            )
        )
    return out


def call(model="m1", **fields):
    return ModelCalled(turn_id="t1", provider="p", model=model, **fields)


def fold_in_pages(projection, records, cuts):
    """Fold page by page through msgspec JSON, as the runner's view store does."""
    encoder = msgspec.json.Encoder()
    decoder = msgspec.json.Decoder(projection.state_type)
    stored: dict[str, bytes] = {}
    bounds = [0, *sorted(set(cuts)), len(records)]
    for start, end in itertools.pairwise(bounds):
        page = [
            r for r in records[start:end] if isinstance(r.event, projection.event_types)
        ]
        keys = {k for r in page for k in projection.keys(r)}
        loaded = {k: decoder.decode(stored[k]) for k in keys if k in stored}
        changed = fold(projection, page, loaded)
        stored.update((k, encoder.encode(changed[k])) for k in keys if k in changed)
    return {k: decoder.decode(v) for k, v in stored.items()}


def example_ledger():
    midnight = JAN_31_LATE + timedelta(hours=1)  # 2026-02-01 00:30 UTC
    return recorded(
        (
            S1,
            SessionOpened(agent="alice", session_key="k1", channel="cli"),
            JAN_31_LATE,
        ),
        (
            S1,
            TurnStarted(turn_id="t1", origin="interactive", user_input="hi"),
            JAN_31_LATE,
        ),
        (
            S1,
            call(
                input_tokens=100,
                output_tokens=10,
                cached_input_tokens=500,
                cost_usd=0.5,
            ),
            JAN_31_LATE,
        ),
        (S2, SessionOpened(agent="bob", session_key="k2"), JAN_31_LATE),
        (S2, call("m2", input_tokens=7, cost_usd=0.25, duration_ms=3.0), midnight),
        (S1, call(success=False, error="boom", duration_ms=2.0), midnight),
        (S3, call("m2", output_tokens=1, cost_usd=1.0), midnight),
    )


def test_a_call_updates_its_model_session_day_and_month_buckets():
    """Each call lands in four buckets, by the UTC date of its recording."""
    states = fold(COST_RECORDS, example_ledger())
    assert sorted(states) == sorted(
        [
            "model:m1",
            "model:m2",
            f"session:{S1}",
            f"session:{S2}",
            f"session:{S3}",
            "day:2026-01-31",
            "day:2026-02-01",
            "month:2026-01",
            "month:2026-02",
        ]
    )
    m1 = totals(states, "model")["m1"]
    assert m1 == CostTotals(
        calls=2,
        failures=1,
        input_tokens=100,
        cached_input_tokens=100,  # clamped to the input
        output_tokens=10,
        cost_usd=0.5,
        duration_ms=2.0,
    )
    assert m1.total_tokens == 110
    assert totals(states, "day")["2026-01-31"].cost_usd == 0.5
    assert totals(states, "day")["2026-02-01"].cost_usd == 1.25
    assert totals(states, "month") == {
        "2026-01": totals(states, "day")["2026-01-31"],
        "2026-02": totals(states, "day")["2026-02-01"],
    }
    assert states[f"session:{S1}"].agent == "alice"
    assert states[f"session:{S1}"].channel == "cli"
    assert states[f"session:{S1}"].totals.calls == 2


def test_agent_totals_are_summed_from_session_buckets():
    """Sessions of one agent add up; a stream that never opened counts under ''."""
    states = fold(COST_RECORDS, example_ledger())
    by_agent = totals(states, "agent")
    assert list(by_agent) == ["", "alice", "bob"]
    assert by_agent["alice"].calls == 2
    assert by_agent["bob"].cost_usd == 0.25
    assert by_agent[""].output_tokens == 1
    assert sessions_of(states, "alice") == (str(S1),)
    assert grand_total(states).calls == 4
    assert grand_total(states).cost_usd == 1.75


def test_day_and_month_are_utc_whatever_the_recorded_offset():
    """A time recorded with an offset is bucketed by its UTC date."""
    paris_early = datetime(2026, 3, 1, 0, 30, tzinfo=timezone(timedelta(hours=2)))
    states = fold(COST_RECORDS, recorded((S1, call(cost_usd=1.0), paris_early)))
    assert "day:2026-02-28" in states
    assert "month:2026-02" in states


def test_other_events_change_no_bucket():
    """Only session openings and model calls have keys."""
    records = recorded(
        (S1, TurnStarted(turn_id="t", origin="cron", user_input="x"), JAN_31_LATE),
        (S1, TurnFailed(turn_id="t", error="x"), JAN_31_LATE),
    )
    assert [COST_RECORDS.keys(r) for r in records] == [(), ()]
    assert fold(COST_RECORDS, records) == {}


def test_unknown_dimension_is_refused():
    """Grouping by an unknown dimension names the known ones."""
    with pytest.raises(
        ValueError,
        match=r"Expected a cost dimension in \['agent', 'day', 'model', 'month', "
        r"'session'\], found 'tool'",
    ):
        totals({}, "tool")


def test_budget_status_reads_the_current_day_and_month():
    """Today's and this month's buckets feed the pricing policy's check."""
    states = fold(COST_RECORDS, example_ledger())
    check = make_budget_checker(daily_limit_usd=1.5, monthly_limit_usd=10.0)
    now = datetime(2026, 2, 1, 12, tzinfo=UTC)
    assert budget_keys(now) == ("day:2026-02-01", "month:2026-02")
    status = budget_status(states, check, now)
    assert (status.state, status.period, status.current_usd) == ("warning", "day", 1.25)
    over = budget_status(states, check, now, estimated_usd=0.5)
    assert (over.state, over.projected_usd) == ("exceeded", 1.75)
    later = budget_status(states, check, datetime(2026, 2, 2, tzinfo=UTC))
    assert (later.state, later.current_usd) == ("ok", 0.0)
    assert budget_status({}, check, now).state == "ok"


def test_budget_status_needs_an_aware_now():
    """A naive now is refused: the day boundary would be a guess."""
    check = make_budget_checker()
    with pytest.raises(
        PricingError,
        match="Expected a timezone-aware now, found naive 2026-02-01T00:00:00",
    ):
        budget_status({}, check, datetime(2026, 2, 1))  # noqa: DTZ001 - the point


def test_lifecycle_declaration_is_valid_and_renders():
    """The cost ledger declares a valid owner, durability and scope."""
    declaration = validate_declaration(COST_RECORDS.lifecycle)
    assert (declaration.durability, declaration.scope) == ("cost", "install")
    assert "| Cost ledger |" in render_ownership_table([declaration])


CONTENT = "CONTENT"
content_text = st.builds(lambda s: f"{CONTENT} {s}", st.text(max_size=20))
money = st.floats(min_value=0, max_value=5, allow_nan=False)
tokens = st.integers(min_value=0, max_value=10_000)

cost_events = st.one_of(
    st.builds(
        SessionOpened,
        agent=st.sampled_from(["alice", "bob"]),
        session_key=st.sampled_from(["k1", "k2"]),
    ),
    st.builds(
        ModelCalled,
        turn_id=st.just("t"),
        provider=st.just("p"),
        model=st.sampled_from(["m1", "m2"]),
        input_tokens=tokens,
        output_tokens=tokens,
        cached_input_tokens=tokens,
        cache_write_tokens=tokens,
        reasoning_tokens=tokens,
        cost_usd=money,
        duration_ms=money,
        success=st.booleans(),
        error=st.none() | content_text,
    ),
    st.builds(
        TurnStarted,
        turn_id=st.just("t"),
        origin=st.just("interactive"),
        user_input=content_text,
    ),
    st.builds(
        AssistantMessage,
        turn_id=st.just("t"),
        text=content_text,
        tool_calls=st.tuples(
            st.builds(
                ToolCallRecord,
                id=st.just("c"),
                name=st.just("shell"),
                arguments=content_text,
            )
        ),
    ),
    st.builds(
        ToolResultRecorded,
        turn_id=st.just("t"),
        call_id=st.just("c"),
        tool=st.just("shell"),
        output=content_text,
        error=st.none() | content_text,
    ),
)


@st.composite
def cost_ledgers(draw):
    size = draw(st.integers(min_value=0, max_value=20))
    at = datetime(2026, 1, 30, 20, tzinfo=UTC)
    items = []
    for _ in range(size):
        at += timedelta(hours=draw(st.integers(min_value=0, max_value=30)))
        items.append((draw(st.sampled_from([S1, S2, S3])), draw(cost_events), at))
    return recorded(*items)


@settings(max_examples=50, deadline=None)
@given(records=cost_ledgers(), data=st.data())
def test_folding_in_pages_equals_folding_at_once(records, data):
    """Any page split (through the JSON view encoding) gives the same states."""
    cuts = data.draw(st.lists(st.integers(min_value=0, max_value=len(records))))
    whole = fold(COST_RECORDS, records)
    paged = fold_in_pages(COST_RECORDS, records, cuts)
    assert paged == whole
    assert digest(paged) == digest(whole)


@settings(max_examples=50, deadline=None)
@given(records=cost_ledgers())
def test_states_never_hold_content(records):
    """No input, output, argument or error text reaches an encoded state."""
    for state in fold(COST_RECORDS, records).values():
        assert CONTENT.encode() not in msgspec.json.encode(state)


@settings(max_examples=40, deadline=None)
@given(records=cost_ledgers())
def test_every_dimension_accounts_for_every_call(records):
    """Models, sessions, agents, days and months each sum to the same calls."""
    states = fold(COST_RECORDS, records)
    calls = sum(isinstance(r.event, ModelCalled) for r in records)
    for by in ("model", "agent", "session", "day", "month"):
        assert sum(t.calls for t in totals(states, by).values()) == calls


def test_cache_write_and_reasoning_tokens_are_summed_and_clamped():
    """Cache writes fit in the input left after cache reads, reasoning in the output."""
    states = fold(
        COST_RECORDS,
        recorded(
            (S1, SessionOpened(agent="alice", session_key="k1"), JAN_31_LATE),
            (
                S1,
                call(
                    input_tokens=1000,
                    cached_input_tokens=600,
                    cache_write_tokens=300,
                    output_tokens=50,
                    reasoning_tokens=40,
                ),
                JAN_31_LATE,
            ),
            (
                S1,
                call(
                    input_tokens=100,
                    cached_input_tokens=80,
                    cache_write_tokens=50,  # only 20 left after the reads
                    output_tokens=5,
                    reasoning_tokens=9,  # clamped to the output
                ),
                JAN_31_LATE,
            ),
        ),
    )
    m1 = totals(states, "model")["m1"]
    assert (m1.cached_input_tokens, m1.cache_write_tokens) == (680, 320)
    assert (m1.output_tokens, m1.reasoning_tokens) == (55, 45)
    assert totals(states, "agent")["alice"] == m1


def test_states_stored_before_the_new_counts_decode_as_zero():
    """A cost state written before cache writes and reasoning existed reads as 0."""
    old = b'{"totals":{"calls":1,"input_tokens":5,"cost_usd":0.5},"agent":"a"}'
    bucket = msgspec.json.decode(old, type=CostBucket)
    assert (bucket.totals.cache_write_tokens, bucket.totals.reasoning_tokens) == (0, 0)
    assert bucket.totals.input_tokens == 5


@settings(max_examples=40, deadline=None)
@given(records=cost_ledgers())
def test_token_parts_never_exceed_their_whole(records):
    """In every total, cached + cache-write <= input and reasoning <= output."""
    for state in fold(COST_RECORDS, records).values():
        t = state.totals
        assert t.cached_input_tokens + t.cache_write_tokens <= t.input_tokens
        assert t.reasoning_tokens <= t.output_tokens


def test_runner_live_catch_up_equals_rebuild(tmp_path):
    """Live catch-up in small pages on SQLite equals a rebuild and a plain fold."""
    store = open_store(str(tmp_path / "l.db"))
    views = SQLiteViewStore(str(tmp_path / "v.db"))
    runner = ProjectionRunner(store, views, [COST_RECORDS])
    streams = [session_stream_id(agent, "k") for agent in ("alice", "bob")]
    for stream, agent in zip(streams, ("alice", "bob"), strict=True):
        store.append(
            stream, [SessionOpened(agent=agent, session_key="k")], expected_version=0
        )
    for round_ in range(4):
        for stream in streams:
            events = [
                TurnStarted(
                    turn_id=f"t{round_}", origin="interactive", user_input="hi"
                ),
                call(f"m{round_ % 2}", input_tokens=round_, cost_usd=0.125),
            ]
            store.append(stream, events, expected_version=store.stream_version(stream))
        runner.catch_up(page_size=3)
    live = digest(views.all(COST_RECORDS.name, CostBucket))
    runner.rebuild(page_size=2)
    assert digest(views.all(COST_RECORDS.name, CostBucket)) == live
    assert live == digest(fold(COST_RECORDS, store.iter_all()))
    by_agent = totals(views.all(COST_RECORDS.name, CostBucket), "agent")
    assert {a: t.calls for a, t in by_agent.items()} == {"alice": 4, "bob": 4}
    assert by_agent["alice"].cost_usd == 0.5
    views.close()
    store.close()


# -- turnledger costs -----------------------------------------------------------


def _costs_cli(capsys, db, *args):
    from turnledger.pipeline.cli import main

    code = main(["--db", db, "costs", *args])
    out, err = capsys.readouterr()
    return code, out, err


def _ledger_with_calls(path):
    from datetime import UTC, datetime

    from turnledger.ledger import ModelCalled, SessionOpened, session_stream_id
    from turnledger.ledger.store import open_store

    with open_store(path) as store:
        for agent, key, model, cost in (
            ("ops", "s1", "m-big", 0.5),
            ("ops", "s2", "m-small", 0.01),
            ("dev", "s1", "m-big", 0.25),
        ):
            stream = session_stream_id(agent, key)
            store.append(
                stream,
                [
                    SessionOpened(agent=agent, session_key=key, channel="cli"),
                    ModelCalled(
                        turn_id="t1",
                        provider="p",
                        model=model,
                        input_tokens=100,
                        output_tokens=10,
                        cost_usd=cost,
                    ),
                ],
                expected_version=0,
            )
    return datetime.now(UTC)


def test_costs_group_and_filter(capsys, tmp_path):
    import json

    db = str(tmp_path / "l.db")
    _ledger_with_calls(db)
    code, out, _ = _costs_cli(capsys, db, "--json")
    report = json.loads(out)
    assert code == 0
    assert report["by"] == "model"
    assert [(r["group"], r["calls"]) for r in report["rows"]] == [
        ("m-big", 2),
        ("m-small", 1),
    ]
    assert report["total"]["cost_usd"] == pytest.approx(0.76)
    assert report["total"]["total_tokens"] == 330
    _, out, _ = _costs_cli(capsys, db, "--by", "agent", "--json")
    assert [r["group"] for r in json.loads(out)["rows"]] == ["ops", "dev"]
    _, out, _ = _costs_cli(capsys, db, "--agent", "ops", "--by", "session", "--json")
    assert [r["group"] for r in json.loads(out)["rows"]] == ["ops/s1", "ops/s2"]
    _, out, _ = _costs_cli(capsys, db, "--session", "s1", "--json")
    assert json.loads(out)["total"]["calls"] == 2
    _, out, _ = _costs_cli(capsys, db, "--since", "2999-01-01", "--json")
    assert json.loads(out)["rows"] == []
    _, out, _ = _costs_cli(capsys, db, "--by", "day")
    assert out.splitlines()[-1].startswith("total")


@pytest.mark.parametrize("args", [["--since", "soon"], ["--session", " "]])
def test_costs_bad_arguments_exit_2(capsys, tmp_path, args):
    code, out, err = _costs_cli(capsys, str(tmp_path / "l.db"), *args)
    assert code == 2
    assert out == ""
    assert "Traceback" not in err
