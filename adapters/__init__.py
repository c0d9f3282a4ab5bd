"""Persistence adapters: turnledger as the durable store of other agent frameworks.

One module per framework, each behind an optional extra. Adapters may import the
ledger, policies and projections; nothing imports them.
"""
