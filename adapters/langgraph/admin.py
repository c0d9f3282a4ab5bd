"""The saver's optional LangGraph removals: ``delete_for_runs`` and ``prune``.

Removals are appended events: an ``item.recorded`` event of kind ``removed``
naming the checkpoints that go (their writes with them), or, for a whole thread,
``items.removed`` (see :mod:`turnledger.adapters.langgraph.records`); stored
values stay, as later checkpoints may extend them. Each method is called with
the saver's lock held.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from turnledger.adapters.langgraph.commit import GroupCommit, Ticket
from turnledger.adapters.langgraph.records import (
    Built,
    checkpoints_removal,
    thread_removal,
)
from turnledger.adapters.langgraph.state import StoredCheckpoint, ThreadState
from turnledger.adapters.langgraph.threads import Threads


class Removals:
    """Removes checkpoints of the saver's threads by run, or all but the latest.

    Args:
        threads: The threads, listed and folded to find what to remove.
        commits: Where the removal events are committed.
    """

    def __init__(self, threads: Threads, commits: GroupCommit) -> None:
        self.threads = threads
        self.commits = commits

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        """Remove every checkpoint whose metadata names one of the runs."""
        wanted = set(run_ids)
        if not wanted:
            return
        for thread_id in self.threads.ids():
            self.remove(thread_id, lambda c: c.metadata.get("run_id") in wanted)

    def prune(self, thread_ids: Sequence[str], strategy: str) -> None:
        """Keep each namespace's latest checkpoint, or delete the threads.

        Raises:
            ValueError: A strategy other than ``keep_latest`` or ``delete``.
        """
        if strategy not in ("keep_latest", "delete"):
            msg = f"Expected strategy keep_latest or delete, found {strategy!r}"
            raise ValueError(msg)
        for thread_id in map(str, thread_ids):
            if strategy == "delete":
                self.commits.commit(Ticket(thread_id, thread_removal))
                continue
            state = self.threads.state(thread_id)
            latest = {ns: ids[-1] for ns, ids in state.order.items() if ids}

            def doomed(c: StoredCheckpoint, keep: dict[str, str] = latest) -> bool:
                return keep.get(c.ns) != c.id

            self.remove(thread_id, doomed)

    def remove(
        self, thread_id: str, doomed: Callable[[StoredCheckpoint], bool]
    ) -> None:
        """Append the removal of a thread's checkpoints that ``doomed`` picks."""

        def build(state: ThreadState) -> Built:
            return checkpoints_removal(state, doomed)

        self.commits.write(Ticket(thread_id, build))
