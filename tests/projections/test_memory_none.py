"""The ``none`` backend: the contract, and explicit refusals of every write."""

from __future__ import annotations

from uuid import UUID

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from tests.contracts.memory_contract import T0, MemoryContract, put
from turnledger.ledger.envelope import Recorded
from turnledger.ledger.events import MemoryStored
from turnledger.projections.memory.none import DISABLED_REASON, NoneMemory
from turnledger.projections.memory.protocol import MemoryBackend, Unsupported


def own_copy(test):
    """A per-class copy of a contract Hypothesis test (HealthCheck.differing_executors)."""
    inner = test.hypothesis.inner_test
    return settings(
        max_examples=25,
        deadline=None,
        suppress_health_check=[HealthCheck.function_scoped_fixture],
    )(given(data=st.data())(inner))


class TestNoneMemory(MemoryContract):
    """Memory disabled passes the contract by declaring it keeps nothing."""

    test_no_path_leaks_outside_the_allowlist_or_session = own_copy(
        MemoryContract.test_no_path_leaks_outside_the_allowlist_or_session
    )

    @pytest.fixture(name="memory")
    def _memory(self):
        return NoneMemory()

    @pytest.fixture(name="reopen")
    def _reopen(self):
        return NoneMemory

    @pytest.fixture(name="memory_factory")
    def _memory_factory(self):
        return NoneMemory


def test_is_a_memory_backend():
    """NoneMemory satisfies the protocol and declares it stores nothing."""
    memory: MemoryBackend = NoneMemory()
    assert memory.name == "none"
    caps = memory.capabilities
    assert (caps.stores, caps.persistent, caps.keyword, caps.vectors) == (
        False,
        False,
        False,
        False,
    )


def test_every_write_is_refused_with_the_reason():
    """store, forget, supersede and purge_session answer Unsupported, never success."""
    memory = NoneMemory()
    answers = {
        "store": put(memory, "k", "v"),
        "forget": memory.forget("k", agent="alice"),
        "supersede": memory.supersede("k", agent="alice", superseded_by="n"),
        "purge_session": memory.purge_session("s1", agent="alice"),
    }
    for operation, answer in answers.items():
        assert answer == Unsupported(
            operation=operation,
            backend="none",
            reason="memory is disabled for this agent (backend none)",
        )
    assert DISABLED_REASON == "memory is disabled for this agent (backend none)"


def test_apply_only_advances_the_position():
    """Events are skipped; the position moves forward, never back."""
    memory = NoneMemory()
    event = Recorded(
        stream_id=UUID(int=1),
        version=1,
        position=7,
        recorded_at=T0,
        event=MemoryStored(agent="alice", key="k", content="c"),
    )
    memory.apply([event], 7)
    memory.apply([], 3)
    assert memory.applied_position() == 7
    assert memory.count(agents=["alice"]) == 0
    assert NoneMemory().applied_position() == 0
