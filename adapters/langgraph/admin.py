"""The saver's optional LangGraph capabilities: delete_for_runs, prune, copy_thread.

Removals are appended ``item.recorded`` events of kind ``removed`` naming the
checkpoints that go (their writes with them); stored values stay, as later
checkpoints may extend them. A copy writes the source's checkpoints to the target
through the saver's own ``put`` and ``put_writes``, oldest first. Each function is
called with the saver's lock held.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, cast

from langchain_core.runnables import RunnableConfig

from turnledger.adapters.langgraph.codec import encode_json
from turnledger.adapters.langgraph.records import Built
from turnledger.adapters.langgraph.state import (
    FRAMEWORK,
    StoredCheckpoint,
    ThreadState,
    write_value,
)
from turnledger.ledger.events import ItemRecorded

if TYPE_CHECKING:
    from turnledger.adapters.langgraph.saver import TurnledgerSaver


def delete_for_runs(saver: TurnledgerSaver, run_ids: Sequence[str]) -> None:
    """Remove every checkpoint whose metadata names one of the runs."""
    wanted = set(run_ids)
    if not wanted:
        return
    for thread_id in saver.thread_ids():
        remove(saver, thread_id, lambda c: c.metadata.get("run_id") in wanted)


def prune(saver: TurnledgerSaver, thread_ids: Sequence[str], strategy: str) -> None:
    """Keep each namespace's latest checkpoint, or delete the threads.

    Raises:
        ValueError: A strategy other than ``keep_latest`` or ``delete``.
    """
    if strategy not in ("keep_latest", "delete"):
        msg = f"Expected strategy keep_latest or delete, found {strategy!r}"
        raise ValueError(msg)
    for thread_id in map(str, thread_ids):
        if strategy == "delete":
            saver.delete_thread(thread_id)
            continue
        state = saver.thread_state(thread_id)
        latest = {ns: ids[-1] for ns, ids in state.order.items() if ids}

        def doomed(c: StoredCheckpoint, keep: dict[str, str] = latest) -> bool:
            return keep.get(c.ns) != c.id

        remove(saver, thread_id, doomed)


def remove(
    saver: TurnledgerSaver, thread_id: str, doomed: Callable[[StoredCheckpoint], bool]
) -> None:
    """Append the removal of a thread's checkpoints that ``doomed`` picks."""

    def build(state: ThreadState) -> Built:
        picked = {
            ns: [i for i, c in by_id.items() if doomed(c)]
            for ns, by_id in state.checkpoints.items()
        }
        ids = {ns: found for ns, found in picked.items() if found}
        if not ids:
            return [], {}
        event = ItemRecorded(
            turn_id=state.cursor.turn_id,
            framework=FRAMEWORK,
            kind="removed",
            fields=encode_json({"ids": ids}),
            typed=False,
        )
        return [event], {}

    saver.append_built(thread_id, build)


def copy_thread(saver: TurnledgerSaver, source_id: str, target_id: str) -> None:
    """Write the source thread's checkpoints and writes to the target thread."""
    source = saver.thread_state(source_id)
    for ns, ids in list(source.order.items()):
        for checkpoint_id in list(ids):
            _copy_one(saver, source, source.checkpoints[ns][checkpoint_id], target_id)


def _copy_one(
    saver: TurnledgerSaver, source: ThreadState, c: StoredCheckpoint, target: str
) -> None:
    found = saver.checkpoint_tuple(source, c)
    parent = source.checkpoints.get(c.ns, {}).get(c.parent or "")
    before = parent.versions if parent is not None else {}
    new_versions = {k: v for k, v in c.versions.items() if before.get(k) != v}
    conf: dict[str, Any] = {"thread_id": target, "checkpoint_ns": c.ns}
    if c.parent:
        conf["checkpoint_id"] = c.parent
    config = cast("RunnableConfig", {"configurable": conf})
    stored = saver.put(config, found.checkpoint, found.metadata, new_versions)
    tasks: dict[tuple[str, str], list[tuple[str, Any]]] = {}
    ordered = sorted(
        source.writes.get((c.ns, c.id), {}).items(), key=lambda kv: kv[0][1]
    )
    for (task, _), (_, channel, value, path) in ordered:
        loaded = write_value(value, saver.serde)
        tasks.setdefault((task, path), []).append((channel, loaded))
    for (task, path), writes in tasks.items():
        saver.put_writes(stored, writes, task, path)
