"""turnledger as LangGraph's persistence: a checkpointer and a long-term store.

Install the extra (``pip install 'turnledger[langgraph]'``), then::

    from turnledger.adapters.langgraph import TurnledgerSaver

    graph = builder.compile(checkpointer=TurnledgerSaver.from_url("turnledger.db"))

and ``store=TurnledgerStore.from_url("turnledger.db")`` for long-term memory.
"""

from __future__ import annotations

from turnledger.adapters.langgraph.saver import TurnledgerSaver
from turnledger.adapters.langgraph.store import TurnledgerStore

__all__ = ["TurnledgerSaver", "TurnledgerStore"]
