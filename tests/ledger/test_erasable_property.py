"""Crypto-shredding holds for any sessions and any subset erased (Hypothesis).

Sessions of a few agents and keys get turns and memory entries on an erasable
ledger; a random subset of sessions is erased by destroying their keys. Then
every event of an erased session reads as ``Erased`` and its text is in no byte
of the ledger or the key store, every other event reads back exactly as
written, and the hash chain verifies.
"""

from __future__ import annotations

import tempfile
from pathlib import Path

from hypothesis import given, settings
from hypothesis import strategies as st

from turnledger.ledger.events import MemoryStored, SessionOpened, TurnStarted
from turnledger.ledger.events.erasure import Erased
from turnledger.ledger.ids import memory_stream_id, session_stream_id
from turnledger.ledger.store import open_store
from turnledger.ledger.subject_keys import keys_path
from turnledger.ledger.verify import verify

SESSIONS = [(agent, key) for agent in ("a", "b") for key in ("k1", "k2", "k3")]

turns = st.lists(
    st.tuples(st.sampled_from(range(len(SESSIONS))), st.integers(0, 10**9)),
    min_size=1,
    max_size=12,
)


@settings(max_examples=25)
@given(turns=turns, erased=st.sets(st.sampled_from(range(len(SESSIONS)))))
def test_erased_sessions_read_erased_and_the_others_intact(
    turns: list[tuple[int, int]], erased: set[int]
) -> None:
    with tempfile.TemporaryDirectory() as folder:
        ledger = str(Path(folder) / "l.db")
        written: dict[int, list[str]] = {}
        with open_store(ledger, erasable=True) as store:
            for number, (index, salt) in enumerate(turns):
                agent, key = SESSIONS[index]
                stream = session_stream_id(agent, key)
                text = f"secret-{index}-{salt}-{number}"
                events: list[SessionOpened | TurnStarted] = []
                if index not in written:
                    events.append(SessionOpened(agent=agent, session_key=key))
                events.append(
                    TurnStarted(turn_id=f"t{number}", origin="channel", user_input=text)
                )
                store.append(
                    stream, events, expected_version=store.stream_version(stream)
                )
                store.append(
                    memory_stream_id(agent),
                    [
                        MemoryStored(
                            agent=agent, key=f"m{number}", content=text, session=key
                        )
                    ],
                    expected_version=store.stream_version(memory_stream_id(agent)),
                )
                written.setdefault(index, []).append(text)
            assert store.sealer is not None
            keys = store.sealer.keys
            for index in erased & set(written):
                agent, key = SESSIONS[index]
                stream = str(session_stream_id(agent, key))
                keys.destroy(keys.select(stream_ids=[stream], agent=agent, session=key))
        with open_store(ledger) as store:
            assert verify(store).ok
            memory_texts = {
                r.event.content
                for r in store.iter_all()
                if isinstance(r.event, MemoryStored)
            }
            for index, texts in written.items():
                agent, key = SESSIONS[index]
                events = [
                    r.event for r in store.read_stream(session_stream_id(agent, key))
                ]
                if index in erased:
                    assert all(isinstance(e, Erased) for e in events)
                    assert not memory_texts & set(texts)
                else:
                    said = [e.user_input for e in events if isinstance(e, TurnStarted)]
                    assert said == texts
                    assert set(texts) <= memory_texts
        raw = Path(ledger).read_bytes() + Path(keys_path(ledger)).read_bytes()
        for texts in written.values():
            for text in texts:
                assert text.encode() not in raw
