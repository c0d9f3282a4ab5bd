"""Child process for the runner kill test: catch up in small pages until killed."""

from __future__ import annotations

import sys

from turnledger.ledger.store import open_store
from turnledger.projections.history import SESSION_HISTORY
from turnledger.projections.runner import ProjectionRunner
from turnledger.projections.views import SQLiteViewStore


def main() -> None:
    ledger_path, views_path = sys.argv[1], sys.argv[2]
    store = open_store(ledger_path)
    views = SQLiteViewStore(views_path)
    runner = ProjectionRunner(store, views, [SESSION_HISTORY])
    print("started", flush=True)
    runner.catch_up(page_size=5, progress=lambda *_: print("page", flush=True))
    print("done", flush=True)


if __name__ == "__main__":
    main()
