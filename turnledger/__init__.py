"""turnledger: an event-sourced memory and payload lifecycle for AI-agent runtimes.

The distribution installs one top-level package; its layers are subpackages,
imported one way: ``turnledger.ledger`` <- ``turnledger.policies`` <-
``turnledger.projections`` <- ``turnledger.pipeline`` / ``turnledger.adapters``.
"""
