"""A writer process for the scale-out test: appends turns to its own session."""

from __future__ import annotations

import sys

from tests.contracts.store_contract import turn_events
from turnledger.ledger.errors import ConcurrencyError
from turnledger.ledger.events import SessionOpened
from turnledger.ledger.ids import session_stream_id
from turnledger.ledger.store import open_store


def main() -> None:
    url, agent, turns = sys.argv[1], sys.argv[2], int(sys.argv[3])
    store = open_store(url)
    stream = session_stream_id(agent, "main")
    for t in range(turns):
        while True:
            version = store.stream_version(stream)
            events = (
                [SessionOpened(agent=agent, session_key="main")] if version == 0 else []
            )
            try:
                store.append(
                    stream,
                    [*events, *turn_events(f"{agent}-{t}")],
                    expected_version=version,
                )
                break
            except ConcurrencyError:
                continue
    print("done", flush=True)
    store.close()


if __name__ == "__main__":
    main()
